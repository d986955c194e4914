"""The placement engine behind `memory_status propose` and `edge_review enqueue` (docs/ARCHITECTURE.md)."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Edge, EdgeType, Thought, ThoughtStatus
from app.db.records import ThoughtRecord
from app.db.repositories.thoughts import thought_select
from app.db.vector import index_distance
from app.embedding.profiles import ModelProfile
from app.embedding.runtime import EmbeddingRuntime
from app.services.text import jaccard, normalised

CANDIDATE_POOL = 100
CLUSTER_SIZE_LIMIT = 50
MERGE_JACCARD = 0.6
REPLACES_OVERLAP = 0.6
DEVELOPS_OVERLAP = 0.3
CONTRADICTS_SIMILARITY = 0.75

_CUES = {
    "evolution": r"\b(now|instead|updated?|no longer|replaced?|changed?|moved to|switched|new version|v\d+|"
    r"deprecated|from now on|supersedes?|revised?)\b",
    "negation": r"\b(not|no|never|don't|doesn't|isn't|aren't|won't|cannot|can't|without|avoid|stop)\b",
    "evidential": r"\b(because|since|evidence|confirmed|measured|shows?|proved?|benchmarks?|verified|as seen)\b",
    "dependency": r"\b(requires?|depends on|needs?|blocked by|prerequisites?|relies on|after)\b",
}


def cues(text: str) -> set[str]:
    lowered = text.lower()
    return {name for name, pattern in _CUES.items() if re.search(pattern, lowered)}


@dataclass(frozen=True)
class Subject:
    thought: ThoughtRecord | None  # None for draft content
    content: str
    created_at: datetime | None
    vector: list[float] | None


@dataclass
class PlannedEdge:
    target: ThoughtRecord
    type: EdgeType
    confidence: float
    rationale: str
    signals: dict[str, Any] = field(default_factory=dict)


@dataclass
class Plan:
    project_id: uuid.UUID
    placement: dict[str, Any]
    edges: list[PlannedEdge]
    lifecycle: dict[str, Any]
    degraded: bool


def choose_edge(subject: Subject, neighbour: ThoughtRecord, similarity: float) -> PlannedEdge:
    """First matching rule wins."""
    overlap = jaccard(subject.content, neighbour.content)
    mine, theirs = cues(subject.content), cues(neighbour.content)
    newer = subject.created_at is None or subject.created_at > neighbour.created_at
    signals = {"similarity": round(similarity, 4), "overlap": round(overlap, 4), "cues": sorted(mine)}
    confident = round(min(1.0, similarity + 0.1), 4)
    if newer and overlap >= REPLACES_OVERLAP and "evolution" in mine:
        return PlannedEdge(neighbour, EdgeType.replaces, confident, "newer restatement with an evolution cue", signals)
    if (("negation" in mine) != ("negation" in theirs)) and similarity >= CONTRADICTS_SIMILARITY:
        return PlannedEdge(neighbour, EdgeType.contradicts, confident, "close meaning, one side negated", signals)
    if "evidential" in mine:
        return PlannedEdge(neighbour, EdgeType.supports, confident, "evidential cue", signals)
    if "evolution" in mine and newer and overlap >= DEVELOPS_OVERLAP:
        return PlannedEdge(neighbour, EdgeType.develops, confident, "builds on the earlier thought", signals)
    if "dependency" in mine:
        return PlannedEdge(neighbour, EdgeType.depends_on, confident, "dependency cue", signals)
    return PlannedEdge(neighbour, EdgeType.related, round(similarity, 4), "semantically close", signals)


def neighbour_threshold(profile: ModelProfile | None) -> float:
    """How similar a neighbour must be to be planned against: the profile's (0.75 for e5-small, either build, and
    without a model), else 0.1 above the model's measured unrelated floor."""
    if profile is None:
        return 0.75
    if profile.neighbour_similarity is not None:
        return profile.neighbour_similarity
    return profile.unrelated_floor + 0.1


async def plan_placement(
    session: AsyncSession,
    embedding: EmbeddingRuntime,
    thought: ThoughtRecord | None,
    content: str,
    project_id: uuid.UUID,
) -> Plan:
    """The plan for a thought (embedded again when its stored vector is the active model's) or for draft
    content, against one project, with the active model's neighbour threshold."""
    vector = None
    profile = embedding.profile
    if thought is not None and profile is not None and thought.embedding_model == profile.model_id:
        vector = await embedding.embed_passages([thought.content])
    elif profile is not None:
        vector = await embedding.embed_passages([content])
    subject = Subject(thought, content, thought.created_at if thought else None, vector[0] if vector else None)
    engine = PlacementEngine(session, neighbour_threshold(profile))
    return await engine.plan(subject, project_id, profile.model_id if profile else None)


