"""The stored health report (app/services/status/health_reports.py, migration 0016) and the background job that keeps
it:
stored on the first tick, checked again only once it is `health.report_interval_minutes` old, by one replica at a
time; a failed check is the job's recorded failure; the MCP action keeps answering live."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from app.db.locks import HEALTH_REPORT_LOCK_KEY
from app.services.jobs import background as jobs
from app.services.jobs.runs import replica_name
from app.services.status.health import HealthService
from app.services.status.health_reports import check_now, latest_report, refresh_if_due
from tests.conftest import settings_with
from tests.support.helpers import ToolCaller, execute, rows


async def stored_row(caller: ToolCaller) -> tuple[Any, ...] | None:
    found = await rows(caller, "SELECT checked_at, replica, requested_by, seconds >= 0 FROM health_report")
    return found[0] if found else None


async def job_run(caller: ToolCaller) -> tuple[Any, ...] | None:
    found = await rows(
        caller, "SELECT replica, succeeded, outcome, finished_at FROM job_run WHERE job = 'health_report'"
    )
    return found[0] if found else None


async def age_report(caller: ToolCaller, minutes: int) -> None:
    await execute(caller, "UPDATE health_report SET checked_at = now() - make_interval(mins => :m)", m=minutes)


async def test_the_job_stores_the_report_and_checks_again_only_when_it_is_due(writer: ToolCaller) -> None:
    db = writer.context.db
    await writer.ok("memory_store", {"action": "create", "content": "A thought without tags or edges"})
    assert await latest_report(db) is None
    await jobs.run_jobs_tick(db, settings_with())
    stored = await latest_report(db)
    assert stored is not None
    async with db.unit_of_work() as session:
        assert stored.report == await HealthService(session).report(include_details=True)  # what the action answers
    assert (stored.replica, stored.requested_by) == (replica_name(), None) and stored.age_seconds < 60
    first = await stored_row(writer)
    assert first is not None and first[1:] == (replica_name(), None, True)
    run = await job_run(writer)
    assert run is not None and run[:2] == (replica_name(), True)
    assert run[2].startswith("health score 99.5 (0 critical, 0 warning, 2 info finding(s)) in ")  # island, untagged

    await jobs.run_jobs_tick(db, settings_with())  # not due: neither checked nor recorded again
    assert await stored_row(writer) == first and await job_run(writer) == run

    await age_report(writer, 16)  # past the default 15 minutes
    await jobs.run_jobs_tick(db, settings_with())
    again, rerun = await stored_row(writer), await job_run(writer)
    assert again is not None and again[0] > first[0]
    assert rerun is not None and rerun[3] > run[3]


async def test_the_interval_is_the_setting(writer: ToolCaller) -> None:
    db = writer.context.db
    await jobs.run_jobs_tick(db, settings_with())
    await age_report(writer, 20)
    before = await stored_row(writer)
    assert before is not None
    await jobs.run_jobs_tick(db, settings_with(health={"report_interval_minutes": 60}))
    assert await stored_row(writer) == before  # 20 minutes old: not due under a 60-minute interval
    await jobs.run_jobs_tick(db, settings_with(health={"report_interval_minutes": 10}))
    after = await stored_row(writer)
    assert after is not None and after[0] > before[0]


async def test_one_replica_at_a_time(writer: ToolCaller) -> None:
    db = writer.context.db
    async with db.unit_of_work() as holder:  # another replica running the job
        await holder.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": HEALTH_REPORT_LOCK_KEY})
        assert await refresh_if_due(db, 15) is None
        await jobs.run_jobs_tick(db, settings_with())
    assert await stored_row(writer) is None and await job_run(writer) is None


async def test_a_failed_check_is_the_jobs_recorded_failure(writer: ToolCaller, monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(*_args: Any, **_kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("canceling statement due to statement timeout")

    monkeypatch.setattr(HealthService, "report", broken)
    await jobs.run_jobs_tick(writer.context.db, settings_with())
    run = await job_run(writer)
    assert run is not None and run[1:3] == (False, "RuntimeError: canceling statement due to statement timeout")
    assert await stored_row(writer) is None


async def test_check_now_stores_at_the_admins_request_and_the_mcp_action_stays_live(
    writer: ToolCaller, admin: ToolCaller
) -> None:
    db = writer.context.db
    stored = await check_now(db, "ada")
    assert stored.requested_by == "ada" and stored.report["summary"]["thoughts"]["active"] == 0
    # The stored report keeps the report's order (json, not jsonb): the page lists the checks as the action does.
    live = (await admin.ok("memory_status", {"action": "health", "include_details": True})).item
    assert list(stored.report["categories"]) == list(live["categories"])
    assert [list(checks) for checks in stored.report["categories"].values()] == [
        list(checks) for checks in live["categories"].values()
    ]
    await writer.ok("memory_store", {"action": "create", "content": "A thought stored after the check"})
    live = (await admin.ok("memory_status", {"action": "health"})).item
    assert live["summary"]["thoughts"]["active"] == 1  # the action checks live
    latest = await latest_report(db)
    assert latest is not None and latest.report["summary"]["thoughts"]["active"] == 0  # the stored one waits
