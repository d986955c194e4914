"""The two retrieval legs and the reads that annotate their candidates."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Text, and_, cast, func, or_, select, text
from sqlalchemy.dialects.postgresql import REGCONFIG, TSQUERY
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Edge, EdgeType, Thought, ThoughtStatus
from app.db.records import ThoughtRecord
from app.db.repositories.thoughts import ThoughtFilter, thought_select, to_record

# A very common word can match most of a project: rank at most this many matching rows.
LEXICAL_MATCH_CAP = 1000


SearchFilter = ThoughtFilter  # the read filter of every leg; kept as a name for bench scripts


def or_tsquery(query: str) -> Any:
    """The query's words OR-ed together (plainto_tsquery sanitises every metacharacter first)."""
    plain = func.plainto_tsquery(cast("english", REGCONFIG), query)
    return cast(func.replace(cast(plain, Text), "&", "|"), TSQUERY)


class SearchRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def vector_leg(
        self, vector: Sequence[float], model_id: str, where: SearchFilter, pool: int
    ) -> list[tuple[uuid.UUID, float]]:
        """(id, cosine distance) nearest first; filters run inside the HNSW scan (iterative scan on)."""
        await self.session.execute(text("SET LOCAL hnsw.iterative_scan = relaxed_order"))
        await self.session.execute(text(f"SET LOCAL hnsw.ef_search = {max(40, min(pool, 1000))}"))
        distance = Thought.embedding.cosine_distance(list(vector))
        statement = (
            select(Thought.id, distance.label("distance"))
            .where(Thought.embedding_model == model_id, *where.clauses())
            .order_by(distance)
            .limit(pool)
        )
        rows = [(row.id, float(row.distance)) for row in await self.session.execute(statement)]
        return sorted(rows, key=lambda row: row[1])  # relaxed order: re-sort the few we got

    async def lexical_leg(self, query: str, where: SearchFilter, pool: int) -> list[tuple[uuid.UUID, float]]:
        """(id, ts_rank_cd) best first, over at most LEXICAL_MATCH_CAP matching rows."""
        tsquery = or_tsquery(query)
        matches = (
            select(Thought.id, Thought.tsv)
            .where(Thought.tsv.op("@@")(tsquery), *where.clauses())
            .limit(LEXICAL_MATCH_CAP)
            .cte("matches")
        )
        rank = func.ts_rank_cd(matches.c.tsv, tsquery)
        statement = select(matches.c.id, rank.label("rank")).order_by(rank.desc(), matches.c.id).limit(pool)
        return [(row.id, float(row.rank)) for row in await self.session.execute(statement)]

    async def distances(
        self, vector: Sequence[float], model_id: str, thought_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, float]:
        """Cosine distances of given thoughts (those of the current model only)."""
        if not thought_ids:
            return {}
        distance = Thought.embedding.cosine_distance(list(vector))
        statement = select(Thought.id, distance.label("distance")).where(
            Thought.id.in_(thought_ids), Thought.embedding_model == model_id
        )
        return {row.id: float(row.distance) for row in await self.session.execute(statement)}

    async def records(self, thought_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, ThoughtRecord]:
        if not thought_ids:
            return {}
        rows = await self.session.execute(thought_select().where(Thought.id.in_(thought_ids)))
        return {row.id: to_record(row) for row in rows}

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
        ids = list(thought_ids)
        live_source = select(Thought.id).where(Thought.id == Edge.source_id, Thought.status != ThoughtStatus.archived)
        statement = select(Edge.source_id, Edge.target_id, Edge.type).where(
            or_(
                and_(Edge.type == EdgeType.replaces, Edge.target_id.in_(ids), live_source.exists()),
                and_(Edge.type == EdgeType.contradicts, or_(Edge.source_id.in_(ids), Edge.target_id.in_(ids))),
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
