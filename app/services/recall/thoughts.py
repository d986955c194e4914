"""Reading thoughts by id and by page (search lives in services/recall/search.py)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.records import EdgeRecord, ThoughtRecord
from app.db.repositories.edges import EdgeRepository
from app.db.repositories.thoughts import ThoughtRepository
from app.errors import not_found
from app.services.recall.hits import HitService


@dataclass(frozen=True)
class Neighbour:
    edge: EdgeRecord
    thought: ThoughtRecord


@dataclass(frozen=True)
class ThoughtWithEdges:
    thought: ThoughtRecord
    upstream: list[Neighbour] = field(default_factory=list)  # edges into the thought
    downstream: list[Neighbour] = field(default_factory=list)  # edges out of it


async def one_hop(
    thoughts: ThoughtRepository, edges: EdgeRepository, thought_id: uuid.UUID, max_edges: int
) -> tuple[list[Neighbour], list[Neighbour]]:
    """(upstream: edges into the thought, downstream: edges out of it), one hop, every type."""
    incident = await edges.incident(thought_id, max_edges)
    others = await thoughts.get_many([e.source_id if e.target_id == thought_id else e.target_id for e in incident])
    # An end deleted after the edges were read (READ COMMITTED) is left out with its edge.
    upstream = [
        Neighbour(e, others[e.source_id]) for e in incident if e.target_id == thought_id and e.source_id in others
    ]
    downstream = [
        Neighbour(e, others[e.target_id]) for e in incident if e.source_id == thought_id and e.target_id in others
    ]
    return upstream, downstream


class RecallService:
    def __init__(self, session: AsyncSession, hits: HitService) -> None:
        self.thoughts = ThoughtRepository(session)
        self.edges = EdgeRepository(session)
        self.hits = hits

    async def get(self, thought_id: uuid.UUID, include_edges: bool, max_edges: int) -> ThoughtWithEdges:
        thought = await self.thoughts.get(thought_id)
        if thought is None:
            raise not_found(f"Thought {thought_id} not found")
        if not include_edges:
            await self.hits.record([thought])
            return ThoughtWithEdges(thought)
        upstream, downstream = await one_hop(self.thoughts, self.edges, thought.id, max_edges)
        others = [neighbour.thought for neighbour in (*upstream, *downstream)]
        # Every thought an answer returns counts one hit (docs/mcp-tools.md, "Hits and primers"), neighbours included.
        await self.hits.record([thought, *others])
        return ThoughtWithEdges(thought, upstream, downstream)
