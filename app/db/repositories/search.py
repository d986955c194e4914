"""The two retrieval legs and the reads that annotate their candidates."""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, NamedTuple

from sqlalchemy import (
    Double,
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
    text,
    tuple_,
)
from sqlalchemy.dialects.postgresql import TSQUERY, UUID
from sqlalchemy.engine import Result
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.config import Bm25Settings
from app.db.engine import execute_core
from app.db.id_lists import id_in_param
from app.db.models import Edge, EdgeType, LexicalCorpus, LexicalTerm, Thought, ThoughtStatus
from app.db.records import ThoughtRecord
from app.db.repositories.thoughts import (
    TSV_CONFIG,
    FilterShape,
    ThoughtFilter,
    VectorScan,
    thought_select,
)
from app.db.vector import HNSW_EF_SEARCH, index_distance, vector_param
from app.db.visibility import UNSCOPED

# The lexical leg's candidates are the thoughts holding the query's rarer lexemes: lexemes are taken rarest first
# while their document frequencies add up to at most CANDIDATE_BUDGET (the rarest always), and at most
# CANDIDATE_CAP rows are read. Every candidate is then scored on every query lexeme, so a thought holding only
# commoner lexemes is missed only where it could score at most the sum of their idf × (k1 + 1)
# (docs/mcp-tools.md). Chosen at 100 k thoughts: the same hybrid answers as with 1000 / 2000, ~2 ms faster
# (docs/BENCHMARKS.md). When the budget cut the candidates, a hybrid search then scores the vector leg's rows the leg
# left out (SearchRepository.with_scores_of): at 100 k that did more for the fused answer than a budget of 2000 / 4000
# or 4000 / 8000, at the cost of one lookup by id (docs/BENCHMARKS.md, "Sixteenth session").
CANDIDATE_BUDGET = 500
CANDIDATE_CAP = 1000
# In a scope of at most WIDER_PASS_MAX_THOUGHTS, when the commoner lexemes could still lift a thought that holds
# none of the probed ones into the first `pool / 10` rows (the page of the call), the leg runs once more with
# WIDER_PASS times the budget and the cap: cheap there, and it makes small stores exact. At 100 k thoughts it ran
# for most paraphrased questions and cost 2.5 ms a search (docs/BENCHMARKS.md).
WIDER_PASS = 4
WIDER_PASS_MAX_THOUGHTS = 10_000
# A search without a vector leg (the embedder down: degraded) has no rows to score in place of what the budget cut,
# and no query embedding to pay for: where the budget cut the leg, it runs again with DEGRADED_WIDEN times both
# limits. At 100 k the leg alone then found a paraphrased note's target in the first 5 for 0.560 of the scoped and
# 0.545 of the unscoped questions, not 0.395 / 0.325 (bm25s: 0.530 / 0.560), in ~14–16 ms instead of ~5
# (docs/BENCHMARKS.md, "Sixteenth session").
DEGRADED_WIDEN = 8
# ts_rank with every position weight 1 and a one-lexeme query is H(tf) / (π²/6), H(n) = Σ 1/j² for j ≤ n, and
# π²/6 − H(n) = 1/n − 1/(2n²) + O(1/n³): tf = round(1 / ((π²/6)(1 − rank)) − 1/2) exactly (0 for an absent
# lexeme). All in C per candidate, where unnesting its tsvector costs ~3 µs.
_PI2_6 = 1.64493406685  # the constant of PostgreSQL's calc_rank_or


SearchFilter = ThoughtFilter  # the read filter of every leg; kept as a name for bench scripts


