"""Background jobs beside the requests: importance decay, proposal expiry, preview-token purge.

Each job runs under a transaction-scoped advisory lock, so with several replicas exactly one runs it;
the decay records its run as an audit event, which is how every replica knows it already ran today.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.engine import Database, is_unavailable
from app.db.repositories.audit import AuditRepository
from app.services.proposals import expire_due_proposals

logger = logging.getLogger(__name__)

DECAY_LOCK_KEY = 7_301_002
EXPIRY_LOCK_KEY = 7_301_003


@dataclass(frozen=True)
class JobSettings:
    decay_rate: float = 0.95
    decay_interval: timedelta = timedelta(days=1)
    tick_seconds: float = 60.0


async def _locked(session: AsyncSession, key: int) -> bool:
    return bool((await session.execute(text("SELECT pg_try_advisory_xact_lock(:key)"), {"key": key})).scalar())


async def decay_importance(db: Database, settings: JobSettings, force: bool = False) -> int | None:
    """Multiply importance by the rate for thoughts not hit in the last day; None when it was not due."""
    async with db.unit_of_work() as session:
        if not await _locked(session, DECAY_LOCK_KEY):
            return None
        due = (
            force
            or (
                await session.execute(
                    text(
                        "SELECT coalesce(max(created_at) < now() - make_interval(secs => :seconds), true) "
                        "FROM audit_event "
                        "WHERE tool = 'jobs' AND action = 'importance_decay'"
                    ),
                    {"seconds": settings.decay_interval.total_seconds()},
                )
            ).scalar()
        )
        if not due:
            return None
        result = await session.execute(
            text(
                "UPDATE thought t SET importance = t.importance * :rate WHERE t.status <> 'archived' AND NOT EXISTS "
                "(SELECT 1 FROM thought_hit h WHERE h.thought_id = t.id AND h.last_hit_at > now() - interval '1 day')"
            ),
            {"rate": settings.decay_rate},
        )
        decayed = int(result.rowcount or 0)  # type: ignore[attr-defined]
        await AuditRepository(session).record(None, "jobs", "importance_decay", [], None, {"decayed": decayed})
        return decayed


async def expire_housekeeping(db: Database) -> int:
    """Pending proposals past their 30 days expire; spent or expired preview tokens older than a day go."""
    async with db.unit_of_work() as session:
        if not await _locked(session, EXPIRY_LOCK_KEY):
            return 0
        expired = await expire_due_proposals(session)
        await session.execute(text("DELETE FROM preview_token WHERE expires_at < now() - interval '1 day'"))
        return expired


async def run_jobs_loop(db: Database, settings: JobSettings) -> None:
    """Runs until cancelled; a failing job is logged and tried again on the next tick."""
    while True:
        try:
            decayed = await decay_importance(db, settings)
            if decayed:
                logger.info("importance decay applied to %d thought(s)", decayed)
            expired = await expire_housekeeping(db)
            if expired:
                logger.info("%d pending proposal(s) expired", expired)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            if is_unavailable(error):  # an outage: one line per tick, not a traceback
                logger.warning(
                    "background jobs: database unavailable (%s); retrying in %.0fs",
                    type(error).__name__,
                    settings.tick_seconds,
                )
            else:
                logger.exception("background job failed; retrying in %.0fs", settings.tick_seconds)
        await asyncio.sleep(settings.tick_seconds)
