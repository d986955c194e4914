"""Per-project HNSW indexes: the jobs build and drop them by the projects' counts, searches walk them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import text

from app.db import graphs, project_indexes
from app.db.engine import Database, build_engine
from app.db.locks import PROJECT_INDEX_LOCK_KEY
from app.db.models import ThoughtStatus
from app.db.repositories.projects import ProjectRepository
from app.db.repositories.search import SearchRepository
from app.db.repositories.thoughts import ThoughtFilter, VectorScan
from app.services.context import AppContext
from app.services.jobs.background import refresh_thought_estimates
from app.services.jobs.project_indexes import (
    BUILD_MAINTENANCE_WORK_MEM,
    IndexChanges,
    ProjectIndexLimits,
    reconcile_project_indexes,
)
from tests.support.helpers import ToolCaller
from tests.support.search import PROFILE, bulk, execute, ids_of, register, rows, search

# Scaled down: built above 10 live thoughts and up to 40 % of them; kept down to 5 and up to 60 %.
LIMITS = ProjectIndexLimits(min_rows=10, max_share=0.4, keep_min_rows=5, keep_max_share=0.6)
QUERY = "garden bed watered"


@pytest.fixture
async def projects(writer: ToolCaller, reader: ToolCaller) -> AsyncIterator[dict[str, uuid.UUID]]:
    """Billing 40 thoughts (61 %), Garden 20 (30 %), Tiny 6 (9 %), counted; the indexes dropped afterwards."""
    ids = {}
    for name, size in (("Billing", 40), ("Garden", 20), ("Tiny", 6)):
        ids[name] = uuid.UUID((await register(writer, name, f"/work/{name.lower()}"))["id"])
        contents = [f"{name.lower()} bed {n} watered on day {n % 7}" for n in range(size)]
        await bulk(writer, contents, cwd=f"/work/{name.lower()}")
    await refresh_thought_estimates(reader.context.db)
    yield ids
    for row in await _indexes(reader.context):
        await execute(reader.context, f'DROP INDEX "{row[0]}"')


async def _indexes(context: AppContext) -> list[Any]:
    return list(
        await rows(
            context,
            "SELECT c.relname, i.indisvalid, pg_get_indexdef(c.oid), c.reloptions FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid WHERE starts_with(c.relname, :prefix) ORDER BY 1",
            prefix=project_indexes.PREFIX,
        )
    )


async def _has_index(context: AppContext, path: str) -> bool:
    async with context.db.unit_of_work() as session:
        project = await ProjectRepository(session).find_for_path(path)
    assert project is not None
    return project.has_project_index


async def _estimate(context: AppContext, name: str, estimate: int) -> None:
    await execute(context, "UPDATE project SET thought_estimate = :n WHERE name = :name", n=estimate, name=name)


async def test_a_mid_size_project_gets_an_index_of_its_rows(reader: ToolCaller, projects: dict[str, uuid.UUID]) -> None:
    changes = await reconcile_project_indexes(reader.context.db, LIMITS)
    assert changes is not None
    assert changes.created == [projects["Garden"]] and changes.dropped == []  # Billing is too big a share, Tiny small
    ((name, valid, definition, options),) = await _indexes(reader.context)
    assert name == "ix_thought_hnsw_project_" + projects["Garden"].hex and valid
    assert definition.endswith(
        "USING hnsw (((embedding)::halfvec(384)) halfvec_cosine_ops) WITH (m='12', ef_construction='256') "
        f"WHERE (project_id = '{projects['Garden']}'::uuid)"
    )
    assert options == ["m=12", "ef_construction=256"]  # project_indexes.GRAPH_PARAMETERS
    assert await _has_index(reader.context, "/work/garden")
    assert not await _has_index(reader.context, "/work/billing")

    again = await reconcile_project_indexes(reader.context.db, LIMITS)
    assert again is not None and again.created == again.dropped == []


async def test_an_index_is_kept_near_the_limits_and_dropped_past_the_keep_limits(
    reader: ToolCaller, projects: dict[str, uuid.UUID]
) -> None:
    await reconcile_project_indexes(reader.context.db, LIMITS)
    name = project_indexes.project_index_name(projects["Garden"])
    await _estimate(reader.context, "Garden", 8)  # under min_rows, over keep_min_rows
    assert await reconcile_project_indexes(reader.context.db, LIMITS) == IndexChanges()
    await _estimate(reader.context, "Garden", 5)  # down to keep_min_rows
    assert await reconcile_project_indexes(reader.context.db, LIMITS) == IndexChanges(dropped=[name])
    assert not await _has_index(reader.context, "/work/garden")

    await _estimate(reader.context, "Garden", 20)
    await reconcile_project_indexes(reader.context.db, LIMITS)
    await _estimate(reader.context, "Garden", 80)  # 80 of 126: 63 %, past keep_max_share; Billing now 32 %
    expected = IndexChanges(created=[projects["Billing"]], dropped=[name])
    assert await reconcile_project_indexes(reader.context.db, LIMITS) == expected


async def test_an_invalid_index_is_rebuilt_and_one_of_a_project_gone_is_dropped(
    reader: ToolCaller, projects: dict[str, uuid.UUID]
) -> None:
    garden = project_indexes.project_index_name(projects["Garden"])
    # A CREATE INDEX CONCURRENTLY that fails leaves its index behind, invalid: as a build cut short by a restart.
    async with reader.context.db.engine.connect() as connection:
        await connection.execution_options(isolation_level="AUTOCOMMIT")
        with pytest.raises(Exception, match="could not create unique index"):
            await connection.exec_driver_sql(f"CREATE UNIQUE INDEX CONCURRENTLY {garden} ON thought (project_id)")
    gone = uuid.uuid4()
    await execute(reader.context, project_indexes.create_statement(gone).replace(" CONCURRENTLY", ""))
    assert [(row[0], row[1]) for row in await _indexes(reader.context)] == sorted(
        [(garden, False), (project_indexes.project_index_name(gone), True)]
    )
    assert not await _has_index(reader.context, "/work/garden")  # an invalid index is never searched

    changes = await reconcile_project_indexes(reader.context.db, LIMITS)
    assert changes == IndexChanges(
        created=[projects["Garden"]], dropped=sorted([garden, project_indexes.project_index_name(gone)])
    )
    assert [(row[0], row[1]) for row in await _indexes(reader.context)] == [(garden, True)]
    assert await _has_index(reader.context, "/work/garden")


async def test_a_build_leaves_its_pooled_connection_as_it_found_it(
    database_url: str, projects: dict[str, uuid.UUID]
) -> None:
    db = Database(build_engine(database_url, pool_size=1))  # one connection: the build's is the next one's
    try:
        changes = await reconcile_project_indexes(db, LIMITS)
        assert changes is not None and changes.created == [projects["Garden"]]
        async with db.unit_of_work() as session:
            settings = await session.execute(text("SHOW maintenance_work_mem"))
            assert settings.scalar_one() != BUILD_MAINTENANCE_WORK_MEM  # the build's 512MB was reset
            isolation = await session.execute(text("SHOW transaction_isolation"))
            assert isolation.scalar_one() == "read committed"
    finally:
        await db.dispose()


async def test_a_refused_build_is_one_warning_and_the_other_projects_are_still_built(
    reader: ToolCaller,
    projects: dict[str, uuid.UUID],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    both = ProjectIndexLimits(min_rows=10, max_share=0.7, keep_min_rows=5, keep_max_share=0.8)  # Billing too
    original = project_indexes.create_statement

    def refused_for_billing(project_id: uuid.UUID) -> str:
        if project_id == projects["Billing"]:  # as PostgreSQL answers a role that does not own the table
            return "DO $$ BEGIN RAISE insufficient_privilege USING MESSAGE = 'must be owner of table thought'; END $$"
        return original(project_id)

    monkeypatch.setattr(project_indexes, "create_statement", refused_for_billing)
    changes = await reconcile_project_indexes(reader.context.db, both)
    assert changes == IndexChanges(created=[projects["Garden"]], failed=[projects["Billing"]])
    refusals = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert refusals == [
        f"could not build the vector index of project {projects['Billing']}: must be owner of table thought"
    ]
    assert [row[0] for row in await _indexes(reader.context)] == [
        project_indexes.project_index_name(projects["Garden"])
    ]


async def test_the_job_runs_on_one_replica_at_a_time(reader: ToolCaller, projects: dict[str, uuid.UUID]) -> None:
    async with reader.context.db.engine.connect() as other:
        await other.execute(text("SELECT pg_advisory_lock(:key)"), {"key": PROJECT_INDEX_LOCK_KEY})
        assert await reconcile_project_indexes(reader.context.db, LIMITS) is None
        await other.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": PROJECT_INDEX_LOCK_KEY})
    assert await _indexes(reader.context) == []
    assert await reconcile_project_indexes(reader.context.db, LIMITS) is not None


async def test_a_search_of_a_project_with_an_index_walks_it_even_in_a_generic_plan(
    reader: ToolCaller, projects: dict[str, uuid.UUID]
) -> None:
    await reconcile_project_indexes(reader.context.db, LIMITS)
    vector = await reader.context.embedding.embed_query(QUERY)
    assert vector is not None
    index = project_indexes.project_index_name(projects["Garden"])

    async def scans_of_the_project_index(scan: VectorScan) -> tuple[int, list[uuid.UUID]]:
        """Scans of the project's index by one vector leg planned generically (as a prepared statement that
        ran 5 times may be), the HNSW walk forced (these few rows would be sorted otherwise).

        The "xact" counter is the backend's pending count: it still holds the scans of earlier transactions
        on this pooled connection until the backend flushes them (at most once a second, when idle), so the
        leg's scans are the counter's growth across it, read twice in the leg's own transaction."""
        where = ThoughtFilter(projects["Garden"], (ThoughtStatus.active,), vector_scan=scan)
        numscans = text("SELECT pg_stat_get_xact_numscans(to_regclass(:i))")
        async with reader.context.db.unit_of_work() as session:
            await session.execute(text("SET LOCAL plan_cache_mode = force_generic_plan"))
            await session.execute(text("SET LOCAL enable_sort = off"))
            before = (await session.execute(numscans, {"i": index})).scalar_one()
            leg = await SearchRepository(session).vector_leg(vector, PROFILE.model_id, where, 100)
            after = (await session.execute(numscans, {"i": index})).scalar_one()
        return int(after) - int(before), [row.id for row in leg]

    walked, own = await scans_of_the_project_index(VectorScan.PROJECT_INDEX)
    assert walked == 1 and len(own) == 20
    walked, shared = await scans_of_the_project_index(VectorScan.SHARED_INDEX)  # the project is a parameter
    assert walked == 0 and shared == own


