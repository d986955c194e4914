"""The vector leg through an HNSW graph answers in the order of the full-precision cosine distance: the graph's
half-precision order is re-ranked (app.db.repositories.search._vector_leg_statement); the page's read reports the
same full-precision distance."""

from __future__ import annotations

import uuid

from sqlalchemy import text

from app.db.models import ThoughtStatus
from app.db.repositories.search import PROJECT_INDEX_EF_SEARCH, UNSCOPED_EF_SEARCH, SearchRepository
from app.db.repositories.thoughts import ThoughtFilter, VectorScan
from app.db.vector import HNSW_EF_SEARCH
from tests.support.helpers import ToolCaller
from tests.support.search import PROFILE, bulk, execute, register, rows

DIMENSIONS = 384
QUERY = [1.0] + [0.0] * (DIMENSIONS - 1)
# Two rows 2.6e-5 apart in cosine distance to QUERY (NEARER 0.143797, FARTHER 0.143822), as e5's near ties are,
# which the graph holds in the other order: it keeps each vector normalised and rounded to half precision and ranks
# by their inner product (pgvector's halfvec_cosine_ops), -0.85596 against -0.85645. Found by a search over rounded
# 4-component vectors.
NEARER = [0.8562, 0.4248, 0.2311, 0.1818] + [0.0] * (DIMENSIONS - 4)
FARTHER = [0.8562, 0.0329, 0.5012, 0.1212] + [0.0] * (DIMENSIONS - 4)
VECTOR = "CAST(:q AS vector)"


def _literal(vector: list[float]) -> str:
    return "[" + ",".join(repr(value) for value in vector) + "]"


async def test_the_walk_s_rows_come_in_full_precision_order_with_full_precision_distances(
    writer: ToolCaller, reader: ToolCaller
) -> None:
    project = await register(writer, "Garden", "/work/garden")
    ids = await bulk(writer, [f"garden bed {n} watered on day {n}" for n in range(6)], cwd="/work/garden")
    nearer, farther = uuid.UUID(ids[0]), uuid.UUID(ids[1])
    for thought_id, vector in ((nearer, NEARER), (farther, FARTHER)):
        await execute(
            writer.context,
            "UPDATE thought SET embedding = CAST(:vector AS vector) WHERE id = :id",
            vector=_literal(vector),
            id=thought_id,
        )
    query = _literal(QUERY)
    full = await rows(reader.context, f"SELECT id FROM thought ORDER BY embedding <=> {VECTOR} LIMIT 2", q=query)
    assert [row.id for row in full] == [nearer, farther]
    async with reader.context.db.unit_of_work() as session:
        await session.execute(text("SET LOCAL enable_seqscan = off"))
        walk = await session.execute(
            text(f"SELECT id FROM thought ORDER BY embedding::halfvec(384) <=> {VECTOR}::halfvec(384) LIMIT 2"),
            {"q": query},
        )
        assert [row.id for row in walk] == [farther, nearer]  # the graph's own order

    for scope in (None, uuid.UUID(project["id"])):  # unscoped, and a project walking the shared graph
        async with reader.context.db.unit_of_work() as session:
            await session.execute(text("SET LOCAL enable_seqscan = off"))  # the graph walk, not a sort of the table
            where = ThoughtFilter(scope, (ThoughtStatus.active,), vector_scan=VectorScan.SHARED_INDEX)
            leg = await SearchRepository(session).vector_leg(QUERY, PROFILE.model_id, where, 100)
            exact = await session.execute(
                text(f"SELECT id, embedding <=> {VECTOR} AS distance FROM thought"), {"q": query}
            )
            distance = {row.id: float(row.distance) for row in exact}
        assert [row.id for row in leg[:2]] == [nearer, farther], scope
        assert [row.score for row in leg] == sorted(distance.values()), scope  # every row, at full precision

    # The page's read (what a row only the full-text leg found shows as its similarity): the same full precision.
    async with reader.context.db.unit_of_work() as session:
        page = await SearchRepository(session).page([nearer, farther], QUERY, PROFILE.model_id)
    assert [page[thought_id].distance for thought_id in (nearer, farther)] == [distance[nearer], distance[farther]]


async def test_each_scope_walks_at_its_own_candidate_list(writer: ToolCaller, reader: ToolCaller) -> None:
    """Every project's walk of the shared graph runs at UNSCOPED_EF_SEARCH (e5's recall@10 at 100 k: 0.946 at the
    session's 200, 0.959 at 400), a walk of a project's own graph at PROJECT_INDEX_EF_SEARCH (the 50 % project's
    0.935-0.956 at 200, 0.972-0.984 at 400); a project's walk of the shared graph, and an exact scan, keep the
    session's HNSW_EF_SEARCH. Each for its transaction only."""
    project = await register(writer, "Orchard", "/work/orchard")
    await bulk(writer, [f"orchard row {n} pruned in week {n}" for n in range(4)], cwd="/work/orchard")
    orchard = uuid.UUID(project["id"])
    cases = (
        (None, VectorScan.SHARED_INDEX, UNSCOPED_EF_SEARCH),
        (orchard, VectorScan.PROJECT_INDEX, PROJECT_INDEX_EF_SEARCH),
        (orchard, VectorScan.SHARED_INDEX, HNSW_EF_SEARCH),
        (orchard, VectorScan.EXACT, HNSW_EF_SEARCH),
    )
    for scope, scan, expected in cases:
        async with reader.context.db.unit_of_work() as session:
            where = ThoughtFilter(scope, (ThoughtStatus.active,), vector_scan=scan)
            found = await SearchRepository(session).vector_leg(QUERY, PROFILE.model_id, where, 100)
            setting = await session.execute(text("SELECT current_setting('hnsw.ef_search')"))
            assert int(setting.scalar_one()) == expected, (scope, scan)
        assert len(found) >= 4, (scope, scan)  # every scan answered (the orchard rows, unscoped more)
        async with reader.context.db.unit_of_work() as session:  # the next transaction: the session's again
            setting = await session.execute(text("SELECT current_setting('hnsw.ef_search')"))
            assert int(setting.scalar_one()) == HNSW_EF_SEARCH
    assert UNSCOPED_EF_SEARCH > HNSW_EF_SEARCH
    assert PROJECT_INDEX_EF_SEARCH > HNSW_EF_SEARCH
