"""The per-project HNSW indexes' job (app.db.project_indexes): which projects get one, by the counts the jobs
keep in `project.thought_estimate`; building, rebuilding (parameters changed) and dropping them CONCURRENTLY, one
replica at a time."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

import asyncpg
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db import graphs, project_indexes
from app.db.engine import Database
from app.db.locks import PROJECT_INDEX_LOCK_KEY
from app.db.repositories.projects import EXACT_SCAN_MAX_ROWS

logger = logging.getLogger(__name__)


# The cap on per-project indexes (ProjectIndexLimits.max_indexes); measured in docs/BENCHMARKS.md, "Many tenants".
MAX_PROJECT_INDEXES = 64


@dataclass(frozen=True)
class ProjectIndexLimits:
    """Which projects get their own HNSW index (app.db.project_indexes), by their last count.

    Built above `min_rows` live thoughts (smaller projects are scanned exactly) and up to `max_share` of all
    live thoughts (a filter that passes most of the shared graph walks it well); kept until the project falls
    to `keep_min_rows` or grows past `keep_max_share`, so a project near a limit is not rebuilt every tick.
    At most `max_indexes` exist, for the largest such projects (by count, then id): every statement on `thought`
    opens, plans around and locks each partial index, and every insert checks each predicate, so their number,
    not their size, is what a many-tenant store pays for (docs/BENCHMARKS.md, "Many tenants"). A project past
    the cap walks the shared graph.
    """

    min_rows: int = EXACT_SCAN_MAX_ROWS
    max_share: float = 0.6
    keep_min_rows: int = EXACT_SCAN_MAX_ROWS // 2
    keep_max_share: float = 0.75
    max_indexes: int = MAX_PROJECT_INDEXES


@dataclass
class IndexChanges:
    created: list[uuid.UUID] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    failed: list[uuid.UUID] = field(default_factory=list)  # builds PostgreSQL refused (logged)
    rebuilt: list[uuid.UUID] = field(default_factory=list)  # built again at the declared parameters


BUILD_TIMEOUT_SECONDS = 3600.0  # a build reads the whole project; pooled connections time out after 60 s
# As migrations 0002/0005 build the shared graph: one spilled past maintenance_work_mem recalls less.
BUILD_MAINTENANCE_WORK_MEM = "512MB"
# `place`: the project's rank by size among those under the keep share (the largest first), which the cap reads.
_INDEX_CANDIDATES = text(
    "WITH total AS (SELECT greatest(sum(thought_estimate), 1) AS n FROM project), "
    "ranked AS (SELECT p.id, p.thought_estimate AS estimate, row_number() OVER (ORDER BY "
    "p.thought_estimate <= CAST(:keep_max_share AS float8) * total.n DESC, p.thought_estimate DESC, p.id) AS place "
    "FROM project p, total) "
    "SELECT r.id, "
    "r.estimate > :min_rows AND r.estimate <= CAST(:max_share AS float8) * total.n "
    "AND r.place <= :max_indexes AS wanted, "
    "r.estimate > :keep_min_rows AND r.estimate <= CAST(:keep_max_share AS float8) * total.n "
    "AND r.place <= :max_indexes AS kept "
    "FROM ranked r, total ORDER BY r.id"
)


async def reconcile_project_indexes(db: Database, limits: ProjectIndexLimits | None = None) -> IndexChanges | None:
    """Build the indexes projects now qualify for; rebuild those whose parameters (reloptions) are not the declared
    ones (app.db.project_indexes.GRAPH_PARAMETERS); drop those of projects gone, shrunk or grown past the limits,
    any a cut-short build left invalid and any a cut-short rebuild left behind. Reads `project.thought_estimate`,
    so it runs after the refresh. None when another replica holds the job."""
    async with db.engine.connect() as connection:
        await connection.execution_options(isolation_level="AUTOCOMMIT")  # CONCURRENTLY runs outside a transaction
        driver: Any = (await connection.get_raw_connection()).driver_connection  # for a per-statement timeout
        if not await driver.fetchval("SELECT pg_try_advisory_lock($1)", PROJECT_INDEX_LOCK_KEY):
            return None
        try:
            return await _reconcile(connection, driver, limits or ProjectIndexLimits())
        finally:
            await driver.execute(f"SELECT pg_advisory_unlock({PROJECT_INDEX_LOCK_KEY})")


async def _reconcile(connection: AsyncConnection, driver: Any, limits: ProjectIndexLimits) -> IndexChanges:
    projects = (await connection.execute(_INDEX_CANDIDATES, asdict(limits))).all()
    indexes = (await connection.execute(project_indexes.EXISTING_INDEXES)).all()
    kept = {project_indexes.project_index_name(row.id) for row in projects if row.kept}
    changes = IndexChanges()
    for row in sorted(indexes, key=lambda index: str(index.name)):
        if project_indexes.is_rebuild_leftover(row.name) or not row.valid or row.name not in kept:
            await driver.execute(project_indexes.drop_statement(row.name), timeout=BUILD_TIMEOUT_SECONDS)
            changes.dropped.append(row.name)
            logger.info("dropped the project vector index %s", row.name)
    valid = {row.name: row.reloptions for row in indexes if row.valid and row.name in kept}
    to_build = [row.id for row in projects if row.wanted and project_indexes.project_index_name(row.id) not in valid]
    to_rebuild = [
        row.id
        for row in projects
        if (name := project_indexes.project_index_name(row.id)) in valid
        and not project_indexes.GRAPH_PARAMETERS.matches(valid[name])
    ]
    if to_build or to_rebuild:
        await driver.execute(f"SET maintenance_work_mem = '{BUILD_MAINTENANCE_WORK_MEM}'")
        try:
            for project_id in to_build:
                await _build(driver, project_id, changes)
            for project_id in to_rebuild:
                await _rebuild(driver, project_id, changes)
        finally:
            await driver.execute("RESET maintenance_work_mem")  # the connection goes back to the pool
    return changes


async def _build(driver: Any, project_id: uuid.UUID, changes: IndexChanges) -> None:
    """One project's index; a refusal (the role does not own `thought`, a full disk) is one warning line, and the
    other projects are still built. Its search keeps the shared graph; the next tick tries again."""
    started = time.monotonic()
    try:
        await driver.execute(project_indexes.create_statement(project_id), timeout=BUILD_TIMEOUT_SECONDS)
    except asyncpg.PostgresError as error:
        changes.failed.append(project_id)
        logger.warning("could not build the vector index of project %s: %s", project_id, error)
        return
    changes.created.append(project_id)
    logger.info("built the vector index of project %s in %.1f s", project_id, time.monotonic() - started)


async def _rebuild(driver: Any, project_id: uuid.UUID, changes: IndexChanges) -> None:
    """One project's index built again beside the old one, which its searches walk until the new one takes its
    name (app.db.graphs). A refusal keeps the old index (one warning line; the next tick drops what it left)."""
    name = project_indexes.project_index_name(project_id)
    started = time.monotonic()
    try:
        replacement = project_indexes.create_statement(project_id, suffix=graphs.NEXT_SUFFIX)
        await driver.execute(replacement, timeout=BUILD_TIMEOUT_SECONDS)
        async with driver.transaction():
            for statement in graphs.swap_statements(name):
                await driver.execute(statement)
        retired = project_indexes.drop_statement(name + graphs.RETIRED_SUFFIX)
        await driver.execute(retired, timeout=BUILD_TIMEOUT_SECONDS)
    except asyncpg.PostgresError as error:
        changes.failed.append(project_id)
        logger.warning("could not rebuild the vector index of project %s: %s", project_id, error)
        return
    changes.rebuilt.append(project_id)
    logger.info(
        "rebuilt the vector index of project %s at %s in %.1f s",
        project_id,
        project_indexes.GRAPH_PARAMETERS.clause(),
        time.monotonic() - started,
    )
