"""The two retrieval legs and the reads that annotate their candidates."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any, NamedTuple

from sqlalchemy import (
    Executable,
    Integer,
    Select,
    Text,
    and_,
    bindparam,
    case,
    cast,
    func,
    literal_column,
    null,
    or_,
    select,
    union_all,
)
from sqlalchemy.dialects.postgresql import REGCONFIG, TSQUERY
from sqlalchemy.engine import Result
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.db.engine import execute_core
from app.db.models import Edge, EdgeType, Thought, ThoughtStatus
from app.db.records import ThoughtRecord
from app.db.repositories.thoughts import FilterShape, ThoughtFilter, VectorScan, id_in_param, thought_select
from app.db.vector import HNSW_EF_SEARCH, index_distance, vector_param

# A very common word can match most of a project, so the leg ranks at most this many matching rows. Measured at
# 100 k thoughts: rows holding every word are few (p95 ~600), and for the OR match 300 agrees with the uncapped
# top 10 nearly as often as 1000 does (0.913 vs 0.924) for well under half the p95 (docs/BENCHMARKS.md).
EVERY_WORD_CAP = 1000
ANY_WORD_CAP = 300


SearchFilter = ThoughtFilter  # the read filter of every leg; kept as a name for bench scripts


def hnsw_ef_search(pool: int) -> int:
    """The HNSW candidate list for a pool: never below the session's HNSW_EF_SEARCH, at most 1000."""
    return max(HNSW_EF_SEARCH, min(pool, 1000))


class LegRow(NamedTuple):
    """One candidate of a retrieval leg: cosine distance (vector leg) or ts_rank_cd (lexical leg)."""

    id: uuid.UUID
    score: float
    created_at: datetime


class PageRow(NamedTuple):
    """A thought of a search page: its record, its distance to the query and the edges that flag it."""

    record: ThoughtRecord
    distance: float | None
    superseded_by: list[uuid.UUID]  # sources of `replaces` edges into it that are not archived
    contradicted_by: list[uuid.UUID]  # the other ends of its `contradicts` edges


# The hot statements below are built once (per filter shape) and reused with new parameters: building a SELECT
# per call cost more Python than running it (docs/BENCHMARKS.md).


def _words() -> tuple[Any, Any]:
    """(every word, any word) of the `words` parameter as tsqueries; plainto_tsquery sanitises metacharacters.

    Scalar subqueries, so PostgreSQL computes each once (an InitPlan) even in a generic plan, where the
    expression would otherwise be evaluated again for every ranked row (measured: generic plans 1 ms slower).
    """
    every = func.plainto_tsquery(cast("english", REGCONFIG), bindparam("words", type_=Text))
    some = cast(func.replace(cast(every, Text), "&", "|"), TSQUERY)
    return select(every).scalar_subquery(), select(some).scalar_subquery()


@lru_cache(maxsize=128)
def _vector_leg_statement(
    shape: FilterShape, scan: VectorScan, project_id: uuid.UUID | None
) -> Select[*tuple[Any, ...]]:
    """Nearest first, as `scan` says:
    - SHARED_INDEX: through the HNSW index of every thought, the filter inside the walk;
    - EXACT: by the full-precision distance, which no index serves, so a small project's rows are read through
      its btree and sorted, none converted to half precision;
    - PROJECT_INDEX: through the project's own HNSW index. The project is written into the statement (a uuid,
      `project_id`): only then can PostgreSQL match the index's predicate, in a generic plan too.
    """
    vector = vector_param("vector")
    exact = scan is VectorScan.EXACT
    distance = Thought.embedding.cosine_distance(vector) if exact else index_distance(Thought.embedding, vector)
    clauses = shape.clauses()
    if scan is VectorScan.PROJECT_INDEX and project_id is not None:
        clauses = [
            Thought.project_id == literal_column(f"'{project_id}'::uuid"),
            *shape._replace(project=False).clauses(),
        ]
    return (
        select(Thought.id, distance.label("distance"), Thought.created_at)
        .where(Thought.embedding_model == bindparam("model"), *clauses)
        .order_by(distance)
        .limit(bindparam("pool", type_=Integer))
    )


