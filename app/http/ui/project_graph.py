"""The project graph page (/ui/graph): a project's most connected thoughts, drawn by static/graph.js from
app/http/ui/graph.py's JSON."""

from __future__ import annotations

from starlette.responses import Response

from app.http.ui.forms import count_param
from app.http.ui.graph import legend, overview
from app.http.ui.page import Page
from app.services.recall import operations as recall_operations

PROJECT_PAGE = 40  # thoughts per page of a project's graph (app.services.recall.project_graph.MAX_NODES caps it)


async def project_graph(page: Page) -> Response:
    """/ui/graph?project=<id>&offset=<n>: the project's most connected live thoughts, PROJECT_PAGE a page, with
    the edges among them; without a project, the projects to pick from."""
    asked = page.params.get("project")
    project = await page.project(asked)
    values = page.values(projects=await page.projects(), project=project, page=PROJECT_PAGE)
    if project is None:
        message = f"No project {asked!r} that you may see: pick one below." if asked else None
        return page.render("project_graph.html", {**values, "message": message}, 404 if asked else 200)
    offset = count_param(page.params.get("offset"))
    found = await recall_operations.project_graph(page.context, project.id, PROJECT_PAGE, offset)
    graph = overview(found)
    values.update(graph=graph, legend=legend(graph), offset=offset, total=found.connected)
    return page.render("project_graph.html", values)
