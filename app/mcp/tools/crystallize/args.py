"""memory_crystallize argument models: graph, cluster, auto_cluster."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.mcp.tools.common import ConfirmArgs, CwdArgs, IdList, ShapeArgs, TagList, TextStr

TOOL = "memory_crystallize"
StatusFilter = Literal["draft", "active", "archived", "all"]


class GraphArgs(CwdArgs, ShapeArgs):
    action: Literal["graph"]
    status: StatusFilter | None = Field(default=None, description="default active + draft")
    limit: int | None = Field(default=None, ge=1, le=1000, description="max nodes (default 500)")
    offset: int = Field(default=0, ge=0, description="nodes to skip")


class ClusterArgs(CwdArgs):
    action: Literal["cluster"]
    thought_ids: IdList = Field(description="cluster members")
    title: TextStr | None = Field(default=None, description="cluster thought's content")
    tags: TagList | None = Field(default=None, description="cluster thought's tags")


class AutoClusterArgs(ConfirmArgs):
    action: Literal["auto_cluster"]
    min_similarity: float | None = Field(default=None, gt=0, le=2, description="max cosine distance to join")
    min_members: int | None = Field(default=None, ge=2, le=1000, description="smallest cluster (default: setting)")