async def test_the_search_tool_reads_a_project_through_its_index_unless_it_is_counted_small(
    reader: ToolCaller, projects: dict[str, uuid.UUID], monkeypatch: pytest.MonkeyPatch
) -> None:
    await reconcile_project_indexes(reader.context.db, LIMITS)
    scans: list[VectorScan] = []
    original = SearchRepository.vector_leg

    async def spied(self: SearchRepository, vector: Any, model: str, where: ThoughtFilter, pool: int) -> Any:
        scans.append(where.vector_scan)
        return await original(self, vector, model, where, pool)

    monkeypatch.setattr(SearchRepository, "vector_leg", spied)
    arguments: dict[str, Any] = {"hybrid": False, "min_relevance": 0, "limit": 10}
    await search(reader, QUERY, cwd="/work/garden", **arguments)  # 20 thoughts counted just now: exact wins
    await execute(reader.context, "UPDATE project SET thought_estimate_at = NULL")  # no recent count
    answer = await search(reader, QUERY, cwd="/work/garden", **arguments)
    await search(reader, QUERY, cwd="/work/billing", **arguments)
    await search(reader, QUERY, **arguments)
    assert scans == [VectorScan.EXACT, VectorScan.PROJECT_INDEX, VectorScan.SHARED_INDEX, VectorScan.SHARED_INDEX]
    garden = await rows(reader.context, "SELECT id FROM thought WHERE project_id = :p", p=projects["Garden"])
    assert len(answer.items) == 10 and set(ids_of(answer)) <= {str(row[0]) for row in garden}


