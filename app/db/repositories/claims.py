"""Content claims: the unique (project, md5(content)) key create paths take before inserting thoughts."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from sqlalchemy import bindparam, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.engine import execute_core
from app.db.models import ContentClaim


class ContentClaimRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def claim(self, project_id: uuid.UUID, claims: Mapping[str, uuid.UUID]) -> set[str]:
        """Claim each content md5 for its new thought id; answers the md5s another thought holds.

        In md5 order, so two calls claiming overlapping contents cannot deadlock. A claim a concurrent call
        inserted is waited for: it is ours if that call rolls back, theirs once it commits.
        """
        if not claims:
            return set()
        values = [{"project_id": project_id, "content_md5": md5, "thought_id": claims[md5]} for md5 in sorted(claims)]
        statement = pg_insert(ContentClaim).on_conflict_do_nothing().returning(ContentClaim.content_md5)
        won = {row.content_md5 for row in await execute_core(self.session, statement, values)}  # in this order
        return set(claims) - won

    async def lock(self, project_id: uuid.UUID, md5s: set[str]) -> None:
        """Hold the claims until commit: a concurrent call taking one over waits, then sees ours."""
        statement = (
            select(ContentClaim.content_md5)
            .where(ContentClaim.project_id == project_id, ContentClaim.content_md5.in_(sorted(md5s)))
            .order_by(ContentClaim.content_md5)
            .with_for_update()
        )
        await self.session.execute(statement)

    async def take_over(self, project_id: uuid.UUID, claims: Mapping[str, uuid.UUID]) -> None:
        """Point claims (locked by `lock`) whose thought is no longer a live holder of the content to ours."""
        if not claims:
            return
        statement = (
            update(ContentClaim)
            .where(ContentClaim.project_id == bindparam("p"), ContentClaim.content_md5 == bindparam("md5"))
            .values(thought_id=bindparam("holder"))
        )
        values = [{"p": project_id, "md5": md5, "holder": claims[md5]} for md5 in sorted(claims)]
        await execute_core(self.session, statement, values)  # one executemany
