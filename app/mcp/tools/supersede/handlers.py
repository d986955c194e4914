"""memory_supersede handlers: archive, archive_batch, merge (preview → confirm)."""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.repositories.projects import ProjectRepository
from app.db.repositories.thoughts import ThoughtRepository
from app.mcp.envelope import Meta, collection, single
from app.mcp.registry import CallContext, ConfirmFlow, Preview, ToolAnswer
from app.mcp.shaping import ThoughtShaper, shape_edge
from app.mcp.tools.common import uuid_arg
from app.mcp.tools.supersede.args import ArchiveArgs, ArchiveBatchArgs, MergeArgs
from app.services.membership import require_role
from app.services.scope import normalize_path
from app.services.store import check_content, normalize_tags
from app.services.supersede import MERGE_PREVIEW_EDGES, MergePlan, SupersedeService, archive_outcome

# ---------------------------------------------------------------- archive


async def _thought_id(args: ArchiveArgs, ctx: CallContext) -> uuid.UUID:
    return uuid_arg(args.thought_id, "thought_id")


async def _plan_archive(args: ArchiveArgs, ctx: CallContext, session: AsyncSession, thought_id: uuid.UUID) -> Preview:
    thought = await ThoughtRepository(session).get(thought_id)
    if thought is not None:
        await require_role(session, [thought.project_id])  # previews included
    item = {
        "status": "preview",
        "action": "archive",
        "thought_id": str(thought_id),
        "current_status": thought.status.value if thought else None,
        "outcome": archive_outcome(thought),
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
    found = await ThoughtRepository(session).get_many(thought_ids)
    await require_role(session, [thought.project_id for thought in found.values()])  # previews included
    seen: set[Any] = set()
    items = []
    for thought_id in thought_ids:
        # A repeated id previews as already_archived after its first occurrence.
        outcome = (
            "already_archived" if thought_id in seen and thought_id in found else archive_outcome(found.get(thought_id))
        )
        seen.add(thought_id)
        items.append({"thought_id": str(thought_id), "outcome": outcome})
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


async def _merge_values(args: MergeArgs, ctx: CallContext, plan: MergePlan, session: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if args.merged_content is not None:
        values["content"] = check_content(args.merged_content, ctx.app.limits.content_hard, "merged_content")
    if args.merged_tags is not None:
        values["tags"] = normalize_tags(args.merged_tags, "merged_tags")
    path = normalize_path(args.cwd or "")
    project = await ProjectRepository(session).find_for_path(path) if path else None
    if project is not None and plan.target is not None and project.id != plan.target.project_id:
        values["project_id"] = project.id
    return values


@dataclass(frozen=True)
class _MergeCall:
    source_id: uuid.UUID
    target_id: uuid.UUID
    vectors: list[list[float]] | None


async def _prepare_merge(args: MergeArgs, ctx: CallContext) -> _MergeCall:
    source_id = uuid_arg(args.source_id, "source_id")
    target_id = uuid_arg(args.target_id, "target_id")
    if args.merged_content is not None:
        check_content(args.merged_content, ctx.app.limits.content_hard, "merged_content")
    vectors = await ctx.app.embedding.embed_passages([args.merged_content]) if args.merged_content else None
    return _MergeCall(source_id, target_id, vectors)


async def _plan_merge(args: MergeArgs, ctx: CallContext, session: AsyncSession, call: _MergeCall) -> Preview:
    plan = await SupersedeService(session, ctx.principal).merge_plan(call.source_id, call.target_id)
    values = await _merge_values(args, ctx, plan, session)
    return Preview(Meta("merge"), _merge_preview(plan, values))


async def _merge(args: MergeArgs, ctx: CallContext, session: AsyncSession, call: _MergeCall) -> ToolAnswer:
    service = SupersedeService(session, ctx.principal)
    plan = await service.merge_plan(call.source_id, call.target_id, lock=True)
    values = await _merge_values(args, ctx, plan, session)
    if "content" in values:
        profile = ctx.app.embedding.profile
        vectors = call.vectors
        values["embedding"] = vectors[0] if vectors and profile else None
        values["embedding_model"] = profile.model_id if vectors and profile else None
    target, transferred = await service.merge(plan, values)
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
