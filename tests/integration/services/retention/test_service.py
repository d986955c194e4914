"""app/services/retention/: settings as defaults, and what the delete and compact confirm flows read and write inside
their transaction."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

import pytest

from app.config import EmbeddingSettings
from app.embedding.profiles import OFFLINE_MINILM
from app.embedding.runtime import EmbeddingRuntime
from app.errors import AppError
from app.services.context import AppContext
from app.services.retention.operations import CONTENT_CUT, candidate_page
from app.services.retention.service import RetentionService, Summary, embedded_summary
from tests.conftest import settings_with
from tests.support.helpers import ToolCaller
from tests.support.search import archive, create, execute, link, register


async def test_the_candidate_page_falls_back_to_the_settings(writer: ToolCaller, app_context: AppContext) -> None:
    page = await candidate_page(app_context, writer.principal, None, None, None, 0)
    assert page.limit == app_context.settings.retention_review.page_size and page.candidates == [] and page.total == 0
    tuned = dataclasses.replace(app_context, settings=settings_with(retention_review={"page_size": 3}))
    assert (await candidate_page(tuned, writer.principal, 5, 0.5, None, 0)).limit == 3
    assert (await candidate_page(tuned, writer.principal, 5, 0.5, 7, 0)).limit == 7


async def test_a_candidate_is_listed_with_its_content_cut_and_its_project(
    writer: ToolCaller, app_context: AppContext
) -> None:
    """The cut and the project both doors list (retention_review list, the console's retention page)."""
    project = await register(writer, "attic", "/work/attic")
    long = "An attic note " + "y" * 300
    made = await create(writer, long, cwd="/work/attic")
    await execute(
        app_context,
        "UPDATE thought SET status = 'archived', importance = 0.05, created_at = now() - interval '90 days', "
        "archived_at = now() - interval '90 days' WHERE id = :id",
        id=uuid.UUID(made["id"]),
    )
    page = await candidate_page(app_context, writer.principal, None, None, None, 0)
    [found] = [c for c in page.candidates if str(c.id) == made["id"]]
    assert found.content == long[:CONTENT_CUT] and len(found.content) == CONTENT_CUT
    assert (str(found.project_id), found.project_name) == (project["id"], "attic")


async def test_a_delete_preview_lists_the_edges_that_go_with_the_thought(
    writer: ToolCaller, app_context: AppContext
) -> None:
    doomed, other = await create(writer, "Doomed"), await create(writer, "Other")
    edge = await link(writer, other["id"], doomed["id"], "supports")
    async with app_context.db.unit_of_work() as session:
        service = RetentionService(session, writer.principal)
        dependents = await service.delete_preview(uuid.UUID(doomed["id"]))
        assert await service.delete_preview(uuid.uuid4()) is None
    assert dependents is not None
    assert [(str(d.edge_id), str(d.thought_id), d.type, d.direction) for d in dependents] == [
        (edge["id"], other["id"], "supports", "incoming")
    ]


async def test_a_summary_is_embedded_when_the_embedder_is_ready(app_context: AppContext, tmp_path: Path) -> None:
    summary = Summary("What the sources said", ["notes"])
    embedded = await embedded_summary(app_context, summary)
    assert embedded.embedding is not None and app_context.embedding.profile is not None
    assert embedded.embedding_model == app_context.embedding.profile.model_id
    unloaded = EmbeddingRuntime(EmbeddingSettings(model=OFFLINE_MINILM, cache_dir=tmp_path))
    assert await embedded_summary(dataclasses.replace(app_context, embedding=unloaded), summary) == summary


async def test_compact_writes_the_summary_in_its_project_or_refuses_an_unknown_one(
    writer: ToolCaller, app_context: AppContext
) -> None:
    project = await register(writer, "notes", "/work/notes")
    source = await create(writer, "Draft idea about caching")
    await archive(app_context, source["id"])
    missing = uuid.uuid4()
    async with app_context.db.unit_of_work() as session:
        with pytest.raises(AppError, match=f"Project {missing} not found \\(summary.project_id\\)"):
            await RetentionService(session, writer.principal).compact(
                [uuid.UUID(source["id"])], Summary("Caching, in short", [], missing)
            )
    summary = Summary("Caching, in short", ["cache"], uuid.UUID(project["id"]))
    async with app_context.db.unit_of_work() as session:
        created = await RetentionService(session, writer.principal).compact([uuid.UUID(source["id"])], summary)
    assert (created.content, created.tags, str(created.project_id)) == ("Caching, in short", ["cache"], project["id"])
    assert created.is_protected and created.embedding_model is None  # the backfill embeds it
