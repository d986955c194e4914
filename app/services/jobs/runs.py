"""The background jobs' state as every replica sees it: each job's last run (start, end, outcome, which replica
ran it), kept in PostgreSQL (`job_run`, one row per job) by app.services.jobs.background and read by the operations
page.

Recording never fails a job: a write that fails (the database away, the table not migrated yet on an old
schema) is logged and the job's own outcome stands.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.repositories.job_runs import JobRunRepository, JobRunRow

if TYPE_CHECKING:
    from app.db.engine import Database

logger = logging.getLogger(__name__)

MAX_OUTCOME = 1000  # characters of an error kept: enough for the message, not for a dump


def replica_name() -> str:
    """This process as the operations page names it: host (a container's id under Docker) and process id."""
    return f"{socket.gethostname()}:{os.getpid()}"[:200]


async def record_job_run(db: Database, job: str, seconds: float, succeeded: bool, outcome: str) -> bool:
    """Upsert the job's row with this run; False (and a warning) when it could not be written."""
    try:
        async with db.unit_of_work() as session:
            await JobRunRepository(session).record(job, replica_name(), seconds, succeeded, outcome[:MAX_OUTCOME])
    except Exception as error:  # the job's result stands; its row waits for the next run
        logger.warning("background job %r: its run was not recorded (%s: %s)", job, type(error).__name__, error)
        return False
    return True


class JobRunService:
    def __init__(self, session: AsyncSession) -> None:
        self.runs = JobRunRepository(session)

    async def last_runs(self) -> dict[str, JobRunRow]:
        """Each job's last recorded run, by job key."""
        return {row.job: row for row in await self.runs.all()}
