"""The thought reads of memory_recall (and memory_reflect timeline) as units of work: search and
clusters (`search`), `context`, `get`, `chain`, a thought's page (`neighbourhood`: its edges and chain in one
read) and the paged inventory (`page`).

A request names what to read; the service owns the rest — the query embedding started beside the
transaction, the read scope, the thought filter and how the vector leg reads it, the relevance
calibration of the active model, the hits it counts, and the links or clusters the answer attaches.
The adapter shapes; a read that counts hits (search, clusters, context, get, neighbourhood) takes the adapter's
`answer` and builds it inside the transaction that counts them, so an answer that fails to build leaves no hit
(issue 22).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.records import ThoughtRecord, UrlLinkRecord
from app.db.replicas import on_replica
from app.db.repositories.projects import ProjectRepository
from app.db.repositories.search import SearchRepository
from app.db.repositories.thoughts import STANDINGS as STANDINGS  # `page`'s browse filters, for the adapters
from app.db.repositories.thoughts import Narrowing as Narrowing
from app.db.repositories.thoughts import ThoughtFilter, ThoughtRepository, VectorScan, status_filter
from app.db.repositories.url_links import UrlLinkRepository
from app.errors import not_found
from app.services.context import AppContext
from app.services.recall.graph import ChainStep, GraphService
from app.services.recall.hits import HitService
from app.services.recall.id_lookup import IdQuery, parse_id_query
from app.services.recall.project_graph import ProjectGraph, most_connected
from app.services.recall.relevance import Calibration
from app.services.recall.requests import PageRequest, Ranking, Reranking, SearchRequest
from app.services.recall.search import QueryVector, SearchOutcome, SearchQuery, SearchService
from app.services.recall.thoughts import Neighbour, RecallService, ThoughtWithEdges
from app.services.scope import ReadScope, resolve_project_scope, resolve_read_scope

Links = dict[uuid.UUID, list[UrlLinkRecord]]
RANKED = set(Ranking.model_fields) | set(Reranking.model_fields)
Answered = TypeVar("Answered")


def _as_is(found: Any) -> Any:
    return found


def calibration(app: AppContext) -> Calibration:
    """The configured floors, else the active model's measured ones."""
    profile = app.embedding.profile
    floors = app.settings.search.confidence
    unrelated = (
        floors.unrelated_floor if floors.unrelated_floor is not None else (profile.unrelated_floor if profile else 0.8)
    )
    strong = floors.vector_floor if floors.vector_floor is not None else (profile.vector_floor if profile else 0.9)
    return Calibration(unrelated, strong)


def search_service(
    session: AsyncSession, app: AppContext, count_hits: bool = True, hits: HitService | None = None
) -> SearchService:
    if hits is None and count_hits:
        hits = HitService(session, app.settings.primer.promote_threshold)
    return SearchService(session, app.embedding, calibration(app), app.settings.search, hits if count_hits else None)


class _DeferredHits(HitService):
    """The hits of a read on a replica, which cannot write them: collected, then counted on the primary."""

    def __init__(self, session: AsyncSession, promote_threshold: int) -> None:
        super().__init__(session, promote_threshold)
        self.thoughts: list[ThoughtRecord] = []

    async def record(self, thoughts: Iterable[ThoughtRecord]) -> None:
        self.thoughts.extend(thoughts)


@asynccontextmanager
async def _reading(app: AppContext) -> AsyncIterator[tuple[AsyncSession, HitService]]:
    """A read's unit of work (on a replica when one has caught up, app.db.replicas) and where its hits go: the
    same transaction on the primary; on a replica, a transaction on the primary once the answer is built."""
    threshold = app.settings.primer.promote_threshold
    async with app.db.reading() as session:
        if not on_replica(session):
            yield session, HitService(session, threshold)
            return
        deferred = _DeferredHits(session, threshold)
        yield session, deferred
    if deferred.thoughts:
        async with app.db.unit_of_work() as primary:
            await HitService(primary, threshold).record(deferred.thoughts)


async def _scope(session: AsyncSession, cwd: str | None, project_id: uuid.UUID | None) -> ReadScope:
    projects = ProjectRepository(session)
    return await resolve_project_scope(projects, project_id) if project_id else await resolve_read_scope(projects, cwd)


def scoped_filter(scope: ReadScope, status: str, **filters: Any) -> ThoughtFilter:
    """The read filter of a scope: its project, and how the vector leg reads that project."""
    project = scope.project
    return ThoughtFilter(
        project_id=project.id if project else None,
        statuses=status_filter(status),
        vector_scan=VectorScan.of(project),
        **filters,
    )


async def _links(session: AsyncSession, wanted: bool, ids: list[uuid.UUID]) -> Links | None:
    return await UrlLinkRepository(session).for_thoughts(ids) if wanted else None


# ---------------------------------------------------------------- search, clusters


@dataclass(frozen=True)
class SearchResult:
    scope: ReadScope
    outcome: SearchOutcome
    links: Links | None
    clusters: dict[Any, Any]  # hit id → (cluster id, cluster content), when grouped


