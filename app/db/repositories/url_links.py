"""Url links of thoughts, always read for a whole answer in one query."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import ThoughtUrlLink
from app.db.records import UrlLinkRecord


class UrlLinkRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def insert_many(self, rows: Sequence[dict[str, Any]]) -> None:
        if rows:
            await self.session.execute(insert(ThoughtUrlLink), list(rows))

    async def for_thoughts(self, thought_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, list[UrlLinkRecord]]:
        ids = set(thought_ids)
        links: dict[uuid.UUID, list[UrlLinkRecord]] = {thought_id: [] for thought_id in ids}
        if not ids:
            return links
        statement = (
            select(ThoughtUrlLink.thought_id, ThoughtUrlLink.text, ThoughtUrlLink.url, ThoughtUrlLink.label)
            .where(ThoughtUrlLink.thought_id.in_(ids))
            .order_by(ThoughtUrlLink.sort_order, ThoughtUrlLink.created_at, ThoughtUrlLink.id)
        )
        for row in await self.session.execute(statement):
            links[row.thought_id].append(UrlLinkRecord(**row._mapping))
        return links
