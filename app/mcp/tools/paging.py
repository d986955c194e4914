"""The paged thought inventory behind memory_recall list and memory_reflect timeline: shaping only."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from app.mcp.calls import CallContext, ToolAnswer
from app.mcp.envelope import Meta, collection
from app.mcp.shaping import ThoughtShaper
from app.services.recall import operations as recall_operations
from app.services.recall.operations import Narrowing
from app.services.recall.requests import PageRequest


async def thought_page(
    ctx: CallContext,
    action: str,
    request: PageRequest,
    compact: bool,
    fields: Sequence[str] | None,
    project_id: uuid.UUID | None = None,
    narrowing: Narrowing | None = None,
    total_cap: int | None = None,
) -> ToolAnswer:
    """Newest first; counts carry the page that ran (limit, offset) and the un-paged total. `project_id`,
    `narrowing` and `total_cap`: the console's browse (app.services.recall.operations.page); only with a cap do
    the counts carry `total_capped` (1: more match than `total`), which no tool's answer has."""
    found = await recall_operations.page(ctx.app, request, project_id, narrowing, total_cap)
    shape = ThoughtShaper(compact=compact, fields=fields, url_links=found.links)
    counts = {"limit": request.limit, "offset": request.offset}
    if total_cap is not None:
        counts["total_capped"] = int(found.total_capped)
    meta = Meta(action, scope=found.scope.scope, warnings=found.scope.warnings, counts=counts)
    return ToolAnswer(collection(meta, [shape(row) for row in found.rows], total=found.total))