@lru_cache(maxsize=64)
def _lexical_leg_statement(shape: FilterShape) -> Select[*tuple[Any, ...]]:
    """Both tiers in one statement; the any-word scan runs only if the every-word tier has < `enough` rows."""
    every_word, any_word = _words()
    pool = bindparam("pool", type_=Integer)
    every = (
        select(Thought.id, Thought.tsv, Thought.created_at)
        .where(Thought.tsv.op("@@")(every_word), *shape.clauses())
        .limit(EVERY_WORD_CAP)
        .cte("every_word")
    )
    every_rank = func.ts_rank_cd(every.c.tsv, any_word)
    first = (
        select(every.c.id, every_rank.label("rank"), every.c.created_at, literal_column("0").label("tier"))
        .order_by(every_rank.desc(), every.c.id)
        .limit(pool)
        .cte("first_tier")
    )
    # Uncorrelated, so PostgreSQL evaluates it once and skips the any-word scan when it is false.
    too_few = select(func.count()).select_from(first).scalar_subquery() < bindparam("enough", type_=Integer)
    some = (
        select(Thought.id, Thought.tsv, Thought.created_at)
        .where(Thought.tsv.op("@@")(any_word), too_few, *shape.clauses())
        .limit(ANY_WORD_CAP)
        .cte("any_word")
    )
    some_rank = func.ts_rank_cd(some.c.tsv, any_word)
    second = (
        select(some.c.id, some_rank.label("rank"), some.c.created_at, literal_column("1").label("tier"))
        .where(some.c.id.not_in(select(first.c.id)))
        .order_by(some_rank.desc(), some.c.id)
        .limit(pool)
    )
    tiers = union_all(select(first), second).subquery("tiers")
    return (
        select(tiers.c.id, tiers.c.rank, tiers.c.created_at)
        .order_by(tiers.c.tier, tiers.c.rank.desc(), tiers.c.id)
        .limit(pool)
    )


def _standing() -> tuple[Any, Any]:
    """Per thought (correlated to `Thought`): the non-archived sources of `replaces` edges into it, and the
    other ends of its `contradicts` edges, as id arrays (NULL when there are none). The one definition of
    what flags a thought, for search pages, id lookups and suppress mode."""
    replacer = aliased(Thought)
    superseded_by = (
        select(func.array_agg(Edge.source_id))
        .join(replacer, replacer.id == Edge.source_id)
        .where(Edge.type == EdgeType.replaces, Edge.target_id == Thought.id, replacer.status != ThoughtStatus.archived)
        .scalar_subquery()
    )
    other_end = case((Edge.source_id == Thought.id, Edge.target_id), else_=Edge.source_id)
    contradicted_by = (
        select(func.array_agg(other_end))
        .where(Edge.type == EdgeType.contradicts, or_(Edge.source_id == Thought.id, Edge.target_id == Thought.id))
        .scalar_subquery()
    )
    return superseded_by.label("superseded_by"), contradicted_by.label("contradicted_by")


def _with_standing(statement: Select[*tuple[Any, ...]]) -> Select[*tuple[Any, ...]]:
    return statement.add_columns(*_standing())


@lru_cache(maxsize=2)
def _page_statement(with_distance: bool) -> Select[*tuple[Any, ...]]:
    """The page's thoughts with their distance to the query and their standing edges, in one read."""
    distance: Any = null()
    if with_distance:
        cosine = index_distance(Thought.embedding, vector_param("vector"))  # the vector leg's numbers
        distance = case((Thought.embedding_model == bindparam("model"), cosine), else_=None)
    return _with_standing(thought_select().add_columns(distance.label("distance"))).where(id_in_param(Thought.id))


@lru_cache(maxsize=64)
def _id_range_statement(shape: FilterShape) -> Select[*tuple[Any, ...]]:
    """Thoughts with ids in [low, high] in id order, capped, each row carrying the uncapped count."""
    uuid_type = Thought.id.type
    in_range = and_(Thought.id >= bindparam("low", type_=uuid_type), Thought.id <= bindparam("high", type_=uuid_type))
    return (
        _with_standing(thought_select())
        .add_columns(func.count().over().label("total"))
        .where(in_range, *shape.clauses())
        .order_by(Thought.id)
        .limit(bindparam("cap", type_=Integer))
    )


@lru_cache(maxsize=1)
def _superseded_statement() -> Select[*tuple[Any, ...]]:
    """Which of the `ids` a non-archived thought replaces (suppress mode)."""
    superseded_by, _ = _standing()
    return select(Thought.id).where(id_in_param(Thought.id), superseded_by.is_not(None))


# A page's cluster memberships (group_by_cluster): cluster edges point from the cluster to its member.
_CLUSTERS_OF = (
    select(Edge.target_id, Thought.id, Thought.content)
    .join(Thought, Thought.id == Edge.source_id)
    .where(Edge.type == EdgeType.cluster, id_in_param(Edge.target_id))
    .order_by(Edge.created_at)
)


