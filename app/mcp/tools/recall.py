"""memory_recall: search, get, context, chain, clusters, list (compact by default)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from app.db.repositories.url_links import UrlLinkRepository
from app.mcp.envelope import Meta, single
from app.mcp.registry import Action, CallContext, ToolAnswer, ToolSpec
from app.mcp.shaping import ThoughtShaper, shape_edge
from app.mcp.tools import recall_search
from app.mcp.tools.common import (
    COMMON_FIELD_DOCS,
    READ_ONLY,
    CwdArgs,
    IdStr,
    LinksArgs,
    ShapeArgs,
    TagStr,
    uuid_arg,
)
from app.mcp.tools.paging import PageRequest, thought_page
from app.services.hits import HitService
from app.services.recall import Neighbour, RecallService

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


def shaper(args: ReadArgs, links: dict[Any, Any] | None) -> ThoughtShaper:
    compact = True if args.compact is None else args.compact
    return ThoughtShaper(compact=compact, fields=args.fields, url_links=links)


def _neighbours(rows: list[Neighbour], shape: ThoughtShaper) -> list[dict[str, Any]]:
    return [{"edge": shape_edge(row.edge), "thought": shape(row.thought)} for row in rows]


async def get_thought(args: GetArgs, ctx: CallContext) -> ToolAnswer:
    thought_id = uuid_arg(args.thought_id, "thought_id")
    async with ctx.app.db.unit_of_work() as session:
        hits = HitService(session, ctx.app.limits.primer_threshold)
        found = await RecallService(session, hits).get(thought_id, args.include_edges, ctx.app.limits.graph_max_degree)
        ids = [found.thought.id, *(n.thought.id for n in [*found.upstream, *found.downstream])]
        links = await UrlLinkRepository(session).for_thoughts(ids) if args.include_url_links else None
    shape = shaper(args, links)
    item = shape(found.thought)
    if args.include_edges:
        item["upstream"] = _neighbours(found.upstream, shape)
        item["downstream"] = _neighbours(found.downstream, shape)
    return ToolAnswer(single(Meta("get"), item))


async def list_thoughts(args: ListArgs, ctx: CallContext) -> ToolAnswer:
    request = PageRequest(
        "list",
        args.cwd,
        args.status,
        args.limit,
        args.offset,
        args.compact is not False,
        args.fields,
        args.include_url_links,
        args.tag,
        args.is_cluster,
    )
    return await thought_page(ctx, request)


SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Find and read thoughts (compact by default; compact=false adds scores). search {query} hybrid "
        "vector+full-text, an id or ≥13-hex id prefix resolves directly; get {thought_id, include_edges?}; "
        "context {query|thought_id} best match + neighbourhood; chain {thought_id} parent/develops chain; "
        "clusters {query} cluster thoughts only; list (paged inventory, status default all)."
    ),
    actions=(
        Action("search", SearchArgs, recall_search.search_thoughts),
        Action("get", GetArgs, get_thought),
        Action("context", ContextArgs, recall_search.context),
        Action("chain", ChainArgs, recall_search.chain),
        Action("clusters", ClustersArgs, recall_search.search_clusters),
        Action("list", ListArgs, list_thoughts),
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
