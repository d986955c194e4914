"""Edge rows."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import insert, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Edge
from app.db.records import EdgeRecord

_COLUMNS = (Edge.id, Edge.source_id, Edge.target_id, Edge.type, Edge.created_at)


def _record(row: Any) -> EdgeRecord:
    return EdgeRecord(**row._mapping)


class EdgeRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def insert_many(self, rows: Sequence[dict[str, Any]]) -> None:
        if rows:
            await self.session.execute(insert(Edge), list(rows))

    async def incident(self, thought_id: uuid.UUID, limit: int) -> list[EdgeRecord]:
        statement = (
            select(*_COLUMNS)
            .where(or_(Edge.source_id == thought_id, Edge.target_id == thought_id))
            .order_by(Edge.created_at, Edge.id)
            .limit(limit)
        )
        return [_record(row) for row in await self.session.execute(statement)]
