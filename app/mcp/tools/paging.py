"""The paged thought inventory behind memory_recall list and memory_reflect timeline."""

from __future__ import annotations

from dataclasses import dataclass

from app.db.repositories.projects import ProjectRepository
from app.db.repositories.thoughts import ThoughtFilter, ThoughtRepository, status_filter
from app.db.repositories.url_links import UrlLinkRepository
from app.mcp.envelope import Meta, collection
from app.mcp.registry import CallContext, ToolAnswer
from app.mcp.shaping import ThoughtShaper
from app.services.scope import resolve_read_scope


@dataclass(frozen=True)
class PageRequest:
    action: str
    cwd: str | None
    status: str
    limit: int
    offset: int
    compact: bool
    fields: list[str] | None
    include_url_links: bool
    tag: str | None = None
    is_cluster: bool | None = None


async def thought_page(ctx: CallContext, request: PageRequest) -> ToolAnswer:
    """Newest first; counts carry the page that ran (limit, offset) and the un-paged total."""
    async with ctx.app.db.unit_of_work() as session:
        scope = await resolve_read_scope(ProjectRepository(session), request.cwd)
        where = ThoughtFilter(
            project_id=scope.project.id if scope.project else None,
            statuses=status_filter(request.status),
            tag=request.tag,
            is_cluster=request.is_cluster,
        )
        rows, total = await ThoughtRepository(session).page_with_total(where, request.limit, request.offset)
        wanted = request.include_url_links
        links = await UrlLinkRepository(session).for_thoughts(row.id for row in rows) if wanted else None
    shape = ThoughtShaper(compact=request.compact, fields=request.fields, url_links=links)
    counts = {"limit": request.limit, "offset": request.offset}
    meta = Meta(request.action, scope=scope.scope, warnings=scope.warnings, counts=counts)
    return ToolAnswer(collection(meta, [shape(row) for row in rows], total=total))
