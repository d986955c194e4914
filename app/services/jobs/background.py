"""Background jobs beside the requests: importance decay, proposal expiry, preview-token purge, the project
counts and per-project vector indexes (app.services.jobs.project_indexes) the search plans by, and the stored health
report the console's health page shows (app.services.status.health_reports).

Each job runs under an advisory lock, so with several replicas exactly one runs it;
the decay records its run as an audit event, which is how every replica knows it already ran today.
The replica that ran a job records the run — start, end, outcome — in `job_run` (app.services.jobs.runs), one
row per job, which the console's operations page shows on every replica.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from app.config import DecaySettings, Settings
from app.db.engine import Database, is_unavailable
from app.db.locks import DECAY_LOCK_KEY, ESTIMATE_LOCK_KEY, EXPIRY_LOCK_KEY
from app.ids import new_id
from app.services.auth.oauth_grants import purge_expired_oauth_rows
from app.services.auth.sessions import ConsoleSessionService
from app.services.jobs.project_indexes import reconcile_project_indexes
from app.services.jobs.runs import record_job_run
from app.services.review.proposals import expire_due_proposals
from app.services.status.health_reports import refresh_if_due

logger = logging.getLogger(__name__)


async def _locked(session: AsyncSession, key: int) -> bool:
    return bool((await session.execute(text("SELECT pg_try_advisory_xact_lock(:key)"), {"key": key})).scalar())


async def decay_importance(db: Database, decay: DecaySettings, force: bool = False) -> int | None:
    """Multiply importance by the rate for thoughts not hit in the last day; None when it was not due.

    The rows are decayed DECAY_BATCH at a time, each batch its own transaction: at 100 k thoughts a single
    UPDATE ran 39 s (every rewritten row re-enters every index, HNSW included), near the statement timeout,
    holding every row lock meanwhile. A session-level advisory lock spans the batches so one replica runs
    it, and the audit event is written first, so a run cut short is not repeated within the interval.
    """
    async with db.engine.connect() as connection:
        locked = (await connection.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": DECAY_LOCK_KEY})).scalar()
        await connection.commit()
        if not locked:
            return None
        try:
            decayed = await _decay_in_batches(connection, decay, force)
            if decayed:
                await _vacuum_thoughts(connection)
            return decayed
        finally:
            await connection.rollback()
            await connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": DECAY_LOCK_KEY})
            await connection.commit()


async def _decay_in_batches(connection: AsyncConnection, decay: DecaySettings, force: bool) -> int | None:
    seconds = decay.interval_hours * 3600
    if not force and not (await connection.execute(_DECAY_DUE, {"seconds": seconds})).scalar():
        return None
    event_id = new_id()
    await connection.execute(_DECAY_STARTED, {"id": event_id})
    await connection.commit()
    decayed, after = 0, uuid.UUID(int=0)
    while True:
        batch = [
            row.id
            for row in await connection.execute(
                _DECAY_BATCH_SQL, {"rate": decay.rate, "after": after, "batch": DECAY_BATCH}
            )
        ]
        await connection.commit()
        if not batch:
            break
        decayed, after = decayed + len(batch), max(batch)
    await connection.execute(_DECAY_DONE, {"id": event_id, "decayed": decayed})
    await connection.commit()
    return decayed


async def _vacuum_thoughts(connection: AsyncConnection) -> None:
    """VACUUM `thought` once the decay has rewritten most of its rows.

    An update clears its page's all-visible bit, so after the decay every count that could be an index-only
    scan (the timeline's total, the console's counts per project, the project-count job) fetched each row from
    the heap until autovacuum came by, which a decay's dead rows alone may not trigger for hours: at 100 k
    thoughts, a 50 k-thought project's count went from ~200 ms to ~10 ms after this VACUUM (docs/BENCHMARKS.md).
    SKIP_LOCKED: a project index build (CREATE INDEX CONCURRENTLY) holding the table is not waited for. A role
    that does not own the table gets PostgreSQL's warning and skips it; any failure is logged, never the
    decay's.
    """
    driver: Any = (await connection.get_raw_connection()).driver_connection  # VACUUM runs outside a transaction
    started = time.monotonic()
    try:
        await driver.execute("VACUUM (SKIP_LOCKED) thought", timeout=VACUUM_TIMEOUT_SECONDS)
    except Exception as error:
        logger.warning("VACUUM after the importance decay failed (%s: %s)", type(error).__name__, error)
        return
    logger.info("vacuumed thought after the importance decay in %.1f s", time.monotonic() - started)


VACUUM_TIMEOUT_SECONDS = 3600.0  # pooled connections time out after 60 s; a large table takes longer
DECAY_BATCH = 5000
_DECAY_DUE = text(
    "SELECT coalesce(max(created_at) < now() - make_interval(secs => :seconds), true) "
    "FROM audit_event WHERE tool = 'jobs' AND action = 'importance_decay'"
)
_DECAY_STARTED = text(
    "INSERT INTO audit_event (id, tool, action, details) VALUES (:id, 'jobs', 'importance_decay', '{\"decayed\": 0}')"
)
_DECAY_DONE = text(
    "UPDATE audit_event SET details = jsonb_build_object('decayed', CAST(:decayed AS int)) WHERE id = :id"
)
_DECAY_BATCH_SQL = text(
    "UPDATE thought t SET importance = t.importance * :rate WHERE t.id IN ("
    "SELECT c.id FROM thought c WHERE c.id > :after AND c.status <> 'archived' AND NOT EXISTS ("
    "SELECT 1 FROM thought_hit h WHERE h.thought_id = c.id AND h.last_hit_at > now() - interval '1 day') "
    "ORDER BY c.id LIMIT :batch) RETURNING t.id"
)


@dataclass(frozen=True)
class Housekeeping:
    proposals_expired: int
    oauth_rows_purged: int  # expired OAuth requests, codes and tokens, and those of ended grants
    console_sessions_purged: int = 0  # expired console sessions, and those ended over a day ago


async def expire_housekeeping(db: Database) -> Housekeeping | None:
    """Pending proposals past their 30 days expire; spent or expired preview tokens older than a day go, and the
    OAuth rows nothing can redeem any more (app.services.auth.oauth_grants), and the console sessions that ended or
    expired (app.services.auth.sessions). None when another replica holds the job."""
    async with db.unit_of_work() as session:
        if not await _locked(session, EXPIRY_LOCK_KEY):
            return None
        expired = await expire_due_proposals(session)
        await session.execute(text("DELETE FROM preview_token WHERE expires_at < now() - interval '1 day'"))
        purged = await purge_expired_oauth_rows(session)
        sessions = await ConsoleSessionService(session).purge()
        return Housekeeping(expired, purged.total, sessions)


# Every project's count and time, so a current estimate stays fresh (the vector leg trusts it for
# app.db.repositories.projects.ESTIMATE_FRESH_FOR); one scan of thought per tick.
_REFRESH_ESTIMATES = text(
    "UPDATE project p SET thought_estimate = coalesce(c.n, 0), thought_estimate_at = now() FROM project q "
    "LEFT JOIN (SELECT project_id, count(*) AS n FROM thought WHERE status <> 'archived' GROUP BY project_id) c "
    "ON c.project_id = q.id WHERE p.id = q.id"
)


async def refresh_thought_estimates(db: Database) -> int | None:
    """Each project's live thoughts into `project.thought_estimate(_at)` (the vector leg's plan choice); the
    number of projects counted, or None when another replica holds the job."""
    async with db.unit_of_work() as session:
        if not await _locked(session, ESTIMATE_LOCK_KEY):
            return None
        result = await session.execute(_REFRESH_ESTIMATES)
        return int(getattr(result, "rowcount", 0) or 0)


# A job answers what it did (a line for the operations page), or None when it did not run here: nothing was due,
# or another replica holds its lock. Only runs are recorded.
JobBody = Callable[[Database, Settings], Awaitable[str | None]]


async def _decay(db: Database, settings: Settings) -> str | None:
    decayed = await decay_importance(db, settings.decay)
    if decayed is None:
        return None
    if decayed:
        logger.info("importance decay applied to %d thought(s)", decayed)
    return f"{decayed} thought(s) decayed"


async def _expiry(db: Database, _settings: Settings) -> str | None:
    done = await expire_housekeeping(db)
    if done is None:
        return None
    if done.proposals_expired:
        logger.info("%d pending proposal(s) expired", done.proposals_expired)
    return (
        f"{done.proposals_expired} pending proposal(s) expired; preview tokens dead for a day purged; "
        f"{done.oauth_rows_purged} expired OAuth row(s) purged"
    ) + (f"; {done.console_sessions_purged} console session(s) purged" if done.console_sessions_purged else "")


async def _counts(db: Database, _settings: Settings) -> str | None:
    counted = await refresh_thought_estimates(db)
    return None if counted is None else f"{counted} project(s) counted"


async def _project_indexes(db: Database, _settings: Settings) -> str | None:
    changes = await reconcile_project_indexes(db)  # after the counts it decides by
    if changes is None:
        return None
    rebuilt = f", {len(changes.rebuilt)} rebuilt at new parameters" if changes.rebuilt else ""
    failed = f", {len(changes.failed)} build(s) refused (see the log)" if changes.failed else ""
    return f"{len(changes.created)} index(es) built, {len(changes.dropped)} dropped{rebuilt}{failed}"


async def _health_report(db: Database, settings: Settings) -> str | None:
    stored = await refresh_if_due(db, settings.health.report_interval_minutes)  # a failure raises: recorded
    if stored is None:
        return None
    found = stored.report["summary"]["findings"]
    counts = ", ".join(f"{found[severity]} {severity}" for severity in ("critical", "warning", "info"))
    return f"health score {stored.report['health_score']} ({counts} finding(s)) in {stored.seconds:.1f} s"


@dataclass(frozen=True)
class Job:
    key: str  # job_run.job
    name: str
    run: JobBody


JOBS: tuple[Job, ...] = (
    Job("importance_decay", "importance decay", _decay),
    Job("project_counts", "project counts", _counts),
    Job("project_indexes", "project vector indexes", _project_indexes),
    Job("expiry", "proposal expiry and preview purge", _expiry),
    Job("health_report", "health report", _health_report),
)


async def run_jobs_tick(db: Database, settings: Settings) -> None:
    """Every job once, each run recorded in `job_run`. One that fails is logged (and recorded) and does not keep
    the others from running; a database outage ends the tick (the rest would fail alike, the record too)."""
    for job in JOBS:
        started = time.monotonic()
        try:
            done = await job.run(db, settings)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            if is_unavailable(error):  # an outage: one line per tick, not a traceback
                logger.warning(
                    "background jobs: database unavailable (%s); retrying in %.0fs",
                    type(error).__name__,
                    settings.jobs.tick_seconds,
                )
                return
            logger.exception("background job %r failed; retrying in %.0fs", job.name, settings.jobs.tick_seconds)
            await record_job_run(db, job.key, time.monotonic() - started, False, f"{type(error).__name__}: {error}")
            continue
        if done is not None:
            await record_job_run(db, job.key, time.monotonic() - started, True, done)


async def run_jobs_loop(db: Database, settings: Settings) -> None:
    """Runs until cancelled, a tick every `settings.jobs.tick_seconds`."""
    while True:
        await run_jobs_tick(db, settings)
        await asyncio.sleep(settings.jobs.tick_seconds)
