"""The stored health report (`health_report`): one row, replaced by each check that stores its report."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import exists, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import HealthReport


@dataclass(frozen=True)
class HealthReportRow:
    report: dict[str, Any]
    checked_at: datetime
    age_seconds: float  # how long ago, by the database's clock (the one checked_at was taken from)
    seconds: float
    replica: str
    requested_by: str | None


_AGE = func.greatest(0, func.extract("epoch", func.now() - HealthReport.checked_at)).label("age_seconds")


class HealthReportRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def latest(self) -> HealthReportRow | None:
        found = (await self.session.execute(select(HealthReport, _AGE))).first()
        if found is None:
            return None
        stored, age = found
        return HealthReportRow(
            stored.report, stored.checked_at, float(age), stored.seconds, stored.replica, stored.requested_by
        )

    async def due(self, seconds: float) -> bool:
        """Whether no report is stored, or the stored one was checked at least `seconds` ago."""
        recent = func.now() - func.make_interval(0, 0, 0, 0, 0, 0, seconds)
        statement = select(~exists().where(HealthReport.checked_at > recent))
        return bool((await self.session.execute(statement)).scalar_one())

    async def store(self, report: dict[str, Any], seconds: float, replica: str, requested_by: str | None) -> None:
        """Replace the stored report with this one, checked now: when this statement runs, after the checks (the
        database's clock; now() would be the start of their transaction)."""
        values = {
            "one": True,
            "checked_at": func.statement_timestamp(),
            "seconds": seconds,
            "replica": replica,
            "requested_by": requested_by,
            "report": report,
        }
        statement = insert(HealthReport).values(values)
        excluded = statement.excluded
        await self.session.execute(
            statement.on_conflict_do_update(
                index_elements=[HealthReport.one],
                set_={name: getattr(excluded, name) for name in values if name != "one"},
            )
        )
