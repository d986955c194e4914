"""A project's graph as a person browses it: its most connected live thoughts, a page at a time, and the edges
among them (the console's project graph view, docs/CONSOLE.md).

Ranking is one statement: the ends of the project's edges counted per thought (a pass over the project's edges:
no index names a project's edges), sorted by that count, then walked in that order through the primary key of
`thought` until a page of the project's live thoughts is found — so a page costs offset + limit key lookups, not
one per connected thought (the statement ran 67 ms, now 3 ms, for the largest project at 100 k thoughts;
docs/CONSOLE.md "Project graph").
`connected` counts the thoughts at either end of the project's edges, archived ones included, so the last page
may come out short. The edges drawn between a page's thoughts are one indexed read by `source_id`.
Both run under the caller's visibility like every other read (SHADOWED / the ORM's criteria).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Edge
from app.db.visibility import SHADOWED

# The page cap: past ~60 nodes a drawing in a 72 rem box stops being readable.
MAX_NODES = 60

# The project's edges are read once, both ends of each row unnested: every read of `edge` checks that both of its
# ends are readable (SHADOWED), so the earlier UNION ALL of the source and target columns paid that check twice
# per edge (two index lookups of `thought` each): 2 lookups per edge instead of 4 (docs/BENCHMARKS.md, "Twelfth
# round").
_RANKED_SQL = """
WITH ends AS (
    SELECT end_id AS id FROM edge CROSS JOIN LATERAL (VALUES (edge.source_id), (edge.target_id)) AS both_ends (end_id)
    WHERE edge.project_id = :project
), degree AS (
    SELECT id, count(*) AS degree, count(*) OVER () AS connected FROM ends GROUP BY id
)
SELECT t.id, t.content, t.status, d.degree, d.connected
FROM (SELECT * FROM degree ORDER BY degree DESC, id) AS d
CROSS JOIN LATERAL (
    SELECT id, content, status FROM thought
    WHERE thought.id = d.id AND thought.project_id = :project AND thought.status IN ('active', 'draft')
) AS t
ORDER BY d.degree DESC, d.id
LIMIT :limit OFFSET :offset
"""


@dataclass(frozen=True)
class GraphNode:
    id: uuid.UUID
    content: str
    status: str
    degree: int


@dataclass(frozen=True)
class GraphEdge:
    id: uuid.UUID
    source_id: uuid.UUID
    target_id: uuid.UUID
    type: str


@dataclass(frozen=True)
class ProjectGraph:
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    connected: int  # live thoughts of the project with at least one edge (what the pages walk through)


async def most_connected(session: AsyncSession, project_id: uuid.UUID, limit: int, offset: int) -> ProjectGraph:
    """The page of the project's live thoughts by number of edges (most first, then by id), with every edge
    whose two ends are on the page."""
    limit = max(1, min(limit, MAX_NODES))
    parameters = {"project": project_id, "limit": limit, "offset": max(0, offset)}
    rows = (await session.execute(text(_RANKED_SQL).execution_options(**SHADOWED), parameters)).all()
    nodes = [GraphNode(row.id, row.content, str(row.status), int(row.degree)) for row in rows]
    connected = int(rows[0].connected) if rows else 0
    ids = [node.id for node in nodes]
    edges: list[GraphEdge] = []
    if ids:
        found = await session.execute(
            select(Edge.id, Edge.source_id, Edge.target_id, Edge.type)
            .where(Edge.source_id.in_(ids), Edge.target_id.in_(ids))
            .order_by(Edge.id)
        )
        edges = [GraphEdge(row.id, row.source_id, row.target_id, str(row.type.value)) for row in found.all()]
    return ProjectGraph(nodes, edges, connected)
