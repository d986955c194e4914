"""retention_review handlers: list, protect, delete, compact."""

from __future__ import annotations

from typing import Any

from app.db.repositories.projects import ProjectRepository
from app.db.repositories.thoughts import ThoughtRepository
from app.errors import not_found
from app.mcp.envelope import Meta, collection, preview_meta, single
from app.mcp.registry import CallContext, ToolAnswer
from app.mcp.shaping import ThoughtShaper
from app.mcp.tools.common import previewed_arguments, uuid_arg
from app.mcp.tools.retention.args import TOOL, CompactArgs, DeleteArgs, ListArgs, ProtectArgs
from app.services.previews import PreviewService
from app.services.retention import Dependent, RetentionRule, RetentionService
from app.services.store import check_content, normalize_tags

CONTENT_CUT = 200


async def list_candidates(args: ListArgs, ctx: CallContext) -> ToolAnswer:
    limits = ctx.app.limits
    rule = RetentionRule(
        args.min_age_days or limits.retention_min_age_days,
        limits.retention_importance_floor if args.importance_floor is None else args.importance_floor,
    )
    limit = args.limit or limits.retention_page_size
    async with ctx.app.db.unit_of_work() as session:
        rows, total = await RetentionService(session, ctx.principal).candidates(rule, limit, args.offset)
    shape = ThoughtShaper(compact=bool(args.compact), fields=args.fields)
    items = []
    for row in rows:
        item = shape(row)
        if "content" in item:
            item["content"] = row.content[:CONTENT_CUT]
        if not args.fields:
            item["project_id"], item["project_name"] = str(row.project_id), row.project_name
        items.append(item)
    meta = Meta("list", counts={"limit": limit, "offset": args.offset})
    return ToolAnswer(collection(meta, items, total=total))


async def protect(args: ProtectArgs, ctx: CallContext) -> ToolAnswer:
    thought_id = uuid_arg(args.thought_id, "thought_id")
    async with ctx.app.db.unit_of_work() as session:
        thought = await RetentionService(session, ctx.principal).protect(thought_id, args.protected)
    item = {
        "thought_id": str(thought_id),
        "is_protected": thought.is_protected,
        "status": thought.status.value,
    }
    return ToolAnswer(single(Meta("protect"), item))


def _dependents(rows: list[Dependent]) -> list[dict[str, Any]]:
    return [
        {"edge_id": str(r.edge_id), "thought_id": str(r.thought_id), "type": r.type, "direction": r.direction}
        for r in rows
    ]


async def delete(args: DeleteArgs, ctx: CallContext) -> ToolAnswer:
    thought_id = uuid_arg(args.thought_id, "thought_id")
    async with ctx.app.db.unit_of_work() as session:
        service = RetentionService(session, ctx.principal)
        previews = PreviewService(session, ctx.app.limits.preview_ttl_seconds)
        if args.confirm:
            await previews.redeem(ctx.principal, TOOL, "delete", previewed_arguments(args), args.preview_token)
            removed = await service.hard_delete(thought_id)
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
        thought = await ThoughtRepository(session).get(thought_id)
        if thought is None:
            return ToolAnswer(single(Meta("delete"), {"status": "not_found", "thought_id": str(thought_id)}))
        dependents = await service.dependents(thought_id)
        token = await previews.issue(ctx.principal, TOOL, "delete", previewed_arguments(args))
    instruction = (
        f"Call retention_review again with action=delete, thought_id={thought_id}, confirm=true, "
        f"preview_token={token} to hard-delete it and its {len(dependents)} edge(s)."
    )
    item = {
        "status": "preview",
        "action": "preview",
        "deleted": False,
        "preview": True,
        "confirm": False,
        "thought_id": str(thought_id),
        "dependents": _dependents(dependents),
        "instruction": instruction,
        "preview_token": token,
    }
    return ToolAnswer(single(Meta("delete", preview=preview_meta(token, instruction)), item))


async def compact(args: CompactArgs, ctx: CallContext) -> ToolAnswer:
    source_ids = [uuid_arg(value, f"source_ids[{index}]") for index, value in enumerate(args.source_ids)]
    content = check_content(args.summary.content, ctx.app.limits.content_hard, "summary.content")
    tags = normalize_tags(args.summary.tags, "summary.tags")
    project_id = uuid_arg(args.summary.project_id, "summary.project_id") if args.summary.project_id else None
    if not args.confirm:
        instruction = (
            "Call retention_review again with action=compact, the same source_ids and summary, confirm=true to proceed."
        )
        item = {
            "status": "preview",
            "preview": True,
            "confirm": False,
            "source_ids": [str(s) for s in source_ids],
            "instruction": instruction,
        }
        meta = Meta(
            "compact",
            counts={"sources": len(set(source_ids))},
            preview=preview_meta(None, instruction=instruction),
        )
        return ToolAnswer(single(meta, item))
    vectors = await ctx.app.embedding.embed_passages([content])
    profile = ctx.app.embedding.profile
    summary: dict[str, Any] = {"content": content, "tags": tags}
    if vectors and profile:
        summary.update(embedding=vectors[0], embedding_model=profile.model_id)
    async with ctx.app.db.unit_of_work() as session:
        project = None
        if project_id is not None:
            project = await ProjectRepository(session).get(project_id)
            if project is None:
                raise not_found(f"Project {project_id} not found (summary.project_id)")
        created = await RetentionService(session, ctx.principal).compact(source_ids, summary, project)
    item = {
        "status": "compacted",
        "preview": False,
        "confirm": True,
        "source_ids": [str(s) for s in source_ids],
        "summary": ThoughtShaper(compact=False)(created),
    }
    return ToolAnswer(single(Meta("compact", counts={"sources": len(set(source_ids))}), item))
