"""app/services/supersede/service.py: what memory_supersede's confirm flows read and write inside their transaction."""

from __future__ import annotations

import uuid

import pytest

from app.db.models import ThoughtStatus
from app.errors import AppError
from app.services.context import AppContext
from app.services.supersede.service import MergeRequest, SupersedeService, merge_request, plan_merge, run_merge
from tests.support.helpers import ToolCaller
from tests.support.search import archive, create, register, rows


async def test_archive_previews_say_what_archiving_would_do(writer: ToolCaller, app_context: AppContext) -> None:
    live, gone = uuid.UUID((await create(writer, "Live thought"))["id"]), uuid.UUID((await create(writer, "Old"))["id"])
    await archive(app_context, str(gone))
    missing = uuid.uuid4()
    async with app_context.db.unit_of_work() as session:
        service = SupersedeService(session, writer.principal)
        assert await service.archive_preview(live) == (ThoughtStatus.active, "would_archive")
        assert await service.archive_preview(gone) == (ThoughtStatus.archived, "already_archived")
        assert await service.archive_preview(missing) == (None, "not_found")
        outcomes = await service.archive_batch_preview([live, missing, live, gone])
    assert outcomes == ["would_archive", "not_found", "already_archived", "already_archived"]
    assert (await rows(app_context, "SELECT count(*) FROM thought WHERE status = 'archived'"))[0][0] == 1


async def test_a_merge_request_checks_and_embeds_the_merged_content(
    writer: ToolCaller, app_context: AppContext
) -> None:
    source, target = uuid.uuid4(), uuid.uuid4()
    request = await merge_request(app_context, source, target, "Merged text", ["a"], None)
    assert (request.content, request.tags, request.cwd) == ("Merged text", ["a"], None)
    assert request.vectors is not None and len(request.vectors) == 1
    assert (await merge_request(app_context, source, target, None, None, "/x")).vectors is None
    with pytest.raises(AppError, match=r"'merged_content'.*over the 720-character limit"):
        await merge_request(app_context, source, target, "x" * 721, None, None)


async def test_a_merge_plans_the_cwd_project_then_merges(writer: ToolCaller, app_context: AppContext) -> None:
    project = await register(writer, "api", "/work/api")
    source = uuid.UUID((await create(writer, "Tokens expire after an hour"))["id"])
    target = uuid.UUID((await create(writer, "Access tokens last one hour"))["id"])
    request = await merge_request(
        app_context, source, target, "Access tokens expire after one hour", ["auth"], "/work/api"
    )
    async with app_context.db.unit_of_work() as session:
        plan, values = await plan_merge(app_context, session, writer.principal, request)
    assert plan.outcome == "would_merge"
    assert values == {
        "content": "Access tokens expire after one hour",
        "tags": ["auth"],
        "project_id": uuid.UUID(project["id"]),
    }
    async with app_context.db.unit_of_work() as session:
        merged, transferred = await run_merge(app_context, session, writer.principal, request)
    assert (merged.id, merged.content, str(merged.project_id), transferred) == (
        target,
        "Access tokens expire after one hour",
        project["id"],
        0,
    )
    assert merged.embedding_model == (app_context.embedding.profile.model_id if app_context.embedding.profile else None)
    [(status,)] = await rows(app_context, "SELECT status::text FROM thought WHERE id = :id", id=source)
    assert status == "archived"


async def test_a_merge_without_new_values_plans_none(writer: ToolCaller, app_context: AppContext) -> None:
    source = uuid.UUID((await create(writer, "One"))["id"])
    async with app_context.db.unit_of_work() as session:
        plan, values = await plan_merge(app_context, session, writer.principal, MergeRequest(source, source))
    assert (plan.outcome, plan.reason, values) == ("ineligible", "source and target are the same thought", {})
