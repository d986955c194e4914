"""memory_reflect handlers: reflect (writes slots and thoughts), timeline (paged thought list)."""

from __future__ import annotations

from app.errors import bad_request
from app.mcp.calls import CallContext, ToolAnswer
from app.mcp.envelope import Meta, single
from app.mcp.tools.paging import thought_page
from app.mcp.tools.reflect.args import ReflectArgs, TimelineArgs
from app.services.recall.requests import PageRequest
from app.services.reflect.operations import record_reflection
from app.services.reflect.service import ReflectInput
from app.services.store.thoughts import check_content


async def reflect(args: ReflectArgs, ctx: CallContext) -> ToolAnswer:
    data = ReflectInput(
        summary=args.summary,
        goals_add=[goal for goal in args.goals_add or [] if goal.strip()],
        goals_remove=[goal for goal in args.goals_remove or [] if goal.strip()],
        decisions=[text.strip() for text in args.decisions or [] if text.strip()],
        pending=[text.strip() for text in args.pending or [] if text.strip()],
        wake_days=args.wake_days,
    )
    if not ((data.summary or "").strip() or data.goals_add or data.goals_remove or data.decisions or data.pending):
        raise bad_request(
            "memory_reflect action=reflect has nothing to record: pass summary, goals_add, goals_remove, "
            "decisions or pending"
        )
    for name, texts in (("decisions", args.decisions or []), ("pending", args.pending or [])):
        for index, text in enumerate(texts):
            if text.strip():  # blank entries are skipped, not refused
                check_content(text.strip(), ctx.app.settings.content.hard_limit, f"{name}[{index}]")
    counts, resolved = await record_reflection(ctx.app, ctx.principal, data, args.cwd)
    scope = None if resolved is None else {"project": str(resolved.id), "project_name": resolved.name, "global": False}
    return ToolAnswer(single(Meta("reflect", scope=scope), counts.__dict__))


async def timeline(args: TimelineArgs, ctx: CallContext) -> ToolAnswer:
    request = PageRequest.of(args)
    return await thought_page(ctx, "timeline", request, bool(args.compact), args.fields)
