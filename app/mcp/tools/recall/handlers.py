"""memory_recall handlers: search, get, context, chain, clusters, list."""

from __future__ import annotations

from typing import Any

from app.errors import bad_request
from app.mcp.calls import CallContext, ToolAnswer
from app.mcp.envelope import Meta, collection, single
from app.mcp.shaping import ThoughtShaper, shape_edge
from app.mcp.tools.common import ShapeArgs, uuid_arg
from app.mcp.tools.paging import thought_page
from app.mcp.tools.recall.args import ChainArgs, ClustersArgs, ContextArgs, GetArgs, ListArgs, SearchArgs
from app.services.recall import operations as recall_operations
from app.services.recall.graph import ChainStep
from app.services.recall.operations import (
    ContextRequest,
    ContextResult,
    GetResult,
    SearchResult,
)
from app.services.recall.requests import SearchRequest
from app.services.recall.search import Hit, SearchOutcome
from app.services.recall.thoughts import Neighbour
from app.services.scope import ReadScope


def _shaper(args: ShapeArgs, links: dict[Any, Any] | None) -> ThoughtShaper:
    return ThoughtShaper(compact=args.compact is not False, fields=args.fields, url_links=links)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def search_item(hit: Hit, shape: ThoughtShaper, full: bool) -> dict[str, Any]:
    """Safety annotations always show; ranking metadata only behind compact=false."""
    item: dict[str, Any] = {"thought": shape(hit.thought)}
    if full or hit.standing != "current":
        item["standing"] = hit.standing
    if hit.superseded_by:
        item["superseded_by"] = [str(thought_id) for thought_id in hit.superseded_by]
    if hit.contradicted_by:
        item["contradicted_by"] = [str(thought_id) for thought_id in hit.contradicted_by]
    if full or hit.low_confidence:
        item["low_confidence"] = hit.low_confidence
    if full:
        scores = {
            "similarity": _round(hit.similarity),
            "distance": _round(hit.distance),
            "rrf_score": _round(hit.rrf_score),
            "bm25_score": _round(hit.bm25_score),
            "relevance": _round(hit.relevance),
            "recency_score": _round(hit.recency_score),
            "final_score": _round(hit.final_score),
        }
        item["scores"] = {key: value for key, value in scores.items() if value is not None}
        item["match_source"] = list(hit.match_source)
    return item


def _meta(action: str, scope: ReadScope, outcome: SearchOutcome) -> Meta:
    return Meta(
        action,
        scope=scope.scope,
        warnings=[*scope.warnings, *outcome.warnings],
        degraded=outcome.degraded,
        reason=outcome.reason,
    )


async def _run_search(args: SearchArgs | ClustersArgs, ctx: CallContext, request: SearchRequest) -> ToolAnswer:
    # shaped inside the read's transaction: an answer that fails to build counts no hit
    return await recall_operations.search_answered(ctx.app, request, lambda found: search_answer(args, request, found))


def search_answer(args: SearchArgs | ClustersArgs, request: SearchRequest, found: SearchResult) -> ToolAnswer:
    outcome = found.outcome
    shape, full = _shaper(args, found.links), args.compact is False
    items = [search_item(hit, shape, full) for hit in outcome.hits]
    if request.group_by_cluster:
        items = _group_by_cluster(outcome.hits, items, found.clusters)
    meta = _meta(args.action, found.scope, outcome)
    answer = collection(meta, items, total=outcome.total, filtered_out=outcome.filtered_out)
    answer["meta"]["counts"]["returned"] = len(outcome.hits)
    return ToolAnswer(answer)


def _group_by_cluster(hits: list[Hit], items: list[dict[str, Any]], clusters: dict[Any, Any]) -> list[dict[str, Any]]:
    """Un-clustered hits first, then one group per cluster in order of its first hit."""
    loose: list[dict[str, Any]] = []
    groups: dict[Any, dict[str, Any]] = {}
    for hit, item in zip(hits, items, strict=True):
        cluster = clusters.get(hit.thought.id)
        if cluster is None:
            loose.append(item)
            continue
        cluster_id, content = cluster
        group = groups.setdefault(cluster_id, {"cluster": {"id": str(cluster_id), "content": content}, "items": []})
        group["items"].append(item)
    return [*loose, *groups.values()]