def search_query(
    request: SearchRequest, where: ThoughtFilter, vector: QueryVector | None, id_query: IdQuery | None
) -> SearchQuery:
    """What the pipeline runs for a request: its Ranking and Reranking fields as sent, its scope's filter."""
    ranked = request.model_dump(include=RANKED)
    return SearchQuery(text=request.query, where=where, vector=vector, id_query=id_query, id_parsed=True, **ranked)


async def search(app: AppContext, request: SearchRequest, count_hits: bool = True) -> SearchResult:
    """`count_hits=False` for a search that picks a thought to act on (the console's thought picker): choosing is
    not recalling."""
    return await search_answered(app, request, _as_is, count_hits)


async def search_answered(
    app: AppContext,
    request: SearchRequest,
    answer: Callable[[SearchResult], Answered],
    count_hits: bool = True,
    project_id: uuid.UUID | None = None,
) -> Answered:
    """One search: an id-shaped query is looked up (it embeds only if the lookup misses); any other query's
    embedding runs while the transaction resolves the scope and runs the lexical leg. `answer` runs before the
    commit that counts the hits. `project_id` scopes it to that project instead of `request.cwd` (the console,
    whose projects need not have a path)."""
    id_query = parse_id_query(request.query)
    vector = QueryVector(app.embedding, request.query)
    if id_query is None:
        vector.start()
    try:
        async with _reading(app) as (session, hits):
            scope = await _scope(session, request.cwd, project_id)
            where = scoped_filter(
                scope,
                request.status,
                tag=request.tag,
                is_cluster=request.is_cluster,
                min_importance=request.min_importance,
            )
            query = search_query(request, where, vector, id_query)
            outcome = await search_service(session, app, count_hits, hits=hits).search(query)
            ids = [hit.thought.id for hit in outcome.hits]
            links = await _links(session, request.include_url_links, ids)
            clusters = await SearchRepository(session).clusters_of(ids) if request.group_by_cluster else {}
            return answer(SearchResult(scope, outcome, links, clusters))
    finally:
        vector.cancel()


# ---------------------------------------------------------------- context


@dataclass(frozen=True)
class ContextRequest:
    """Exactly one of `query` (best match + neighbourhood) or `thought_id` (that thought + neighbourhood)."""

    query: str | None
    thought_id: uuid.UUID | None
    cwd: str | None
    max_edges: int
    min_relevance: float | None = None
    include_url_links: bool = False


@dataclass(frozen=True)
class ContextResult:
    thought: ThoughtRecord | None  # None: the query matched nothing
    upstream: list[Neighbour]
    downstream: list[Neighbour]
    scope: ReadScope | None  # a query's read scope; None for a thought_id
    degraded: bool
    links: Links | None


async def context(app: AppContext, request: ContextRequest) -> ContextResult:
    return await context_answered(app, request, _as_is)


async def context_answered(
    app: AppContext, request: ContextRequest, answer: Callable[[ContextResult], Answered]
) -> Answered:
    """The best match (or the given thought) and its neighbourhood; `answer` runs before the commit of the hits."""
    scope: ReadScope | None = None
    degraded = False
    vector = QueryVector(app.embedding, request.query or "")
    if request.query is not None:
        vector.start()
    try:  # a failed call must not leave its query embedding running
        async with _reading(app) as (session, hits):
            if request.thought_id is not None:
                found = await ThoughtRepository(session).get(request.thought_id)
                if found is None:
                    raise not_found(f"Thought {request.thought_id} not found")
                thought = found
            else:
                scope = await resolve_read_scope(ProjectRepository(session), request.cwd)
                gate = request.min_relevance if request.min_relevance is not None else 0.0
                query = SearchQuery(
                    text=request.query or "",
                    where=scoped_filter(scope, "active"),
                    limit=1,
                    min_relevance=gate,
                    vector=vector,
                )
                outcome = await search_service(session, app, count_hits=False).search(query)
                degraded = outcome.degraded
                if not outcome.hits:
                    return answer(ContextResult(None, [], [], scope, degraded, None))
                thought = outcome.hits[0].thought
            upstream, downstream = await GraphService(session).neighbourhood(thought.id, request.max_edges)
            neighbours = [n.thought for n in [*upstream, *downstream]]
            # One sorted batch for the best match and its neighbours: two batches could lock in opposite orders.
            await hits.record([thought, *neighbours])
            links = await _links(session, request.include_url_links, [thought.id, *(n.id for n in neighbours)])
            return answer(ContextResult(thought, upstream, downstream, scope, degraded, links))
    finally:
        vector.cancel()


# ---------------------------------------------------------------- get, chain


@dataclass(frozen=True)
class GetResult:
    found: ThoughtWithEdges
    links: Links | None


async def get(app: AppContext, thought_id: uuid.UUID, include_edges: bool, include_url_links: bool) -> GetResult:
    return await get_answered(app, thought_id, include_edges, include_url_links, _as_is)


