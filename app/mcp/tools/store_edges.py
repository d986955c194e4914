"""memory_store edge actions: link, link_batch, unlink, unlink_batch, retype."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from app.db.repositories.audit import AuditRepository
from app.errors import AppError, not_found
from app.mcp.envelope import Meta, collection, preview_meta, single
from app.mcp.registry import CallContext, ToolAnswer
from app.mcp.shaping import shape_edge
from app.mcp.tools.common import previewed_arguments, uuid_arg
from app.services.edges import EdgeService, edge_not_found
from app.services.previews import PreviewService

if TYPE_CHECKING:
    from app.mcp.tools.store import LinkArgs, LinkBatchArgs, RetypeArgs, UnlinkArgs, UnlinkBatchArgs

TOOL = "memory_store"


async def link(args: LinkArgs, ctx: CallContext) -> ToolAnswer:
    source_id = uuid_arg(args.source_id, "source_id")
    target_id = uuid_arg(args.target_id, "target_id")
    async with ctx.app.db.unit_of_work() as session:
        result = await EdgeService(session, ctx.principal).link(source_id, target_id, args.edge_type)
    return ToolAnswer(single(Meta("link"), shape_edge(result.edge)))


async def link_batch(args: LinkBatchArgs, ctx: CallContext) -> ToolAnswer:
    items: list[dict[str, Any]] = []
    async with ctx.app.db.unit_of_work() as session:
        service = EdgeService(session, ctx.principal)
        await service.lock_pairs(_parsed_pairs(args))  # all locks up front, in one order: no deadlock
        for index, entry in enumerate(args.links):
            row: dict[str, Any] = {
                "index": index,
                "status": "linked",
                "source": entry.source,
                "target": entry.target,
            }
            try:
                async with session.begin_nested():  # a failing item rolls back alone
                    result = await service.link(
                        uuid_arg(entry.source, f"links[{index}].source"),
                        uuid_arg(entry.target, f"links[{index}].target"),
                        entry.type,
                    )
                row["type"] = result.edge.type.value
            except AppError as error:
                row.update(status="failed", error=error.message)
            items.append(row)
    failed = sum(1 for row in items if row["status"] == "failed")
    meta = Meta("link_batch", counts={"linked": len(items) - failed, "failed": failed})
    return ToolAnswer(collection(meta, items))


def _parsed_pairs(args: LinkBatchArgs) -> list[tuple[uuid.UUID, uuid.UUID]]:
    pairs = []
    for entry in args.links:
        try:
            pairs.append((uuid_arg(entry.source, "source"), uuid_arg(entry.target, "target")))
        except AppError:
            continue  # reported by its own row
    return pairs


def _consequence(edge: Any) -> str:
    return f"Removes the '{edge.type.value}' edge between '{edge.source_id}' and '{edge.target_id}'."


async def unlink(args: UnlinkArgs, ctx: CallContext) -> ToolAnswer:
    edge_id = uuid_arg(args.edge_id, "edge_id")
    async with ctx.app.db.unit_of_work() as session:
        service = EdgeService(session, ctx.principal)
        previews = PreviewService(session, ctx.app.limits.preview_ttl_seconds)
        edge = await service.get(edge_id)
        if args.confirm:
            await previews.redeem(ctx.principal, TOOL, "unlink", previewed_arguments(args), args.preview_token)
            if edge is None or not await service.delete(edge_id):
                return ToolAnswer(single(Meta("unlink"), {"status": "not_found", "edge_id": str(edge_id)}))
            await AuditRepository(session).record(ctx.principal.user_id, TOOL, "unlink", [edge_id], None, _audit(edge))
            return ToolAnswer(single(Meta("unlink"), {"status": "deleted", "edge_id": str(edge_id)}))
        if edge is None:
            return ToolAnswer(single(Meta("unlink"), {"status": "not_found", "edge_id": str(edge_id)}))
        token = await previews.issue(ctx.principal, TOOL, "unlink", previewed_arguments(args))
    item = {
        "status": "preview",
        "edge_id": str(edge_id),
        "edge": shape_edge(edge),
        "consequence": _consequence(edge),
        "preview_token": token,
        "instruction": (
            f"Call memory_store again with action=unlink, edge_id={edge_id}, confirm=true, "
            f"preview_token={token} to proceed."
        ),
    }
    return ToolAnswer(single(Meta("unlink", preview=preview_meta(token)), item))


def _audit(edge: Any) -> dict[str, Any]:
    return {"source_id": str(edge.source_id), "target_id": str(edge.target_id), "type": edge.type.value}


async def unlink_batch(args: UnlinkBatchArgs, ctx: CallContext) -> ToolAnswer:
    edge_ids = [uuid_arg(value, f"edge_ids[{index}]") for index, value in enumerate(args.edge_ids)]
    async with ctx.app.db.unit_of_work() as session:
        service = EdgeService(session, ctx.principal)
        edges = {edge_id: await service.get(edge_id) for edge_id in dict.fromkeys(edge_ids)}
        if args.confirm:
            missing = [str(edge_id) for edge_id, edge in edges.items() if edge is None]
            if missing:  # validated before any delete: never a partial prune
                raise edge_not_found_many(missing)
            gone = [str(edge_id) for edge_id in edges if not await service.delete(edge_id)]
            if gone:  # deleted by a concurrent call since the check: refuse the whole batch, as for a missing id
                raise edge_not_found_many(gone)
            await AuditRepository(session).record(ctx.principal.user_id, TOOL, "unlink_batch", list(edges))
            items = [{"edge_id": str(edge_id), "status": "deleted"} for edge_id in edge_ids]
            meta = Meta("unlink_batch", counts={"deleted": len(items), "preview": 0, "failed": 0})
            return ToolAnswer(collection(meta, items))
    items = [_batch_preview_row(edge_id, edges[edge_id]) for edge_id in edge_ids]
    failed = sum(1 for row in items if row["status"] == "failed")
    instruction = "Call memory_store again with action=unlink_batch, edge_ids=[...], confirm=true to proceed."
    counts = {"deleted": 0, "preview": len(items) - failed, "failed": failed}
    meta = Meta("unlink_batch", counts=counts, preview=preview_meta(None, instruction=instruction))
    return ToolAnswer(collection(meta, items))


def _batch_preview_row(edge_id: uuid.UUID, edge: Any) -> dict[str, Any]:
    if edge is None:
        return {"edge_id": str(edge_id), "status": "failed", "error": f"Edge not found: {edge_id}"}
    return {
        "edge_id": str(edge_id),
        "status": "preview",
        "edge": shape_edge(edge),
        "consequence": _consequence(edge),
    }


def edge_not_found_many(missing: list[str]) -> AppError:
    return not_found(f"Edge not found: {', '.join(missing)} — nothing was deleted; drop the missing ids and retry")


async def retype(args: RetypeArgs, ctx: CallContext) -> ToolAnswer:
    edge_id = uuid_arg(args.edge_id, "edge_id")
    async with ctx.app.db.unit_of_work() as session:
        service = EdgeService(session, ctx.principal)
        previews = PreviewService(session, ctx.app.limits.preview_ttl_seconds)
        edge = await service.get(edge_id)
        if edge is None:
            raise edge_not_found(edge_id)
        await service.validate_retype(edge, args.new_type)
        if args.confirm:
            await previews.redeem(ctx.principal, TOOL, "retype", previewed_arguments(args), args.preview_token)
            edge, created = await service.retype(edge, args.new_type)
            await AuditRepository(session).record(
                ctx.principal.user_id,
                TOOL,
                "retype",
                [edge_id, created.id],
                None,
                {"new_type": args.new_type.value},
            )
            item = {
                "status": "retyped",
                "edge_id": str(created.id),
                "old_edge_id": str(edge_id),
                "new_edge_id": str(created.id),
                "old_type": edge.type.value,
                "new_type": args.new_type.value,
            }
            return ToolAnswer(single(Meta("retype"), item))
        token = await previews.issue(ctx.principal, TOOL, "retype", previewed_arguments(args))
    consequence = (
        f"Replaces the '{edge.type.value}' edge between '{edge.source_id}' and '{edge.target_id}' with a "
        f"'{args.new_type.value}' edge (new id, created_at kept)."
    )
    item = {
        "status": "preview",
        "edge_id": str(edge_id),
        "old_edge_id": str(edge_id),
        "old_type": edge.type.value,
        "new_type": args.new_type.value,
        "source_id": str(edge.source_id),
        "target_id": str(edge.target_id),
        "consequence": consequence,
        "preview_token": token,
    }
    return ToolAnswer(single(Meta("retype", preview=preview_meta(token, consequence)), item))