# An unscoped walk of the shared graph (every project): with e5 vectors at 100 k, recall@10 against exact was
# 0.946 at ef_search 200 and 0.959 at 400 for +2 ms p50 of the leg (docs/BENCHMARKS.md, HNSW recall, twelfth
# round); over four more builds of the shared graph, 0.929-0.982 at 400 (two under 0.95) and 0.966-0.985 at 800,
# for twice the walk's CPU (thirteenth round). The shared graph at m 16 / ef_construction 200 (migration 0023,
# app.db.graphs.SHARED_GRAPH) recalls 0.976-0.985 at 400 and 0.964-0.969 at 200 ("Fourteenth session").
UNSCOPED_EF_SEARCH = 400
# A walk of a project's own graph (VectorScan.PROJECT_INDEX): with e5 vectors at 100 k, the 50 % project's
# recall@10 against exact was 0.935-0.956 at ef_search 200 and 0.972-0.984 at 400 over seven builds of its graph
# (GRAPH_PARAMETERS), the 25 % project's 0.986 and 0.996, for +0.65-0.76 ms of the statement's execution (EXPLAIN
# ANALYZE medians, the box at load 7.6) or +1.3-1.7 ms of the backend's CPU (docs/BENCHMARKS.md, HNSW recall,
# thirteenth round). A project's walk of the shared graph (past the index cap, or most of the memory) keeps the
# session's 200; an exact scan of a small project walks nothing.
PROJECT_INDEX_EF_SEARCH = 400


def hnsw_ef_search(pool: int, unscoped: bool = False, scan: VectorScan = VectorScan.SHARED_INDEX) -> int:
    """The HNSW candidate list for a pool: never below the session's HNSW_EF_SEARCH (UNSCOPED_EF_SEARCH for a
    walk of every project, PROJECT_INDEX_EF_SEARCH for a walk of a project's own graph), at most 1000."""
    if unscoped:
        floor = UNSCOPED_EF_SEARCH
    elif scan is VectorScan.PROJECT_INDEX:
        floor = PROJECT_INDEX_EF_SEARCH
    else:
        floor = HNSW_EF_SEARCH
    return max(floor, min(pool, 1000))


class LegRow(NamedTuple):
    """One candidate of a retrieval leg: cosine distance (vector leg) or BM25 score (lexical leg)."""

    id: uuid.UUID
    score: float
    created_at: datetime


class LexicalLeg(NamedTuple):
    """The lexical leg's rows, and the score of a thought holding each known query lexeme once at the average
    length (Σ idf): how much of the query the best row matched; the query's BM25 statistics in the scope (None
    when no thought holds a query lexeme), for scoring other rows the same way (SearchRepository.with_scores_of);
    `cut`: the candidates left out thoughts holding only commoner lexemes that could still reach the call's page."""

    rows: list[LegRow]
    idf_mass: float
    statistics: Bm25Query | None = None
    cut: bool = False


class PageRow(NamedTuple):
    """A thought of a search page: its record, its distance to the query and the edges that flag it."""

    record: ThoughtRecord
    distance: float | None
    superseded_by: list[uuid.UUID]  # sources of `replaces` edges into it that are not archived
    contradicted_by: list[uuid.UUID]  # the other ends of its `contradicts` edges


# The hot statements below are built once (per filter shape) and reused with new parameters: building a SELECT
# per call cost more Python than running it (docs/BENCHMARKS.md).


@lru_cache(maxsize=128)
def _vector_leg_statement(
    shape: FilterShape, scan: VectorScan, project_id: uuid.UUID | None
) -> Select[*tuple[Any, ...]]:
    """Nearest first by the full-precision cosine distance, as `scan` says:
    - SHARED_INDEX: the first `pool` rows of a walk of the HNSW index of every thought (the filter inside the
      walk), re-ranked by the full-precision distance;
    - EXACT: by the full-precision distance, which no index serves, so a small project's rows are read through
      its btree and sorted, none converted to half precision;
    - PROJECT_INDEX: as SHARED_INDEX through the project's own HNSW index. The project is written into the
      statement (a uuid, `project_id`): only then can PostgreSQL match the index's predicate, in a generic plan
      too.

    The re-rank: the graph ranks by the inner product of normalised half-precision vectors (halfvec_cosine_ops),
    within ~1e-3 of the full-precision distance, and e5's neighbours lie closer together than that, so the walk's
    own order swaps rows across the page's edge and its distances are not the ones an exact scan reports. A cosine
    per row the walk already read, nothing more walked: a wider re-ranked list (the walk's whole ef_search list)
    recalled no more at 10 k unless it made the iterative scan walk a second stretch, which is a longer walk's
    price (docs/BENCHMARKS.md, twelfth round).
    """
    vector = vector_param("vector")
    clauses = shape.clauses()
    if scan is VectorScan.PROJECT_INDEX and project_id is not None:
        clauses = [
            Thought.project_id == literal_column(f"'{project_id}'::uuid"),
            *shape._replace(project=False).clauses(),
        ]
    in_scope = (Thought.embedding_model == bindparam("model"), *clauses)
    pool = bindparam("pool", type_=Integer)
    if scan is VectorScan.EXACT:
        distance = Thought.embedding.cosine_distance(vector)
        return (
            select(Thought.id, distance.label("distance"), Thought.created_at)
            .where(*in_scope)
            .order_by(distance)
            .limit(pool)
        )
    walk = (
        select(Thought.id, Thought.embedding, Thought.created_at)
        .where(*in_scope)
        .order_by(index_distance(Thought.embedding, vector))
        .limit(pool)
        .subquery("walk")
    )
    distance = walk.c.embedding.cosine_distance(vector)
    return select(walk.c.id, distance.label("distance"), walk.c.created_at).order_by(distance, walk.c.id).limit(pool)


