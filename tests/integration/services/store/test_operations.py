"""app/services/store/operations.py: memory_store's thought writes as units of work, without the tool layer."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from app.db.models import EdgeType
from app.errors import AppError, bad_request
from app.services.context import AppContext
from app.services.store import operations as store_operations
from app.services.store.operations import link_pair, link_pairs
from app.services.store.thoughts import NewThought
from tests.support.helpers import ToolCaller
from tests.support.search import create, register, rows


async def test_create_lands_in_the_cwd_project_and_warns_over_the_soft_limit(
    writer: ToolCaller, app_context: AppContext
) -> None:
    project = await register(writer, "docs", "/work/docs")
    long = "word " * 130  # 650 characters, over the 600 soft limit
    written = await store_operations.create(app_context, writer.principal, NewThought(long), "/work/docs/guide")
    assert str(written.thought.project_id) == project["id"]
    assert written.scope is not None and written.scope["project"] == project["id"]
    assert written.warnings == [
        "1 thought(s) over the 600-character soft limit (longest 650); short thoughts recall better"
    ]
    assert (written.thought.embedding_model is not None) == (app_context.embedding.profile is not None)


async def test_update_checks_and_reports_the_new_project(writer: ToolCaller, app_context: AppContext) -> None:
    project = await register(writer, "ops", "/work/ops")
    made = await store_operations.create(
        app_context, writer.principal, NewThought("Pager rota changes on Mondays"), None
    )
    assert made.scope is None and str(made.thought.project_id) != project["id"]  # no cwd: the default project
    moved = await store_operations.update(app_context, writer.principal, made.thought.id, {"cwd": "/work/ops"})
    assert moved.scope is not None and moved.scope["project"] == project["id"] and moved.warnings == []
    with pytest.raises(AppError, match="over the 720-character limit"):
        await store_operations.update(app_context, writer.principal, made.thought.id, {"content": "x" * 721})


async def test_bulk_create_fails_refused_rows_alone(writer: ToolCaller, app_context: AppContext) -> None:
    rows: list[NewThought | AppError] = [NewThought("First row"), bad_request("refused by the adapter")]
    written = await store_operations.bulk_create(app_context, writer.principal, rows, None)
    assert [(o.index, o.thought is not None, o.error.message if o.error else None) for o in written.outcomes] == [
        (0, True, None),
        (1, False, "refused by the adapter"),
    ]
    assert written.warnings == []


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


@dataclass(frozen=True)
class Typed:
    """A thought to create as a door received it (store_operations.ThoughtFields)."""

    content: str
    tags: list[str] | None = None
    status: str | None = None
    is_protected: bool = False
    is_global: bool = False
    parent_id: str | None = None
    url_links: list[Any] | None = None


async def test_the_arguments_rules_are_the_operations_for_every_door(
    writer: ToolCaller, app_context: AppContext
) -> None:
    """What memory_store's handlers and the console's forms share: each refusal names its argument, and a refused
    call writes nothing."""
    parent = await create(writer, "The runbook lives in the ops wiki")
    made = await store_operations.create_given(
        app_context,
        writer.principal,
        Typed("Runbook pages carry an owner", [" Ops ", "ops"], None, parent_id=parent["id"]),
        None,
    )
    assert made.thought.tags == ["Ops"]  # trimmed, one of each whatever its case
    for fields, argument in (
        (Typed("x" * 721), "content"),
        (Typed("Fine", status="archived"), "status"),
        (Typed("Fine", parent_id="nope"), "parent_id"),
    ):
        with pytest.raises(AppError, match=f"'{argument}'"):
            await store_operations.create_given(app_context, writer.principal, fields, None)

    thought_id = str(made.thought.id)
    with pytest.raises(AppError, match="needs at least one field to change"):
        await store_operations.update_given(app_context, writer.principal, thought_id, {"tags_mode": "add"})
    with pytest.raises(AppError, match="needs at least one field to change"):  # null is "not given"
        await store_operations.update_given(app_context, writer.principal, thought_id, {"content": None})
    with pytest.raises(AppError, match="Invalid 'thought_id'"):
        await store_operations.update_given(app_context, writer.principal, "nope", {"content": "New"})
    added = await store_operations.update_given(
        app_context, writer.principal, thought_id, {"tags": ["wiki"], "tags_mode": "add", "surface_after": None}
    )
    assert added.thought.tags == ["Ops", "wiki"]

    with pytest.raises(AppError, match="Invalid 'target_id'"):
        await store_operations.link(app_context, writer.principal, thought_id, "nope", EdgeType.related)
    other = await create(writer, "Owners review their runbook pages yearly")
    edge = await store_operations.link(app_context, writer.principal, other["id"], thought_id, EdgeType.supports)
    assert (str(edge.source_id), str(edge.target_id), edge.type) == (other["id"], thought_id, EdgeType.supports)
    parent_edges = await rows(
        app_context, "SELECT count(*) FROM edge WHERE type = 'parent' AND target_id = :id", id=made.thought.id
    )
    assert parent_edges == [(1,)]
    count = await rows(app_context, "SELECT count(*) FROM thought WHERE content = 'Fine'")
    assert count == [(0,)]
