"""app/services/store/edges.py: unlink, unlink_batch and retype as memory_store's confirm flows run them (audited)."""

from __future__ import annotations

import uuid

import pytest

from app.db.models import EdgeType
from app.db.records import EdgeRecord
from app.errors import AppError
from app.services.context import AppContext
from app.services.store.edges import EdgeService
from tests.support.helpers import ToolCaller
from tests.support.search import create, link, rows


async def _edges(writer: ToolCaller, count: int) -> list[uuid.UUID]:
    hub = await create(writer, "Hub")
    ends = [await create(writer, f"End {index}") for index in range(count)]
    return [uuid.UUID((await link(writer, hub["id"], end["id"], "related"))["id"]) for end in ends]


async def _edge(context: AppContext, writer: ToolCaller, edge_id: uuid.UUID) -> EdgeRecord:
    """The edge as a preview read it."""
    async with context.db.unit_of_work() as session:
        edge = await EdgeService(session, writer.principal).get(edge_id)
    assert edge is not None
    return edge


async def _audit(context: AppContext) -> list[tuple[object, ...]]:
    found = await rows(context, "SELECT tool, action, target_ids, details FROM audit_event ORDER BY created_at")
    return [tuple(row) for row in found]


async def test_unlink_deletes_and_audits_a_previewed_edge_once(writer: ToolCaller, app_context: AppContext) -> None:
    [edge_id] = await _edges(writer, 1)
    edge = await _edge(app_context, writer, edge_id)
    async with app_context.db.unit_of_work() as session:
        service = EdgeService(session, writer.principal)
        assert await service.unlink(edge)
        assert not await service.unlink(edge)  # gone already: nothing more recorded
    details = {"source_id": str(edge.source_id), "target_id": str(edge.target_id), "type": "related"}
    assert await _audit(app_context) == [("memory_store", "unlink", [str(edge_id)], details)]


async def test_unlink_batch_deletes_all_or_nothing(writer: ToolCaller, app_context: AppContext) -> None:
    first, second = await _edges(writer, 2)
    missing = uuid.uuid4()
    async with app_context.db.unit_of_work() as session:
        service = EdgeService(session, writer.principal)
        edges = {edge_id: await service.get(edge_id) for edge_id in (first, missing)}
        with pytest.raises(AppError, match=f"Edge not found: {missing} — nothing was deleted"):
            await service.unlink_batch(edges)
    assert len(await rows(app_context, "SELECT id FROM edge")) == 2 and await _audit(app_context) == []
    async with app_context.db.unit_of_work() as session:
        service = EdgeService(session, writer.principal)
        await service.unlink_batch({edge_id: await service.get(edge_id) for edge_id in (first, second)})
    assert await rows(app_context, "SELECT id FROM edge") == []
    assert await _audit(app_context) == [("memory_store", "unlink_batch", [str(first), str(second)], {})]


async def test_retype_replaces_the_edge_and_audits_both_ids(writer: ToolCaller, app_context: AppContext) -> None:
    [edge_id] = await _edges(writer, 1)
    edge = await _edge(app_context, writer, edge_id)
    async with app_context.db.unit_of_work() as session:
        old, new = await EdgeService(session, writer.principal).retype(edge, EdgeType.supports)
    assert (old.id, old.type, new.type, new.created_at) == (
        edge_id,
        EdgeType.related,
        EdgeType.supports,
        edge.created_at,
    )
    assert await _audit(app_context) == [
        ("memory_store", "retype", [str(edge_id), str(new.id)], {"new_type": "supports"})
    ]
