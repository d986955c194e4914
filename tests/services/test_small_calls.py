"""The single-call units of work behind memory_manage, edge_review reject, retention_review protect and
memory_store link / link_batch."""

from __future__ import annotations

import uuid

import pytest

from app.db.models import EdgeType
from app.errors import AppError
from app.services.admin import operations as admin_operations
from app.services.context import AppContext
from app.services.retention.operations import protect_thought
from app.services.review import operations as review_operations
from app.services.store.operations import link_pair, link_pairs
from tests.helpers import ToolCaller
from tests.integration.search_support import create


async def test_projects_are_created_updated_listed_and_resolved(app_context: AppContext, writer: ToolCaller) -> None:
    made = await admin_operations.create_project(app_context, writer.principal, "search", "/work/search", None)
    await admin_operations.update_project(app_context, made.id, {"description": "the search service"})
    listed = {project.name: project for project in await admin_operations.list_projects(app_context)}
    assert listed["search"].description == "the search service"
    resolved = await admin_operations.resolve_project(app_context, "/work/search/app")
    assert resolved is not None and resolved.id == made.id


async def test_links_one_and_many(writer: ToolCaller, app_context: AppContext) -> None:
    first, second = await create(writer, "First"), await create(writer, "Second")
    edge = await link_pair(
        app_context, writer.principal, uuid.UUID(first["id"]), uuid.UUID(second["id"]), EdgeType.related
    )
    assert edge.type is EdgeType.related
    outcomes = await link_pairs(
        app_context,
        writer.principal,
        [(second["id"], first["id"], EdgeType.supports), ("nope", first["id"], EdgeType.related)],
    )
    assert outcomes[0].edge is not None and outcomes[0].error is None
    assert outcomes[1].edge is None and outcomes[1].error is not None and "links[1].source" in outcomes[1].error.message


async def test_protect_and_reject_refuse_what_is_missing(writer: ToolCaller, app_context: AppContext) -> None:
    made = await create(writer, "Keep me")
    protected = await protect_thought(app_context, writer.principal, uuid.UUID(made["id"]), True)
    assert protected.is_protected
    with pytest.raises(AppError):
        await review_operations.reject(app_context, writer.principal, uuid.uuid4())
