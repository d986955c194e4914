"""memory_recall handlers: search, get, context, chain, clusters, list."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.repositories.projects import ProjectRepository
from app.db.repositories.search import SearchRepository
from app.db.repositories.thoughts import ThoughtFilter, ThoughtRepository, VectorScan, status_filter
from app.db.repositories.url_links import UrlLinkRepository
from app.errors import bad_request, not_found
from app.mcp.envelope import Meta, collection, single
from app.mcp.registry import CallContext, ToolAnswer
from app.mcp.shaping import ThoughtShaper, shape_edge
from app.mcp.tools.common import uuid_arg
from app.mcp.tools.paging import PageRequest, thought_page
from app.mcp.tools.recall.args import ChainArgs, ClustersArgs, ContextArgs, GetArgs, ListArgs, ReadArgs, SearchArgs
from app.services.graph import ChainStep, GraphService
from app.services.hits import HitService
from app.services.id_lookup import parse_id_query
from app.services.recall import Neighbour, RecallService
from app.services.relevance import Calibration
from app.services.scope import ReadScope, resolve_read_scope
from app.services.search import Hit, QueryVector, SearchOutcome, SearchQuery, SearchService

CHAIN_CAP = 200


def calibration(ctx: CallContext) -> Calibration:
    profile = ctx.app.embedding.profile
    limits = ctx.app.limits
    unrelated = (
        limits.unrelated_floor if limits.unrelated_floor is not None else (profile.unrelated_floor if profile else 0.8)
    )
    strong = limits.vector_floor if limits.vector_floor is not None else (profile.vector_floor if profile else 0.9)
    return Calibration(unrelated, strong)


def search_service(session: AsyncSession, ctx: CallContext, count_hits: bool = True) -> SearchService:
    hits = HitService(session, ctx.app.limits.primer_threshold) if count_hits else None
    limits = ctx.app.limits
    return SearchService(session, ctx.app.embedding, calibration(ctx), limits.default_min_relevance, hits, limits.bm25)


def _shaper(args: ReadArgs, links: dict[Any, Any] | None) -> ThoughtShaper:
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


async def _links(session: AsyncSession, args: ReadArgs, ids: list[Any]) -> dict[Any, Any] | None:
    return await UrlLinkRepository(session).for_thoughts(ids) if args.include_url_links else None


def _scoped(scope: ReadScope, status: str, **filters: Any) -> ThoughtFilter:
    """The read filter of a scope: its project, and how the vector leg reads that project."""
    project = scope.project
    return ThoughtFilter(
        project_id=project.id if project else None,
        statuses=status_filter(status),
        vector_scan=VectorScan.of(project),
        **filters,
    )


def _filter(args: SearchArgs | ClustersArgs, scope: ReadScope, is_cluster: bool | None) -> ThoughtFilter:
    return _scoped(
        scope, args.status, tag=args.tag, is_cluster=is_cluster, min_importance=getattr(args, "min_importance", None)
    )


def _query(args: SearchArgs | ClustersArgs, where: ThoughtFilter, vector: QueryVector) -> SearchQuery:
    return SearchQuery(
        text=args.query,
        where=where,
        limit=args.limit,
        hybrid=args.hybrid,
        min_relevance=args.min_relevance,
        recency_weight=getattr(args, "recency_weight", 0.0),
        recency_half_life_days=getattr(args, "recency_half_life_days", 30.0),
        supersession_mode=getattr(args, "supersession_mode", "flag"),
        contradiction_mode=getattr(args, "contradiction_mode", "flag"),
        vector=vector,
    )


def _meta(action: str, scope: ReadScope, outcome: SearchOutcome) -> Meta:
    return Meta(
        action,
        scope=scope.scope,
        warnings=[*scope.warnings, *outcome.warnings],
        degraded=outcome.degraded,
        reason=outcome.reason,
    )


async def _run_search(
    args: SearchArgs | ClustersArgs, ctx: CallContext, action: str, is_cluster: bool | None, group: bool
) -> ToolAnswer:
    vector = QueryVector(ctx.app.embedding, args.query)
    if parse_id_query(args.query) is None:  # an id-shaped query embeds only if its lookup misses
        vector.start()  # the embedding runs while the transaction resolves the scope and runs the lexical leg
    try:
        async with ctx.app.db.unit_of_work() as session:
            scope = await resolve_read_scope(ProjectRepository(session), args.cwd)
            query = _query(args, _filter(args, scope, is_cluster), vector)
            outcome = await search_service(session, ctx).search(query)
            ids = [hit.thought.id for hit in outcome.hits]
            links = await _links(session, args, ids)
            clusters = await SearchRepository(session).clusters_of(ids) if group else {}
    finally:
        vector.cancel()
    shape, full = _shaper(args, links), args.compact is False
    items = [search_item(hit, shape, full) for hit in outcome.hits]
    if group:
        items = _group_by_cluster(outcome.hits, items, clusters)
    meta = _meta(action, scope, outcome)
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
    return await _run_search(args, ctx, "search", args.is_cluster, args.group_by_cluster)


async def search_clusters(args: ClustersArgs, ctx: CallContext) -> ToolAnswer:
    if args.is_cluster is False:
        raise bad_request(
            "Invalid argument 'is_cluster' for memory_recall action=clusters: false contradicts the action, which "
            "searches cluster thoughts only — drop is_cluster, or use action=search with is_cluster=false"
        )
    return await _run_search(args, ctx, "clusters", True, False)


def _steps(rows: list[Neighbour], shape: ThoughtShaper) -> list[dict[str, Any]]:
    return [{"edge": shape_edge(row.edge), "thought": shape(row.thought)} for row in rows]


def _chain_steps(rows: list[ChainStep], shape: ThoughtShaper) -> list[dict[str, Any]]:
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
    max_edges = args.max_degree or ctx.app.limits.graph_max_degree
    scope: ReadScope | None = None
    degraded = False
    vector = QueryVector(ctx.app.embedding, args.query or "")
    if args.query is not None:
        vector.start()
    try:  # a failed call must not leave its query embedding running
        async with ctx.app.db.unit_of_work() as session:
            if args.thought_id is not None:
                thought_id = uuid_arg(args.thought_id, "thought_id")
                found = await ThoughtRepository(session).get(thought_id)
                if found is None:
                    raise not_found(f"Thought {thought_id} not found")
                thought = found
            else:
                scope = await resolve_read_scope(ProjectRepository(session), args.cwd)
                where = _scoped(scope, "active")
                gate = args.min_relevance if args.min_relevance is not None else 0.0
                query = SearchQuery(args.query or "", where, 1, min_relevance=gate, vector=vector)
                outcome = await search_service(session, ctx, count_hits=False).search(query)
                degraded = outcome.degraded
                if not outcome.hits:
                    meta = Meta(
                        "context",
                        scope=scope.scope,
                        warnings=scope.warnings,
                        degraded=degraded,
                        reason="no_match",
                    )
                    return ToolAnswer(single(meta, None))
                thought = outcome.hits[0].thought
            upstream, downstream = await GraphService(session).neighbourhood(thought.id, max_edges)
            neighbours = [n.thought.id for n in [*upstream, *downstream]]
            # One sorted batch for the best match and its neighbours: two batches could lock in opposite orders.
            await HitService(session, ctx.app.limits.primer_threshold).record([thought.id, *neighbours])
            links = await _links(session, args, [thought.id, *neighbours])
    finally:
        vector.cancel()
    shape = _shaper(args, links)
    item = {
        "thought": shape(thought),
        "chain": {"upstream": _steps(upstream, shape), "downstream": _steps(downstream, shape)},
    }
    meta = Meta(
        "context",
        scope=scope.scope if scope else None,
        warnings=scope.warnings if scope else [],
        degraded=degraded,
    )
    return ToolAnswer(single(meta, item))


async def chain(args: ChainArgs, ctx: CallContext) -> ToolAnswer:
    thought_id = uuid_arg(args.thought_id, "thought_id")
    depth = args.max_degree or ctx.app.limits.graph_max_degree
    async with ctx.app.db.unit_of_work() as session:
        graph = GraphService(session)
        thought = await graph.thoughts.get(thought_id)
        if thought is None:
            raise not_found(f"Thought {thought_id} not found")
        upstream, downstream = await graph.chain(thought_id, depth, CHAIN_CAP)
        ids = [thought_id, *(s.neighbour.thought.id for s in [*upstream, *downstream])]
        links = await _links(session, args, ids)
    shape = _shaper(args, links)
    item = {
        "thought": shape(thought),
        "upstream": _chain_steps(upstream, shape),
        "downstream": _chain_steps(downstream, shape),
    }
    return ToolAnswer(single(Meta("chain"), item))


async def get_thought(args: GetArgs, ctx: CallContext) -> ToolAnswer:
    thought_id = uuid_arg(args.thought_id, "thought_id")
    async with ctx.app.db.unit_of_work() as session:
        hits = HitService(session, ctx.app.limits.primer_threshold)
        found = await RecallService(session, hits).get(thought_id, args.include_edges, ctx.app.limits.graph_max_degree)
        ids = [found.thought.id, *(n.thought.id for n in [*found.upstream, *found.downstream])]
        links = await UrlLinkRepository(session).for_thoughts(ids) if args.include_url_links else None
    shape = _shaper(args, links)
    item = shape(found.thought)
    if args.include_edges:
        item["upstream"] = _steps(found.upstream, shape)
        item["downstream"] = _steps(found.downstream, shape)
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