@lru_cache(maxsize=2)
def _lexical_statistics_statement(scoped: bool) -> Select[*tuple[Any, ...]]:
    """The query's lexemes known to the scope, with their document frequencies and the scope's corpus size
    (every project's summed when unscoped): migration 0009's tables."""
    project = bindparam("filter_project", type_=UUID(as_uuid=True))
    words = func.to_tsvector(TSV_CONFIG, bindparam("words", type_=Text))
    terms = select(func.unnest(func.tsvector_to_array(words)).label("lexeme")).subquery("terms")
    sizes = select(func.coalesce(func.sum(LexicalCorpus.thoughts), 0), func.coalesce(func.sum(LexicalCorpus.tokens), 0))
    holds = LexicalTerm.lexeme == terms.c.lexeme
    if scoped:
        sizes = sizes.where(LexicalCorpus.project_id == project)
        holds = and_(holds, LexicalTerm.project_id == project)
    corpus = sizes.cte("corpus")
    return (
        select(
            terms.c.lexeme,
            func.sum(LexicalTerm.thoughts).label("df"),
            select(corpus.c[0]).scalar_subquery().label("thoughts"),
            select(corpus.c[1]).scalar_subquery().label("tokens"),
        )
        .join_from(terms, LexicalTerm, holds)
        .group_by(terms.c.lexeme)
    )


@lru_cache(maxsize=256)
def _lexical_leg_statement(shape: FilterShape, lexemes: int) -> Select[*tuple[Any, ...]]:
    """The candidates (rows matching `probe`, at most `cap`) scored by Okapi BM25 on `lexemes` query lexemes:

        score = Σ idf_i · tf_i · (k1 + 1) / (tf_i + norm_base + norm_length · length)

    with the idf_i, the lexemes (`lexeme_i`, tsqueries) and the length terms bound by Bm25Query.parameters().
    """
    candidates = (
        select(Thought.id, Thought.tsv, Thought.created_at)
        .where(Thought.tsv.op("@@")(bindparam("probe", type_=TSQUERY)), *shape.clauses())
        .limit(bindparam("cap", type_=Integer))
        .subquery("candidates")
    )
    return _bm25_ranked(candidates, lexemes)


@lru_cache(maxsize=32)
def _lexical_scores_statement(lexemes: int) -> Select[*tuple[Any, ...]]:
    """The BM25 scores (as _lexical_leg_statement's) of the thoughts `ids` that hold a query lexeme (`probe`)."""
    candidates = (
        select(Thought.id, Thought.tsv, Thought.created_at)
        .where(id_in_param(Thought.id, "ids"), Thought.tsv.op("@@")(bindparam("probe", type_=TSQUERY)))
        .subquery("candidates")
    )
    return _bm25_ranked(candidates, lexemes)


