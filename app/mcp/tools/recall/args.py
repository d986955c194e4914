"""memory_recall argument models: search, get, context, chain, clusters, list.

search, clusters and list take their service's request models (app.services.recall.requests), adding only `action` and
the output shape: an argument, its default, bounds and description are declared there once."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.mcp.tools.common import CwdArgs, IdStr, LinksArgs, QueryStr, ShapeArgs
from app.services.recall.requests import MIN_RELEVANCE, QUERY, ClustersRequest, PageRequest, SearchRequest

TOOL = "memory_recall"
THOUGHT_ID = "thought id"
MAX_DEGREE = "edges per traversal step"


class ReadArgs(ShapeArgs, LinksArgs):
    pass


class SearchArgs(SearchRequest, ReadArgs, CwdArgs):
    action: Literal["search"]


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


class ClustersArgs(ClustersRequest, ReadArgs, CwdArgs):
    action: Literal["clusters"]


class ListArgs(PageRequest, ReadArgs, CwdArgs):
    action: Literal["list"]