async def test_at_most_max_indexes_exist_for_the_largest_projects(
    reader: ToolCaller, projects: dict[str, uuid.UUID]
) -> None:
    """Each partial index costs every statement on `thought` (planning, locks) and every insert (its predicate):
    past the cap only the largest qualifying projects keep one, and one that outgrows a holder takes its place."""
    capped = ProjectIndexLimits(min_rows=5, max_share=0.4, keep_min_rows=3, keep_max_share=0.45, max_indexes=1)
    # Garden (30 %) and Tiny (9 %) both qualify; Billing (61 %) is past the share.
    assert await reconcile_project_indexes(reader.context.db, capped) == IndexChanges(created=[projects["Garden"]])
    assert await reconcile_project_indexes(reader.context.db, capped) == IndexChanges()

    await _estimate(reader.context, "Tiny", 25)  # 25 of 85 (29 %): now larger than Garden's 20 (24 %)
    garden = project_indexes.project_index_name(projects["Garden"])
    expected = IndexChanges(created=[projects["Tiny"]], dropped=[garden])
    assert await reconcile_project_indexes(reader.context.db, capped) == expected
    assert [row[0] for row in await _indexes(reader.context)] == [project_indexes.project_index_name(projects["Tiny"])]
    assert await _has_index(reader.context, "/work/tiny") and not await _has_index(reader.context, "/work/garden")


