"""Slots: two virtual (derived, never written) and two stored (a project row wins over the global one)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, func, or_, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.locks import SLOT_SEED, hold_text_until_commit
from app.db.models import Primer, Slot, Thought, ThoughtHit, ThoughtStatus
from app.db.records import ThoughtRecord
from app.db.repositories.thoughts import thought_select, to_record
from app.ids import new_id
from app.services.admin.membership import require_role
from app.services.status.frontier import FrontierService

SLOT_ORDER = ("pending_items", "architecture_decisions", "project_context", "active_goals")
STORED_SLOTS = ("project_context", "active_goals")


@dataclass(frozen=True)
class SlotView:
    name: str
    scope: str  # "project" or "global"
    virtual: bool
    content: str
    truncated: bool
    max_chars: int
    updated_at: datetime | None


@dataclass(frozen=True)
class StoredSlot:
    project_id: uuid.UUID | None
    content: str
    updated_at: datetime


def cut(content: str, max_chars: int, keep_newest: bool = False) -> tuple[str, bool]:
    if len(content) <= max_chars:
        return content, False
    return (content[-max_chars:] if keep_newest else content[:max_chars]), True


async def _require_slot_role(session: AsyncSession, project_id: uuid.UUID | None) -> None:
    if project_id is not None:
        await require_role(session, [project_id])


class SlotService:
    def __init__(self, session: AsyncSession, max_chars: int) -> None:
        self.session = session
        self.max_chars = max_chars

    async def stored(self, name: str, project_id: uuid.UUID | None) -> StoredSlot | None:
        """The project row if there is one, else the global row."""
        owner: ColumnElement[bool] = Slot.project_id.is_(None)
        if project_id is not None:
            owner = or_(owner, Slot.project_id == project_id)
        statement = select(Slot.project_id, Slot.content, Slot.updated_at).where(Slot.name == name, owner)
        rows = {
            row.project_id: StoredSlot(row.project_id, row.content, row.updated_at)
            for row in await self.session.execute(statement)
        }
        return rows.get(project_id) or rows.get(None)

    async def write(self, name: str, project_id: uuid.UUID | None, content: str) -> None:
        """Upsert the owner's row: a project's slot needs the action's role in the project (a global slot is
        everyone's: the action's role alone, checked by dispatch)."""
        await _require_slot_role(self.session, project_id)
        statement = pg_insert(Slot).values(id=new_id(), project_id=project_id, name=name, content=content)
        await self.session.execute(
            statement.on_conflict_do_update(
                index_elements=[Slot.project_id, Slot.name],
                # excluded.updated_at is the default, now(): the same moment, and an expression Citus accepts here
                set_={"content": statement.excluded.content, "updated_at": statement.excluded.updated_at},
            )
        )

    async def own_row(self, name: str, project_id: uuid.UUID | None) -> str:
        """The content of exactly this owner's row ('' when absent), locked for update.

        An advisory lock on (name, owner) comes first: while the row does not exist there is nothing to lock,
        and two first writers would each build on '' and the second overwrite the first.
        """
        await _require_slot_role(self.session, project_id)  # it is read to be written
        await hold_text_until_commit(self.session, f"slot:{name}:{project_id or 'global'}", SLOT_SEED)
        owner = Slot.project_id.is_(None) if project_id is None else Slot.project_id == project_id
        row = (
            await self.session.execute(select(Slot.content).where(Slot.name == name, owner).with_for_update())
        ).first()
        return row.content if row else ""

    async def read_all(self, project_id: uuid.UUID | None, limit: int, offset: int) -> list[SlotView]:
        scope = "project" if project_id is not None else "global"
        pending = await FrontierService(self.session).pending(project_id)
        pending_lines = [f"- {t.content} ({t.id})" for t in pending[offset : offset + limit]]
        decisions = await self._primer_thoughts(project_id)
        views = [
            self._view("pending_items", scope, True, "\n".join(pending_lines), None),
            self._view("architecture_decisions", scope, True, "\n".join(f"- {t.content}" for t in decisions), None),
        ]
        for name in STORED_SLOTS:
            row = await self.stored(name, project_id)
            row_scope = "project" if row is not None and row.project_id is not None else "global"
            views.append(
                self._view(name, row_scope, False, row.content if row else "", row.updated_at if row else None)
            )
        return views

    def _view(self, name: str, scope: str, virtual: bool, content: str, updated_at: datetime | None) -> SlotView:
        text, truncated = cut(content, self.max_chars)
        return SlotView(name, scope, virtual, text, truncated, self.max_chars, updated_at)

    async def _primer_thoughts(self, project_id: uuid.UUID | None) -> list[ThoughtRecord]:
        statement: Any = (
            thought_select()
            .join(Primer, and_(Primer.project_id == Thought.project_id, Primer.thought_id == Thought.id))
            .outerjoin(
                ThoughtHit, and_(ThoughtHit.project_id == Thought.project_id, ThoughtHit.thought_id == Thought.id)
            )
            .where(Thought.status != ThoughtStatus.archived)  # archiving the thought takes it out of the slot
            .order_by(func.coalesce(ThoughtHit.hit_count, 0).desc(), Thought.id)
            .limit(50)
        )
        if project_id is not None:
            statement = statement.where(Thought.project_id == project_id)
        return [to_record(row) for row in await self.session.execute(statement)]
