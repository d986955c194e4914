"""memory_recall argument models: search, get, context, chain, clusters, list."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.config import SearchSettings
from app.mcp.tools.common import CwdArgs, IdStr, LinksArgs, QueryStr, ShapeArgs, TagStr

TOOL = "memory_recall"
StatusFilter = Literal["draft", "active", "archived", "all"]

QUERY = "search text or thought id"
STATUS = "default active (list: all)"
TAG = "only thoughts with this tag"
IS_CLUSTER = "true: clusters only; false: none"
LIMIT = "default 10 (list: 50)"
# The shipped default (tools/list is the same for every deployment): "default 0.4".
MIN_RELEVANCE = f"gate for vector-only hits (default {SearchSettings().default_min_relevance}; 0 = off)"
THOUGHT_ID = "thought id"
MAX_DEGREE = "edges per traversal step"


class ReadArgs(ShapeArgs, LinksArgs):
    pass


class SearchArgs(ReadArgs, CwdArgs):
    action: Literal["search"]
    query: QueryStr = Field(description=QUERY)
    hybrid: bool = Field(default=True, description="false = vector leg only")
    status: StatusFilter = Field(default="active", description=STATUS)
    tag: TagStr | None = Field(default=None, description=TAG)
    is_cluster: bool | None = Field(default=None, description=IS_CLUSTER)
    group_by_cluster: bool = Field(default=False, description="group hits by cluster")
    min_importance: float | None = Field(default=None, ge=0, le=1, description="importance floor")
    limit: int = Field(default=10, ge=1, le=100, description=LIMIT)
    min_relevance: float | None = Field(default=None, ge=0, le=1, description=MIN_RELEVANCE)
    recency_weight: float = Field(default=0, ge=0, le=1, description="boost for recent thoughts")
    recency_half_life_days: float = Field(default=30, ge=1, le=3650, description="age that halves the boost")
    supersession_mode: Literal["flag", "suppress", "off"] = Field(default="flag", description="superseded hits")
    contradiction_mode: Literal["flag", "off"] = Field(default="flag", description="contradicted hits")


class GetArgs(ReadArgs):
    action: Literal["get"]
    thought_id: IdStr = Field(description=THOUGHT_ID)
    include_edges: bool = Field(default=False, description="add upstream/downstream")


class ContextArgs(ReadArgs, CwdArgs):
    action: Literal["context"]
    query: QueryStr | None = Field(default=None, description=QUERY)
    thought_id: IdStr | None = Field(default=None, description=THOUGHT_ID)
    max_degree: int | None = Field(default=None, ge=1, le=500, description=MAX_DEGREE)
    min_relevance: float | None = Field(default=None, ge=0, le=1, description=MIN_RELEVANCE)


class ChainArgs(ReadArgs):
    action: Literal["chain"]
    thought_id: IdStr = Field(description=THOUGHT_ID)
    max_degree: int | None = Field(default=None, ge=1, le=500, description=MAX_DEGREE)


class ClustersArgs(ReadArgs, CwdArgs):
    action: Literal["clusters"]
    query: QueryStr = Field(description=QUERY)
    hybrid: bool = Field(default=True, description="false = vector leg only")
    status: StatusFilter = Field(default="active", description=STATUS)
    tag: TagStr | None = Field(default=None, description=TAG)
    is_cluster: bool | None = Field(default=None, description=IS_CLUSTER)
    limit: int = Field(default=10, ge=1, le=100, description=LIMIT)
    min_relevance: float | None = Field(default=None, ge=0, le=1, description=MIN_RELEVANCE)


class ListArgs(ReadArgs, CwdArgs):
    action: Literal["list"]
    status: StatusFilter = Field(default="all", description=STATUS)
    tag: TagStr | None = Field(default=None, description=TAG)
    is_cluster: bool | None = Field(default=None, description=IS_CLUSTER)
    limit: int = Field(default=50, ge=1, le=500, description=LIMIT)
    offset: int = Field(default=0, ge=0, description="list: rows to skip")
