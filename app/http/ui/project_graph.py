"""The project graph page (/ui/graph): a project's most connected thoughts, drawn by static/graph.js from
app/http/ui/graph.py's JSON."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response

from app.http.ui.forms import count_param
from app.http.ui.graph import legend, overview
from app.http.ui.session import SessionData
from app.services.recall import operations as recall_operations
from app.services.values import Principal

if TYPE_CHECKING:
    from app.http.ui.console import Console

PROJECT_PAGE = 40  # thoughts per page of a project's graph (app.services.recall.project_graph.MAX_NODES caps it)


async def project_graph(
    console: Console, request: Request, principal: Principal, session: SessionData | None
) -> Response:
    """/ui/graph?project=<id>&offset=<n>: the project's most connected live thoughts, PROJECT_PAGE a page, with
    the edges among them; without a project, the projects to pick from."""
    projects = await console.projects(principal)
    asked = request.query_params.get("project")
    project = console.pick(projects.items, asked)
    values = console.base(principal, session, projects=projects, project=project, page=PROJECT_PAGE)
    if project is None:
        message = f"No project {asked!r} that you may see: pick one below." if asked else None
        return console.render(request, "project_graph.html", {**values, "message": message}, 404 if asked else 200)
    offset = count_param(request.query_params.get("offset"))
    found = await recall_operations.project_graph(console.context, uuid.UUID(str(project["id"])), PROJECT_PAGE, offset)
    graph = overview(found)
    values.update(graph=graph, legend=legend(graph), offset=offset, total=found.connected)
    return console.render(request, "project_graph.html", values)
