"""memory_recall's search and page requests, declared once, with their defaults, bounds and descriptions.

The tool's argument models derive from them (`app/mcp/tools/recall/args.py` adds `action` and the output shape), the
operations read them (`app.services.recall.operations.search`), and the search service ranks by their `Ranking` and
`Reranking` parts (`app.services.recall.search.SearchQuery` derives from both). A new search argument is one field
here, its use, its test and its row in mcp-tools.md; the field's description is what tools/list shows.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from app.config import SearchSettings
from app.services.kinds import CwdRequest, LinksRequest, QueryStr, TagStr

StatusFilter = Literal["draft", "active", "archived", "all"]
SupersessionMode = Literal["flag", "suppress", "off"]
ContradictionMode = Literal["flag", "off"]

QUERY = "search text or thought id"
STATUS = "default active (list: all)"
TAG = "only thoughts with this tag"
IS_CLUSTER = "true: clusters only; false: none"
LIMIT = "default 10 (list: 50)"
# The shipped default (tools/list is the same for every deployment): "default 0.4".
MIN_RELEVANCE = f"gate for vector-only hits (default {SearchSettings().default_min_relevance}; 0 = off)"


class Ranking(BaseModel):
    """How the two legs are ranked and gated: every ranked read (search, clusters) takes these."""

    hybrid: bool = Field(default=True, description="false = vector leg only")
    limit: int = Field(default=10, ge=1, le=100, description=LIMIT)
    min_relevance: float | None = Field(default=None, ge=0, le=1, description=MIN_RELEVANCE)  # None: the setting


class Reranking(BaseModel):
    """What search adds to the fused order: the recency boost and how contested thoughts stand."""

    recency_weight: float = Field(default=0, ge=0, le=1, description="boost for recent thoughts")
    recency_half_life_days: float = Field(default=30, ge=1, le=3650, description="age that halves the boost")
    supersession_mode: SupersessionMode = Field(default="flag", description="superseded hits")
    contradiction_mode: ContradictionMode = Field(default="flag", description="contradicted hits")


class ClustersRequest(Ranking, LinksRequest, CwdRequest):
    """A ranked read of thoughts: what `clusters` takes (it searches cluster thoughts only)."""

    query: QueryStr = Field(description=QUERY)
    status: StatusFilter = Field(default="active", description=STATUS)
    tag: TagStr | None = Field(default=None, description=TAG)
    is_cluster: bool | None = Field(default=None, description=IS_CLUSTER)


class SearchRequest(Reranking, ClustersRequest):
    """One search (`memory_recall action=search`, the console's search page)."""

    min_importance: float | None = Field(default=None, ge=0, le=1, description="importance floor")
    group_by_cluster: bool = Field(default=False, description="group hits by cluster")

    @classmethod
    def of_clusters(cls, request: ClustersRequest) -> SearchRequest:
        """The search a clusters request runs: cluster thoughts only, search's other arguments at their defaults."""
        return cls.model_validate({**request.model_dump(include=set(ClustersRequest.model_fields)), "is_cluster": True})


class PageRequest(LinksRequest, CwdRequest):
    """A page of the thought inventory, newest first: what `memory_recall list` takes. `memory_reflect timeline`
    describes its paging arguments its own way and reaches the same request through `of`."""

    status: StatusFilter = Field(default="all", description=STATUS)
    tag: TagStr | None = Field(default=None, description=TAG)
    is_cluster: bool | None = Field(default=None, description=IS_CLUSTER)
    limit: int = Field(default=50, ge=1, le=500, description=LIMIT)
    offset: int = Field(default=0, ge=0, description="list: rows to skip")

    @classmethod
    def of(cls, arguments: BaseModel) -> PageRequest:
        """The page another tool's arguments name, read by field name (a field they lack keeps its default)."""
        return cls.model_validate(arguments, from_attributes=True)
