"""app/services/review/operations.py: propose and enqueue as units of work, without the tool layer."""

from __future__ import annotations

import uuid

import pytest

from app.db.repositories.projects import ProjectRepository
from app.errors import AppError
from app.services.context import AppContext
from app.services.review import operations as review_operations
from tests.support.helpers import ToolCaller
from tests.support.search import create, register


async def test_a_draft_without_cwd_is_pinned_to_the_default_project(app_context: AppContext) -> None:
    proposed = await review_operations.propose(app_context, None, "A draft about release trains", None)
    async with app_context.db.unit_of_work() as session:
        default = await ProjectRepository(session).ensure_default()
    assert proposed.plan.project_id == default.id
    assert proposed.thought is None and proposed.path == "" and proposed.resolved is None


async def test_a_thought_is_pinned_to_the_cwd_project_when_it_names_one(
    writer: ToolCaller, app_context: AppContext
) -> None:
    project = await register(writer, "web", "/work/web")
    made = await create(writer, "The web app ships on Thursdays")
    proposed = await review_operations.propose(app_context, made["id"].upper(), None, "/work/web")
    assert str(proposed.plan.project_id) == project["id"]
    assert proposed.resolved is not None and str(proposed.resolved.id) == project["id"]
    missing = str(uuid.uuid4()).upper()
    with pytest.raises(AppError, match=f"Thought {missing} not found"):
        await review_operations.propose(app_context, missing, None, None)


async def test_enqueue_needs_an_active_thought(writer: ToolCaller, app_context: AppContext) -> None:
    draft = await create(writer, "A draft is not planned", status="draft")
    with pytest.raises(AppError, match="needs an active thought"):
        await review_operations.enqueue(app_context, writer.principal, uuid.UUID(draft["id"]), None, 5)
    active = await create(writer, "An active thought is planned")
    queued = await review_operations.enqueue(app_context, writer.principal, uuid.UUID(active["id"]), None, 5)
    assert queued.skipped >= 0 and len(queued.created) <= 5


async def test_the_queue_page_reads_every_project_without_cwd(writer: ToolCaller, app_context: AppContext) -> None:
    page = await review_operations.queue_page(app_context, writer.principal, None, None, None, False, 50, 0)
    assert page.scope.project is None and page.rows == [] and page.total == 0 and page.all_total == 0