def _bm25_ranked(candidates: Any, lexemes: int) -> Select[*tuple[Any, ...]]:
    """The candidates (id, tsv, created_at) with their Okapi BM25 score on `lexemes` query lexemes, best first,
    at most `pool`."""
    all_weights: Any = literal_column("'{1,1,1,1}'::float4[]")
    norm = bindparam("norm_base", type_=Double) + bindparam("norm_length", type_=Double) * cast(
        func.length(candidates.c.tsv), Double
    )
    saturation = bindparam("k1_plus_1", type_=Double)
    score: Any = None
    for slot in range(lexemes):
        rank = cast(func.ts_rank(all_weights, candidates.c.tsv, bindparam(f"lexeme_{slot}", type_=TSQUERY), 0), Double)
        tf = func.round(1.0 / (_PI2_6 * (1.0 - rank)) - 0.5)
        term = bindparam(f"idf_{slot}", type_=Double) * tf * saturation / (tf + norm)
        score = term if score is None else score + term
    scored = select(candidates.c.id, score.label("score"), candidates.c.created_at).subquery("scored")
    return (
        select(scored.c.id, scored.c.score, scored.c.created_at)
        .order_by(scored.c.score.desc(), scored.c.id)
        .limit(bindparam("pool", type_=Integer))
    )


@dataclass(frozen=True)
class Bm25Query:
    """A query's lexemes with their BM25 weights in a scope, rarest first."""

    lexemes: tuple[str, ...]
    frequencies: tuple[int, ...]
    thoughts: int  # N
    average_length: float  # avgdl

    def idf(self, frequency: int) -> float:
        return math.log(1.0 + (self.thoughts - frequency + 0.5) / (frequency + 0.5))

    def idf_mass(self) -> float:
        return sum(self.idf(frequency) for frequency in self.frequencies)

    def probed(self, budget: int) -> int:
        """How many lexemes, rarest first, draw the candidates: while their frequencies add up to at most
        `budget`, the rarest always."""
        count, total = 0, 0
        for frequency in self.frequencies:
            if count and total + frequency > budget:
                break
            count += 1
            total += frequency
        return count

    def unprobed_bound(self, probed: int, bm25: Bm25Settings) -> float:
        """The most a thought holding none of the first `probed` lexemes can score: Σ idf · (k1 + 1) over the
        others (the limit of a term's share as tf grows)."""
        return sum(self.idf(frequency) for frequency in self.frequencies[probed:]) * (bm25.k1 + 1.0)

    def parameters(self, bm25: Bm25Settings, budget: int, cap: int) -> dict[str, Any]:
        """The leg's: candidates from the lexemes `probed(budget)`, at most `cap` of them."""
        probe = " | ".join(_tsquery_lexeme(lexeme) for lexeme in self.lexemes[: self.probed(budget)])
        return {"probe": probe, "cap": cap, **self.weights(bm25)}

    def score_parameters(self, bm25: Bm25Settings) -> dict[str, Any]:
        """_lexical_scores_statement's: a thought is scored when it holds any query lexeme."""
        return {"probe": " | ".join(_tsquery_lexeme(lexeme) for lexeme in self.lexemes), **self.weights(bm25)}

    def weights(self, bm25: Bm25Settings) -> dict[str, Any]:
        """What every BM25 statement binds: the length terms, and each lexeme's tsquery and idf by its slot."""
        values: dict[str, Any] = {
            "k1_plus_1": bm25.k1 + 1.0,
            "norm_base": bm25.k1 * (1.0 - bm25.b),
            "norm_length": bm25.k1 * bm25.b / self.average_length,
        }
        for slot, (lexeme, frequency) in enumerate(zip(self.lexemes, self.frequencies, strict=True)):
            values[f"lexeme_{slot}"] = _tsquery_lexeme(lexeme)
            values[f"idf_{slot}"] = self.idf(frequency)
        return values


