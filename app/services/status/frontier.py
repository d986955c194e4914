"""The frontier: what to work on next (docs/mcp-tools.md, memory_status action=frontier)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy import and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Edge, EdgeType, Thought, ThoughtStatus
from app.db.records import ThoughtRecord
from app.db.repositories.thoughts import thought_select, to_record

FRONTIER_TAGS = ("directive", "todo", "pending")
CONTENT_SHORT = 120


@dataclass
class FrontierEntry:
    thought: ThoughtRecord
    reason: str
    priority: float = 0.0
    blocked_by: list[uuid.UUID] = field(default_factory=list)


def content_short(content: str) -> str:
    collapsed = " ".join(content.split())
    return collapsed if len(collapsed) <= CONTENT_SHORT else collapsed[:CONTENT_SHORT] + "…"


def _age_bonus(created_at: datetime, now: datetime) -> float:
    age = now - created_at
    if age <= timedelta(days=7):
        return 0.1
    return 0.05 if age <= timedelta(days=30) else 0.0


class FrontierService:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def _candidates(self, project_id: uuid.UUID | None, tags: tuple[str, ...]) -> list[ThoughtRecord]:
        replacer = Thought.__table__.alias("replacer")
        is_superseded = (
            select(Edge.id)
            .join(replacer, replacer.c.id == Edge.source_id)
            .where(Edge.target_id == Thought.id, Edge.type == EdgeType.replaces, replacer.c.status != "archived")
            .exists()
        )
        statement = thought_select().where(
            Thought.is_cluster.is_(False),
            Thought.status.in_((ThoughtStatus.active, ThoughtStatus.draft)),
            Thought.tags.overlap(list(tags)),
            or_(Thought.surface_after.is_(None), Thought.surface_after <= func.now()),
            ~is_superseded,
        )
        if project_id is not None:
            statement = statement.where(Thought.project_id == project_id)
        return [to_record(row) for row in await self.session.execute(statement.order_by(Thought.id))]

    async def pending(self, project_id: uuid.UUID | None) -> list[ThoughtRecord]:
        """The `pending` thoughts the frontier surfaces (the pending_items slot)."""
        return await self._candidates(project_id, ("pending",))

    async def frontier(self, project_id: uuid.UUID | None) -> list[FrontierEntry]:
        candidates = await self._candidates(project_id, FRONTIER_TAGS)
        on_frontier = {t.id for t in candidates}
        blockers = await self._dependencies(list(on_frontier))
        now = datetime.now(UTC)
        entries = []
        for thought in candidates:
            blocked_by = sorted(target for target in blockers.get(thought.id, []) if target in on_frontier)
            bonus = 0.15 if not blocked_by else 0.0
            priority = min(1.0, 0.5 * thought.importance + bonus + _age_bonus(thought.created_at, now))
            reason = "pending" if "pending" in thought.tags else "directive"
            entries.append(FrontierEntry(thought, reason, round(priority, 4), blocked_by))
        entries.sort(key=lambda entry: (-entry.priority, str(entry.thought.id)))
        return entries

    async def _dependencies(self, thought_ids: list[uuid.UUID]) -> dict[uuid.UUID, list[uuid.UUID]]:
        if not thought_ids:
            return {}
        statement = select(Edge.source_id, Edge.target_id).where(
            and_(Edge.type == EdgeType.depends_on, Edge.source_id.in_(thought_ids))
        )
        result: dict[uuid.UUID, list[uuid.UUID]] = {}
        for row in await self.session.execute(statement):
            result.setdefault(row.source_id, []).append(row.target_id)
        return result
