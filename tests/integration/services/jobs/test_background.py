"""Background jobs (app/services/jobs/background.py): importance decay and proposal expiry under advisory locks."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from app.config import DecaySettings
from app.db.engine import Database
from app.db.locks import DECAY_LOCK_KEY, EXPIRY_LOCK_KEY
from app.db.repositories.job_runs import JobRunRepository
from app.ids import new_id
from app.services.jobs import background as jobs
from app.services.jobs.background import Housekeeping, decay_importance, expire_housekeeping
from app.services.jobs.runs import JobRunService, replica_name
from tests.conftest import settings_with
from tests.support.helpers import ToolCaller


async def rows(db: Database, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    async with db.unit_of_work() as session:
        return [tuple(row) for row in (await session.execute(text(sql), params)).all()]


async def execute(db: Database, sql: str, **params: Any) -> None:
    async with db.unit_of_work() as session:
        await session.execute(text(sql), params)


async def thought(caller: ToolCaller, content: str) -> str:
    return str((await caller.ok("memory_store", {"action": "create", "content": content})).item["id"])


async def importance(db: Database, thought_id: str) -> float:
    return float((await rows(db, "SELECT importance FROM thought WHERE id = :id", id=thought_id))[0][0])


async def hit(db: Database, thought_id: str, hours_ago: int) -> None:
    await execute(
        db,
        "INSERT INTO thought_hit (thought_id, project_id, hit_count, last_hit_at) "
        "SELECT id, project_id, 1, now() - make_interval(hours => :hours) FROM thought WHERE id = :id",
        id=thought_id,
        hours=hours_ago,
    )


# ---------------------------------------------------------------- decay


async def test_decay_multiplies_importance_of_thoughts_not_hit_in_a_day_once_per_interval(writer: ToolCaller) -> None:
    db = writer.context.db
    idle = await thought(writer, "A thought nobody recalls")
    recent = await thought(writer, "A thought recalled an hour ago")
    stale_hit = await thought(writer, "A thought recalled two days ago")
    archived = await thought(writer, "An archived thought")
    await hit(db, recent, 1)
    await hit(db, stale_hit, 48)
    await execute(db, "UPDATE thought SET status = 'archived', archived_at = now() WHERE id = :id", id=archived)
    await execute(db, "UPDATE thought SET importance = 0.8 WHERE id = :id", id=stale_hit)
    decay = DecaySettings(rate=0.5, interval_hours=24)

    assert await decay_importance(db, decay) == 2
    assert [await importance(db, t) for t in (idle, recent, stale_hit, archived)] == [0.5, 1.0, 0.4, 1.0]
    assert await rows(
        db, "SELECT user_id, details FROM audit_event WHERE tool = 'jobs' AND action = 'importance_decay'"
    ) == [(None, {"decayed": 2})]

    # a second run inside the interval does nothing
    assert await decay_importance(db, decay) is None
    assert [await importance(db, t) for t in (idle, recent, stale_hit, archived)] == [0.5, 1.0, 0.4, 1.0]

    # once the interval has passed it runs again
    await execute(db, "UPDATE audit_event SET created_at = now() - interval '25 hours' WHERE tool = 'jobs'")
    assert await decay_importance(db, decay) == 2
    assert [await importance(db, t) for t in (idle, stale_hit)] == [0.25, 0.2]
    assert await decay_importance(db, decay) is None
    # `force` ignores the interval (the CLI/bench path), never the lock
    assert await decay_importance(db, decay, force=True) == 2


async def test_decay_skips_while_another_transaction_holds_its_lock(writer: ToolCaller) -> None:
    db = writer.context.db
    idle = await thought(writer, "A thought nobody recalls")
    async with db.unit_of_work() as holder:
        await holder.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": DECAY_LOCK_KEY})
        assert await decay_importance(db, DecaySettings(), force=True) is None
    assert await importance(db, idle) == 1.0
    assert await rows(db, "SELECT count(*) FROM audit_event WHERE tool = 'jobs'") == [(0,)]
    # released with the transaction: the next run goes ahead
    assert await decay_importance(db, DecaySettings()) == 1
    assert await importance(db, idle) == 0.95


# ---------------------------------------------------------------- expiry


async def proposal(db: Database, source: str, target: str, status: str, expires_in_days: int) -> str:
    proposal_id = str(new_id())
    await execute(
        db,
        "INSERT INTO placement_proposal (id, project_id, source_id, target_id, kind, edge_type, status, fingerprint, "
        "expires_at) SELECT :id, project_id, :source, :target, 'edge', 'related', CAST(:status AS proposal_status), "
        "'f', now() + make_interval(days => :days) FROM thought WHERE id = :source",
        id=proposal_id,
        source=source,
        target=target,
        status=status,
        days=expires_in_days,
    )
    return proposal_id


async def statuses(db: Database) -> dict[str, str]:
    return {row[0]: row[1] for row in await rows(db, "SELECT id::text, status::text FROM placement_proposal")}


async def test_expiry_turns_old_pending_proposals_expired(writer: ToolCaller) -> None:
    db = writer.context.db
    ids = [await thought(writer, f"Proposal endpoint number {n}") for n in range(4)]
    due = await proposal(db, ids[0], ids[1], "pending", -1)
    fresh = await proposal(db, ids[0], ids[2], "pending", 29)
    accepted = await proposal(db, ids[0], ids[3], "accepted", -1)
    await execute(
        db,
        "INSERT INTO preview_token (id, user_id, tool, action, fingerprint, expires_at) VALUES "
        "(gen_random_uuid(), :user, 'edge_review', 'apply', 'x', now() - interval '2 days'), "
        "(gen_random_uuid(), :user, 'edge_review', 'apply', 'y', now() - interval '1 hour')",
        user=str(writer.principal.user_id),
    )
    assert await expire_housekeeping(db) == Housekeeping(proposals_expired=1, oauth_rows_purged=0)
    assert await statuses(db) == {due: "expired", fresh: "pending", accepted: "accepted"}
    assert await rows(db, "SELECT fingerprint FROM preview_token") == [("y",)]  # only the long-dead token goes
    assert await expire_housekeeping(db) == Housekeeping(0, 0)  # a second run finds nothing left to expire

    listed = await writer.ok("edge_review", {"action": "list", "status": "expired"})
    assert [item["id"] for item in listed.items] == [due]


async def test_expiry_skips_while_another_transaction_holds_its_lock(writer: ToolCaller) -> None:
    db = writer.context.db
    a, b = await thought(writer, "Endpoint one of a proposal"), await thought(writer, "Endpoint two of a proposal")
    due = await proposal(db, a, b, "pending", -1)
    async with db.unit_of_work() as holder:
        await holder.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": EXPIRY_LOCK_KEY})
        assert await expire_housekeeping(db) is None  # another replica's run: not this one's
        assert await decay_importance(db, DecaySettings()) == 2  # another job's lock does not block this one
    assert await statuses(db) == {due: "pending"}
    assert await expire_housekeeping(db) == Housekeeping(1, 0)
    assert await statuses(db) == {due: "expired"}


async def test_decay_runs_in_batches_and_records_the_total(writer: ToolCaller, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each batch commits on its own (no long statement, no long-held row locks); the audit names the total."""
    db = writer.context.db
    idle = [await thought(writer, f"Idle thought number {n}") for n in range(5)]
    monkeypatch.setattr(jobs, "DECAY_BATCH", 2)
    assert await decay_importance(db, DecaySettings(rate=0.5)) == 5
    assert [await importance(db, t) for t in idle] == [0.5] * 5
    assert await rows(db, "SELECT details FROM audit_event WHERE tool = 'jobs' AND action = 'importance_decay'") == [
        ({"decayed": 5},)
    ]
    assert await rows(db, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'") == [(0,)]


async def test_the_decay_vacuums_thought_so_its_counts_stay_index_only(writer: ToolCaller) -> None:
    """A VACUUM's statistics reach shared memory when it ends (not batched like a backend's counters)."""
    db = writer.context.db
    await thought(writer, "A thought the decay rewrites")
    query = "SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'thought'"
    before = (await rows(db, query))[0][0]
    assert await decay_importance(db, DecaySettings(), force=True) == 1
    assert (await rows(db, query))[0][0] == before + 1
    assert await decay_importance(db, DecaySettings()) is None  # not due: no decay, no VACUUM
    assert (await rows(db, query))[0][0] == before + 1


async def _tick_failing_at(monkeypatch: pytest.MonkeyPatch, db: Database, job: str, error: Exception) -> list[str]:
    """One tick with `job` (a function of app.services.jobs.background) raising `error`: which of the two ran."""
    ran: list[str] = []

    async def failing(*_args: Any) -> None:
        ran.append(job)
        raise error

    async def expiry(_db: Database) -> Housekeeping:
        ran.append("expire_housekeeping")
        return Housekeeping(0, 0)

    monkeypatch.setattr(jobs, job, failing)
    monkeypatch.setattr(jobs, "expire_housekeeping", expiry)
    await jobs.run_jobs_tick(db, settings_with())
    return ran


async def test_a_failing_job_does_not_keep_the_others_of_its_tick_from_running(
    writer: ToolCaller, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    refused = RuntimeError("must be owner of table thought")
    ran = await _tick_failing_at(monkeypatch, writer.context.db, "reconcile_project_indexes", refused)
    assert ran == ["reconcile_project_indexes", "expire_housekeeping"]
    assert "background job 'project vector indexes' failed" in caplog.text


async def test_a_database_outage_ends_the_tick_with_one_warning(
    writer: ToolCaller, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    gone = ConnectionRefusedError("the server is gone")
    assert await _tick_failing_at(monkeypatch, writer.context.db, "decay_importance", gone) == ["decay_importance"]
    warnings = [record for record in caplog.records if "database unavailable" in record.getMessage()]
    assert len(warnings) == 1 and "ConnectionRefusedError" in warnings[0].getMessage()


# ---------------------------------------------------------------- job state (job_run)


async def job_runs(db: Database) -> dict[str, tuple[Any, ...]]:
    found = await rows(
        db,
        "SELECT job, replica, succeeded, outcome, started_at <= finished_at, last_succeeded_at, finished_at "
        "FROM job_run ORDER BY job",
    )
    return {row[0]: row[1:] for row in found}


async def test_each_run_is_recorded_once_per_job_by_the_replica_that_ran_it(writer: ToolCaller) -> None:
    db = writer.context.db
    await thought(writer, "A thought the decay will find idle")
    await jobs.run_jobs_tick(db, settings_with())
    first = await job_runs(db)
    assert sorted(first) == sorted(job.key for job in jobs.JOBS)
    for replica, succeeded, _outcome, ordered, last_ok, finished in first.values():
        assert (replica, succeeded, ordered) == (replica_name(), True, True) and last_ok == finished
    assert first["importance_decay"][2] == "1 thought(s) decayed"
    assert first["project_counts"][2] == "1 project(s) counted"
    assert first["project_indexes"][2] == "0 index(es) built, 0 dropped"
    assert first["expiry"][2] == (
        "0 pending proposal(s) expired; preview tokens dead for a day purged; 0 expired OAuth row(s) purged"
    )

    await jobs.run_jobs_tick(db, settings_with())  # the decay is not due again: its row keeps the real run
    second = await job_runs(db)
    assert sorted(second) == sorted(first)  # still one row per job
    assert second["importance_decay"] == first["importance_decay"]
    assert second["project_counts"][5] >= first["project_counts"][5]


async def test_a_failed_run_is_recorded_with_its_error_and_the_last_success_kept(
    writer: ToolCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = writer.context.db
    await jobs.run_jobs_tick(db, settings_with())
    succeeded_at = (await job_runs(db))["project_indexes"][4]

    async def refused(*_args: Any) -> None:
        raise RuntimeError("must be owner of table thought")

    monkeypatch.setattr(jobs, "reconcile_project_indexes", refused)
    await jobs.run_jobs_tick(db, settings_with())
    replica, succeeded, outcome, _ordered, last_ok, _finished = (await job_runs(db))["project_indexes"]
    assert (replica, succeeded, outcome) == (replica_name(), False, "RuntimeError: must be owner of table thought")
    assert last_ok == succeeded_at
    assert (await job_runs(db))["expiry"][1] is True  # the next job still ran


async def test_a_job_another_replica_holds_is_not_recorded_here(writer: ToolCaller) -> None:
    db = writer.context.db
    async with db.unit_of_work() as holder:
        await holder.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": EXPIRY_LOCK_KEY})
        await jobs.run_jobs_tick(db, settings_with())
    assert "expiry" not in await job_runs(db) and "project_counts" in await job_runs(db)


async def test_a_failing_record_never_fails_the_job(
    writer: ToolCaller, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    db = writer.context.db
    a, b = await thought(writer, "Endpoint one of a proposal"), await thought(writer, "Endpoint two of a proposal")
    due = await proposal(db, a, b, "pending", -1)

    async def broken(*_args: Any) -> None:
        raise RuntimeError("relation job_run does not exist")

    monkeypatch.setattr(JobRunRepository, "record", broken)
    await jobs.run_jobs_tick(db, settings_with())
    assert await statuses(db) == {due: "expired"}  # the expiry ran and committed all the same
    assert await job_runs(db) == {}
    assert "background job 'expiry': its run was not recorded (RuntimeError: relation job_run" in caplog.text


async def test_the_service_lists_the_last_runs(writer: ToolCaller) -> None:
    db = writer.context.db
    await jobs.run_jobs_tick(db, settings_with())
    async with db.unit_of_work() as session:
        last = await JobRunService(session).last_runs()
    assert set(last) == {job.key for job in jobs.JOBS}
    assert last["project_counts"].succeeded and last["project_counts"].replica == replica_name()
