"""Preview tokens: stored, expiring, single-use, bound to user, tool, action and arguments."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import PreviewToken
from app.ids import new_id


@dataclass(frozen=True)
class PreviewTokenRow:
    id: uuid.UUID
    user_id: uuid.UUID | None
    tool: str
    action: str
    fingerprint: str
    expires_at: datetime
    used_at: datetime | None
    now: datetime


class PreviewRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def insert(self, user_id: uuid.UUID | None, tool: str, action: str, fingerprint: str, ttl: int) -> uuid.UUID:
        token = new_id()
        await self.session.execute(
            insert(PreviewToken).values(
                id=token,
                user_id=user_id,
                tool=tool,
                action=action,
                fingerprint=fingerprint,
                expires_at=func.now() + timedelta(seconds=ttl),
            )
        )
        return token

    async def lock(self, token: uuid.UUID) -> PreviewTokenRow | None:
        statement = (
            select(
                PreviewToken.id,
                PreviewToken.user_id,
                PreviewToken.tool,
                PreviewToken.action,
                PreviewToken.fingerprint,
                PreviewToken.expires_at,
                PreviewToken.used_at,
                func.now().label("now"),
            )
            .where(PreviewToken.id == token)
            .with_for_update()
        )
        row = (await self.session.execute(statement)).first()
        return PreviewTokenRow(**row._mapping) if row else None

    async def mark_used(self, token: uuid.UUID) -> None:
        await self.session.execute(update(PreviewToken).where(PreviewToken.id == token).values(used_at=func.now()))