async def _waiting_concurrent_builds(context: AppContext) -> int:
    waiting = await rows(
        context,
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND starts_with(query, 'CREATE INDEX CONCURRENTLY')",
    )
    return int(waiting[0][0])


async def test_an_index_at_other_parameters_is_rebuilt_beside_it_and_then_takes_its_name(
    reader: ToolCaller, projects: dict[str, uuid.UUID], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release that declares other GRAPH_PARAMETERS reaches a store whose project graph an older one built
    under the same name: the job reads the index's reloptions, not its name. The replacement builds CONCURRENTLY
    beside the old graph, which stays valid and searched until the replacement takes its name.

    A transaction holding a write lock on `thought` pauses the build where CREATE INDEX CONCURRENTLY waits for
    the table's writers (after creating its index, before filling it), so the store is looked at mid-rebuild."""
    garden = project_indexes.project_index_name(projects["Garden"])
    assert await reconcile_project_indexes(reader.context.db, LIMITS) == IndexChanges(created=[projects["Garden"]])
    built = ["m=12", "ef_construction=256"]
    assert [row[3] for row in await _indexes(reader.context)] == [built]
    monkeypatch.setattr(project_indexes, "GRAPH_PARAMETERS", graphs.Graph(m=8, ef_construction=64))  # the release
    declared = ["m=8", "ef_construction=64"]

    async with reader.context.db.engine.connect() as writer_lock:
        await writer_lock.execute(text("LOCK TABLE thought IN ROW EXCLUSIVE MODE"))  # as any open write holds
        job = asyncio.create_task(reconcile_project_indexes(reader.context.db, LIMITS))
        for _ in range(600):  # until the build waits for that lock (bounded: a build that never waits fails below)
            if job.done() or await _waiting_concurrent_builds(reader.context):
                break
            await asyncio.sleep(0.05)
        assert not job.done()
        during = [(row[0], row[1], row[3]) for row in await _indexes(reader.context)]
        assert during == [(garden, True, built), (garden + graphs.NEXT_SUFFIX, False, declared)]
        assert await _has_index(reader.context, "/work/garden")  # searches still walk the old graph
        await writer_lock.rollback()
        changes = await job

    assert changes == IndexChanges(rebuilt=[projects["Garden"]])
    ((name, valid, definition, options),) = await _indexes(reader.context)
    assert (name, valid, options) == (garden, True, declared)
    assert f"WHERE (project_id = '{projects['Garden']}'::uuid)" in definition
    assert await _has_index(reader.context, "/work/garden")
    assert await reconcile_project_indexes(reader.context.db, LIMITS) == IndexChanges()  # converged: no rebuild


async def test_what_a_cut_short_rebuild_left_is_dropped_and_the_index_kept(
    reader: ToolCaller, projects: dict[str, uuid.UUID]
) -> None:
    """A restart mid-rebuild leaves the replacement (invalid, or valid before the swap) or the replaced graph
    (after it): the next tick drops them (any index of those names), and an index already at the declared
    parameters is not rebuilt."""
    await reconcile_project_indexes(reader.context.db, LIMITS)
    garden = project_indexes.project_index_name(projects["Garden"])
    leftovers = [garden + graphs.NEXT_SUFFIX, garden + graphs.RETIRED_SUFFIX]
    for leftover in leftovers:
        await execute(reader.context, f'CREATE INDEX "{leftover}" ON thought (project_id)')
    assert len(await _indexes(reader.context)) == 3

    assert await reconcile_project_indexes(reader.context.db, LIMITS) == IndexChanges(dropped=sorted(leftovers))
    assert [(row[0], row[1]) for row in await _indexes(reader.context)] == [(garden, True)]
    with pytest.raises(ValueError, match="not a project index"):
        project_indexes.drop_statement(graphs.SHARED_INDEX + graphs.NEXT_SUFFIX)  # never the shared graph's
