"""The console's memory pages: search (the home page) and a thought with its edges, history and neighbourhood.

Search reads the search operation (app.services.recall.operations.search_answered) with the picked project's id
instead of a cwd (the contract's cwd cannot name a project without a `local_path`) and renders its typed hits; the
query a person typed passes the tool's checks first (`memory_recall action=search`: validation, role, rate limit,
refusals in the contract's words; tool_calls.checked). The thought page reads the neighbourhood operation (the thought,
its edges both ways, its parent/develops chain: app.services.recall.operations.neighbourhood) behind the checks of
`memory_recall action=get`, and renders its typed records shaped as `get` and `chain` answer them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.responses import RedirectResponse, Response

from app.http.ui.forms import count_param
from app.http.ui.graph import legend, neighbourhood
from app.http.ui.page import Page
from app.http.ui.session import COOKIE_PATH
from app.http.ui.tool_calls import Listing, Refusal, checked
from app.mcp.calls import CallContext
from app.mcp.shaping import ThoughtShaper
from app.mcp.tools.common import uuid_arg
from app.mcp.tools.recall.args import GetArgs, SearchArgs
from app.mcp.tools.recall.handlers import chain_items, search_item, step_items
from app.services.recall import operations as recall_operations
from app.services.recall.operations import Neighbourhood, SearchResult

STATUSES = ("active", "draft", "archived", "all")
# memory_recall search's supersession_mode: how superseded thoughts stand in the answer.
STANDINGS = (("flag", "flag superseded"), ("suppress", "hide superseded"), ("off", "ignore supersession"))
# memory_recall search answers at most 100 hits and takes no offset: "more" asks again for SEARCH_STEP more.
SEARCH_STEP = 10
SEARCH_LIMIT = 100


def _hits(found: SearchResult) -> Listing:
    """Each hit with its scores, match source and standing (the contract's full shape), the total matched and the
    warnings."""
    shape = ThoughtShaper(compact=False, url_links=found.links)
    outcome = found.outcome
    items = [search_item(hit, shape, True) for hit in outcome.hits]
    return Listing(items, outcome.total, (*found.scope.warnings, *outcome.warnings))


async def _searched(page: Page, arguments: dict[str, Any], project_id: uuid.UUID | None) -> Listing:
    """The search of a project by its id (a project the user may not see is not found), or of everything the user
    sees. The page's hits are built inside the read, before the commit that counts them."""

    async def run(args: Any, ctx: CallContext) -> Listing:
        assert isinstance(args, SearchArgs)  # the search action's validated arguments
        return await recall_operations.search_answered(ctx.app, args, _hits, project_id=project_id)

    found = await checked(page, "memory_recall", arguments, run)
    return Listing.refused(found) if isinstance(found, Refusal) else found


async def search(page: Page) -> Response:
    params = page.params
    project = await page.project(params.get("project"))
    form = {
        "query": params.get("query", "").strip(),
        "tag": params.get("tag", "").strip(),
        "status": params.get("status") if params.get("status") in STATUSES else "active",
        "standing": params.get("standing") if params.get("standing") in dict(STANDINGS) else "flag",
        "project": str(project.id) if project else "",
        "limit": min(max(count_param(params.get("limit")), SEARCH_STEP), SEARCH_LIMIT),
    }
    if form["tag"] and not form["query"]:  # a tag alone is a browse of the tagged thoughts, not a search
        browse = {"project": form["project"], "tag": form["tag"], "status": form["status"]}
        return RedirectResponse(f"{COOKIE_PATH}/browse?{urlencode(browse)}", status_code=303)
    results: Listing | None = None
    if form["query"]:
        arguments: dict[str, Any] = {
            "action": "search",
            "query": form["query"],
            "status": form["status"],
            "supersession_mode": form["standing"],
            "limit": form["limit"],
            "compact": False,  # the contract's full shape: scores and match source
        }
        if form["tag"]:
            arguments["tag"] = form["tag"]
        # that project's own thoughts, with or without a path
        results = await _searched(page, arguments, project.id if project else None)
    values = page.values(
        projects=await page.projects(),
        project=project,
        form=form,
        results=results,
        statuses=STATUSES,
        standings=STANDINGS,
        step=SEARCH_STEP,
        most=SEARCH_LIMIT,
    )
    return page.render("search.html", values, results.page_status if results is not None else 200)


@dataclass(frozen=True)
class ThoughtView:
    """A thought's page: the thought, its edges both ways and its lineage (each shaped as `get` and `chain`
    answer them, which the templates' lines read), and the drawing of its neighbourhood."""

    thought: dict[str, Any]
    edges_in: list[dict[str, Any]]
    edges_out: list[dict[str, Any]]
    ancestors: list[dict[str, Any]]
    descendants: list[dict[str, Any]]
    graph: dict[str, Any]


def _viewed(found: Neighbourhood) -> ThoughtView:
    shape = ThoughtShaper(compact=False)
    return ThoughtView(
        shape(found.thought),
        step_items(found.upstream, shape),
        step_items(found.downstream, shape),
        chain_items(found.ancestors, shape),
        chain_items(found.descendants, shape),
        neighbourhood(found),
    )


async def thought(page: Page) -> Response:
    """A thought by id, through `memory_recall action=get`'s checks (its refusals, and the 404 of a thought the
    user may not see), read with its edges and chain in one operation."""
    arguments = {"action": "get", "thought_id": page.path_param("thought_id"), "include_edges": True}

    async def run(args: Any, ctx: CallContext) -> ThoughtView:
        assert isinstance(args, GetArgs)  # the get action's validated arguments
        thought_id = uuid_arg(args.thought_id, "thought_id")
        return await recall_operations.neighbourhood(ctx.app, thought_id, _viewed)

    found = await checked(page, "memory_recall", arguments, run)
    if isinstance(found, Refusal):
        values = page.values(found=found, thought=None)
        return page.render("thought.html", values, found.status)
    steps = [*found.edges_in, *found.edges_out]
    values = page.values(
        thought=found.thought,
        edges_in=found.edges_in,
        edges_out=found.edges_out,
        supersession=[step for step in steps if step["edge"]["type"] == "replaces"],
        ancestors=found.ancestors,
        descendants=found.descendants,
        graph=found.graph,
        legend=legend(found.graph),
    )
    return page.render("thought.html", values)
