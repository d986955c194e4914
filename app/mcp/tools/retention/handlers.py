"""retention_review handlers: list, protect, delete, compact."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.mcp.calls import CallContext, ToolAnswer
from app.mcp.confirm import ConfirmFlow, Preview
from app.mcp.envelope import Meta, collection, single
from app.mcp.shaping import ThoughtShaper
from app.mcp.tools.common import uuid_arg
from app.mcp.tools.retention.args import CompactArgs, DeleteArgs, ListArgs, ProtectArgs
from app.services.retention.operations import candidate_page, protect_thought
from app.services.retention.service import (
    Dependent,
    RetentionService,
    Summary,
    embedded_summary,
)
from app.services.store.thoughts import check_content, normalize_tags
from app.services.values import ThoughtRecord


async def list_candidates(args: ListArgs, ctx: CallContext) -> ToolAnswer:
    page = await candidate_page(
        ctx.app, ctx.principal, args.min_age_days, args.importance_floor, args.limit, args.offset
    )
    shape = ThoughtShaper(compact=bool(args.compact), fields=args.fields)
    items = []
    for candidate in page.candidates:
        item = shape(candidate)
        if not args.fields:
            item["project_id"], item["project_name"] = str(candidate.project_id), candidate.project_name
        items.append(item)
    meta = Meta("list", counts={"limit": page.limit, "offset": args.offset})
    return ToolAnswer(collection(meta, items, total=page.total))


async def protect(args: ProtectArgs, ctx: CallContext) -> ToolAnswer:
    return protected_answer(await protect_thought(ctx.app, ctx.principal, args.thought_id, args.protected))


def protected_answer(thought: ThoughtRecord) -> ToolAnswer:
    """protect's answer (and the console's outcome page of a protect, app/http/ui/review.py)."""
    item = {"thought_id": str(thought.id), "is_protected": thought.is_protected, "status": thought.status.value}
    return ToolAnswer(single(Meta("protect"), item))


def _dependents(rows: list[Dependent]) -> list[dict[str, Any]]:
    return [
        {"edge_id": str(r.edge_id), "thought_id": str(r.thought_id), "type": r.type, "direction": r.direction}
        for r in rows
    ]


# ---------------------------------------------------------------- delete, compact (preview → confirm)


async def _thought_id(args: DeleteArgs, ctx: CallContext) -> uuid.UUID:
    return uuid_arg(args.thought_id, "thought_id")


async def _plan_delete(
    args: DeleteArgs, ctx: CallContext, session: AsyncSession, thought_id: uuid.UUID
) -> Preview | ToolAnswer:
    dependents = await RetentionService(session, ctx.principal).delete_preview(thought_id)
    if dependents is None:
        return ToolAnswer(single(Meta("delete"), {"status": "not_found", "thought_id": str(thought_id)}))
    item = {
        "status": "preview",
        "action": "preview",
        "deleted": False,
        "preview": True,
        "confirm": False,
        "thought_id": str(thought_id),
        "dependents": _dependents(dependents),
    }
    purpose = f"hard-delete it and its {len(dependents)} edge(s)"
    return Preview(Meta("delete"), item, confirm_with=f"thought_id={thought_id}", purpose=purpose)


async def _delete(args: DeleteArgs, ctx: CallContext, session: AsyncSession, thought_id: uuid.UUID) -> ToolAnswer:
    removed = await RetentionService(session, ctx.principal).hard_delete(thought_id)
    item = {
        "status": "deleted",
        "action": "deleted",
        "deleted": True,
        "preview": False,
        "confirm": True,
        "thought_id": str(thought_id),
        "edges_removed": removed,
    }
    return ToolAnswer(single(Meta("delete"), item))


delete = ConfirmFlow(
    prepare=_thought_id,
    plan=_plan_delete,
    execute=_delete,
    in_item=("instruction", "preview_token"),
    in_meta={"consequence": "instruction"},  # the contract words it so: the instruction is meta's consequence
)


@dataclass(frozen=True)
class _CompactCall:
    source_ids: list[uuid.UUID]
    summary: Summary


async def _prepare_compact(args: CompactArgs, ctx: CallContext) -> _CompactCall:
    """Checks the call; a confirmed one embeds the summary too, before its transaction."""
    source_ids = [uuid_arg(value, f"source_ids[{index}]") for index, value in enumerate(args.source_ids)]
    content = check_content(args.summary.content, ctx.app.settings.content.hard_limit, "summary.content")
    tags = normalize_tags(args.summary.tags, "summary.tags")
    project_id = uuid_arg(args.summary.project_id, "summary.project_id") if args.summary.project_id else None
    summary = Summary(content, tags, project_id)
    return _CompactCall(source_ids, await embedded_summary(ctx.app, summary) if args.confirm else summary)


async def _plan_compact(args: CompactArgs, ctx: CallContext, session: None, call: _CompactCall) -> Preview:
    item = {
        "status": "preview",
        "preview": True,
        "confirm": False,
        "source_ids": [str(s) for s in call.source_ids],
    }
    meta = Meta("compact", counts={"sources": len(set(call.source_ids))})
    return Preview(meta, item, confirm_with="the same source_ids and summary")


async def _compact(args: CompactArgs, ctx: CallContext, session: AsyncSession, call: _CompactCall) -> ToolAnswer:
    created = await RetentionService(session, ctx.principal).compact(call.source_ids, call.summary)
    item = {
        "status": "compacted",
        "preview": False,
        "confirm": True,
        "source_ids": [str(s) for s in call.source_ids],
        "summary": ThoughtShaper(compact=False)(created),
    }
    return ToolAnswer(single(Meta("compact", counts={"sources": len(set(call.source_ids))}), item))


compact = ConfirmFlow(
    prepare=_prepare_compact,
    plan=_plan_compact,
    execute=_compact,
    token=False,
    in_item=("instruction",),
    in_meta={"instruction": "instruction"},
    preview_reads=False,
)