class PlacementEngine:
    def __init__(self, session: AsyncSession, neighbour_similarity: float) -> None:
        self.session = session
        self.threshold = neighbour_similarity

    async def plan(self, subject: Subject, project_id: uuid.UUID, model_id: str | None) -> Plan:
        neighbours = await self._neighbours(subject, project_id, model_id)
        edges = [choose_edge(subject, thought, similarity) for thought, similarity in neighbours]
        edges.sort(key=lambda edge: (-edge.confidence, str(edge.target.id)))
        placement = await self._placement(neighbours)
        lifecycle = _lifecycle(subject, neighbours, edges)
        return Plan(project_id, placement, edges, lifecycle, degraded=subject.vector is None)

    async def _neighbours(
        self, subject: Subject, project_id: uuid.UUID, model_id: str | None
    ) -> list[tuple[ThoughtRecord, float]]:
        if subject.vector is None or model_id is None:
            return []
        distance = index_distance(Thought.embedding, subject.vector)
        statement = (
            thought_select()
            .add_columns(distance.label("distance"))
            .where(
                Thought.project_id == project_id,
                Thought.status == ThoughtStatus.active,
                Thought.is_cluster.is_(False),
                Thought.embedding_model == model_id,
            )
            .order_by(distance)
            .limit(CANDIDATE_POOL)
        )
        if subject.thought is not None:
            statement = statement.where(Thought.id != subject.thought.id)
        rows = (await self.session.execute(statement)).all()
        close = [(_record(row), 1.0 - float(row.distance)) for row in rows]
        close = [(thought, similarity) for thought, similarity in close if similarity >= self.threshold]
        if subject.thought is None or not close:
            return close
        linked = await self._linked_to(subject.thought.id, [thought.id for thought, _ in close])
        return [(thought, similarity) for thought, similarity in close if thought.id not in linked]

    async def _linked_to(self, thought_id: uuid.UUID, others: list[uuid.UUID]) -> set[uuid.UUID]:
        statement = select(Edge.source_id, Edge.target_id).where(
            or_(
                (Edge.source_id == thought_id) & Edge.target_id.in_(others),
                (Edge.target_id == thought_id) & Edge.source_id.in_(others),
            )
        )
        return {
            row.target_id if row.source_id == thought_id else row.source_id
            for row in await self.session.execute(statement)
        }

    async def _placement(self, neighbours: list[tuple[ThoughtRecord, float]]) -> dict[str, Any]:
        if not neighbours:
            return {"kind": "none", "rationale": "no close neighbour"}
        ids = [thought.id for thought, _ in neighbours]
        clusters = (
            await self.session.execute(
                select(Edge.target_id, Edge.source_id).where(Edge.type == EdgeType.cluster, Edge.target_id.in_(ids))
            )
        ).all()
        votes: dict[uuid.UUID, int] = {}
        for row in clusters:
            votes[row.source_id] = votes.get(row.source_id, 0) + 1
        if votes:
            best, count = max(votes.items(), key=lambda item: (item[1], str(item[0])))
            size = (
                await self.session.execute(
                    select(func.count()).select_from(Edge).where(Edge.source_id == best, Edge.type == EdgeType.cluster)
                )
            ).scalar_one()
            if count * 2 > len({row.target_id for row in clusters}) and size < CLUSTER_SIZE_LIMIT:
                return {
                    "kind": "cluster",
                    "cluster_id": str(best),
                    "rationale": f"{count} clustered neighbour(s) share it",
                }
        chained = await self._in_chain(ids)
        for thought, similarity in neighbours:
            if thought.id in chained:
                return {
                    "kind": "parent",
                    "parent_id": str(thought.id),
                    "rationale": f"nearest chained neighbour ({similarity:.2f})",
                }
        return {"kind": "none", "rationale": "no clustered or chained neighbour"}

    async def _in_chain(self, ids: list[uuid.UUID]) -> set[uuid.UUID]:
        statement = select(Edge.source_id, Edge.target_id).where(
            Edge.type.in_((EdgeType.parent, EdgeType.develops)),
            or_(Edge.source_id.in_(ids), Edge.target_id.in_(ids)),
        )
        rows = (await self.session.execute(statement)).all()
        return {end for row in rows for end in (row.source_id, row.target_id)}


def _record(row: Any) -> ThoughtRecord:
    return ThoughtRecord(**{key: value for key, value in row._mapping.items() if key != "distance"})


def _lifecycle(
    subject: Subject, neighbours: list[tuple[ThoughtRecord, float]], edges: list[PlannedEdge]
) -> dict[str, Any]:
    # The order of docs/ARCHITECTURE.md ("Placement rules"): replaces+archive, merge, link, keep. A `replaces` edge
    # needs the same word overlap as a merge, so checking merge first would make replaces+archive unreachable.
    replaced = next((edge for edge in edges if edge.type == EdgeType.replaces), None)
    if replaced is not None:
        return {
            "action": "replaces+archive",
            "target_id": str(replaced.target.id),
            "rationale": "the older thought is superseded",
        }
    for thought, _ in neighbours:
        if (
            normalised(thought.content) == normalised(subject.content)
            or jaccard(thought.content, subject.content) >= MERGE_JACCARD
        ):
            return {"action": "merge", "target_id": str(thought.id), "rationale": "near-identical content"}
    if edges:
        return {"action": "link", "rationale": f"{len(edges)} close neighbour(s)"}
    return {"action": "keep", "rationale": "nothing close"}
