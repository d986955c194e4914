"""app/services/status/operations.py: memory_status's slots, frontier and health reads as units of work."""

from __future__ import annotations

from app.services.context import AppContext
from app.services.status import operations as status_operations
from tests.support.helpers import ToolCaller
from tests.support.search import create, register


async def test_slots_and_frontier_read_the_cwd_scope(writer: ToolCaller, app_context: AppContext) -> None:
    project = await register(writer, "mobile", "/work/mobile")
    await create(writer, "Pending: rotate the signing key", status="draft", cwd="/work/mobile")
    scope, views = await status_operations.read_slots(app_context, "/work/mobile", None, 0)
    assert scope.project is not None and str(scope.project.id) == project["id"]
    assert "project" in {view.scope for view in views}
    scope, entries = await status_operations.read_frontier(app_context, None)
    assert scope.project is None and not scope.cwd_given
    assert isinstance(entries, list)


async def test_health_reports_findings(app_context: AppContext) -> None:
    report = await status_operations.health_report(app_context, False, None)
    assert isinstance(report, dict) and report
