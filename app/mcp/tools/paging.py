"""The paged thought inventory behind memory_recall list and memory_reflect timeline: shaping only."""

from __future__ import annotations

from collections.abc import Sequence

from app.mcp.calls import CallContext, ToolAnswer
from app.mcp.envelope import Meta, collection
from app.mcp.shaping import ThoughtShaper
from app.services.recall import operations as recall_operations
from app.services.recall.requests import PageRequest


async def thought_page(
    ctx: CallContext,
    action: str,
    request: PageRequest,
    compact: bool,
    fields: Sequence[str] | None,
) -> ToolAnswer:
    """Newest first; counts carry the page that ran (limit, offset) and the un-paged total."""
    found = await recall_operations.page(ctx.app, request)
    shape = ThoughtShaper(compact=compact, fields=fields, url_links=found.links)
    counts = {"limit": request.limit, "offset": request.offset}
    meta = Meta(action, scope=found.scope.scope, warnings=found.scope.warnings, counts=counts)
    return ToolAnswer(collection(meta, [shape(row) for row in found.rows], total=found.total))
