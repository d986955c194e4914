"""The two retrieval legs and the reads that annotate their candidates."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Text, and_, case, cast, func, literal, or_, select
from sqlalchemy.dialects.postgresql import REGCONFIG, TSQUERY
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Edge, EdgeType, Thought, ThoughtStatus
from app.db.records import ThoughtRecord
from app.db.repositories.thoughts import ThoughtFilter, id_in, thought_select, to_record
from app.db.vector import index_distance

# A very common word can match most of a project, so the leg ranks at most this many matching rows. Measured at
# 100 k thoughts: rows holding every word are few (p95 ~600), and for the OR match 300 agrees with the uncapped
# top 10 nearly as often as 1000 does (0.913 vs 0.924) for well under half the p95 (docs/BENCHMARKS.md).
EVERY_WORD_CAP = 1000
ANY_WORD_CAP = 300


SearchFilter = ThoughtFilter  # the read filter of every leg; kept as a name for bench scripts


def hnsw_ef_search(pool: int) -> int:
    """The HNSW candidate list for a pool: at 100 k thoughts with m 12, 100 recalled 0.976 and 200 0.994 (+0.3 ms)."""
    return max(200, min(pool, 1000))


class LegRow(NamedTuple):
    """One candidate of a retrieval leg: cosine distance (vector leg) or ts_rank_cd (lexical leg)."""

    id: uuid.UUID
    score: float
    created_at: datetime


def and_tsquery(query: str) -> Any:
    """Every word of the query (plainto_tsquery sanitises every metacharacter)."""
    return func.plainto_tsquery(cast("english", REGCONFIG), query)


def or_tsquery(query: str) -> Any:
    """The query's words OR-ed together."""
    return cast(func.replace(cast(and_tsquery(query), Text), "&", "|"), TSQUERY)


class SearchRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def vector_leg(self, vector: Sequence[float], model_id: str, where: SearchFilter, pool: int) -> list[LegRow]:
        """Nearest first by cosine distance; filters run inside the HNSW scan (iterative scan on)."""
        ef_search = str(hnsw_ef_search(pool))
        await self.session.execute(
            select(
                func.set_config("hnsw.iterative_scan", "relaxed_order", True),
                func.set_config("hnsw.ef_search", ef_search, True),
            )
        )
        distance = index_distance(Thought.embedding, vector)
        statement = (
            select(Thought.id, distance.label("distance"), Thought.created_at)
            .where(Thought.embedding_model == model_id, *where.clauses())
            .order_by(distance)
            .limit(pool)
        )
        rows = [LegRow(row.id, float(row.distance), row.created_at) for row in await self.session.execute(statement)]
        return sorted(rows, key=lambda row: row.score)  # relaxed order: re-sort the few we got

    async def lexical_leg(self, query: str, where: SearchFilter, pool: int, enough: int) -> list[LegRow]:
        """Best first by ts_rank_cd of the OR-ed words: rows holding every word, then rows holding any.

        The AND match is cheap (GIN intersects the words); the OR match of common words can cover most of a
        project, so it runs only when fewer than `enough` rows hold every word, over at most
        ANY_WORD_CAP matching rows.
        """
        every = await self._ranked(and_tsquery(query), query, where, pool, EVERY_WORD_CAP)
        if len(every) >= enough:
            return every
        seen = {row.id for row in every}
        some = await self._ranked(or_tsquery(query), query, where, pool, ANY_WORD_CAP)
        return [*every, *(row for row in some if row.id not in seen)][:pool]

    async def _ranked(self, match: Any, query: str, where: SearchFilter, pool: int, cap: int) -> list[LegRow]:
        matches = (
            select(Thought.id, Thought.tsv, Thought.created_at)
            .where(Thought.tsv.op("@@")(match), *where.clauses())
            .limit(cap)
            .cte("matches")
        )
        rank = func.ts_rank_cd(matches.c.tsv, or_tsquery(query))
        statement = (
            select(matches.c.id, rank.label("rank"), matches.c.created_at)
            .order_by(rank.desc(), matches.c.id)
            .limit(pool)
        )
        return [LegRow(row.id, float(row.rank), row.created_at) for row in await self.session.execute(statement)]

    async def records(
        self, thought_ids: Sequence[uuid.UUID], vector: Sequence[float] | None, model_id: str | None
    ) -> dict[uuid.UUID, tuple[ThoughtRecord, float | None]]:
        """The thoughts with their cosine distance to `vector` (None without one or for another model's vector)."""
        if not thought_ids:
            return {}
        if vector is None:
            distance: Any = literal(None)
        else:
            cosine = index_distance(Thought.embedding, vector)  # the same numbers as the vector leg's
            distance = case((Thought.embedding_model == model_id, cosine), else_=None)
        statement = thought_select().add_columns(distance.label("distance")).where(id_in(Thought.id, thought_ids))
        found: dict[uuid.UUID, tuple[ThoughtRecord, float | None]] = {}
        for row in await self.session.execute(statement):
            fields = dict(row._mapping)
            distance_value = fields.pop("distance")
            found[row.id] = (ThoughtRecord(**fields), None if distance_value is None else float(distance_value))
        return found

    async def by_id_range(
        self, low: uuid.UUID, high: uuid.UUID, where: SearchFilter, cap: int
    ) -> tuple[list[ThoughtRecord], int]:
        """Thoughts whose id falls in [low, high] (an id prefix), in id order, and how many there are."""
        in_range = and_(Thought.id >= low, Thought.id <= high, *where.clauses())
        total = (await self.session.execute(select(func.count()).select_from(Thought).where(in_range))).scalar_one()
        rows = await self.session.execute(thought_select().where(in_range).order_by(Thought.id).limit(cap))
        return [to_record(row) for row in rows], int(total)

    async def standing_edges(self, thought_ids: Sequence[uuid.UUID]) -> list[tuple[uuid.UUID, uuid.UUID, EdgeType]]:
        """`replaces` edges into the thoughts from non-archived sources, and `contradicts` edges at either end."""
        if not thought_ids:
            return []
        live_source = select(Thought.id).where(Thought.id == Edge.source_id, Thought.status != ThoughtStatus.archived)
        statement = select(Edge.source_id, Edge.target_id, Edge.type).where(
            or_(
                and_(Edge.type == EdgeType.replaces, id_in(Edge.target_id, thought_ids), live_source.exists()),
                and_(
                    Edge.type == EdgeType.contradicts,
                    or_(id_in(Edge.source_id, thought_ids), id_in(Edge.target_id, thought_ids)),
                ),
            )
        )
        return [(row.source_id, row.target_id, row.type) for row in await self.session.execute(statement)]

    async def clusters_of(self, thought_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, tuple[uuid.UUID, str]]:
        """member id → (cluster id, cluster content) via `cluster` edges (cluster → member)."""
        if not thought_ids:
            return {}
        statement = (
            select(Edge.target_id, Thought.id, Thought.content)
            .join(Thought, Thought.id == Edge.source_id)
            .where(Edge.type == EdgeType.cluster, Edge.target_id.in_(list(thought_ids)))
            .order_by(Edge.created_at)
        )
        result: dict[uuid.UUID, tuple[uuid.UUID, str]] = {}
        for row in await self.session.execute(statement):
            result.setdefault(row.target_id, (row.id, row.content))
        return result