async def get_answered(
    app: AppContext,
    thought_id: uuid.UUID,
    include_edges: bool,
    include_url_links: bool,
    answer: Callable[[GetResult], Answered],
) -> Answered:
    """One thought (and its edges); `answer` runs before the commit of its hit."""
    async with _reading(app) as (session, hits):
        found = await RecallService(session, hits).get(thought_id, include_edges, app.settings.graph.max_degree)
        ids = [found.thought.id, *(n.thought.id for n in [*found.upstream, *found.downstream])]
        links = await _links(session, include_url_links, ids)
        return answer(GetResult(found, links))


async def get_many(app: AppContext, thought_ids: list[uuid.UUID]) -> dict[uuid.UUID, ThoughtRecord]:
    """The thoughts that exist among these, in one query, counting no hit: the console shows them beside a review
    queue or a preview, which is not recalling them (`get` counts one per call)."""
    async with app.db.autocommit() as session:
        return await ThoughtRepository(session).get_many(thought_ids)


CHAIN_CAP = 200


@dataclass(frozen=True)
class ChainResult:
    thought: ThoughtRecord
    upstream: list[ChainStep]
    downstream: list[ChainStep]
    links: Links | None


async def chain(app: AppContext, thought_id: uuid.UUID, max_depth: int, include_url_links: bool) -> ChainResult:
    """The parent/develops chain both ways, `max_depth` steps at most, CHAIN_CAP thoughts at most."""
    async with app.db.reading() as session:
        graph = GraphService(session)
        thought = await graph.thoughts.get(thought_id)
        if thought is None:
            raise not_found(f"Thought {thought_id} not found")
        upstream, downstream = await graph.chain(thought_id, max_depth, CHAIN_CAP)
        ids = [thought_id, *(s.neighbour.thought.id for s in [*upstream, *downstream])]
        links = await _links(session, include_url_links, ids)
    return ChainResult(thought, upstream, downstream, links)


@dataclass(frozen=True)
class Neighbourhood:
    """A thought as its page shows it: the record, its edges both ways with the other end's record (as `get`
    with edges reads them), and its parent/develops chain both ways (as `chain` walks it)."""

    thought: ThoughtRecord
    upstream: list[Neighbour]  # edges into the thought
    downstream: list[Neighbour]  # edges out of it
    ancestors: list[ChainStep]
    descendants: list[ChainStep]


async def neighbourhood(
    app: AppContext, thought_id: uuid.UUID, answer: Callable[[Neighbourhood], Answered]
) -> Answered:
    """One thought, its one-hop edges and its chain (`settings.graph.max_degree` edges and steps, CHAIN_CAP thoughts
    a side), in one read: the thought and its neighbours count a hit each, as `get` counts them; the chain counts
    none, as `chain` counts none. `answer` runs before the commit of the hits."""
    max_degree = app.settings.graph.max_degree
    async with _reading(app) as (session, hits):
        found = await RecallService(session, hits).get(thought_id, True, max_degree)
        ancestors, descendants = await GraphService(session).chain(thought_id, max_degree, CHAIN_CAP)
        return answer(Neighbourhood(found.thought, found.upstream, found.downstream, ancestors, descendants))


# ---------------------------------------------------------------- the paged inventory


@dataclass(frozen=True)
class PageResult:
    scope: ReadScope
    rows: list[ThoughtRecord]
    total: int  # every row the filters match, ignoring the page; with `total_capped`, fewer than match
    links: Links | None
    total_capped: bool = False  # more rows match than `total` (a page read with `total_cap`)


async def page(
    app: AppContext,
    request: PageRequest,
    project_id: uuid.UUID | None = None,
    narrowing: Narrowing | None = None,
    total_cap: int | None = None,
) -> PageResult:
    """Newest first. `project_id` scopes the page to that project instead of `request.cwd` (as in
    `search_answered`); `narrowing` adds the console's browse filters (dates, edge type, standing). `total_cap`
    (the console's pages) counts the total only up to max(total_cap, offset + limit) rows, exact below that and
    `total_capped` above; without it (the tools' answers) the total is exact."""
    async with app.db.reading() as session:
        scope = await _scope(session, request.cwd, project_id)
        where = ThoughtFilter(
            project_id=scope.project.id if scope.project else None,
            statuses=status_filter(request.status),
            tag=request.tag,
            is_cluster=request.is_cluster,
        )
        thoughts = ThoughtRepository(session)
        capped = False
        if total_cap is None:
            rows, total = await thoughts.page_with_total(where, request.limit, request.offset, narrowing)
        else:
            rows, total, capped = await thoughts.page_with_capped_total(
                where, request.limit, request.offset, total_cap, narrowing
            )
        links = await _links(session, request.include_url_links, [row.id for row in rows])
    return PageResult(scope, list(rows), total, links, capped)


async def project_graph(app: AppContext, project_id: uuid.UUID, limit: int, offset: int) -> ProjectGraph:
    """A page of a project's most connected live thoughts and the edges among them (the console's /ui/graph), as
    the caller may see them."""
    async with app.db.autocommit() as session:
        return await most_connected(session, project_id, limit, offset)
