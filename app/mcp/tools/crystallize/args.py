"""memory_crystallize argument models: graph, cluster, auto_cluster."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.mcp.tools.common import ConfirmArgs, CwdArgs, IdStr, ShapeArgs, TagStr

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
