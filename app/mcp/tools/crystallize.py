"""memory_crystallize: graph, cluster, auto_cluster (preview-first, global)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.db.models import Role
from app.mcp.registry import Action, ToolSpec
from app.mcp.tools import crystallize_handlers
from app.mcp.tools.common import (
    COMMON_FIELD_DOCS,
    DESTRUCTIVE,
    ConfirmArgs,
    CwdArgs,
    IdStr,
    ShapeArgs,
    TagStr,
)

TOOL = "memory_crystallize"
StatusFilter = Literal["draft", "active", "archived", "all"]


class GraphArgs(CwdArgs, ShapeArgs):
    action: Literal["graph"]
    status: StatusFilter | None = None
    limit: int | None = Field(default=None, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)


class ClusterArgs(CwdArgs):
    action: Literal["cluster"]
    thought_ids: list[IdStr] = Field(min_length=1, max_length=1000)
    title: str | None = None
    tags: list[TagStr] | None = None


class AutoClusterArgs(ConfirmArgs):
    action: Literal["auto_cluster"]
    min_similarity: float | None = Field(default=None, gt=0, le=2)
    min_members: int | None = Field(default=None, ge=2, le=1000)


SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Clusters. graph {cwd?, status?, limit?, offset?} → nodes in items, edges beside them; "
        "cluster {thought_ids, title?, tags?, cwd?} creates a cluster thought; auto_cluster "
        "{min_similarity?, min_members?} groups similar thoughts across all projects: previews, then "
        "confirm=true+preview_token."
    ),
    actions=(
        Action("graph", GraphArgs, crystallize_handlers.graph, Role.reader),
        Action("cluster", ClusterArgs, crystallize_handlers.cluster, Role.writer),
        Action("auto_cluster", AutoClusterArgs, crystallize_handlers.auto_cluster, Role.writer),
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
