"""app/services/admin/operations.py: memory_manage's project calls, one unit of work each."""

from __future__ import annotations

from app.services.admin import operations as admin_operations
from app.services.context import AppContext
from tests.support.helpers import ToolCaller


async def test_projects_are_created_updated_listed_and_resolved(app_context: AppContext, writer: ToolCaller) -> None:
    made = await admin_operations.create_project(app_context, writer.principal, "search", "/work/search", None)
    await admin_operations.update_project(app_context, made.id, {"description": "the search service"})
    listed = {project.name: project for project in await admin_operations.list_projects(app_context)}
    assert listed["search"].description == "the search service"
    resolved = await admin_operations.resolve_project(app_context, "/work/search/app")
    assert resolved is not None and resolved.id == made.id
