"""memory_crystallize: graph, cluster, auto_cluster (preview-first, global)."""

from __future__ import annotations

from app.mcp.registry import Action, ToolSpec
from app.mcp.tools.common import DESTRUCTIVE
from app.mcp.tools.crystallize import handlers
from app.mcp.tools.crystallize.args import (
    TOOL,
    AutoClusterArgs,
    ClusterArgs,
    GraphArgs,
)
from app.services.values import Role

SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Clusters. graph: nodes in items, edges beside them; cluster {thought_ids}: a new cluster thought; "
        "auto_cluster: groups similar thoughts in all projects, previewed first."
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
)
