"""Audit events, written in the same transaction as the destructive action they record."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import AuditEvent
from app.ids import new_id


class AuditRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def record(
        self,
        user_id: uuid.UUID | None,
        tool: str,
        action: str,
        target_ids: Iterable[uuid.UUID],
        project_id: uuid.UUID | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        await self.session.execute(
            insert(AuditEvent).values(
                id=new_id(),
                user_id=user_id,
                project_id=project_id,
                tool=tool,
                action=action,
                target_ids=[str(target) for target in target_ids],
                details=details or {},
            )
        )
