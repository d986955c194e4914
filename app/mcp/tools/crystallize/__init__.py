"""memory_crystallize: graph, cluster, auto_cluster (preview-first, global)."""

from __future__ import annotations

from app.db.models import Role
from app.mcp.registry import Action, ToolSpec
from app.mcp.tools.common import COMMON_FIELD_DOCS, DESTRUCTIVE
from app.mcp.tools.crystallize import handlers
from app.mcp.tools.crystallize.args import (
    TOOL,
    AutoClusterArgs,
    ClusterArgs,
    GraphArgs,
)

SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Clusters. graph {cwd?, status?, limit?, offset?} → nodes in items, edges beside them; "
        "cluster {thought_ids, title?, tags?, cwd?} creates a cluster thought; auto_cluster "
        "{min_similarity?, min_members?} groups similar thoughts across all projects: previews, then "
        "confirm=true+preview_token."
    ),
    actions=(
        Action("graph", GraphArgs, handlers.graph, Role.reader),
        Action("cluster", ClusterArgs, handlers.cluster, Role.writer),
        Action("auto_cluster", AutoClusterArgs, handlers.auto_cluster, Role.writer),
    ),
    annotations=DESTRUCTIVE,
    retired={
        "dry_run": "dry_run was removed; use confirm",
        "project_id": "project_id was removed; use cwd",
    },
    field_docs={
        **COMMON_FIELD_DOCS,
        "cwd": "graph: scope (omit = every project); cluster: project of the new cluster",
        "limit": "max nodes",
        "status": "thought status (or all)",
        "min_similarity": "max cosine DISTANCE to join (lower = tighter; default: setting)",
        "min_members": "smallest group that becomes a cluster (default: setting)",
    },
)
