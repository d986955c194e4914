"""The console's project graph (/ui/graph) in-process on a real PostgreSQL: a project's most connected live
thoughts first, the edges among them, archived thoughts left out, pages that walk on, a closed project invisible
to a non-member (the page and the service alike), and the thought page's graph labels with their full text."""

from __future__ import annotations

import html
import json
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from app.config import Settings
from app.db.models import Role
from app.db.visibility import Caller, acting_as
from app.main import create_http_app
from app.services.context import AppContext
from app.services.recall.project_graph import most_connected
from tests.support.console import BASE, signed_in
from tests.support.helpers import ToolCaller
from tests.support.team import team

GRAPH_DATA = re.compile(r'<script type="application/json" id="graph-data">(.*?)</script>', re.S)


@pytest.fixture
async def ui(app_context: AppContext, tmp_path: Path) -> AsyncIterator[httpx2.AsyncClient]:
    settings = Settings(_env_file=None, auth={"mode": "token"}, data_dir=tmp_path, jobs={"enabled": False})
    transport = httpx2.ASGITransport(app=create_http_app(settings, app_context))
    async with httpx2.AsyncClient(transport=transport, base_url=BASE, follow_redirects=False) as client:
        yield client


def drawn(page: str) -> dict[str, Any]:
    found = GRAPH_DATA.search(page)
    assert found is not None, "the page embeds its graph"
    return dict(json.loads(html.unescape(found[1])))


async def hub_project(writer: ToolCaller) -> dict[str, Any]:
    """Project Hub: a hub linked to three spokes, one spoke linked to a fourth thought, an archived thought linked
    to the hub, and a thought without edges."""
    project = (await writer.ok("memory_manage", {"action": "create", "name": "Hub", "local_path": "/srv/hub"})).item

    async def store(content: str) -> str:
        item = (await writer.ok("memory_store", {"action": "create", "content": content, "cwd": "/srv/hub"})).item
        return str(item["id"])

    hub = await store("The hub thought that everything in this project points at, with a long tail of words")
    spokes = [await store(f"Spoke number {n} of the hub") for n in range(3)]
    far = await store("A thought two hops from the hub")
    archived = await store("An archived thought once linked to the hub")
    await store("A lonely thought with no edges at all")

    async def link(source: str, target: str, edge_type: str) -> None:
        arguments = {"action": "link", "source_id": source, "target_id": target, "edge_type": edge_type}
        await writer.ok("memory_store", arguments)

    for spoke in spokes:
        await link(hub, spoke, "related")
    await link(spokes[0], far, "supports")
    await link(archived, hub, "replaces")
    preview = await writer.ok("memory_supersede", {"action": "archive", "thought_id": archived})
    token = preview.meta["preview"]["token"]
    await writer.ok(
        "memory_supersede", {"action": "archive", "thought_id": archived, "confirm": True, "preview_token": token}
    )
    return {"project": project, "hub": hub, "spokes": spokes, "far": far, "archived": archived}


async def test_the_project_graph_shows_the_most_connected_first_with_their_edges(
    ui: httpx2.AsyncClient, app_context: AppContext, writer: ToolCaller
) -> None:
    world = await hub_project(writer)
    await signed_in(ui, app_context, "ada", Role.reader)
    assert '<a href="/ui/graph">Graph</a>' in (await ui.get("/ui/search")).text  # reachable from the navigation
    page = await ui.get(f"/ui/graph?project={world['project']['id']}")
    assert page.status_code == 200 and "<h1>Graph of Hub</h1>" in page.text
    graph = drawn(page.text)
    ids = [node["id"] for node in graph["nodes"]]
    assert ids[0] == world["hub"] and graph["nodes"][0]["degree"] == 4  # three spokes and the archived thought
    assert set(ids) == {world["hub"], *world["spokes"], world["far"]}  # no archived one, no thought without edges
    assert graph["nodes"][1]["id"] == world["spokes"][0] and graph["nodes"][1]["degree"] == 2
    edges = sorted((edge["source"], edge["target"], edge["type"]) for edge in graph["edges"])
    assert edges == sorted(
        [(world["hub"], spoke, "related") for spoke in world["spokes"]]
        + [(world["spokes"][0], world["far"], "supports")]
    )
    hub = graph["nodes"][0]
    assert hub["label"] == "The hub thought that everything…" and hub["full"].endswith("a long tail of words")
    assert "related (solid blue line)" in page.text and "supports (dotted green line)" in page.text
    assert f'<a href="/ui/thoughts/{world["far"]}" data-node="{world["far"]}"' in page.text
    assert 'tabindex="0" role="group" aria-roledescription="graph"' in page.text  # the drawing takes focus

    project_id = uuid.UUID(world["project"]["id"])
    async with app_context.db.autocommit() as db:
        first = await most_connected(db, project_id, 2, 0)
        rest = await most_connected(db, project_id, 2, 2)
        past = await most_connected(db, project_id, 2, 10)
    assert [node.id for node in first.nodes] == [uuid.UUID(world["hub"]), uuid.UUID(world["spokes"][0])]
    assert len(rest.nodes) == 2 and not {node.id for node in rest.nodes} & {node.id for node in first.nodes}
    assert first.connected == 6 and past.nodes == []  # the archived end counted, so a last page may be short
    beyond = await ui.get(f"/ui/graph?project={world['project']['id']}&offset=40")
    assert beyond.status_code == 200 and "No thoughts past 40" in beyond.text
    huge = await ui.get(f"/ui/graph?project={world['project']['id']}&offset={10**30}")  # past PostgreSQL's bigint
    assert huge.status_code == 200 and "No thoughts past 1000000000" in huge.text


async def test_a_project_without_edges_and_an_unknown_project_say_what_to_do(
    ui: httpx2.AsyncClient, app_context: AppContext, writer: ToolCaller
) -> None:
    project = (await writer.ok("memory_manage", {"action": "create", "name": "Bare", "local_path": "/srv/bare"})).item
    await writer.ok("memory_store", {"action": "create", "content": "Nothing links here", "cwd": "/srv/bare"})
    await signed_in(ui, app_context, "ada", Role.reader)
    bare = await ui.get(f"/ui/graph?project={project['id']}")
    assert bare.status_code == 200 and "No thought of Bare has an edge yet." in bare.text
    assert 'id="graph-data"' not in bare.text and "cytoscape" not in bare.text
    unknown = await ui.get("/ui/graph?project=nope")
    assert unknown.status_code == 404 and "No project &#39;nope&#39; that you may see" in unknown.text
    picker = await ui.get("/ui/graph")
    assert picker.status_code == 200 and f'<option value="{project["id"]}"' in picker.text


async def test_a_closed_project_graph_is_nothing_to_a_non_member(
    ui: httpx2.AsyncClient, app_context: AppContext
) -> None:
    cast = await team(app_context)
    await signed_in(ui, app_context, "bob", Role.writer)
    refused = await ui.get(f"/ui/graph?project={cast.secret.id}")
    assert refused.status_code == 404 and "master key" not in refused.text
    with acting_as(Caller(cast.bob.principal, "test")):
        async with app_context.db.autocommit() as db:
            hidden = await most_connected(db, uuid.UUID(cast.secret.id), 40, 0)
    assert hidden.nodes == [] and hidden.edges == [] and hidden.connected == 0
    with acting_as(Caller(cast.alice.principal, "test")):
        async with app_context.db.autocommit() as db:
            shown = await most_connected(db, uuid.UUID(cast.secret.id), 40, 0)
    assert {str(node.id) for node in shown.nodes} == set(cast.secret.thought_ids[:2]) and len(shown.edges) == 1
