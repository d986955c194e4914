"""memory_recall argument models: search, get, context, chain, clusters, list."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from app.mcp.tools.common import CwdArgs, IdStr, LinksArgs, ShapeArgs, TagStr

TOOL = "memory_recall"
QueryStr = Annotated[str, StringConstraints(min_length=1, max_length=2000)]
StatusFilter = Literal["draft", "active", "archived", "all"]


class ReadArgs(ShapeArgs, LinksArgs):
    pass


class SearchArgs(ReadArgs, CwdArgs):
    action: Literal["search"]
    query: QueryStr
    hybrid: bool = True
    status: StatusFilter = "active"
    tag: TagStr | None = None
    is_cluster: bool | None = None
    group_by_cluster: bool = False
    min_importance: float | None = Field(default=None, ge=0, le=1)
    limit: int = Field(default=10, ge=1, le=100)
    min_relevance: float | None = Field(default=None, ge=0, le=1)
    recency_weight: float = Field(default=0, ge=0, le=1)
    recency_half_life_days: float = Field(default=30, ge=1, le=3650)
    supersession_mode: Literal["flag", "suppress", "off"] = "flag"
    contradiction_mode: Literal["flag", "off"] = "flag"


class GetArgs(ReadArgs):
    action: Literal["get"]
    thought_id: IdStr
    include_edges: bool = False


class ContextArgs(ReadArgs, CwdArgs):
    action: Literal["context"]
    query: QueryStr | None = None
    thought_id: IdStr | None = None
    max_degree: int | None = Field(default=None, ge=1, le=500)
    min_relevance: float | None = Field(default=None, ge=0, le=1)


class ChainArgs(ReadArgs):
    action: Literal["chain"]
    thought_id: IdStr
    max_degree: int | None = Field(default=None, ge=1, le=500)


class ClustersArgs(ReadArgs, CwdArgs):
    action: Literal["clusters"]
    query: QueryStr
    hybrid: bool = True
    status: StatusFilter = "active"
    tag: TagStr | None = None
    is_cluster: bool | None = None
    limit: int = Field(default=10, ge=1, le=100)
    min_relevance: float | None = Field(default=None, ge=0, le=1)


class ListArgs(ReadArgs, CwdArgs):
    action: Literal["list"]
    status: StatusFilter = "all"
    tag: TagStr | None = None
    is_cluster: bool | None = None
    limit: int = Field(default=50, ge=1, le=500)
    offset: int = Field(default=0, ge=0)
