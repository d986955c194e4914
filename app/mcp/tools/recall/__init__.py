"""memory_recall: search, get, context, chain, clusters, list (compact by default)."""

from __future__ import annotations

from app.mcp.registry import Action, ToolSpec
from app.mcp.tools.common import READ_ONLY
from app.mcp.tools.recall import handlers
from app.mcp.tools.recall.args import (
    TOOL,
    ChainArgs,
    ClustersArgs,
    ContextArgs,
    GetArgs,
    ListArgs,
    SearchArgs,
)

SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Find and read thoughts (compact=false adds scores). search {query}: hybrid; an id or ≥13-hex prefix "
        "resolves directly. get {thought_id}. context {query|thought_id}: best match + neighbours. chain "
        "{thought_id}. clusters {query}: clusters only. list: paged."
    ),
    actions=(
        Action("search", SearchArgs, handlers.search_thoughts),
        Action("get", GetArgs, handlers.get_thought),
        Action("context", ContextArgs, handlers.context),
        Action("chain", ChainArgs, handlers.chain),
        Action("clusters", ClustersArgs, handlers.search_clusters),
        Action("list", ListArgs, handlers.list_thoughts),
    ),
    annotations=READ_ONLY,
    retired={
        "top_k": "top_k was removed; use limit",
        "cluster": "cluster was removed; use is_cluster",
        "mode": "mode was removed; use hybrid (true = vector + full-text fusion, false = vector only)",
        "project_id": "project_id was removed; use cwd",
    },
)
