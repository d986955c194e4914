"""The console's health page on the stored report (app/services/status/health_reports.py), in-process on a real
PostgreSQL: it shows the report the background job stored with how old it is, without checking again; Check now
(admins only, CSRF) and the safe fixes check and store it again; with none stored yet, the first view checks."""

from __future__ import annotations

import re

import httpx2
import pytest

from app.db.models import Role
from app.main import settings_view
from app.services.context import AppContext
from app.services.jobs import background as jobs
from app.services.jobs.runs import replica_name
from tests.conftest import settings_with
from tests.support.console import signed_in, text_of, ui  # noqa: F401 (fixture)
from tests.support.helpers import ToolCaller, execute, rows
from tests.support.membership import close, vault


async def stored(caller: ToolCaller) -> list[tuple[object, ...]]:
    return await rows(caller, "SELECT checked_at, requested_by, report->'summary'->'thoughts' FROM health_report")


async def test_the_page_shows_the_stored_report_and_its_age_without_checking(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    await writer.ok("memory_store", {"action": "create", "content": "A thought the job has seen"})
    await jobs.run_jobs_tick(app_context.db, settings_with())  # the background job stores the report
    await writer.ok("memory_store", {"action": "create", "content": "A thought stored after the check"})
    before = await stored(writer)
    await signed_in(ui, app_context, "ada", Role.admin)
    page = await ui.get("/ui/admin/health")
    assert page.status_code == 200, page.text
    text = text_of(page.text)
    assert "Checked less than a minute ago (" in text and f"by the background job on {replica_name()} , in " in text
    assert "draft thoughts 0 active thoughts 1 archived thoughts 0" in text  # the stored report: one thought
    assert await stored(writer) == before  # the page checked nothing
    assert "once this report is 15 min old ( health.report_interval_minutes ). memory_status" in text

    await execute(writer, "UPDATE health_report SET checked_at = now() - interval '4 minutes 10 seconds'")
    assert "Checked 4 min ago (" in text_of((await ui.get("/ui/admin/health")).text)


@pytest.mark.parametrize(
    "settings", [{"jobs": {"enabled": False}, "health": {"report_interval_minutes": 2.5}}], indirect=True
)
async def test_the_page_says_when_this_process_runs_no_jobs(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
) -> None:
    await signed_in(ui, app_context, "ada", Role.admin)
    text = text_of((await ui.get("/ui/admin/health")).text)
    assert "once this report is 2.5 min old ( health.report_interval_minutes ); this process does not run" in text
    assert "( jobs.enabled = false ): a replica that does, or Check now, refreshes it." in text


async def test_check_now_checks_and_stores_for_admins_only(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    await jobs.run_jobs_tick(app_context.db, settings_with())
    await writer.ok("memory_store", {"action": "create", "content": "A thought stored after the check"})
    before = await stored(writer)
    csrf = await signed_in(ui, app_context, "wes", Role.writer)
    refused = await ui.post("/ui/admin/health/check", data={"csrf": csrf})
    assert refused.status_code == 403 and "need the admin role" in refused.text
    ui.cookies.clear()
    csrf = await signed_in(ui, app_context, "ada", Role.admin)
    assert (await ui.post("/ui/admin/health/check", data={})).status_code == 403  # no CSRF token
    assert await stored(writer) == before
    checked = await ui.post("/ui/admin/health/check", data={"csrf": csrf})
    assert checked.status_code == 200, checked.text
    text = text_of(checked.text)
    assert "Checked less than a minute ago (" in text and "at the request of ada on " in text
    assert "draft thoughts 0 active thoughts 1 archived thoughts 0" in text
    [(checked_at, requested_by, thoughts)] = await stored(writer)
    assert checked_at > before[0][0] and requested_by == "ada" and thoughts["active"] == 1
    assert 'action="/ui/admin/health/check"' in checked.text  # the form again, for the next check


async def test_the_first_view_checks_and_the_fix_stores_the_report_after_it(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    admin: ToolCaller,
) -> None:
    thought = (await admin.ok("memory_store", {"action": "create", "content": "A cluster left without members"})).item
    await execute(admin, "UPDATE thought SET is_cluster = true WHERE id = :id", id=thought["id"])
    csrf = await signed_in(ui, app_context, "ada", Role.admin)
    assert await stored(admin) == []
    page = await ui.get("/ui/admin/health")  # nothing stored yet: this view checks, once
    assert page.status_code == 200 and "at the request of ada" in page.text
    assert "<td>empty clusters</td><td>warning</td><td>1</td>" in page.text
    [(first_at, _, _)] = await stored(admin)
    fixed = await ui.post("/ui/admin/health/fix", data={"csrf": csrf})
    assert fixed.status_code == 200 and "<dt>empty clusters archived</dt><dd>1</dd>" in fixed.text
    assert "<td>empty clusters</td><td>warning</td><td>0</td>" in fixed.text  # the report after the fix
    [(fixed_at, requested_by, thoughts)] = await stored(admin)
    assert fixed_at > first_at and requested_by == "ada" and thoughts["archived"] == 1


async def test_the_operations_page_lists_the_health_job_and_its_setting(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
) -> None:
    app_context.settings_view.update(settings_view(app_context.settings, "postgresql+asyncpg://u@h/db"))
    await jobs.run_jobs_tick(app_context.db, app_context.settings)
    await signed_in(ui, app_context, "ada", Role.admin)
    text = text_of((await ui.get("/ui/admin/operations")).text)
    assert re.search(r"health report \d{4}-\d\d-\d\d \d\d:\d\d:\d\d .* ok: health score 100\.0 \(0 critical", text)
    assert "health.report_interval_minutes 15 jobs.enabled Yes" in text


async def test_an_admin_outside_a_closed_project_gets_a_live_report_of_their_projects_never_the_stored_one(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    admin: ToolCaller,
) -> None:
    await vault(admin)  # three thoughts in Vault, its creator `admin` its admin
    await admin.ok("memory_store", {"action": "create", "content": "A thought of the open default project"})
    await jobs.run_jobs_tick(app_context.db, settings_with())  # stored: every project's four thoughts
    await close(app_context, "Vault", {})
    before = await stored(admin)
    assert [row[2] for row in before] == [{"draft": 0, "active": 4, "archived": 0}]

    csrf = await signed_in(ui, app_context, "ada", Role.admin)  # a global admin, not a member of Vault
    text = text_of((await ui.get("/ui/admin/health")).text)
    assert "draft thoughts 0 active thoughts 1 archived thoughts 0" in text and "at the request of ada" in text
    checked = await ui.post("/ui/admin/health/check", data={"csrf": csrf})
    assert checked.status_code == 200 and "active thoughts 1 " in text_of(checked.text)
    assert await stored(admin) == before  # a report of some projects is not stored as everyone's

    ui.cookies.clear()
    await signed_in(ui, app_context, "admin", Role.admin)  # a member of every project: the stored report
    assert "draft thoughts 0 active thoughts 4 archived thoughts 0" in text_of((await ui.get("/ui/admin/health")).text)
