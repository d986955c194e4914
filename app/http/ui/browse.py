"""The console's browse pages: a project's thoughts by tag, edge type, creation date and standing, newest first,
paged (/ui/browse), and its timeline (/ui/projects/<id>/timeline).

Both read the inventory operation (app.services.recall.operations.page) with the project's id instead of a cwd —
the contract's cwd can only name a project by its path, and a project without one would otherwise widen to every
project — and render its typed rows. The arguments a person typed pass the tool's checks first (`memory_recall
action=list`, `memory_reflect action=timeline`: validation, role, rate limit and refusals in the contract's words;
tool_calls.checked). A project the user may not see is not in the picker, and its id is not found by the read
(app.db.visibility).
"""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from starlette.responses import Response

from app.http.ui.forms import count_param
from app.http.ui.memory import STATUSES
from app.http.ui.page import Page
from app.http.ui.tool_calls import Listing, Refusal, checked
from app.mcp.calls import CallContext
from app.mcp.shaping import ThoughtShaper
from app.services.recall import operations as recall_operations
from app.services.recall.operations import STANDINGS, Narrowing, PageResult
from app.services.recall.requests import PageRequest
from app.services.values import EdgeType

PAGE = 50
# The pages count a project's thoughts up to this many (or offset + PAGE, past it) and say "more than 1,000"
# beyond: an exact total of the largest project (50 000 rows at 100 k) cost every page ~50 ms. The tools' own
# totals stay exact (app.services.recall.operations.page).
TOTAL_CAP = 1000
EDGE_TYPES = tuple(edge_type.value for edge_type in EdgeType)
# standing → its label; `archived` is the archived status, the others Narrowing's standings
STANDING_LABELS = {
    "": "any",
    "superseded": "superseded (a newer thought replaces it)",
    "contradicted": "contradicted",
    "protected": "protected",
    "global": "global (shown in every project)",
    "archived": "archived",
}
assert set(STANDING_LABELS) == {"", "archived", *STANDINGS}


def _rows(found: PageResult | Refusal, warn: bool = True) -> Listing:
    """The page of thoughts as the list shows them; `warn=False` leaves the scope's note out."""
    if isinstance(found, Refusal):
        return Listing.refused(found)
    shape = ThoughtShaper(compact=False, url_links=found.links)
    warnings = tuple(found.scope.warnings) if warn else ()
    return Listing([shape(row) for row in found.rows], found.total, warnings, total_capped=found.total_capped)


async def _listed(
    page: Page, tool: str, arguments: dict[str, Any], project_id: uuid.UUID | None, narrowing: Narrowing | None
) -> PageResult | Refusal:
    """The inventory read of a list or timeline call, scoped by project id and narrowed by the browse filters."""

    async def run(args: Any, ctx: CallContext) -> PageResult:
        return await recall_operations.page(ctx.app, PageRequest.of(args), project_id, narrowing, TOTAL_CAP)

    return await checked(page, tool, arguments, run)


async def timeline(page: Page) -> Response:
    """/ui/projects/<id>/timeline: the project's own thoughts, newest first, PAGE a page, by status."""
    params = page.params
    project = await page.project(page.path_param("project_id"))
    if project is None:
        return page.error("No such project (or it is not one you may see).", 404)
    status = params.get("status") if params.get("status") in STATUSES else "all"
    offset = count_param(params.get("offset"))
    arguments: dict[str, Any] = {"action": "timeline", "status": status, "limit": PAGE, "offset": offset}
    answer = _rows(await _listed(page, "memory_reflect", arguments, project.id, None))
    values = page.values(
        project=project,
        answer=answer,
        status=status,
        statuses=STATUSES,
        offset=offset,
        page=PAGE,
        total=answer.total,
        capped=answer.total_capped,
    )
    return page.render("timeline.html", values, answer.page_status)


async def browse(page: Page) -> Response:
    """/ui/browse?project=&tag=&edge=&standing=&from=&to=&status=&offset=: a project's thoughts (or every project's
    the user sees, with no project), narrowed by the filters given, newest first, PAGE a page."""
    params = page.params
    asked = params.get("project", "")
    project = await page.project(asked)
    edge, standing, status = params.get("edge", ""), params.get("standing", ""), params.get("status", "")
    form: dict[str, str] = {
        "project": str(project.id) if project else "",
        "tag": params.get("tag", "").strip(),
        "edge": edge if edge in EDGE_TYPES else "",
        "standing": standing if standing in STANDING_LABELS else "",
        "from": params.get("from", "").strip(),
        "to": params.get("to", "").strip(),
        "status": status if status in STATUSES else "all",
    }
    errors: dict[str, str] = {}
    created_from = _day(form["from"], "from", errors)
    created_to = _day(form["to"], "to", errors)
    if created_from and created_to and created_to < created_from:
        errors["to"] = "The end date is before the start date: swap them, or clear one."
    values = page.values(
        projects=await page.projects(),
        project=project,
        form=form,
        errors=errors,
        statuses=STATUSES,
        edge_types=EDGE_TYPES,
        standings=STANDING_LABELS,
        page=PAGE,
        offset=0,
        answer=None,
    )
    if asked and project is None:
        values["message"] = "No such project (or it is not one you may see): pick one below, or browse every project."
        return page.render("browse.html", values, 404)
    if errors:
        return page.render("browse.html", values, 400)
    offset = count_param(params.get("offset"))
    narrowing = Narrowing(
        created_from=_midnight(created_from),
        created_before=_midnight(created_to + timedelta(days=1)) if created_to else None,
        edge_type=EdgeType(form["edge"]) if form["edge"] else None,
        standing=form["standing"] if form["standing"] in STANDINGS else None,
    )
    status = "archived" if form["standing"] == "archived" else form["status"]
    arguments: dict[str, Any] = {"action": "list", "status": status, "limit": PAGE, "offset": offset}
    if form["tag"]:
        arguments["tag"] = form["tag"]
    found = await _listed(page, "memory_recall", arguments, project.id if project else None, narrowing)
    # the page says "every project you may see" without a project: no cwd note needed
    answer = _rows(found, warn=project is not None)
    query = urlencode(
        {key: value for key, value in form.items() if value and key != "status"} | {"status": form["status"]}
    )
    values.update(
        answer=answer,
        offset=offset,
        total=answer.total,
        capped=answer.total_capped,
        query=query,
        narrowed=_narrowed(form),
        clear_tag=_link({**form, "tag": ""}),
        every_project=_link({**form, "project": ""}),
        clear_all=_link({"project": form["project"]}),
    )
    return page.render("browse.html", values, answer.page_status)


def _narrowed(form: dict[str, str]) -> str:
    """The filters in words, for the heading and the empty state."""
    words = []
    if form["tag"]:
        words.append(f"tagged {form['tag']}")
    if form["edge"]:
        words.append(f"with a {form['edge']} edge")
    if form["standing"]:
        words.append(form["standing"])
    if form["from"] and form["to"]:
        words.append(f"created {form['from']} to {form['to']}")
    elif form["from"]:
        words.append(f"created on or after {form['from']}")
    elif form["to"]:
        words.append(f"created on or before {form['to']}")
    return ", ".join(words)


def _link(form: dict[str, str]) -> str:
    return "/ui/browse?" + urlencode({key: value for key, value in form.items() if value})


def _day(value: str, name: str, errors: dict[str, str]) -> date | None:
    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        errors[name] = f"{value!r} is not a date: write it as YYYY-MM-DD (e.g. 2026-11-30), or leave it empty."
        return None


def _midnight(day: date | None) -> datetime | None:
    return datetime(day.year, day.month, day.day, tzinfo=UTC) if day else None