async def search_thoughts(args: SearchArgs, ctx: CallContext) -> ToolAnswer:
    return await _run_search(args, ctx, args)  # the arguments are the service's request


async def search_clusters(args: ClustersArgs, ctx: CallContext) -> ToolAnswer:
    if args.is_cluster is False:
        raise bad_request(
            "Invalid argument 'is_cluster' for memory_recall action=clusters: false contradicts the action, which "
            "searches cluster thoughts only — drop is_cluster, or use action=search with is_cluster=false",
            argument="is_cluster",
        )
    return await _run_search(args, ctx, SearchRequest.of_clusters(args))


def step_items(rows: list[Neighbour], shape: ThoughtShaper) -> list[dict[str, Any]]:
    """Each edge with the thought at its other end (`get` with edges, `context`; the console's thought page)."""
    return [{"edge": shape_edge(row.edge), "thought": shape(row.thought)} for row in rows]


def chain_items(rows: list[ChainStep], shape: ThoughtShaper) -> list[dict[str, Any]]:
    """Each chain step: its edge, the thought it reaches and how far (`chain`; the console's thought page)."""
    return [
        {
            "edge": shape_edge(step.neighbour.edge),
            "thought": shape(step.neighbour.thought),
            "depth": step.depth,
        }
        for step in rows
    ]


async def context(args: ContextArgs, ctx: CallContext) -> ToolAnswer:
    if (args.query is None) == (args.thought_id is None):
        raise bad_request(
            "memory_recall action=context needs exactly one of 'query' (best match + neighbourhood) or "
            "'thought_id' (that thought + neighbourhood)"
        )
    request = ContextRequest(
        query=args.query,
        thought_id=uuid_arg(args.thought_id, "thought_id") if args.thought_id is not None else None,
        cwd=args.cwd,
        max_edges=args.max_degree or ctx.app.settings.graph.max_degree,
        min_relevance=args.min_relevance,
        include_url_links=args.include_url_links,
    )
    return await recall_operations.context_answered(ctx.app, request, lambda found: _context_answer(args, found))


def _context_answer(args: ContextArgs, found: ContextResult) -> ToolAnswer:
    scope = found.scope
    meta = Meta(
        "context",
        scope=scope.scope if scope else None,
        warnings=scope.warnings if scope else [],
        degraded=found.degraded,
    )
    if found.thought is None:
        meta.reason = "no_match"
        return ToolAnswer(single(meta, None))
    shape = _shaper(args, found.links)
    item = {
        "thought": shape(found.thought),
        "chain": {"upstream": step_items(found.upstream, shape), "downstream": step_items(found.downstream, shape)},
    }
    return ToolAnswer(single(meta, item))


async def chain(args: ChainArgs, ctx: CallContext) -> ToolAnswer:
    thought_id = uuid_arg(args.thought_id, "thought_id")
    depth = args.max_degree or ctx.app.settings.graph.max_degree
    found = await recall_operations.chain(ctx.app, thought_id, depth, args.include_url_links)
    shape = _shaper(args, found.links)
    item = {
        "thought": shape(found.thought),
        "upstream": chain_items(found.upstream, shape),
        "downstream": chain_items(found.downstream, shape),
    }
    return ToolAnswer(single(Meta("chain"), item))


async def get_thought(args: GetArgs, ctx: CallContext) -> ToolAnswer:
    thought_id = uuid_arg(args.thought_id, "thought_id")
    return await recall_operations.get_answered(
        ctx.app, thought_id, args.include_edges, args.include_url_links, lambda read: _get_answer(args, read)
    )


def _get_answer(args: GetArgs, read: GetResult) -> ToolAnswer:
    shape = _shaper(args, read.links)
    item = shape(read.found.thought)
    if args.include_edges:
        item["upstream"] = step_items(read.found.upstream, shape)
        item["downstream"] = step_items(read.found.downstream, shape)
    return ToolAnswer(single(Meta("get"), item))


async def list_thoughts(args: ListArgs, ctx: CallContext) -> ToolAnswer:
    return await thought_page(ctx, "list", args, args.compact is not False, args.fields)
