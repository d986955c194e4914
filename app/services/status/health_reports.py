"""The stored health report: the last `memory_status action=health include_details=true` report, kept in
`health_report` (one row, migration 0016) with when it was checked, how long that took, where, and who asked.

The background job (app.services.jobs.background) checks again once the stored report is
`health.report_interval_minutes` old, on one replica (an advisory lock); an admin's Check now on the console, and the
console's safe fixes, check and store at once. The console's health page shows the stored report instead of running
every check (~0.1 s at 100 k thoughts since migration 0024, ~0.4 s before: docs/BENCHMARKS.md "Sixteenth session").
The MCP action and GET /api/health-check stay live.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.locks import HEALTH_REPORT_LOCK_KEY
from app.db.repositories.health_reports import HealthReportRepository, HealthReportRow
from app.db.visibility import current_caller, resolved
from app.services.jobs.runs import replica_name
from app.services.status.health import HealthService

if TYPE_CHECKING:
    from app.db.engine import Database


async def _check_and_store(session: AsyncSession, requested_by: str | None) -> HealthReportRow:
    checked = await _live(session, requested_by)
    reports = HealthReportRepository(session)
    await reports.store(checked.report, checked.seconds, checked.replica, requested_by)
    stored = await reports.latest()
    assert stored is not None  # stored just above, in this transaction
    return stored


async def _partial_view(session: AsyncSession) -> bool:
    """The caller cannot see every project (app.db.visibility): the stored report, of every project, is not theirs
    to read, and a report of only their projects is not everyone's to store."""
    visibility = await resolved(session)
    return visibility is not None and not visibility.sees_all


async def _live(session: AsyncSession, requested_by: str | None) -> HealthReportRow:
    """Every check now over what the session may read, not (yet) stored."""
    started = time.monotonic()
    report = await HealthService(session).report(include_details=True)
    now = datetime.now(UTC)
    return HealthReportRow(report, now, 0.0, time.monotonic() - started, replica_name(), requested_by)


async def latest_report(db: Database) -> HealthReportRow | None:
    """The stored report, or None before the first check; for a caller who cannot see every project, a live report
    of their projects."""
    async with db.autocommit() as session:
        if await _partial_view(session):
            caller = current_caller()
            return await _live(session, caller.principal.name if caller else None)
        return await HealthReportRepository(session).latest()


async def check_now(db: Database, requested_by: str) -> HealthReportRow:
    """Every check now (what `memory_status action=health include_details=true` answers), stored as the latest
    report at `requested_by`'s request."""
    async with db.unit_of_work() as session:
        if await _partial_view(session):
            return await _live(session, requested_by)
        return await _check_and_store(session, requested_by)


async def refresh_if_due(db: Database, interval_minutes: float) -> HealthReportRow | None:
    """The background job: check and store when the stored report is `interval_minutes` old (or there is none);
    None when it is not due, or another replica holds the job."""
    async with db.unit_of_work() as session:
        locked = await session.execute(select(func.pg_try_advisory_xact_lock(HEALTH_REPORT_LOCK_KEY)))
        if not locked.scalar() or not await HealthReportRepository(session).due(interval_minutes * 60):
            return None
        return await _check_and_store(session, None)
