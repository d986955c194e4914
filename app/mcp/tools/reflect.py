"""memory_reflect: reflect (writes slots and thoughts), timeline (paged thought list)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from app.db.models import Role
from app.db.repositories.projects import ProjectRepository
from app.errors import bad_request
from app.mcp.envelope import Meta, single
from app.mcp.registry import Action, CallContext, ToolAnswer, ToolSpec
from app.mcp.tools.common import COMMON_FIELD_DOCS, WRITES, CwdArgs, LinksArgs, ShapeArgs
from app.mcp.tools.paging import PageRequest, thought_page
from app.services.reflection import ReflectInput, ReflectionService
from app.services.scope import normalize_path
from app.services.store import check_content

TOOL = "memory_reflect"
GoalStr = Annotated[str, StringConstraints(max_length=500)]
StatusFilter = Literal["draft", "active", "archived", "all"]


class ReflectArgs(CwdArgs):
    action: Literal["reflect"]
    summary: Annotated[str, StringConstraints(max_length=2000)] | None = None
    goals_add: list[GoalStr] | None = Field(default=None, max_length=100)
    goals_remove: list[GoalStr] | None = Field(default=None, max_length=100)
    decisions: list[str] | None = Field(default=None, max_length=100)
    pending: list[str] | None = Field(default=None, max_length=100)
    wake_days: int = Field(default=7, ge=1, le=365)


class TimelineArgs(CwdArgs, ShapeArgs, LinksArgs):
    action: Literal["timeline"]
    status: StatusFilter = "all"
    limit: int = Field(default=50, ge=1, le=500)
    offset: int = Field(default=0, ge=0)


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
                check_content(text.strip(), ctx.app.limits.content_hard, f"{name}[{index}]")
    texts = [*data.decisions, *data.pending]
    vectors = await ctx.app.embedding.embed_passages(texts) if texts else None
    profile = ctx.app.embedding.profile
    by_text = dict(zip(texts, vectors, strict=True)) if vectors and profile else {}
    async with ctx.app.db.unit_of_work() as session:
        projects = ProjectRepository(session)
        path = normalize_path(args.cwd or "")
        resolved = await projects.find_for_path(path) if path else None
        project = resolved or await projects.ensure_default()
        counts = await ReflectionService(session, ctx.principal, ctx.app.limits.slot_max_chars).reflect(
            data,
            resolved.id if resolved else None,
            project,
            by_text,
            profile.model_id if by_text and profile else None,
        )
    scope = None if resolved is None else {"project": str(resolved.id), "project_name": resolved.name, "global": False}
    return ToolAnswer(single(Meta("reflect", scope=scope), counts.__dict__))


async def timeline(args: TimelineArgs, ctx: CallContext) -> ToolAnswer:
    request = PageRequest(
        "timeline",
        args.cwd,
        args.status,
        args.limit,
        args.offset,
        bool(args.compact),
        args.fields,
        args.include_url_links,
    )
    return await thought_page(ctx, request)


SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Session reflection; cwd scopes both. reflect (writes): summary → project_context slot, "
        "goals_add/goals_remove → active_goals, decisions → active thoughts, pending → drafts that surface "
        "after wake_days (default 7). timeline {status?, limit 1–500, offset?} pages thoughts."
    ),
    actions=(
        Action("reflect", ReflectArgs, reflect, Role.writer),
        Action("timeline", TimelineArgs, timeline, Role.reader),
    ),
    annotations=WRITES,
    retired={
        "goals_delta": "goals_delta was removed; use goals_add / goals_remove",
        "project_id": "project_id was removed; use cwd",
    },
    field_docs={
        **COMMON_FIELD_DOCS,
        "cwd": "working directory: scope (timeline) or target project (reflect)",
        "goals_remove": "drop goal lines containing any of these (case-insensitive)",
        "status": "draft, active, archived or all",
    },
)
