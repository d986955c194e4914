"""memory_supersede handlers: archive, archive_batch, merge (preview → confirm)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from app.db.repositories.projects import ProjectRepository
from app.db.repositories.thoughts import ThoughtRepository
from app.mcp.envelope import Meta, collection, preview_meta, single
from app.mcp.registry import CallContext, ToolAnswer
from app.mcp.shaping import ThoughtShaper, shape_edge
from app.mcp.tools.common import previewed_arguments, uuid_arg
from app.mcp.tools.supersede.args import TOOL, ArchiveArgs, ArchiveBatchArgs, MergeArgs
from app.services.previews import PreviewService
from app.services.scope import normalize_path
from app.services.store import check_content, normalize_tags
from app.services.supersede import MERGE_PREVIEW_EDGES, MergePlan, SupersedeService, archive_outcome


async def archive(args: ArchiveArgs, ctx: CallContext) -> ToolAnswer:
    thought_id = uuid_arg(args.thought_id, "thought_id")
    async with ctx.app.db.unit_of_work() as session:
        previews = PreviewService(session, ctx.app.limits.preview_ttl_seconds)
        if args.confirm:
            await previews.redeem(ctx.principal, TOOL, "archive", previewed_arguments(args), args.preview_token)
            archived = await SupersedeService(session, ctx.principal).archive(thought_id)
            item: dict[str, Any] = {
                "status": "executed",
                "action": "archive",
                "result": ThoughtShaper(compact=False)(archived),
            }
            return ToolAnswer(single(Meta("archive"), item))
        thought = await ThoughtRepository(session).get(thought_id)
        token = await previews.issue(ctx.principal, TOOL, "archive", previewed_arguments(args))
    item = {
        "status": "preview",
        "action": "archive",
        "thought_id": str(thought_id),
        "current_status": thought.status.value if thought else None,
        "outcome": archive_outcome(thought),
        "preview_token": token,
        "instruction": (
            f"Call memory_supersede again with action=archive, thought_id={thought_id}, confirm=true, "
            f"preview_token={token} to proceed."
        ),
    }
    return ToolAnswer(single(Meta("archive", preview=preview_meta(token)), item))


async def archive_batch(args: ArchiveBatchArgs, ctx: CallContext) -> ToolAnswer:
    thought_ids = [uuid_arg(value, f"thought_ids[{index}]") for index, value in enumerate(args.thought_ids)]
    async with ctx.app.db.unit_of_work() as session:
        previews = PreviewService(session, ctx.app.limits.preview_ttl_seconds)
        if args.confirm:
            await previews.redeem(ctx.principal, TOOL, "archive_batch", previewed_arguments(args), args.preview_token)
            rows = await SupersedeService(session, ctx.principal).archive_batch(thought_ids)
            failed = sum(1 for row in rows if row["status"] == "failed")
            meta = Meta("archive_batch", counts={"archived": len(rows) - failed, "failed": failed})
            return ToolAnswer(collection(meta, rows))
        found = await ThoughtRepository(session).get_many(thought_ids)
        token = await previews.issue(ctx.principal, TOOL, "archive_batch", previewed_arguments(args))
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
    return ToolAnswer(collection(Meta("archive_batch", counts=counts, preview=preview_meta(token)), items))


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


async def merge(args: MergeArgs, ctx: CallContext) -> ToolAnswer:
    source_id = uuid_arg(args.source_id, "source_id")
    target_id = uuid_arg(args.target_id, "target_id")
    if args.merged_content is not None:
        check_content(args.merged_content, ctx.app.limits.content_hard, "merged_content")
    vectors = await ctx.app.embedding.embed_passages([args.merged_content]) if args.merged_content else None
    async with ctx.app.db.unit_of_work() as session:
        service = SupersedeService(session, ctx.principal)
        previews = PreviewService(session, ctx.app.limits.preview_ttl_seconds)
        if args.confirm:
            await previews.redeem(ctx.principal, TOOL, "merge", previewed_arguments(args), args.preview_token)
            plan = await service.merge_plan(source_id, target_id, lock=True)
            values = await _merge_values(args, ctx, plan, session)
            if "content" in values:
                profile = ctx.app.embedding.profile
                values["embedding"] = vectors[0] if vectors and profile else None
                values["embedding_model"] = profile.model_id if vectors and profile else None
            target, transferred = await service.merge(plan, values)
            result = {"target": ThoughtShaper(compact=False)(target), "edges_transferred": transferred}
            return ToolAnswer(single(Meta("merge"), {"status": "executed", "action": "merge", "result": result}))
        plan = await service.merge_plan(source_id, target_id)
        values = await _merge_values(args, ctx, plan, session)
        token = await previews.issue(ctx.principal, TOOL, "merge", previewed_arguments(args))
    item = _merge_preview(plan, values, token)
    return ToolAnswer(single(Meta("merge", preview=preview_meta(token)), item))


def _merge_preview(plan: MergePlan, values: dict[str, Any], token: str) -> dict[str, Any]:
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
    item["preview_token"] = token
    return item
