"""The search pipeline (docs/ARCHITECTURE.md): id lookup, vector + lexical legs, score fusion, calibration, standing,
gate."""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Literal

from pydantic import ConfigDict, InstanceOf
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import SearchSettings
from app.db.records import ThoughtRecord
from app.db.repositories.search import LegRow, LexicalLeg, PageRow, SearchRepository
from app.db.repositories.thoughts import ThoughtFilter
from app.embedding.embedder import Vector
from app.embedding.runtime import EmbeddingRuntime
from app.services.recall.hits import HitService
from app.services.recall.id_lookup import ID_PREFIX_MATCH_HARD_CAP, IdQuery, id_not_found_warning, parse_id_query
from app.services.recall.relevance import Calibration
from app.services.recall.requests import Ranking, Reranking

RRF_K = 60  # of the reported rrf_score (the tie-break of the fusion)
# The least standard deviation a leg's scores are divided by (_fuse): below it a leg's rows count as about
# equally good. Over a pool of 100 rows e5's and MiniLM's cosines spread wider (LoCoMo, docs/BENCHMARKS.md).
MIN_COSINE_DEVIATION = 0.01
MIN_BM25_DEVIATION = 0.1
# What a row missing from a leg counts there, in that leg's standard deviations (_fuse). Missing from the vector
# leg: its cosine is under the leg's lowest by an unknown amount, counted VECTOR_ABSENT_PENALTY under it. Missing
# from the lexical leg: that leg is bounded (a candidate budget per lexeme) and its zero padding sets its lowest,
# so absence from it says less: at most LEXICAL_ABSENT_FLOOR under its mean. At 100 k notes the former rule (the
# lowest value of either leg) let lexical rows outside the vector leg bury the vector leg's answer (e5 hit@5 0.645
# against the vector leg's 0.715); this one keeps LoCoMo's tuning half (docs/BENCHMARKS.md, "eleventh round").
VECTOR_ABSENT_PENALTY = 1.0
LEXICAL_ABSENT_FLOOR = 1.0
# How many of the first fused candidates lift the one stored before them (at least 3 × limit): on LoCoMo's tuning
# half R@5 0.618 against 0.621 for every candidate, at a fraction of the reads (docs/BENCHMARKS.md).
NEIGHBOUR_LEADERS = 30
Standing = Literal["current", "contradicted", "superseded"]
STANDING_ORDER = {"current": 0, "contradicted": 1, "superseded": 2}


