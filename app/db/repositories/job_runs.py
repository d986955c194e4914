"""The background jobs' last runs (`job_run`): one row per job, upserted by the replica that ran it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import case, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import JobRun


@dataclass(frozen=True)
class JobRunRow:
    job: str
    replica: str
    started_at: datetime
    finished_at: datetime
    succeeded: bool
    outcome: str
    last_succeeded_at: datetime | None


class JobRunRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def record(self, job: str, replica: str, seconds: float, succeeded: bool, outcome: str) -> None:
        """The run that ended now (the database's clock, as every replica reads it) after `seconds`."""
        finished = func.now()
        values = {
            "job": job,
            "replica": replica,
            "started_at": finished - func.make_interval(0, 0, 0, 0, 0, 0, seconds),
            "finished_at": finished,
            "succeeded": succeeded,
            "outcome": outcome,
            "last_succeeded_at": finished if succeeded else None,
        }
        statement = insert(JobRun).values(values)
        excluded = statement.excluded
        await self.session.execute(
            statement.on_conflict_do_update(
                index_elements=[JobRun.job],
                set_={
                    "replica": excluded.replica,
                    "started_at": excluded.started_at,
                    "finished_at": excluded.finished_at,
                    "succeeded": excluded.succeeded,
                    "outcome": excluded.outcome,
                    "last_succeeded_at": case(
                        (excluded.succeeded, excluded.last_succeeded_at), else_=JobRun.last_succeeded_at
                    ),
                },
            )
        )

    async def all(self) -> list[JobRunRow]:
        rows = await self.session.execute(select(JobRun).order_by(JobRun.job))
        return [
            JobRunRow(
                run.job, run.replica, run.started_at, run.finished_at, run.succeeded, run.outcome, run.last_succeeded_at
            )
            for run in rows.scalars()
        ]
