"""app/services/reflect/service.py record_reflection: one reflection as a unit of work."""

from __future__ import annotations

from app.db.models import ThoughtStatus
from app.services.context import AppContext
from app.services.reflect.operations import record_reflection
from app.services.reflect.service import ReflectInput
from tests.support.helpers import ToolCaller
from tests.support.search import register, rows


async def test_a_reflection_writes_into_the_cwd_project(writer: ToolCaller, app_context: AppContext) -> None:
    project = await register(writer, "api", "/work/api")
    data = ReflectInput("API work", ["ship v2"], [], ["Use cursor paging"], ["Docs"], 7)
    counts, resolved = await record_reflection(app_context, writer.principal, data, "/work/api/src")
    assert resolved is not None and str(resolved.id) == project["id"]
    assert counts.summary_appended and counts.goals_added == 1
    assert counts.decisions_created == 1 and counts.pending_created == 1
    statuses = await rows(app_context, "SELECT content, status FROM thought WHERE project_id = :p", p=resolved.id)
    assert {(row.content, row.status) for row in statuses} >= {
        ("Use cursor paging", ThoughtStatus.active.value),
        ("Docs", ThoughtStatus.draft.value),
    }


async def test_a_reflection_without_cwd_answers_no_project(writer: ToolCaller, app_context: AppContext) -> None:
    data = ReflectInput("Quiet day", [], [], [], [], 7)
    counts, resolved = await record_reflection(app_context, writer.principal, data, None)
    assert resolved is None and counts.summary_appended
