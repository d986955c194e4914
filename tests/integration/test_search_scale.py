"""Scale sanity: a project-filtered vector search still fills its page when the project is a small minority."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from app.db.repositories.search import SearchRepository
from tests.helpers import ToolCaller
from tests.integration.search_support import PROFILE, bulk, execute, ids_of, register, search

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

    # The planner may answer a selective filter exactly (btree + sort). Take that path away so the vector leg
    # must walk the HNSW index with the filter inside it: only the iterative scan still fills the page.
    assert await _plan_uses_hnsw(reader, small["id"])
    original = SearchRepository.vector_leg

    async def through_hnsw(self: SearchRepository, *args: Any, **kwargs: Any) -> list[Any]:
        await self.session.execute(text("SET LOCAL enable_sort = off"))
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
