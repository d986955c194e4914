"""memory_supersede handlers: archive, archive_batch, merge (preview → confirm)."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.mcp.calls import CallContext, ToolAnswer
from app.mcp.confirm import ConfirmFlow, Preview
from app.mcp.envelope import Meta, collection, single
from app.mcp.shaping import ThoughtShaper, shape_edge
from app.mcp.tools.common import uuid_arg
from app.mcp.tools.supersede.args import ArchiveArgs, ArchiveBatchArgs, MergeArgs
from app.services.supersede.service import (
    MERGE_PREVIEW_EDGES,
    MergePlan,
    MergeRequest,
    SupersedeService,
    merge_request,
    plan_merge,
    run_merge,
)

# ---------------------------------------------------------------- archive


async def _thought_id(args: ArchiveArgs, ctx: CallContext) -> uuid.UUID:
    return uuid_arg(args.thought_id, "thought_id")


async def _plan_archive(args: ArchiveArgs, ctx: CallContext, session: AsyncSession, thought_id: uuid.UUID) -> Preview:
    status, outcome = await SupersedeService(session, ctx.principal).archive_preview(thought_id)
    item = {
        "status": "preview",
        "action": "archive",
        "thought_id": str(thought_id),
        "current_status": status.value if status else None,
        "outcome": outcome,
    }
    return Preview(Meta("archive"), item, confirm_with=f"thought_id={thought_id}")


async def _archive(args: ArchiveArgs, ctx: CallContext, session: AsyncSession, thought_id: uuid.UUID) -> ToolAnswer:
    archived = await SupersedeService(session, ctx.principal).archive(thought_id)
    item: dict[str, Any] = {
        "status": "executed",
        "action": "archive",
        "result": ThoughtShaper(compact=False)(archived),
    }
    return ToolAnswer(single(Meta("archive"), item))


archive = ConfirmFlow(
    prepare=_thought_id, plan=_plan_archive, execute=_archive, in_item=("preview_token", "instruction")
)


# ---------------------------------------------------------------- archive_batch


async def _thought_ids(args: ArchiveBatchArgs, ctx: CallContext) -> list[uuid.UUID]:
    return [uuid_arg(value, f"thought_ids[{index}]") for index, value in enumerate(args.thought_ids)]


async def _plan_archive_batch(
    args: ArchiveBatchArgs, ctx: CallContext, session: AsyncSession, thought_ids: list[uuid.UUID]
) -> Preview:
    outcomes = await SupersedeService(session, ctx.principal).archive_batch_preview(thought_ids)
    items = [
        {"thought_id": str(thought_id), "outcome": outcome}
        for thought_id, outcome in zip(thought_ids, outcomes, strict=True)
    ]
    counts = dict(Counter(item["outcome"] for item in items))
    return Preview(Meta("archive_batch", counts=counts), items=items)


async def _archive_batch(
    args: ArchiveBatchArgs, ctx: CallContext, session: AsyncSession, thought_ids: list[uuid.UUID]
) -> ToolAnswer:
    rows = await SupersedeService(session, ctx.principal).archive_batch(thought_ids)
    failed = sum(1 for row in rows if row["status"] == "failed")
    meta = Meta("archive_batch", counts={"archived": len(rows) - failed, "failed": failed})
    return ToolAnswer(collection(meta, rows))


archive_batch = ConfirmFlow(prepare=_thought_ids, plan=_plan_archive_batch, execute=_archive_batch)


# ---------------------------------------------------------------- merge


async def _prepare_merge(args: MergeArgs, ctx: CallContext) -> MergeRequest:
    source_id = uuid_arg(args.source_id, "source_id")
    target_id = uuid_arg(args.target_id, "target_id")
    return await merge_request(ctx.app, source_id, target_id, args.merged_content, args.merged_tags, args.cwd)


async def _plan_merge(args: MergeArgs, ctx: CallContext, session: AsyncSession, request: MergeRequest) -> Preview:
    plan, values = await plan_merge(ctx.app, session, ctx.principal, request)
    return Preview(Meta("merge"), _merge_preview(plan, values))


async def _merge(args: MergeArgs, ctx: CallContext, session: AsyncSession, request: MergeRequest) -> ToolAnswer:
    target, transferred = await run_merge(ctx.app, session, ctx.principal, request)
    result = {"target": ThoughtShaper(compact=False)(target), "edges_transferred": transferred}
    return ToolAnswer(single(Meta("merge"), {"status": "executed", "action": "merge", "result": result}))


merge = ConfirmFlow(prepare=_prepare_merge, plan=_plan_merge, execute=_merge)


def _merge_preview(plan: MergePlan, values: dict[str, Any]) -> dict[str, Any]:
    edges = plan.source_edges
    item: dict[str, Any] = {"status": "preview", "action": "merge", "outcome": plan.outcome}
    if plan.reason:
        item["reason"] = plan.reason
    item["source"] = {
        "id": str(plan.source_id),
        "status": plan.source.status.value if plan.source else None,
        "edges": [shape_edge(edge) for edge in edges[:MERGE_PREVIEW_EDGES]],
        "source_edge_count": len(edges),
        "truncated": len(edges) > MERGE_PREVIEW_EDGES,
    }
    item["target"] = {"id": str(plan.target_id), "status": plan.target.status.value if plan.target else None}
    proposed: dict[str, Any] = {}
    if "content" in values:
        proposed["content"] = values["content"]
    if "tags" in values:
        proposed["tags"] = values["tags"]
    if "project_id" in values:
        proposed["project_id"] = str(values["project_id"])
    item["proposed"] = proposed
    item["effects"] = {"source_archived": True, "target_updated": bool(values), "replaces_edge_created": True}
    return item