def _page_row(row: Any, *extra: str) -> PageRow:
    """A page row; `extra`: columns of the statement that are not part of the page (dropped)."""
    fields = dict(row._mapping)
    for name in extra:
        fields.pop(name)
    distance = fields.pop("distance", None)
    superseded_by, contradicted_by = fields.pop("superseded_by"), fields.pop("contradicted_by")
    return PageRow(
        ThoughtRecord(**fields),
        None if distance is None else float(distance),
        superseded_by or [],
        contradicted_by or [],
    )


class SearchRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def _execute(self, statement: Executable, parameters: Mapping[str, Any] | None = None) -> Result[Any]:
        # Core, not the ORM session: ~0.4 ms less per search (interleaved A/B, docs/BENCHMARKS.md).
        return await execute_core(self.session, statement, parameters)

    async def vector_leg(self, vector: Sequence[float], model_id: str, where: SearchFilter, pool: int) -> list[LegRow]:
        """Nearest first by cosine distance; filters run inside the HNSW scan (the session's iterative scan),
        through the shared index or the project's own, or an exact scan of a small project (`where.vector_scan`).

        The connection's session settings (app.db.vector.configure_vector_session) cover the default pool;
        a larger pool widens ef_search for this transaction only.
        """
        ef_search = hnsw_ef_search(pool)
        if ef_search != HNSW_EF_SEARCH:
            await self._execute(select(func.set_config("hnsw.ef_search", str(ef_search), True)))
        scan = where.vector_scan
        project_id = where.project_id if scan is VectorScan.PROJECT_INDEX else None  # a statement per project
        # With the project written into the statement, its `filter_project` value is left unused.
        parameters = {"vector": vector, "model": model_id, "pool": pool, **where.parameters()}
        result = await self._execute(_vector_leg_statement(where.shape, scan, project_id), parameters)
        rows = [LegRow(row.id, float(row.distance), row.created_at) for row in result]
        return sorted(rows, key=lambda row: row.score)  # relaxed order: re-sort the few we got

    async def lexical_leg(self, query: str, where: SearchFilter, pool: int, enough: int) -> list[LegRow]:
        """Best first by ts_rank_cd of the OR-ed words: rows holding every word, then rows holding any.

        The AND match is cheap (GIN intersects the words); the OR match of common words can cover most of a
        project, so it runs only when fewer than `enough` rows hold every word, over at most ANY_WORD_CAP
        matching rows. Each tier ranks at most its cap of matching rows.
        """
        parameters = {"words": query, "pool": pool, "enough": enough, **where.parameters()}
        result = await self._execute(_lexical_leg_statement(where.shape), parameters)
        return [LegRow(row.id, float(row.rank), row.created_at) for row in result]

    async def page(
        self, thought_ids: Sequence[uuid.UUID], vector: Sequence[float] | None, model_id: str | None
    ) -> dict[uuid.UUID, PageRow]:
        """The thoughts with their cosine distance to `vector` (None without one, or for another model's
        vector) and their standing edges."""
        if not thought_ids:
            return {}
        parameters: dict[str, Any] = {"ids": list(thought_ids)}
        if vector is not None:
            parameters |= {"vector": vector, "model": model_id}
        rows = await self._execute(_page_statement(vector is not None), parameters)
        return {row.id: _page_row(row) for row in rows}

    async def by_id_range(
        self, low: uuid.UUID, high: uuid.UUID, where: SearchFilter, cap: int
    ) -> tuple[list[PageRow], int]:
        """Thoughts whose id falls in [low, high] (an id prefix), in id order, with their standing edges (no
        distance), and how many there are."""
        parameters = {"low": low, "high": high, "cap": cap, **where.parameters()}
        rows = (await self._execute(_id_range_statement(where.shape), parameters)).all()
        total = rows[0].total if rows else 0  # the window counts the whole range before the LIMIT applies
        return [_page_row(row, "total") for row in rows], int(total)

    async def superseded_among(self, thought_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        """The thoughts a non-archived thought replaces."""
        if not thought_ids:
            return set()
        return {row.id for row in await self._execute(_superseded_statement(), {"ids": list(thought_ids)})}

    async def clusters_of(self, thought_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, tuple[uuid.UUID, str]]:
        """member id → (cluster id, cluster content) via `cluster` edges (cluster → member)."""
        if not thought_ids:
            return {}
        result: dict[uuid.UUID, tuple[uuid.UUID, str]] = {}
        for row in await self._execute(_CLUSTERS_OF, {"ids": list(thought_ids)}):
            result.setdefault(row.target_id, (row.id, row.content))
        return result
