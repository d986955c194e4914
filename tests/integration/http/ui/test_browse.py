"""The browse pages (app/http/ui/browse.py) and the project scope of every console page: a project without a path
means that project, the filters, paging, tags as links, empty states, and nothing of a closed project for a
non-member."""

from __future__ import annotations

import html
import re
from typing import Any

import httpx2
import pytest

from app.db.models import Role
from app.http.ui import browse as browse_page
from app.services.context import AppContext
from tests.support.console import sign_in, signed_in, token_for, ui  # noqa: F401 (fixture)
from tests.support.helpers import ToolCaller
from tests.support.team import team

ROW = re.compile(r'<li class="result">')


def shown(page: httpx2.Response) -> str:
    return html.unescape(page.text)


async def default_project(caller: ToolCaller) -> dict[str, Any]:
    projects = (await caller.ok("memory_manage", {"action": "list"})).items
    return next(project for project in projects if project["is_default"])


async def test_a_project_without_a_path_means_that_project_on_every_page(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    await writer.ok("memory_manage", {"action": "create", "name": "atlas", "local_path": "/srv/atlas"})
    await writer.ok("memory_store", {"action": "create", "content": "Pipeline notes of atlas", "cwd": "/srv/atlas"})
    await writer.ok("memory_store", {"action": "create", "content": "Pipeline notes of default", "tags": ["ops"]})
    default = await default_project(writer)
    assert default["local_path"] is None
    await signed_in(ui, app_context, "rita", Role.reader)

    timeline = await ui.get(f"/ui/projects/{default['id']}/timeline")
    assert timeline.status_code == 200
    assert "1 thought, newest first." in timeline.text
    assert "Pipeline notes of default" in timeline.text and "Pipeline notes of atlas" not in timeline.text
    assert "spans every project" not in timeline.text

    search = await ui.get("/ui/search", params={"query": "pipeline notes", "project": default["id"]})
    assert search.status_code == 200, search.text
    assert "Pipeline notes of default" in search.text and "Pipeline notes of atlas" not in search.text
    assert "spans every project" not in search.text
    everywhere = await ui.get("/ui/search", params={"query": "pipeline notes"})
    assert "Pipeline notes of default" in everywhere.text and "Pipeline notes of atlas" in everywhere.text

    browsed = await ui.get("/ui/browse", params={"project": default["id"]})
    assert browsed.status_code == 200
    assert "Pipeline notes of default" in browsed.text and "Pipeline notes of atlas" not in browsed.text
    # a search's refusal keeps the tool's text when scoped by id too
    bad = await ui.get("/ui/search", params={"query": "x" * 2001, "project": default["id"]})
    assert bad.status_code == 400 and "Invalid argument 'query' for memory_recall action=search" in shown(bad)


async def test_browse_by_tag_edge_type_standing_and_date(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    project = (await writer.ok("memory_manage", {"action": "create", "name": "atlas", "local_path": "/srv/atlas"})).item
    base = {"action": "create", "cwd": "/srv/atlas"}
    old = (
        await writer.ok("memory_store", {**base, "content": "Deploys use the blue pipeline", "tags": ["deploy"]})
    ).item
    new = (await writer.ok("memory_store", {**base, "content": "Deploys use the green pipeline"})).item
    kept = (await writer.ok("memory_store", {**base, "content": "The on-call rota", "is_protected": True})).item
    gone = (await writer.ok("memory_store", {**base, "content": "A retired runbook"})).item
    await writer.ok(
        "memory_store", {"action": "link", "source_id": new["id"], "target_id": old["id"], "edge_type": "replaces"}
    )
    archive = {"action": "archive", "thought_id": gone["id"]}
    token = (await writer.ok("memory_supersede", archive)).meta["preview"]["token"]
    await writer.ok("memory_supersede", {**archive, "confirm": True, "preview_token": token})
    await signed_in(ui, app_context, "rita", Role.reader)

    def browse(**filters: str) -> Any:
        return ui.get("/ui/browse", params={"project": project["id"], **filters})

    tagged = await browse(tag="deploy")
    assert tagged.status_code == 200
    assert "1 thought tagged deploy, newest first" in tagged.text
    assert "Deploys use the blue pipeline" in tagged.text and "green pipeline" not in tagged.text
    replaces = await browse(edge="replaces")
    assert len(ROW.findall(replaces.text)) == 2  # both ends of the edge
    superseded = await browse(standing="superseded")
    assert "blue pipeline" in superseded.text and "green pipeline" not in superseded.text
    both = await browse(edge="replaces", standing="superseded")
    assert "blue pipeline" in both.text and len(ROW.findall(both.text)) == 1
    assert "No thoughts with a related edge, contradicted in atlas" in shown(
        await browse(edge="related", standing="contradicted")
    )
    protected = await browse(standing="protected")
    assert "The on-call rota" in protected.text and len(ROW.findall(protected.text)) == 1
    archived = await browse(standing="archived")
    assert "A retired runbook" in archived.text and len(ROW.findall(archived.text)) == 1

    day = str(kept["created_at"])[:10]  # the date the database gave it, not the test's clock
    same_day = await browse(**{"from": day, "to": day})
    assert len(ROW.findall(same_day.text)) == 4
    before = await browse(to="2000-01-01")
    assert "No thoughts created on or before 2000-01-01 in atlas" in shown(before)
    assert "clear every filter" in before.text

    empty = await browse(tag="nothing-here")
    assert empty.status_code == 200
    text = shown(empty)
    assert "No thoughts tagged nothing-here in atlas" in text
    assert "clear the tag" in text and "browse all projects" in text

    bad = await browse(**{"from": "yesterday", "tag": "deploy"})
    assert bad.status_code == 400
    assert "'yesterday' is not a date: write it as YYYY-MM-DD" in shown(bad)
    assert 'value="yesterday" aria-invalid="true"' in bad.text and 'value="deploy"' in bad.text
    swapped = await browse(**{"from": "2026-02-01", "to": "2026-01-01"})
    assert swapped.status_code == 400 and "The end date is before the start date" in swapped.text

    # a tag is a link to this view wherever it shows, and a tag alone in the search form browses it
    thought = await ui.get(f"/ui/thoughts/{old['id']}")
    assert f'href="/ui/browse?project={project["id"]}&amp;tag=deploy"' in thought.text
    assert f'href="/ui/browse?project={project["id"]}&amp;tag=deploy"' in tagged.text
    redirect = await ui.get("/ui/search", params={"tag": "deploy", "project": project["id"]})
    assert redirect.status_code == 303 and redirect.headers["location"].startswith("/ui/browse?")


async def test_browse_and_search_page_within_the_contract_limits(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    await writer.ok("memory_manage", {"action": "create", "name": "atlas", "local_path": "/srv/atlas"})
    thoughts = [{"content": f"Quarterly marmalade report number {n}", "tags": ["report"]} for n in range(60)]
    await writer.ok("memory_store", {"action": "bulk_create", "thoughts": thoughts, "cwd": "/srv/atlas"})
    await signed_in(ui, app_context, "rita", Role.reader)

    first = await ui.get("/ui/browse", params={"tag": "report"})
    assert "60 thoughts tagged report, newest first" in first.text and len(ROW.findall(first.text)) == 50
    assert "spans every project" not in first.text  # the page says it browses every project
    second = await ui.get("/ui/browse", params={"tag": "report", "offset": "50"})
    assert len(ROW.findall(second.text)) == 10 and "Newer" in second.text
    past = await ui.get("/ui/browse", params={"tag": "report", "offset": "500"})
    assert "No thoughts past 500" in past.text

    search = await ui.get("/ui/search", params={"query": "marmalade report", "status": "all"})
    assert len(ROW.findall(search.text)) == 10
    assert "Show 10 more" in search.text and "limit=20" in search.text
    more = await ui.get("/ui/search", params={"query": "marmalade report", "status": "all", "limit": "20"})
    assert len(ROW.findall(more.text)) == 20
    most = await ui.get("/ui/search", params={"query": "marmalade report", "status": "all", "limit": "999"})
    assert len(ROW.findall(most.text)) == 60 and "Show" not in most.text  # capped at the contract's 100


async def test_a_reader_who_is_no_member_of_a_closed_project_sees_none_of_it(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
) -> None:
    cast = await team(app_context)
    await sign_in(ui, await token_for(app_context, "rita", Role.reader))
    secret = cast.secret

    assert (await ui.get("/ui/browse", params={"project": secret.id})).status_code == 404
    assert (await ui.get(f"/ui/projects/{secret.id}/timeline")).status_code == 404
    for page in (
        await ui.get("/ui/browse"),
        await ui.get("/ui/browse", params={"edge": "related"}),
        await ui.get("/ui/browse", params={"project": secret.id, "tag": "x"}),
        await ui.get("/ui/search", params={"query": "master key note", "project": secret.id}),
        await ui.get("/ui/search", params={"query": "master key note"}),
    ):
        assert "secret master key note" not in page.text  # alice's thoughts there; the global one reads everywhere
        assert f'<option value="{secret.id}"' not in page.text and ">secret</option>" not in page.text
    everything = await ui.get("/ui/browse")
    assert "open note 0" in everything.text and "a global note everyone reads" in everything.text

    ui.cookies.clear()  # a second browser: the owner sees their project
    await sign_in(ui, await token_for(app_context, "alice", Role.writer))
    owner = await ui.get("/ui/browse", params={"project": secret.id, "edge": "related"})
    assert owner.status_code == 200 and len(ROW.findall(owner.text)) == 2


async def test_a_page_counts_up_to_its_cap_and_says_more_than_past_it(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The timeline and browse count at most max(TOTAL_CAP, offset + a page) thoughts; the tools' totals stay
    exact."""
    monkeypatch.setattr(browse_page, "TOTAL_CAP", 20)
    project = (await writer.ok("memory_manage", {"action": "create", "name": "atlas", "local_path": "/srv/atlas"})).item
    thoughts = [{"content": f"Quarterly marmalade report number {n}", "tags": ["report"]} for n in range(60)]
    await writer.ok("memory_store", {"action": "bulk_create", "thoughts": thoughts, "cwd": "/srv/atlas"})
    await signed_in(ui, app_context, "rita", Role.reader)

    first = await ui.get("/ui/browse", params={"project": project["id"], "tag": "report"})
    assert "More than 50 thoughts tagged report, newest first" in first.text  # the bound: offset 0 + 50
    assert len(ROW.findall(first.text)) == 50 and "offset=50" in first.text and "Older" in first.text
    second = await ui.get("/ui/browse", params={"project": project["id"], "tag": "report", "offset": "50"})
    assert "60 thoughts tagged report, newest first" in second.text  # bound 100: exact
    assert len(ROW.findall(second.text)) == 10 and "Older" not in second.text

    timeline = await ui.get(f"/ui/projects/{project['id']}/timeline")
    assert "More than 50 thoughts, newest first." in timeline.text and "Older" in timeline.text
    monkeypatch.setattr(browse_page, "TOTAL_CAP", 60)
    exact = await ui.get(f"/ui/projects/{project['id']}/timeline")
    assert "60 thoughts, newest first." in exact.text and "More than" not in exact.text

    listed = await writer.ok("memory_recall", {"action": "list", "cwd": "/srv/atlas", "limit": 5})
    assert listed.meta["counts"]["total"] == 60 and "total_capped" not in listed.meta["counts"]
    timeline_call = await writer.ok("memory_reflect", {"action": "timeline", "cwd": "/srv/atlas", "limit": 5})
    assert timeline_call.meta["counts"]["total"] == 60 and "total_capped" not in timeline_call.meta["counts"]
