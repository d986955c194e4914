"""The search pipeline (DESIGN.md §9): id lookup, vector + lexical legs, RRF, calibration, standing, gate."""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import EdgeType
from app.db.records import ThoughtRecord
from app.db.repositories.search import SearchRepository
from app.db.repositories.thoughts import ThoughtFilter
from app.embedding.runtime import EmbeddingRuntime
from app.services.hits import HitService
from app.services.id_lookup import ID_PREFIX_MATCH_HARD_CAP, IdQuery, id_not_found_warning, parse_id_query
from app.services.relevance import Calibration

RRF_K = 60
Standing = Literal["current", "contradicted", "superseded"]
STANDING_ORDER = {"current": 0, "contradicted": 1, "superseded": 2}


@dataclass(frozen=True)
class SearchQuery:
    text: str
    where: ThoughtFilter
    limit: int
    hybrid: bool = True
    min_relevance: float | None = None  # None = the default gate
    recency_weight: float = 0.0
    recency_half_life_days: float = 30.0
    supersession_mode: Literal["flag", "suppress", "off"] = "flag"
    contradiction_mode: Literal["flag", "off"] = "flag"
    # The query vector when the caller embedded it before opening its transaction (None = embedder down).
    vector: list[float] | None = None
    embedded: bool = False


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
class SearchOutcome:
    hits: list[Hit]
    total: int
    filtered_out: int = 0
    degraded: bool = False
    warnings: list[str] = field(default_factory=list)
    reason: str | None = None


def pool_size(limit: int) -> int:
    return min(1000, max(10 * limit, 100))


def recency(created_at: datetime, half_life_days: float, now: datetime) -> float:
    age_days = max(0.0, (now - created_at).total_seconds() / 86_400)
    return math.pow(0.5, age_days / half_life_days)


