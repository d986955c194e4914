"""memory_reflect: summary lines, goals, decisions (de-duplicated) and pending drafts."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Thought, ThoughtStatus
from app.db.records import Principal, ProjectRecord
from app.services.admin.membership import require_role
from app.services.status.slots import SlotService, cut
from app.services.store.thoughts import NewThought, StoreService
from app.services.text import jaccard

DECISION_JACCARD = 0.6


@dataclass(frozen=True)
class ReflectInput:
    summary: str | None
    goals_add: list[str]
    goals_remove: list[str]
    decisions: list[str]
    pending: list[str]
    wake_days: int


@dataclass(frozen=True)
class ReflectCounts:
    summary_appended: bool
    goals_added: int
    goals_removed: int
    decisions_created: int
    pending_created: int


class ReflectionService:
    def __init__(self, session: AsyncSession, principal: Principal, max_chars: int) -> None:
        self.session = session
        self.principal = principal
        self.slots = SlotService(session, max_chars)
        self.max_chars = max_chars

    async def reflect(
        self,
        data: ReflectInput,
        slot_owner: uuid.UUID | None,
        project: ProjectRecord,
        vectors: dict[str, list[float]],
        model_id: str | None,
    ) -> ReflectCounts:
        if slot_owner is not None and (data.summary or data.goals_add or data.goals_remove):
            await require_role(self.session, [slot_owner])  # the project's slots (the global ones need no project)
        appended = await self._append_summary(data.summary, slot_owner)
        added, removed = await self._edit_goals(data.goals_add, data.goals_remove, slot_owner)
        decisions = await self._new_decisions(data.decisions, project.id)
        store = StoreService(self.session, self.principal)
        created_decisions = await self._create(
            store,
            project,
            [NewThought(text, ["decision", "reflect"]) for text in decisions],
            vectors,
            model_id,
        )
        surface_after = datetime.now(UTC) + timedelta(days=data.wake_days)
        pending = [
            NewThought(text, ["pending", "reflect"], ThoughtStatus.draft, surface_after=surface_after)
            for text in (item.strip() for item in data.pending)
            if text
        ]
        created_pending = await self._create(store, project, pending, vectors, model_id)
        return ReflectCounts(appended, added, removed, created_decisions, created_pending)

    async def _append_summary(self, summary: str | None, owner: uuid.UUID | None) -> bool:
        if not summary or not summary.strip():
            return False
        current = await self.slots.own_row("project_context", owner)
        line = f"[{datetime.now(UTC):%Y-%m-%d %H:%M}] {summary.strip()}"
        content, _ = cut(f"{current}\n{line}" if current else line, self.max_chars, keep_newest=True)
        await self.slots.write("project_context", owner, content)
        return True

    async def _edit_goals(self, add: list[str], remove: list[str], owner: uuid.UUID | None) -> tuple[int, int]:
        if not add and not remove:
            return 0, 0
        lines = [line for line in (await self.slots.own_row("active_goals", owner)).splitlines() if line.strip()]
        needles = [needle.lower() for needle in remove if needle.strip()]
        kept = [line for line in lines if not any(needle in line.lower() for needle in needles)]
        removed = len(lines) - len(kept)
        added = 0
        for goal in (goal.strip() for goal in add):
            if goal and goal.lower() not in {line.lower() for line in kept}:
                kept.append(goal)
                added += 1
        if added or removed:
            await self.slots.write("active_goals", owner, "\n".join(kept))
        return added, removed

    async def _new_decisions(self, decisions: list[str], project_id: uuid.UUID) -> list[str]:
        statement = select(Thought.content).where(
            Thought.project_id == project_id,
            Thought.status != ThoughtStatus.archived,
            Thought.tags.contains(["decision"]),
        )
        known = [row.content for row in await self.session.execute(statement)]
        fresh: list[str] = []
        for text in (decision.strip() for decision in decisions):
            if text and all(jaccard(text, other) < DECISION_JACCARD for other in [*known, *fresh]):
                fresh.append(text)
        return fresh

    async def _create(
        self,
        store: StoreService,
        project: ProjectRecord,
        rows: list[NewThought],
        vectors: dict[str, list[float]],
        model_id: str | None,
    ) -> int:
        """Creates rows whose exact content is not live in the project yet; returns how many are new."""
        if not rows:
            return 0
        existing = await store.thoughts.find_live_by_content(project.id, [row.content for row in rows])
        fresh = [row for row in rows if row.content not in existing]
        if not fresh:
            return 0
        row_vectors = [vectors.get(row.content) for row in fresh] if vectors else None
        outcomes = await store.create_many(project, fresh, row_vectors, model_id if vectors else None)
        return len({outcome.thought.id for outcome in outcomes if outcome.thought is not None})
