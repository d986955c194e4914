"""The console's neighbourhood graph, auto_cluster preview → confirm and the operations overview, in-process on a
real PostgreSQL: the graph's JSON block (escaped, no inline script, the CSP kept strict), auto_cluster through
the preview screen (CSRF, the reader's refusal, applied once, a replay refused), and counts per project and job
state for admins only."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import httpx2

from app.db.models import Role
from app.services.context import AppContext
from app.services.jobs import background as jobs
from app.services.jobs.runs import replica_name
from tests.support.console import confirm_fields, post, signed_in, ui  # noqa: F401 (fixture)
from tests.support.crystallize import BILLING, DEPLOY, age, project, thought
from tests.support.helpers import ToolCaller, execute, rows

GRAPH_DATA = re.compile(r'<script type="application/json" id="graph-data">(.*?)</script>', re.S)
SCRIPT = re.compile(r"<script\b([^>]*)>", re.S)
HOSTILE = 'Closing tags </script><script>alert("x")</script> & <!-- in content'


def graph_of(page: str) -> dict[str, Any]:
    found = GRAPH_DATA.search(page)
    assert found is not None, "no graph JSON block"
    return dict(json.loads(found[1]))


async def test_the_thought_page_embeds_its_neighbourhood_as_json_for_the_graph(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    centre = await thought(writer, "The billing service retries webhooks for 72 hours")
    hostile = await thought(writer, HOSTILE)
    parent = await thought(writer, "Webhook delivery policy")
    await writer.ok(
        "memory_store",
        {"action": "link", "source_id": centre["id"], "target_id": hostile["id"], "edge_type": "related"},
    )
    await writer.ok(
        "memory_store",
        {"action": "link", "source_id": parent["id"], "target_id": centre["id"], "edge_type": "parent"},
    )
    await signed_in(ui, app_context, "rita", Role.reader)
    page = await ui.get(f"/ui/thoughts/{centre['id']}")
    assert page.status_code == 200, page.text
    csp = page.headers["content-security-policy"]
    assert "script-src 'self';" in csp and "unsafe" not in csp  # still strict: no inline script, no eval

    # Every script is a file of the console's, or the inert JSON block.
    for attributes in SCRIPT.findall(page.text):
        assert 'src="/ui/static/' in attributes or 'type="application/json"' in attributes, attributes
    assert "</script><script>alert" not in page.text  # tojson escapes <, > and & inside the block
    graph = graph_of(page.text)
    nodes = {node["id"]: node for node in graph["nodes"]}
    assert graph["centre"] == centre["id"] and set(nodes) == {centre["id"], hostile["id"], parent["id"]}
    assert nodes[hostile["id"]]["label"].startswith("Closing tags </script><script>")  # the text, intact
    assert nodes[centre["id"]]["centre"] is True and nodes[centre["id"]]["status"] == "active"
    types = sorted((edge["source"], edge["target"], edge["type"]) for edge in graph["edges"])
    assert types == sorted(
        [(centre["id"], hostile["id"], "related"), (parent["id"], centre["id"], "parent")]
    )  # each edge once, though get and chain both answer the parent edge

    # The text legend and the list the graph mirrors (links, so the keyboard and no-JavaScript path works).
    assert "Nodes by status:" in page.text and "active (green)" in page.text
    assert "parent (solid violet line)" in page.text and "related (solid blue line)" in page.text
    assert f'<a href="/ui/thoughts/{parent["id"]}" data-node="{parent["id"]}" title="' in page.text
    assert re.search(
        r'<link rel="stylesheet" id="__________cytoscape_stylesheet" href="/ui/static/graph.css\?v=\w+">', page.text
    )

    for asset in ("/ui/static/graph.js", "/ui/static/graph.css", "/ui/static/vendor/cytoscape.min.js"):
        served = await ui.get(asset)
        assert served.status_code == 200, asset
    assert "Cytoscape Consortium" in (await ui.get("/ui/static/vendor/cytoscape.LICENSE")).text


async def test_a_thought_alone_still_gets_its_graph_and_a_missing_one_none(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    alone = await thought(writer, "A thought with no edges at all")
    await signed_in(ui, app_context, "rita", Role.reader)
    graph = graph_of((await ui.get(f"/ui/thoughts/{alone['id']}")).text)
    assert [node["id"] for node in graph["nodes"]] == [alone["id"]] and graph["edges"] == []
    missing = await ui.get("/ui/thoughts/00000000-0000-4000-8000-000000000000")
    assert missing.status_code == 404 and "graph-data" not in missing.text and "cytoscape" not in missing.text


async def clusterable(writer: ToolCaller) -> None:
    await project(writer, "Ops")
    members = [await thought(writer, content, "/srv/ops") for content in BILLING]
    members += [await thought(writer, content) for content in DEPLOY]
    await age(writer, [member["id"] for member in members], 5)


async def clusters_count(writer: ToolCaller) -> int:
    return int((await rows(writer, "SELECT count(*) FROM thought WHERE is_cluster"))[0][0])


async def test_auto_cluster_goes_through_its_preview_and_applies_once(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    await clusterable(writer)
    csrf = await signed_in(ui, app_context, "wes", Role.writer)
    form = await ui.get("/ui/review/clusters")
    assert form.status_code == 200 and '<label for="min_members">' in form.text

    assert (await ui.post("/ui/review/clusters/auto", data={})).status_code == 403
    assert (await ui.post("/ui/review/clusters/auto", data={"csrf": "forged"})).status_code == 403
    assert await rows(writer, "SELECT 1 FROM preview_token") == []  # refused before any tool call

    preview = await post(ui, "/ui/review/clusters/auto", [("csrf", csrf), ("min_similarity", ""), ("min_members", "")])
    assert preview.status_code == 200, preview.text
    assert "Preview: Group similar thoughts into clusters" in preview.text
    assert "Creates 2 cluster thought(s)" in preview.text and html.escape(BILLING[0]) in preview.text
    assert await clusters_count(writer) == 0  # a preview writes nothing
    fields = [*confirm_fields(preview.text), ("keep", "0"), ("keep", "1")]  # both groups ticked, as shown
    assert dict(fields)["confirm"] == "true" and dict(fields)["preview_token"]

    done = await post(ui, "/ui/review/clusters/auto", fields)
    assert done.status_code == 200, done.text
    assert "Group similar thoughts into clusters" in done.text and 'role="status"' in done.text
    assert await clusters_count(writer) == 2
    replay = await post(ui, "/ui/review/clusters/auto", fields)
    assert replay.status_code == 409 and "was already used" in html.unescape(replay.text)
    assert await clusters_count(writer) == 2  # applied exactly once


async def test_auto_cluster_refuses_readers_and_bad_arguments_with_the_tools_text(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    await clusterable(writer)
    csrf = await signed_in(ui, app_context, "rita", Role.reader)
    page = await ui.get("/ui/review/clusters")
    assert page.status_code == 200 and "Preview clusters" not in page.text and "Clusters</a>" not in page.text
    refused = await ui.post("/ui/review/clusters/auto", data={"csrf": csrf})
    assert refused.status_code == 403
    assert "memory_crystallize action=auto_cluster needs the writer role" in html.unescape(refused.text)

    ui.cookies.clear()
    csrf = await signed_in(ui, app_context, "wes", Role.writer)
    bad = await ui.post("/ui/review/clusters/auto", data={"csrf": csrf, "min_members": "1"})
    assert bad.status_code == 400 and "min_members" in bad.text
    assert await clusters_count(writer) == 0


async def test_operations_show_counts_per_project_and_job_state_to_admins_only(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    app_context.settings_view.update({"jobs.enabled": True, "jobs.tick_seconds": 60.0})  # what `serve` sets
    await project(writer, "Ops")
    for content in BILLING[:3]:
        await thought(writer, content, "/srv/ops")
    draft = await thought(writer, BILLING[3], "/srv/ops", status="draft")
    await thought(writer, DEPLOY[0])  # the default project, which has no path
    assert draft["status"] == "draft"

    await signed_in(ui, app_context, "wes", Role.writer)
    refused = await ui.get("/ui/admin/operations")
    assert refused.status_code == 403 and "need the admin role" in refused.text

    ui.cookies.clear()
    await signed_in(ui, app_context, "ada", Role.admin)
    page = await ui.get("/ui/admin/operations")
    assert page.status_code == 200, page.text
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.text))
    assert "Ops /srv/ops 3 1 0 4 Timeline" in text  # active, draft, archived, total
    assert "Every project 4 1 0 5" in text
    assert "default (no path) 1 0 0 1 Timeline" in text  # every project counted, a pathless one too
    assert "jobs.enabled Yes" in text and "jobs.tick_seconds 60.0" in text and "embedder.state" in text
    assert "importance decay not run yet" in text  # no tick has run in this test yet
    await jobs.run_jobs_tick(app_context.db, app_context.settings)
    retired = "INSERT INTO job_run VALUES ('retired_job', 'old-host:1', now(), now(), false, 'Boom: <b>x</b>', NULL)"
    await execute(writer, retired)  # a row of a job this version does not know (a newer replica's)
    page = await ui.get("/ui/admin/operations")
    text_after = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.text))
    assert re.search(r"project counts \d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", text_after)
    assert "ok: 2 project(s) counted" in text_after
    assert replica_name() in text_after and "not run yet" not in text_after
    assert "retired_job" in text_after and "error: Boom: &lt;b&gt;x&lt;/b&gt; old-host:1 never" in text_after
    assert 'href="/ui/admin/operations"' in page.text  # in the admin's navigation