class SearchService:
    def __init__(
        self,
        session: AsyncSession,
        embedding: EmbeddingRuntime,
        calibration: Calibration,
        default_min_relevance: float,
        hits: HitService | None,
    ) -> None:
        self.repo = SearchRepository(session)
        self.embedding = embedding
        self.calibration = calibration
        self.default_gate = default_min_relevance
        self.hits = hits

    async def search(self, query: SearchQuery) -> SearchOutcome:
        outcome = await self._search(query)
        if self.hits is not None:
            await self.hits.record(hit.thought.id for hit in outcome.hits)
        return outcome

    async def _search(self, query: SearchQuery) -> SearchOutcome:
        id_query = parse_id_query(query.text)
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
        hits = [Hit(thought=row, match_source=["id"]) for row in rows]
        # An id is never suppressed: suppress degrades to flag here.
        mode: Literal["flag", "off"] = "off" if query.supersession_mode == "off" else "flag"
        await self._annotate(hits, mode, query.contradiction_mode)
        reason = "ambiguous_id" if total > 1 else None
        # An id is never gated: rows past the limit are sliced off (returned < total), not filtered out.
        return SearchOutcome(hits=hits, total=total, filtered_out=0, reason=reason)

    # ------------------------------------------------------------ ranked search

    async def ranked(self, query: SearchQuery) -> SearchOutcome:
        pool = pool_size(query.limit)
        profile = self.embedding.profile
        if query.embedded:
            vector = query.vector if profile is not None else None
        else:
            vector = await self.embedding.embed_query(query.text) if profile is not None else None
        degraded = vector is None
        vector_rows: list[tuple[uuid.UUID, float]] = []
        if vector is not None and profile is not None:
            vector_rows = await self.repo.vector_leg(vector, profile.model_id, query.where, pool)
        lexical_rows: list[tuple[uuid.UUID, float]] = []
        if query.hybrid or degraded:
            lexical_rows = await self.repo.lexical_leg(query.text, query.where, pool)
        hits = await self._fuse(vector_rows, lexical_rows, vector, query)
        if query.supersession_mode == "suppress":
            await self._annotate(hits, "flag", query.contradiction_mode)
            hits = [hit for hit in hits if hit.standing != "superseded" and not hit.superseded_by]
        else:
            await self._annotate(hits, query.supersession_mode, query.contradiction_mode)
        total = len(hits)
        gate = self.default_gate if query.min_relevance is None else query.min_relevance
        kept = [hit for hit in hits if hit.anchored or (hit.relevance or 0.0) >= gate or gate <= 0]
        # Standing re-orders the page, not the pool: sorting the whole over-fetched pool would push every
        # flagged hit behind every current candidate, i.e. out of the page (flag acting as suppress).
        page = kept[: query.limit]
        page.sort(key=lambda hit: STANDING_ORDER[hit.standing])  # stable: keeps score order inside a group
        reason = "no_match" if total == 0 else None
        return SearchOutcome(
            hits=page,
            total=total,
            filtered_out=total - len(kept),
            degraded=degraded,
            reason=reason,
        )

    async def _fuse(
        self,
        vector_rows: Sequence[tuple[uuid.UUID, float]],
        lexical_rows: Sequence[tuple[uuid.UUID, float]],
        vector: list[float] | None,
        query: SearchQuery,
    ) -> list[Hit]:
        scores: dict[uuid.UUID, float] = {}
        distances = dict(vector_rows)
        semantic = set(distances)
        bm25 = dict(lexical_rows)
        for rows in (vector_rows, lexical_rows):
            for rank, (thought_id, _) in enumerate(rows, start=1):
                scores[thought_id] = scores.get(thought_id, 0.0) + 1.0 / (RRF_K + rank)
        if not scores:
            return []
        profile = self.embedding.profile
        missing = [thought_id for thought_id in scores if thought_id not in distances]
        if vector is not None and profile is not None and missing:
            distances.update(await self.repo.distances(vector, profile.model_id, missing))
        records = await self.repo.records(list(scores))
        best = max(scores.values())
        now = datetime.now(UTC)
        hits: list[Hit] = []
        for thought_id, rrf in scores.items():
            record = records.get(thought_id)
            if record is None:
                continue
            similarity = 1.0 - distances[thought_id] if thought_id in distances else None
            sources = [name for name, leg in (("embedding", semantic), ("bm25", bm25.keys())) if thought_id in leg]
            hit = Hit(thought=record, match_source=sources, similarity=similarity, rrf_score=rrf)
            hit.bm25_score = bm25.get(thought_id)
            hit.relevance = None if similarity is None else self.calibration.relevance(similarity)
            hit.low_confidence = not hit.anchored and self.calibration.is_weak(similarity)
            hit.final_score = rrf / best
            if query.recency_weight > 0:
                hit.recency_score = recency(record.created_at, query.recency_half_life_days, now)
                hit.final_score += query.recency_weight * hit.recency_score
            hits.append(hit)
        hits.sort(key=lambda hit: (-(hit.final_score or 0.0), str(hit.thought.id)))
        return hits

    async def _annotate(
        self, hits: list[Hit], supersession: Literal["flag", "off"], contradiction: Literal["flag", "off"]
    ) -> None:
        by_id = {hit.thought.id: hit for hit in hits}
        for source, target, edge_type in await self.repo.standing_edges(list(by_id)):
            if edge_type == EdgeType.replaces and supersession == "flag" and target in by_id:
                by_id[target].superseded_by.append(source)
            if edge_type == EdgeType.contradicts and contradiction == "flag":
                if target in by_id:
                    by_id[target].contradicted_by.append(source)
                if source in by_id:
                    by_id[source].contradicted_by.append(target)
        for hit in hits:
            hit.superseded_by.sort()
            hit.contradicted_by.sort()
            if hit.superseded_by:
                hit.standing = "superseded"
            elif hit.contradicted_by:
                hit.standing = "contradicted"
