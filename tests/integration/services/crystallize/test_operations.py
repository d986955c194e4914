"""app/services/crystallize/operations.py: memory_crystallize's graph and cluster as units of work,
auto_cluster's plan and run."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.config import EmbeddingSettings
from app.embedding.profiles import OFFLINE_MINILM
from app.embedding.runtime import EmbeddingRuntime
from app.errors import AppError
from app.services.context import AppContext
from app.services.crystallize import operations as crystallize_operations
from tests.support.helpers import ToolCaller
from tests.support.search import create, execute, link, register, rows


async def test_a_cluster_lands_in_the_cwd_project_and_the_graph_shows_it(
    writer: ToolCaller, app_context: AppContext
) -> None:
    project = await register(writer, "infra", "/work/infra")
    first = await create(writer, "Terraform state lives in the shared bucket", cwd="/work/infra")
    second = await create(writer, "Terraform plans run on every pull request", cwd="/work/infra")
    await link(writer, first["id"], second["id"], "related")
    ids = [first["id"], second["id"]]
    made = await crystallize_operations.create_cluster(
        app_context, writer.principal, ids, "  Terraform  ", [" infra ", "Infra"], "/work/infra"
    )
    assert made.cluster.tags == ["cluster", "infra"]  # normalised as the tool's tags are
    assert made.project is not None and str(made.project.id) == project["id"]
    assert made.cluster.content == "Terraform" and made.cluster.is_cluster
    assert [str(member.id) for member in made.members] == [first["id"], second["id"]]
    scope, page = await crystallize_operations.graph(app_context, writer.principal, "/work/infra", None, None, 0)
    assert scope.project is not None and page.total == 3
    assert {str(node.id) for node in page.nodes} == {first["id"], second["id"], str(made.cluster.id)}


async def test_a_cluster_title_is_held_to_the_content_limit(writer: ToolCaller, app_context: AppContext) -> None:
    member = await create(writer, "A lone member")
    with pytest.raises(AppError, match="'title'"):
        await crystallize_operations.create_cluster(app_context, writer.principal, [member["id"]], "t" * 721, [], None)
    with pytest.raises(AppError, match=r"'thought_ids\[1\]'"):  # each id refused by its place in the list
        await crystallize_operations.create_cluster(
            app_context, writer.principal, [member["id"], "nope"], None, [], None
        )


BILLING = [
    "The billing service retries failed card payments three times",
    "Failed card payments are retried three times by the billing service",
    "The billing service retries a failed card payment three times before giving up",
]


async def test_auto_cluster_plans_then_creates_the_groups_it_planned(
    writer: ToolCaller, app_context: AppContext
) -> None:
    ids = [(await create(writer, content))["id"] for content in BILLING]
    await create(writer, "Cats like to sleep in warm sunny windows")
    await execute(app_context, "UPDATE thought SET created_at = now() - interval '5 days'")
    call = crystallize_operations.auto_cluster_call(app_context, None, None)
    assert app_context.embedding.profile is not None
    assert call == crystallize_operations.AutoClusterCall(
        app_context.embedding.profile.auto_cluster_distance,
        app_context.settings.auto_cluster.min_members,
        app_context.embedding.profile.model_id,
    )
    async with app_context.db.unit_of_work() as session:
        planned, candidates = await crystallize_operations.plan_auto_cluster(
            app_context, session, writer.principal, call
        )
    assert candidates == 4 and [sorted(str(m.id) for m in group.members) for group in planned] == [sorted(ids)]
    assert planned[0].cluster is None and (await rows(app_context, "SELECT count(*) FROM edge"))[0][0] == 0
    async with app_context.db.unit_of_work() as session:
        made, _ = await crystallize_operations.run_auto_cluster(app_context, session, writer.principal, call)
    assert [sorted(str(m.id) for m in group.members) for group in made] == [sorted(ids)]
    assert made[0].cluster is not None and made[0].cluster.is_cluster
    cluster_edges = await rows(app_context, "SELECT target_id::text FROM edge WHERE type = 'cluster'")
    assert sorted(row[0] for row in cluster_edges) == sorted(ids)


async def test_auto_cluster_takes_the_callers_thresholds_and_needs_the_embedder(
    app_context: AppContext, tmp_path: Path
) -> None:
    call = crystallize_operations.auto_cluster_call(app_context, 0.05, 7)
    assert (call.max_distance, call.min_members) == (0.05, 7)
    unloaded = EmbeddingRuntime(EmbeddingSettings(model=OFFLINE_MINILM, cache_dir=tmp_path))
    with pytest.raises(AppError, match="auto_cluster needs the embedder"):
        crystallize_operations.auto_cluster_call(dataclasses.replace(app_context, embedding=unloaded), None, None)