class SearchQuery(Ranking, Reranking):
    """What the pipeline runs: the request's `Ranking` and `Reranking` (app.services.recall.requests, their defaults
    and bounds declared there once), the text, and the read filter of its scope."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    text: str
    where: InstanceOf[ThoughtFilter]
    # The caller's embedding of `text`, possibly already running; None = embed when the vector leg needs it.
    vector: InstanceOf[QueryVector] | None = None
    # `text` read as an id, when the caller has parsed it already (id_parsed); otherwise the search parses it.
    id_query: InstanceOf[IdQuery] | None = None
    id_parsed: bool = False


class QueryVector:
    """A query's embedding, computed at most once. `start()` runs it beside the transaction's first reads."""

    def __init__(self, embedding: EmbeddingRuntime, text: str) -> None:
        self._embedding = embedding
        self._text = text
        self._task: asyncio.Task[Vector | None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._embedding.embed_query(self._text))

    async def get(self) -> Vector | None:
        """The vector, or None when the embedder is down (the search is then degraded)."""
        self.start()
        assert self._task is not None
        return await self._task

    def cancel(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()


SearchQuery.model_rebuild()  # its `vector` field names QueryVector, declared after it


@dataclass
class Hit:
    thought: ThoughtRecord
    match_source: list[str]
    similarity: float | None = None
    rrf_score: float | None = None
    bm25_score: float | None = None
    relevance: float | None = None
    recency_score: float | None = None
    final_score: float | None = None
    standing: Standing = "current"
    superseded_by: list[uuid.UUID] = field(default_factory=list)
    contradicted_by: list[uuid.UUID] = field(default_factory=list)
    low_confidence: bool = False

    @property
    def distance(self) -> float | None:
        return None if self.similarity is None else 1.0 - self.similarity

    @property
    def anchored(self) -> bool:
        return "bm25" in self.match_source or "id" in self.match_source


@dataclass
class Candidate:
    """A fused row before its thought is read: enough to rank, gate and count it."""

    id: uuid.UUID
    created_at: datetime
    rrf_score: float
    match_source: list[str]
    distance: float | None = None
    bm25_score: float | None = None
    final_score: float = 0.0
    recency_score: float | None = None
    fused_score: float = 0.0  # the weighted sum of the legs' standardised scores, neighbours added (_fuse)

    @property
    def anchored(self) -> bool:
        return "bm25" in self.match_source


@dataclass
class SearchOutcome:
    hits: list[Hit]
    total: int
    filtered_out: int = 0
    degraded: bool = False
    warnings: list[str] = field(default_factory=list)
    reason: str | None = None


def pool_size(limit: int) -> int:
    return min(1000, max(10 * limit, 100))


def _standardise(values: Sequence[float], floor: float) -> tuple[float, float]:
    """(mean, standard deviation) of a leg's scores, the deviation at least `floor`: in a leg of a few rows
    nearly equal scores stay nearly equal instead of a unit apart."""
    if not values:
        return 0.0, 1.0
    mean = math.fsum(values) / len(values)
    deviation = math.sqrt(math.fsum((value - mean) ** 2 for value in values) / len(values))
    return mean, max(deviation, floor, 1e-9)


def recency(created_at: datetime, half_life_days: float, now: datetime) -> float:
    age_days = max(0.0, (now - created_at).total_seconds() / 86_400)
    return math.pow(0.5, age_days / half_life_days)


class SearchService:
    def __init__(
        self,
        session: AsyncSession,
        embedding: EmbeddingRuntime,
        calibration: Calibration,
        settings: SearchSettings,
        hits: HitService | None,
    ) -> None:
        self.repo = SearchRepository(session)
        self.embedding = embedding
        self.calibration = calibration
        self.default_gate = settings.default_min_relevance
        self.hits = hits
        self.bm25 = settings.bm25
        self.vector_weight = settings.vector_weight
        self.neighbour_weight = settings.neighbour_weight

    async def search(self, query: SearchQuery) -> SearchOutcome:
        outcome = await self._search(query)
        if self.hits is not None:
            await self.hits.record(hit.thought for hit in outcome.hits)
        return outcome

    async def _search(self, query: SearchQuery) -> SearchOutcome:
        id_query = query.id_query if query.id_parsed else parse_id_query(query.text)
        if id_query is None:
            return await self.ranked(query)
        found = await self._by_id(query, id_query)
        if found is not None:
            return found
        fallback = await self.ranked(query)
        fallback.warnings.append(id_not_found_warning(query.text))
        if not fallback.hits and fallback.filtered_out == 0:
            fallback.reason = "id_not_found"
        return fallback

    # ------------------------------------------------------------ id lookup

    async def _by_id(self, query: SearchQuery, id_query: IdQuery) -> SearchOutcome | None:
        if id_query.full is not None:
            # A full id is an explicit reference: only the cluster shape constraint applies.
            shape_only = ThoughtFilter(None, (), None, query.where.is_cluster, None)
            rows, total = await self.repo.by_id_range(id_query.full, id_query.full, shape_only, 1)
        else:
            assert id_query.low is not None and id_query.high is not None
            prefix_scope = replace(query.where, tag=None, min_importance=None)
            cap = min(query.limit, ID_PREFIX_MATCH_HARD_CAP)
            rows, total = await self.repo.by_id_range(id_query.low, id_query.high, prefix_scope, cap)
        if not rows:
            return None
        # An id is never suppressed: suppress degrades to flag here.
        mode: Literal["flag", "off"] = "off" if query.supersession_mode == "off" else "flag"
        hits = [
            flagged(Hit(thought=row.record, match_source=["id"]), row, mode, query.contradiction_mode) for row in rows
        ]
        reason = "ambiguous_id" if total > 1 else None
        # An id is never gated: rows past the limit are sliced off (returned < total), not filtered out.
        return SearchOutcome(hits=hits, total=total, filtered_out=0, reason=reason)

    # ------------------------------------------------------------ ranked search

    async def ranked(self, query: SearchQuery) -> SearchOutcome:
        pool = pool_size(query.limit)
        source = query.vector or QueryVector(self.embedding, query.text)
        lexical = LexicalLeg([], 0.0)
        if query.hybrid:  # the lexical leg runs while the query embedding finishes
            lexical = await self.repo.lexical_leg(query.text, query.where, pool, self.bm25)
        profile = self.embedding.profile
        vector = await source.get() if profile is not None else None
        degraded = vector is None
        vector_rows: list[LegRow] = []
        if vector is not None and profile is not None:
            vector_rows = await self.repo.vector_leg(vector, profile.model_id, query.where, pool)
            if query.hybrid:  # where the budget cut the lexical leg's candidates, it scores these rows too
                lexical = await self.repo.with_scores_of(lexical, [row.id for row in vector_rows], self.bm25)
        elif not query.hybrid:
            lexical = await self.repo.lexical_leg(query.text, query.where, pool, self.bm25)
        if degraded:  # no vector leg stands in for what the budget cut: a wider pass instead
            lexical = await self.repo.widened(lexical, query.where, pool, self.bm25)
        candidates = self._fuse(vector_rows, lexical, query)
        if self.neighbour_weight > 0 and query.hybrid and vector_rows and candidates:
            leaders = candidates[: max(NEIGHBOUR_LEADERS, 3 * query.limit)]
            candidates = self._lift(candidates, await self.repo.preceding([leader.id for leader in leaders]), query)
        if query.supersession_mode == "suppress":
            suppressed = await self._superseded(candidates)
            candidates = [candidate for candidate in candidates if candidate.id not in suppressed]
        total = len(candidates)
        gate = self.default_gate if query.min_relevance is None else query.min_relevance
        kept = [candidate for candidate in candidates if self._passes(candidate, gate)]
        mode: Literal["flag", "off"] = "flag" if query.supersession_mode == "suppress" else query.supersession_mode
        page = kept[: query.limit]
        hits = await self._hits(page, vector, mode, query.contradiction_mode)
        vanished = len(page) - len(hits)  # deleted by a transaction that committed after the legs ran
        # Standing re-orders the page, not the pool: sorting the whole over-fetched pool would push every
        # flagged hit behind every current candidate, i.e. out of the page (flag acting as suppress).
        hits.sort(key=lambda hit: STANDING_ORDER[hit.standing])  # stable: keeps score order inside a group
        reason = "no_match" if total == 0 else None
        filtered_out = total - len(kept)
        return SearchOutcome(
            hits=hits, total=total - vanished, filtered_out=filtered_out, degraded=degraded, reason=reason
        )

    def _passes(self, candidate: Candidate, gate: float) -> bool:
        """Lexical anchors are never gated; a vector-only row needs a calibrated relevance of at least `gate`."""
        if candidate.anchored or gate <= 0:
            return True
        if candidate.distance is None:
            return False
        return self.calibration.relevance(1.0 - candidate.distance) >= gate

    def _fuse(
        self,
        vector_rows: Sequence[LegRow],
        lexical: LexicalLeg,
        query: SearchQuery,
    ) -> list[Candidate]:
        """Score fusion of the two legs' standardised scores, then the opt-in recency term.

        Each leg's scores are standardised over its rows (z = (x − mean) / standard deviation): the cosines of
        the vector leg, and the BM25 scores of the lexical leg padded with zeros up to the vector leg's row count
        (a row holding no query lexeme scores 0). A row missing from the vector leg counts VECTOR_ABSENT_PENALTY
        deviations under that leg's lowest cosine; a row missing from the lexical leg counts its lowest value (0
        for a padded leg), but never more than LEXICAL_ABSENT_FLOOR deviations under its mean. A deviation is at
        least MIN_COSINE_DEVIATION (cosines) or MIN_BM25_DEVIATION × the best BM25. fused = w · z_vector + (1 −
        w) · z_lexical, w = search.vector_weight (a hybrid search then lifts neighbours: _lift). final_score =
        e^(fused − the best fused) (1 for the first row, e^−1 a standard deviation below) + recency_weight ×
        recency.
        rrf_score is plain RRF (k 60 over every rank of both legs), reported and used to break ties. Why
        (docs/BENCHMARKS.md, "LoCoMo"): rank fusion weighs a leg's first row the same whether it stands far above
        the leg's other rows or barely; on real dialogue that lost up to 0.05 R@5 to the lexical leg alone.
        """
        weights = {"embedding": self.vector_weight, "bm25": 1.0 - self.vector_weight}
        padding = max(0, len(vector_rows) - len(lexical.rows))
        values = {
            "embedding": [1.0 - row.score for row in vector_rows],
            "bm25": [row.score for row in lexical.rows] + [0.0] * padding,
        }
        best_bm25 = lexical.rows[0].score if lexical.rows else 0.0
        floors = {"embedding": MIN_COSINE_DEVIATION, "bm25": MIN_BM25_DEVIATION * best_bm25}
        scales = {name: _standardise(leg, floors[name]) for name, leg in values.items()}
        absent = {  # the standardised score of a row missing from the leg
            "embedding": (min(values["embedding"], default=0.0) - scales["embedding"][0]) / scales["embedding"][1]
            - VECTOR_ABSENT_PENALTY,
            "bm25": max(
                (min(values["bm25"], default=0.0) - scales["bm25"][0]) / scales["bm25"][1], -LEXICAL_ABSENT_FLOOR
            ),
        }
        candidates: dict[uuid.UUID, Candidate] = {}
        for name, rows in (("embedding", vector_rows), ("bm25", lexical.rows)):
            for rank, row in enumerate(rows, start=1):
                candidate = candidates.get(row.id)
                if candidate is None:
                    candidate = candidates[row.id] = Candidate(row.id, row.created_at, 0.0, [])
                candidate.rrf_score += 1.0 / (RRF_K + rank)
                candidate.match_source.append(name)
                if name == "embedding":
                    candidate.distance = row.score
                else:
                    candidate.bm25_score = row.score
        if not candidates:
            return []
        for candidate in candidates.values():
            for name, value in (
                ("embedding", None if candidate.distance is None else 1.0 - candidate.distance),
                ("bm25", candidate.bm25_score),
            ):
                if values[name]:
                    mean, deviation = scales[name]
                    standard = absent[name] if value is None else (value - mean) / deviation
                    candidate.fused_score += weights[name] * standard
        return self._ranked(candidates.values(), query)

    def _lift(
        self, candidates: Sequence[Candidate], preceding: Mapping[uuid.UUID, uuid.UUID | None], query: SearchQuery
    ) -> list[Candidate]:
        """Neighbouring turns: the candidate stored just before each leader (`preceding`: leader → that thought,
        for the first candidates of the fused order) adds search.neighbour_weight × (the leader's fused − the
        lowest fused). In a dialogue the turn that holds the answer is often followed by the one that repeats
        the question's words. Only candidates are lifted, never a row neither leg found."""
        by_id = {candidate.id: candidate for candidate in candidates}
        own = {candidate.id: candidate.fused_score for candidate in candidates}
        lowest = min(own.values())
        for leader, before in preceding.items():
            if leader in own and before is not None and before in by_id:
                by_id[before].fused_score += self.neighbour_weight * (own[leader] - lowest)
        return self._ranked(candidates, query)

    @staticmethod
    def _ranked(candidates: Iterable[Candidate], query: SearchQuery) -> list[Candidate]:
        """The final scores (e^(fused − best) + recency) and the order: final score, then rrf_score, then id."""
        candidates = list(candidates)
        best = max(candidate.fused_score for candidate in candidates)
        now = datetime.now(UTC)
        for candidate in candidates:
            candidate.final_score = math.exp(candidate.fused_score - best)
            if query.recency_weight > 0:
                candidate.recency_score = recency(candidate.created_at, query.recency_half_life_days, now)
                candidate.final_score += query.recency_weight * candidate.recency_score
        # The id as a UUID orders as its canonical text does (fixed-width lowercase hex), without a str per row.
        return sorted(candidates, key=lambda row: (-row.final_score, -row.rrf_score, row.id))

    async def _hits(
        self,
        page: list[Candidate],
        vector: Vector | None,
        supersession: Literal["flag", "off"],
        contradiction: Literal["flag", "off"],
    ) -> list[Hit]:
        """The page's thoughts, read in one query with their standing edges and the distances the lexical leg
        did not have."""
        profile = self.embedding.profile
        model_id = profile.model_id if profile is not None else None
        rows = await self.repo.page([candidate.id for candidate in page], vector, model_id)
        hits: list[Hit] = []
        for candidate in page:
            row = rows.get(candidate.id)
            if row is None:  # READ COMMITTED: each statement sees what committed before it began
                continue
            distance = row.distance if candidate.distance is None else candidate.distance
            similarity = None if distance is None else 1.0 - distance
            hit = Hit(thought=row.record, match_source=candidate.match_source, similarity=similarity)
            hit.rrf_score, hit.bm25_score = candidate.rrf_score, candidate.bm25_score
            hit.final_score, hit.recency_score = candidate.final_score, candidate.recency_score
            hit.relevance = None if similarity is None else self.calibration.relevance(similarity)
            hit.low_confidence = not hit.anchored and self.calibration.is_weak(similarity)
            hits.append(flagged(hit, row, supersession, contradiction))
        return hits

    async def _superseded(self, candidates: list[Candidate]) -> set[uuid.UUID]:
        """Candidates a non-archived thought replaces (suppress mode drops them before counting)."""
        return await self.repo.superseded_among([candidate.id for candidate in candidates])


def flagged(hit: Hit, row: PageRow, supersession: Literal["flag", "off"], contradiction: Literal["flag", "off"]) -> Hit:
    """The hit with the standing its row's edges give it in these modes: superseded outranks contradicted;
    the flagging ids in a stable order."""
    hit.superseded_by = sorted(row.superseded_by) if supersession == "flag" else []
    hit.contradicted_by = sorted(row.contradicted_by) if contradiction == "flag" else []
    if hit.superseded_by:
        hit.standing = "superseded"
    elif hit.contradicted_by:
        hit.standing = "contradicted"
    return hit
