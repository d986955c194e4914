"""Graph reads: a thought's one-hop neighbourhood and its parent/develops chain."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import EdgeType
from app.db.records import EdgeRecord
from app.db.repositories.edges import EdgeRepository
from app.db.repositories.thoughts import ThoughtRepository
from app.db.visibility import SHADOWED
from app.services.recall.thoughts import Neighbour, one_hop

# Walks parent/develops edges away from a thought; `source → target` means source is the earlier one.
_CHAIN_SQL = """
WITH RECURSIVE walk(edge_id, thought_id, depth, path) AS (
    SELECT e.id, {next_end}, 1, ARRAY[:start, {next_end}]
    FROM edge e
    WHERE e.{this_end} = :start AND e.type IN ('parent', 'develops')
  UNION ALL
    SELECT e.id, {next_e}, w.depth + 1, w.path || {next_e}
    FROM walk w JOIN edge e ON e.{this_end} = w.thought_id
    WHERE e.type IN ('parent', 'develops') AND w.depth < :max_depth AND NOT {next_e} = ANY(w.path)
)
SELECT e.id, e.source_id, e.target_id, e.type, e.created_at, w.depth
FROM walk w JOIN edge e ON e.id = w.edge_id
ORDER BY w.depth, e.created_at, e.id
LIMIT :cap
"""


@dataclass(frozen=True)
class ChainStep:
    neighbour: Neighbour
    depth: int


class GraphService:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session
        self.thoughts = ThoughtRepository(session)
        self.edges = EdgeRepository(session)

    async def neighbourhood(self, thought_id: uuid.UUID, max_edges: int) -> tuple[list[Neighbour], list[Neighbour]]:
        return await one_hop(self.thoughts, self.edges, thought_id, max_edges)

    async def chain(self, thought_id: uuid.UUID, max_depth: int, cap: int) -> tuple[list[ChainStep], list[ChainStep]]:
        """Ancestors (upstream) and descendants (downstream) over parent/develops, up to max_depth hops."""
        upstream = await self._walk(thought_id, "target_id", "source_id", max_depth, cap)
        downstream = await self._walk(thought_id, "source_id", "target_id", max_depth, cap)
        return upstream, downstream

    async def _walk(self, start: uuid.UUID, this_end: str, next_end: str, max_depth: int, cap: int) -> list[ChainStep]:
        sql = _CHAIN_SQL.format(this_end=this_end, next_end=f"e.{next_end}", next_e=f"e.{next_end}")
        parameters = {"start": start, "max_depth": max_depth, "cap": cap}
        # SHADOWED: the walk never passes through a thought or an edge the caller cannot read.
        rows = (await self.session.execute(text(sql).execution_options(**SHADOWED), parameters)).all()
        ends = [row.source_id if next_end == "source_id" else row.target_id for row in rows]
        records = await self.thoughts.get_many(ends)
        return [
            ChainStep(
                Neighbour(
                    EdgeRecord(row.id, row.source_id, row.target_id, EdgeType(row.type), row.created_at),
                    records[end],
                ),
                row.depth,
            )
            for row, end in zip(rows, ends, strict=True)
            if end in records
        ]
