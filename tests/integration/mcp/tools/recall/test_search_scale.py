"""Scale sanity: a project-filtered vector search still fills its page when the project is a small minority."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text

from app.db.models import ThoughtStatus
from app.db.repositories.projects import ESTIMATE_FRESH_FOR, EXACT_SCAN_MAX_ROWS, ProjectRepository
from app.db.repositories.search import SearchRepository
from app.db.repositories.thoughts import ThoughtFilter, VectorScan
from app.db.visibility import UNSCOPED
from app.services.jobs.background import refresh_thought_estimates
from tests.support.helpers import ToolCaller
from tests.support.search import PROFILE, archive, bulk, execute, ids_of, register, rows, search

BIG, SMALL = 1900, 100  # a 95 / 5 split of 2000 thoughts
QUERY = "invoice retried by billing"


async def test_a_filtered_search_returns_a_full_page(
    writer: ToolCaller, reader: ToolCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    await register(writer, "Billing", "/work/billing")
    small = await register(writer, "Garden", "/work/garden")
    await bulk(writer, [f"invoice {n} retried by billing" for n in range(BIG)], cwd="/work/billing")
    garden = await bulk(writer, [f"garden bed {n} watered" for n in range(SMALL)], cwd="/work/garden")
    await execute(reader.context, "ANALYZE thought")
    # The query sits among the big project's rows: the nearest few hundred vectors are all billing rows.
    arguments: dict[str, Any] = {"cwd": "/work/garden", "hybrid": False, "min_relevance": 0, "limit": 10}
    natural = await search(reader, QUERY, **arguments)
    assert len(natural.items) == 10 and set(ids_of(natural)) <= set(garden)
    assert natural.meta["counts"]["returned"] == 10
    assert natural.meta["scope"] == {"project": small["id"], "project_name": "Garden", "global": False}

    # Never counted by the background jobs, the project gets PostgreSQL's plan, which may answer a selective
    # filter exactly (btree + sort). Take that path away so the vector leg must walk the HNSW index with the
    # filter inside it: only the iterative scan still fills the page.
    assert await _plan_uses_hnsw(reader, small["id"])
    original = SearchRepository.vector_leg

    async def through_hnsw(self: SearchRepository, *args: Any, **kwargs: Any) -> list[Any]:
        await self.session.execute(text("SET LOCAL enable_sort = off").execution_options(**UNSCOPED))
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(SearchRepository, "vector_leg", through_hnsw)
    forced = await search(reader, QUERY, **arguments)
    assert len(forced.items) == 10 and set(ids_of(forced)) <= set(garden)
    assert ids_of(forced) == ids_of(natural)  # the approximate scan finds the exact page here


async def _plan_uses_hnsw(reader: ToolCaller, project_id: str) -> bool:
    vector = await reader.context.embedding.embed_query(QUERY)
    assert vector is not None
    literal = "[" + ",".join(repr(value) for value in vector) + "]"
    async with reader.context.db.unit_of_work() as session:
        await session.execute(text("SET LOCAL enable_sort = off"))
        plan = await session.execute(
            text(
                "EXPLAIN SELECT id FROM thought WHERE embedding_model = :model AND project_id = :project "
                "AND status = 'active' "
                "ORDER BY embedding::halfvec(384) <=> CAST(:vector AS vector)::halfvec(384) LIMIT 100"
            ),
            {"model": PROFILE.model_id, "project": project_id, "vector": literal},
        )
        return any("ix_thought_embedding_hnsw" in line for (line,) in plan)


async def test_a_project_counted_small_is_scanned_exactly_and_any_other_walks_the_index(
    writer: ToolCaller, reader: ToolCaller
) -> None:
    """The exact scan orders by the full-precision distance; the HNSW walk ranks by the half-precision one and
    its candidates are re-ranked by the full-precision distance, so both answer at full precision."""
    project = await register(writer, "Garden", "/work/garden")
    await bulk(writer, [f"garden bed {n} watered on day {n % 7}" for n in range(60)], cwd="/work/garden")
    vector = await reader.context.embedding.embed_query(QUERY)
    assert vector is not None

    async def leg_and_full_precision(small: bool) -> tuple[list[float], list[float]]:
        scan = VectorScan.EXACT if small else VectorScan.SHARED_INDEX
        where = ThoughtFilter(uuid.UUID(project["id"]), (ThoughtStatus.active,), vector_scan=scan)
        async with reader.context.db.unit_of_work() as session:
            leg = await SearchRepository(session).vector_leg(vector, PROFILE.model_id, where, 100)
            full = await session.execute(
                text("SELECT id, embedding <=> CAST(:vector AS vector) FROM thought WHERE id = ANY(:ids)"),
                {"vector": "[" + ",".join(repr(value) for value in vector) + "]", "ids": [row.id for row in leg]},
            )
            exact = {row[0]: row[1] for row in full}
        return [row.score for row in leg], [exact[row.id] for row in leg]

    scores, full = await leg_and_full_precision(small=True)
    assert len(scores) == 60 and scores == full  # every row, at full precision
    scores, full = await leg_and_full_precision(small=False)
    assert len(scores) == 60 and scores == full == sorted(full)  # the walk's rows, re-ranked


async def test_a_project_reads_as_small_only_when_recently_counted_under_the_limit(
    writer: ToolCaller, reader: ToolCaller
) -> None:
    await register(writer, "Garden", "/work/garden")

    async def small() -> bool:
        async with reader.context.db.unit_of_work() as session:
            project = await ProjectRepository(session).find_for_path("/work/garden")
        assert project is not None
        return project.counted_small

    async def counted(estimate: int, age: timedelta | None) -> bool:
        at = "NULL" if age is None else "now() - CAST(:age AS interval)"
        await execute(
            reader.context,
            f"UPDATE project SET thought_estimate = :n, thought_estimate_at = {at} WHERE name = 'Garden'",
            n=estimate,
            **({} if age is None else {"age": age}),
        )
        return await small()

    recent = ESTIMATE_FRESH_FOR - timedelta(seconds=30)
    assert await counted(EXACT_SCAN_MAX_ROWS, recent)
    assert not await counted(EXACT_SCAN_MAX_ROWS + 1, recent)
    assert not await counted(10, ESTIMATE_FRESH_FOR)  # no replica counted lately: PostgreSQL's plan
    assert not await counted(0, None)  # never counted
    await refresh_thought_estimates(reader.context.db)
    assert await small()  # what the refresh stamps is fresh


async def test_the_estimate_refresh_counts_live_thoughts_of_every_project_and_stamps_them(
    writer: ToolCaller, reader: ToolCaller
) -> None:
    await register(writer, "Busy", "/work/busy")
    await register(writer, "Quiet", "/work/quiet")
    ids = await bulk(writer, [f"note {n} about the busy project" for n in range(5)], cwd="/work/busy")
    await archive(reader.context, ids[0])
    projects = await rows(reader.context, "SELECT count(*) FROM project")
    assert await refresh_thought_estimates(reader.context.db) == projects[0][0]
    counted = await rows(
        reader.context,
        "SELECT name, thought_estimate, thought_estimate_at > now() - interval '1 minute' FROM project "
        "WHERE name IN ('Busy', 'Quiet')",
    )
    assert {row[0]: (row[1], row[2]) for row in counted} == {"Busy": (4, True), "Quiet": (0, True)}
