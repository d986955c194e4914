"""memory_recall: search, get, context, chain, clusters, list (compact by default)."""

from __future__ import annotations

from app.mcp.registry import Action, ToolSpec
from app.mcp.tools.common import COMMON_FIELD_DOCS, READ_ONLY
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
        "Find and read thoughts (compact by default; compact=false adds scores). search {query} hybrid "
        "vector+full-text, an id or ≥13-hex id prefix resolves directly; get {thought_id, include_edges?}; "
        "context {query|thought_id} best match + neighbourhood; chain {thought_id} parent/develops chain; "
        "clusters {query} cluster thoughts only; list (paged inventory, status default all)."
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
    field_docs={
        **COMMON_FIELD_DOCS,
        "status": "draft|active|archived|all (search default active, list default all)",
        "hybrid": "false = vector leg only",
        "min_relevance": "calibrated 0–1 gate for vector-only hits (default 0.4; 0 = off)",
        "recency_weight": "0–1 boost for recent thoughts",
        "supersession_mode": "flag|suppress|off superseded hits",
        "include_edges": "add upstream/downstream edges",
        "max_degree": "max edges per traversal step",
    },
)