def _tsquery_lexeme(lexeme: str) -> str:
    """A lexeme as tsquery input that is taken as it is: quoted, never parsed or stemmed again."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


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
        # Full precision, as the vector leg reports its rows: a row only the full-text leg found gets the same
        # similarity it would have had from the vector leg (a cosine for each of the page's rows, nothing walked).
        cosine = Thought.embedding.cosine_distance(vector_param("vector"))
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


@lru_cache(maxsize=1)
def _adjacent_statement() -> Select[*tuple[Any, ...]]:
    """Per thought of `ids`: the thought stored just before it and just after it in its project, by (created_at,
    id) — ids are time-ordered, so a bulk_create's rows follow in the order given (the index
    ix_thought_project_created serves both probes)."""
    other = aliased(Thought)
    key, other_key = tuple_(Thought.created_at, Thought.id), tuple_(other.created_at, other.id)
    same_project = other.project_id == Thought.project_id

    def probe(before: bool) -> Any:
        order = (other.created_at.desc(), other.id.desc()) if before else (other.created_at, other.id)
        side = other_key < key if before else other_key > key
        return select(other.id).where(same_project, side).order_by(*order).limit(1).scalar_subquery()

    return select(Thought.id, probe(True).label("before"), probe(False).label("after")).where(id_in_param(Thought.id))


@lru_cache(maxsize=1)
def _preceding_statement() -> Select[*tuple[Any, ...]]:
    """Per thought of `ids`: the thought stored just before it in its project (one probe of
    ix_thought_project_created each)."""
    other = aliased(Thought)
    before = (
        select(other.id)
        .where(
            other.project_id == Thought.project_id,
            tuple_(other.created_at, other.id) < tuple_(Thought.created_at, Thought.id),
        )
        .order_by(other.created_at.desc(), other.id.desc())
        .limit(1)
        .scalar_subquery()
    )
    return select(Thought.id, before.label("before")).where(id_in_param(Thought.id))


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
        """Nearest first by full-precision cosine distance; filters run inside the HNSW scan (the session's
        iterative scan), through the shared index or the project's own, whose candidates are re-ranked, or an
        exact scan of a small project (`where.vector_scan`).

        The connection's session settings (app.db.vector.configure_vector_session) cover the default pool;
        a larger pool, a walk of every project (UNSCOPED_EF_SEARCH) or of a project's own graph
        (PROJECT_INDEX_EF_SEARCH) widens ef_search for this transaction only.
        """
        ef_search = hnsw_ef_search(pool, unscoped=where.project_id is None, scan=where.vector_scan)
        if ef_search != HNSW_EF_SEARCH:
            # SET LOCAL rather than set_config(): Citus passes SET LOCAL on to the shards' connections
            # (citus.propagate_set_commands = local, scripts/citus/cluster.sh), where the walk runs.
            await self._execute(text(f"SET LOCAL hnsw.ef_search = {int(ef_search)}").execution_options(**UNSCOPED))
        scan = where.vector_scan
        project_id = where.project_id if scan is VectorScan.PROJECT_INDEX else None  # a statement per project
        # With the project written into the statement, its `filter_project` value is left unused.
        parameters = {"vector": vector, "model": model_id, "pool": pool, **where.parameters()}
        result = await self._execute(_vector_leg_statement(where.shape, scan, project_id), parameters)
        return [LegRow(row.id, float(row.distance), row.created_at) for row in result.all()]

    async def lexical_statistics(self, query: str, where: SearchFilter) -> Bm25Query | None:
        """The query's lexemes that some thought of the scope holds, with their BM25 statistics; None when
        there are none (then no thought matches)."""
        parameters = {"words": query, **where.parameters()}
        rows = (await self._execute(_lexical_statistics_statement(where.shape.project), parameters)).all()
        known = sorted((int(row.df), row.lexeme) for row in rows if row.df and row.df > 0)
        if not known or not rows[0].thoughts:
            return None
        thoughts, tokens = int(rows[0].thoughts), int(rows[0].tokens)
        return Bm25Query(
            lexemes=tuple(lexeme for _, lexeme in known),
            frequencies=tuple(frequency for frequency, _ in known),
            thoughts=thoughts,
            average_length=max(tokens / thoughts, 1.0),
        )

    async def lexical_leg(self, query: str, where: SearchFilter, pool: int, bm25: Bm25Settings) -> LexicalLeg:
        """Best first by the Okapi BM25 score of the query's lexemes (OR) over the scope's statistics; ties by
        id. The statistics, then the candidates scored (a statement per lexeme count); once more over a wider
        set of candidates, in a scope of at most WIDER_PASS_MAX_THOUGHTS, when a thought outside the first could
        still reach the call's page (pool / 10 rows)."""
        statistics = await self.lexical_statistics(query, where)
        if statistics is None:
            return LexicalLeg([], 0.0)
        return await self._ranked_leg(statistics, where, pool, bm25, 1)

    async def widened(self, leg: LexicalLeg, where: SearchFilter, pool: int, bm25: Bm25Settings) -> LexicalLeg:
        """A leg the budget `cut` ranked again over DEGRADED_WIDEN times the budget and the cap of every pass, with
        the statistics it already read; any other leg as it is."""
        if leg.statistics is None or not leg.cut:
            return leg
        return await self._ranked_leg(leg.statistics, where, pool, bm25, DEGRADED_WIDEN)

    async def _ranked_leg(
        self, statistics: Bm25Query, where: SearchFilter, pool: int, bm25: Bm25Settings, widen: int
    ) -> LexicalLeg:
        statement = _lexical_leg_statement(where.shape, len(statistics.lexemes))
        page = max(1, pool // 10)
        rows: list[LegRow] = []
        unreached = False
        passes = (1, WIDER_PASS) if statistics.thoughts <= WIDER_PASS_MAX_THOUGHTS else (1,)
        for factor in passes:
            budget, cap = CANDIDATE_BUDGET * widen * factor, CANDIDATE_CAP * widen * factor
            parameters = {"pool": pool, **statistics.parameters(bm25, budget, cap), **where.parameters()}
            result = await self._execute(statement, parameters)
            rows = [LegRow(row.id, float(row.score), row.created_at) for row in result.all()]
            probed = statistics.probed(budget)
            unreached = probed < len(statistics.lexemes) and (
                len(rows) < page or rows[page - 1].score < statistics.unprobed_bound(probed, bm25)
            )
            if not unreached:
                break
        return LexicalLeg(rows, statistics.idf_mass(), statistics, unreached)

    async def with_scores_of(self, leg: LexicalLeg, thought_ids: Sequence[uuid.UUID], bm25: Bm25Settings) -> LexicalLeg:
        """When the leg's candidates were `cut` by the budget, the leg with the thoughts `thought_ids` it did not rank
        added at their own BM25 score, where they hold a query lexeme: the candidates are then only the holders of
        the query's rarer lexemes (CANDIDATE_BUDGET), so a row the vector leg found may hold the commoner ones and
        score well. One statement over at most those ids, by primary key. A leg that was not cut is returned as it
        is: adding the low-scoring rows of a complete leg lost LoCoMo's tuning half 0.006 R@5 (docs/BENCHMARKS.md,
        "Sixteenth session")."""
        if leg.statistics is None or not leg.cut:
            return leg
        known = {row.id for row in leg.rows}
        missing = [thought_id for thought_id in thought_ids if thought_id not in known]
        if not missing:
            return leg
        statistics = leg.statistics
        parameters = {**statistics.score_parameters(bm25), "ids": missing, "pool": len(missing)}
        result = await self._execute(_lexical_scores_statement(len(statistics.lexemes)), parameters)
        added = [LegRow(row.id, float(row.score), row.created_at) for row in result.all()]
        if not added:
            return leg
        rows = sorted([*leg.rows, *added], key=lambda row: (-row.score, row.id))
        return leg._replace(rows=rows)

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
        rows = (await self._execute(_page_statement(vector is not None), parameters)).all()
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

    async def adjacent(self, thought_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, tuple[uuid.UUID | None, ...]]:
        """thought id → the ids stored just before and just after it in its project (None at either end): for
        bench.fusion's replays, which lift either side; the search itself reads `preceding`."""
        if not thought_ids:
            return {}
        rows = await self._execute(_adjacent_statement(), {"ids": list(thought_ids)})
        return {row.id: (row.before, row.after) for row in rows}

    async def preceding(self, thought_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, uuid.UUID | None]:
        """thought id → the id stored just before it in its project (None for a project's first)."""
        if not thought_ids:
            return {}
        rows = (await self._execute(_preceding_statement(), {"ids": list(thought_ids)})).all()
        return {row.id: row.before for row in rows}

    async def clusters_of(self, thought_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, tuple[uuid.UUID, str]]:
        """member id → (cluster id, cluster content) via `cluster` edges (cluster → member)."""
        if not thought_ids:
            return {}
        result: dict[uuid.UUID, tuple[uuid.UUID, str]] = {}
        for row in await self._execute(_CLUSTERS_OF, {"ids": list(thought_ids)}):
            result.setdefault(row.target_id, (row.id, row.content))
        return result
