"""Primers: the always-at-hand set (a pointer per promoted thought)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import and_, delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Primer, Thought, ThoughtHit
from app.db.records import Principal
from app.db.repositories.audit import AuditRepository
from app.formats import iso
from app.services.admin.membership import require_role


class PrimerService:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    def _select(self) -> Any:
        hits = func.coalesce(ThoughtHit.hit_count, 0).label("hit_count")
        return select(Primer.id, Primer.thought_id, hits, Primer.promoted_at, Primer.created_at).outerjoin(
            # A primer and its hit row live in their thought's project: the join names it (a shard's own rows).
            ThoughtHit,
            and_(ThoughtHit.project_id == Primer.project_id, ThoughtHit.thought_id == Primer.thought_id),
        )

    async def list(self, cap: int) -> list[dict[str, Any]]:
        statement = self._select().order_by(func.coalesce(ThoughtHit.hit_count, 0).desc(), Primer.id).limit(cap)
        return [_shape(row) for row in await self.session.execute(statement)]

    async def count(self) -> int:
        return int((await self.session.execute(select(func.count()).select_from(Primer))).scalar_one())

    async def get(self, primer_id: uuid.UUID) -> dict[str, Any] | None:
        row = (await self.session.execute(self._select().where(Primer.id == primer_id))).first()
        return _shape(row) if row else None

    async def project_of(self, primer_id: uuid.UUID) -> uuid.UUID | None:
        """The project of the primer's thought (None: no such primer the caller can see)."""
        of_its_thought = and_(Primer.project_id == Thought.project_id, Primer.thought_id == Thought.id)
        statement = select(Thought.project_id).join(Primer, of_its_thought).where(Primer.id == primer_id)
        return (await self.session.execute(statement)).scalar_one_or_none()

    async def get_to_delete(self, primer_id: uuid.UUID) -> dict[str, Any] | None:
        """The primer a delete would remove (None: no such primer the caller can see), once the caller's role in
        its thought's project allows the delete: previews included."""
        project_id = await self.project_of(primer_id)
        if project_id is not None:
            await require_role(self.session, [project_id])
        return await self.get(primer_id)

    async def delete(self, primer_id: uuid.UUID, principal: Principal, primer: dict[str, Any]) -> bool:
        """Deletes the primer previewed as `primer` and records it in the audit; False when it is gone already."""
        result = await self.session.execute(delete(Primer).where(Primer.id == primer_id))
        if not result.rowcount:  # type: ignore[attr-defined]
            return False
        await AuditRepository(self.session).record(
            principal.user_id, "memory_primers", "delete", [primer_id], None, primer
        )
        return True


def _shape(row: Any) -> dict[str, Any]:
    return {
        "id": str(row.id),
        "thought_id": str(row.thought_id),
        "hit_count": int(row.hit_count),
        "promoted_at": iso(row.promoted_at),
        "created_at": iso(row.created_at),
    }
