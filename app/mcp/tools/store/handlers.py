"""memory_store handlers: create, update, bulk_create, link, link_batch, unlink, unlink_batch, retype."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from app.errors import AppError, bad_request
from app.mcp.calls import CallContext, ToolAnswer
from app.mcp.confirm import ConfirmFlow, Preview
from app.mcp.envelope import Meta, collection, single
from app.mcp.shaping import ThoughtShaper, shape_edge
from app.mcp.tools.common import uuid_arg
from app.mcp.tools.store.args import (
    BulkCreateArgs,
    CreateArgs,
    LinkArgs,
    LinkBatchArgs,
    RetypeArgs,
    ThoughtInput,
    UnlinkArgs,
    UnlinkBatchArgs,
    UpdateArgs,
)
from app.services.store import operations as store_operations
from app.services.store.edges import EdgeService, edge_not_found
from app.services.store.operations import link_pairs, new_thought
from app.services.store.thoughts import NewThought
from app.services.values import EdgeRecord

EdgeState = tuple[uuid.UUID, EdgeRecord | None]
EdgesState = tuple[list[uuid.UUID], dict[uuid.UUID, EdgeRecord | None]]


async def create_thought(args: CreateArgs, ctx: CallContext) -> ToolAnswer:
    written = await store_operations.create_given(ctx.app, ctx.principal, args, args.cwd)
    meta = Meta("create", scope=written.scope, warnings=written.warnings)
    return ToolAnswer(single(meta, ThoughtShaper(compact=False)(written.thought)))


async def update_thought(args: UpdateArgs, ctx: CallContext) -> ToolAnswer:
    written = await store_operations.update_given(ctx.app, ctx.principal, args.thought_id, args.given())
    meta = Meta("update", scope=written.scope, warnings=written.warnings)
    return ToolAnswer(single(meta, ThoughtShaper(compact=False)(written.thought)))


def _bulk_row(raw: dict[str, Any], index: int, hard_limit: int) -> NewThought | AppError:
    prefix = f"thoughts[{index}]."
    try:
        return new_thought(ThoughtInput.model_validate(raw), hard_limit, prefix)
    except ValidationError as error:
        first = error.errors()[0]
        name = ".".join(str(part) for part in first["loc"])
        argument = f"{prefix}{name}"
        return bad_request(
            f"Invalid argument '{argument}': {first['msg']}", argument=argument, reason=first["msg"], validation=first
        )
    except AppError as error:
        return error


async def bulk_create(args: BulkCreateArgs, ctx: CallContext) -> ToolAnswer:
    hard_limit = ctx.app.settings.content.hard_limit
    rows = [_bulk_row(raw, index, hard_limit) for index, raw in enumerate(args.thoughts)]
    written = await store_operations.bulk_create(ctx.app, ctx.principal, rows, args.cwd)
    shape = ThoughtShaper(compact=True)
    items = [
        {"index": o.index, "status": "created", "thought": shape(o.thought)}
        if o.thought is not None
        else {"index": o.index, "status": "failed", "error": o.error.message if o.error else "failed"}
        for o in written.outcomes
    ]
    failed = sum(1 for item in items if item["status"] == "failed")
    meta = Meta(
        "bulk_create",
        scope=written.scope,
        warnings=written.warnings,
        counts={"created": len(items) - failed, "failed": failed},
    )
    return ToolAnswer(collection(meta, items))


async def link(args: LinkArgs, ctx: CallContext) -> ToolAnswer:
    edge = await store_operations.link(ctx.app, ctx.principal, args.source_id, args.target_id, args.edge_type)
    return ToolAnswer(single(Meta("link"), shape_edge(edge)))


async def link_batch(args: LinkBatchArgs, ctx: CallContext) -> ToolAnswer:
    outcomes = await link_pairs(
        ctx.app, ctx.principal, [(entry.source, entry.target, entry.type) for entry in args.links]
    )
    items: list[dict[str, Any]] = []
    for outcome, entry in zip(outcomes, args.links, strict=True):
        row: dict[str, Any] = {
            "index": outcome.index,
            "status": "linked",
            "source": entry.source,
            "target": entry.target,
        }
        if outcome.edge is not None:
            row["type"] = outcome.edge.type.value
        else:
            row.update(status="failed", error=outcome.error.message if outcome.error else "failed")
        items.append(row)
    failed = sum(1 for row in items if row["status"] == "failed")
    meta = Meta("link_batch", counts={"linked": len(items) - failed, "failed": failed})
    return ToolAnswer(collection(meta, items))


def _consequence(edge: Any) -> str:
    return f"Removes the '{edge.type.value}' edge between '{edge.source_id}' and '{edge.target_id}'."


# ---------------------------------------------------------------- unlink (preview → confirm)


async def _edge_id(args: UnlinkArgs | RetypeArgs, ctx: CallContext) -> uuid.UUID:
    return uuid_arg(args.edge_id, "edge_id")


async def _load_edge(args: UnlinkArgs, ctx: CallContext, session: AsyncSession, edge_id: uuid.UUID) -> EdgeState:
    service = EdgeService(session, ctx.principal)
    edge = await service.get(edge_id)
    await service.require_writable([edge])  # preview and confirm alike
    return edge_id, edge


def _unlink_missing(edge_id: uuid.UUID) -> ToolAnswer:
    return ToolAnswer(single(Meta("unlink"), {"status": "not_found", "edge_id": str(edge_id)}))


async def _plan_unlink(
    args: UnlinkArgs, ctx: CallContext, session: AsyncSession, state: EdgeState
) -> Preview | ToolAnswer:
    edge_id, edge = state
    if edge is None:
        return _unlink_missing(edge_id)
    item = {"status": "preview", "edge_id": str(edge_id), "edge": shape_edge(edge)}
    return Preview(Meta("unlink"), item, consequence=_consequence(edge), confirm_with=f"edge_id={edge_id}")


async def _unlink(args: UnlinkArgs, ctx: CallContext, session: AsyncSession, state: EdgeState) -> ToolAnswer:
    edge_id, edge = state
    if edge is None or not await EdgeService(session, ctx.principal).unlink(edge):
        return _unlink_missing(edge_id)
    return ToolAnswer(single(Meta("unlink"), {"status": "deleted", "edge_id": str(edge_id)}))


unlink = ConfirmFlow(
    prepare=_edge_id,
    load=_load_edge,
    plan=_plan_unlink,
    execute=_unlink,
    in_item=("consequence", "preview_token", "instruction"),
)


async def _edge_ids(args: UnlinkBatchArgs, ctx: CallContext) -> list[uuid.UUID]:
    return [uuid_arg(value, f"edge_ids[{index}]") for index, value in enumerate(args.edge_ids)]


async def _load_edges(
    args: UnlinkBatchArgs, ctx: CallContext, session: AsyncSession, edge_ids: list[uuid.UUID]
) -> EdgesState:
    service = EdgeService(session, ctx.principal)
    edges = {edge_id: await service.get(edge_id) for edge_id in dict.fromkeys(edge_ids)}
    await service.require_writable(edges.values())
    return edge_ids, edges


async def _plan_unlink_batch(
    args: UnlinkBatchArgs, ctx: CallContext, session: AsyncSession, state: EdgesState
) -> Preview:
    edge_ids, edges = state
    items = [_batch_preview_row(edge_id, edges[edge_id]) for edge_id in edge_ids]
    failed = sum(1 for row in items if row["status"] == "failed")
    counts = {"deleted": 0, "preview": len(items) - failed, "failed": failed}
    return Preview(Meta("unlink_batch", counts=counts), items=items, confirm_with="edge_ids=[...]")


async def _unlink_batch(
    args: UnlinkBatchArgs, ctx: CallContext, session: AsyncSession, state: EdgesState
) -> ToolAnswer:
    edge_ids, edges = state
    await EdgeService(session, ctx.principal).unlink_batch(edges)
    items = [{"edge_id": str(edge_id), "status": "deleted"} for edge_id in edge_ids]
    meta = Meta("unlink_batch", counts={"deleted": len(items), "preview": 0, "failed": 0})
    return ToolAnswer(collection(meta, items))


unlink_batch = ConfirmFlow(
    prepare=_edge_ids,
    load=_load_edges,
    plan=_plan_unlink_batch,
    execute=_unlink_batch,
    token=False,
    in_meta={"instruction": "instruction"},
)


def _batch_preview_row(edge_id: uuid.UUID, edge: Any) -> dict[str, Any]:
    if edge is None:
        return {"edge_id": str(edge_id), "status": "failed", "error": f"Edge not found: {edge_id}"}
    return {
        "edge_id": str(edge_id),
        "status": "preview",
        "edge": shape_edge(edge),
        "consequence": _consequence(edge),
    }


async def _load_retype(args: RetypeArgs, ctx: CallContext, session: AsyncSession, edge_id: uuid.UUID) -> EdgeRecord:
    service = EdgeService(session, ctx.principal)
    edge = await service.get(edge_id)
    if edge is None:
        raise edge_not_found(edge_id)
    await service.require_writable([edge])
    await service.validate_retype(edge, args.new_type)
    return edge


async def _plan_retype(args: RetypeArgs, ctx: CallContext, session: AsyncSession, edge: EdgeRecord) -> Preview:
    consequence = (
        f"Replaces the '{edge.type.value}' edge between '{edge.source_id}' and '{edge.target_id}' with a "
        f"'{args.new_type.value}' edge (new id, created_at kept)."
    )
    item = {
        "status": "preview",
        "edge_id": str(edge.id),
        "old_edge_id": str(edge.id),
        "old_type": edge.type.value,
        "new_type": args.new_type.value,
        "source_id": str(edge.source_id),
        "target_id": str(edge.target_id),
    }
    return Preview(Meta("retype"), item, consequence=consequence)


async def _retype(args: RetypeArgs, ctx: CallContext, session: AsyncSession, edge: EdgeRecord) -> ToolAnswer:
    edge_id = edge.id
    edge, created = await EdgeService(session, ctx.principal).retype(edge, args.new_type)
    item = {
        "status": "retyped",
        "edge_id": str(created.id),
        "old_edge_id": str(edge_id),
        "new_edge_id": str(created.id),
        "old_type": edge.type.value,
        "new_type": args.new_type.value,
    }
    return ToolAnswer(single(Meta("retype"), item))


retype = ConfirmFlow(
    prepare=_edge_id,
    load=_load_retype,
    plan=_plan_retype,
    execute=_retype,
    in_item=("consequence", "preview_token"),
    in_meta={"consequence": "consequence"},
)
