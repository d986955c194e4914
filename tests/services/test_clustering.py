"""app/services/clustering.py: memory_crystallize's graph and cluster as units of work."""

from __future__ import annotations

import uuid

import pytest

from app.errors import AppError
from app.services import clustering
from app.services.context import AppContext
from tests.helpers import ToolCaller
from tests.integration.search_support import create, link, register


async def test_a_cluster_lands_in_the_cwd_project_and_the_graph_shows_it(
    writer: ToolCaller, app_context: AppContext
) -> None:
    project = await register(writer, "infra", "/work/infra")
    first = await create(writer, "Terraform state lives in the shared bucket", cwd="/work/infra")
    second = await create(writer, "Terraform plans run on every pull request", cwd="/work/infra")
    await link(writer, first["id"], second["id"], "related")
    ids = [uuid.UUID(first["id"]), uuid.UUID(second["id"])]
    made = await clustering.create_cluster(app_context, writer.principal, ids, "  Terraform  ", [], "/work/infra")
    assert made.project is not None and str(made.project.id) == project["id"]
    assert made.cluster.content == "Terraform" and made.cluster.is_cluster
    assert [str(member.id) for member in made.members] == [first["id"], second["id"]]
    scope, page = await clustering.graph(app_context, writer.principal, "/work/infra", None, None, 0)
    assert scope.project is not None and page.total == 3
    assert {str(node.id) for node in page.nodes} == {first["id"], second["id"], str(made.cluster.id)}


async def test_a_cluster_title_is_held_to_the_content_limit(writer: ToolCaller, app_context: AppContext) -> None:
    member = await create(writer, "A lone member")
    with pytest.raises(AppError, match="'title'"):
        await clustering.create_cluster(app_context, writer.principal, [uuid.UUID(member["id"])], "t" * 721, [], None)
