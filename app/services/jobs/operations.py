"""The background jobs' last runs as the console's operations page shows them, one read."""

from __future__ import annotations

import dataclasses

from app.db.repositories.job_runs import JobRunRow
from app.db.visibility import resolved
from app.services.context import AppContext
from app.services.jobs.background import JOBS
from app.services.jobs.runs import JobRunService

WITHHELD_OUTCOME = "(what it did spans every project: shown to an admin who is a member of every project)"
WITHHELD_ERROR = "(the message may name any project: shown to an admin who is a member of every project; see the log)"


async def job_runs(app: AppContext) -> list[tuple[str, JobRunRow | None]]:
    """Every job of this version by name with its last run (None: never recorded), then rows of jobs it does not
    know (a newer replica's). To a caller who cannot see every project an outcome line is withheld."""
    async with app.db.autocommit() as session:
        runs = await JobRunService(session).last_runs()
        visibility = await resolved(session)
    if visibility is not None and not visibility.sees_all:
        runs = {key: _withheld(run) for key, run in runs.items()}
    known = {job.key for job in JOBS}
    unknown = [(key, run) for key, run in sorted(runs.items()) if key not in known]
    return [(job.name, runs.get(job.key)) for job in JOBS] + unknown


def _withheld(run: JobRunRow) -> JobRunRow:
    """A job's run as an admin who cannot see every project is shown it: when, where and whether it succeeded, not
    its outcome line, which counts (or, failed, may name) rows of every project — as the stored health report is
    replaced by a live one of their projects (app.services.status.health_reports)."""
    return dataclasses.replace(run, outcome=WITHHELD_OUTCOME if run.succeeded else WITHHELD_ERROR)
