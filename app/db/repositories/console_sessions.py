"""Console sessions (`console_session`): one row per sign-in, found by the SHA-256 of the cookie's secret."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import ColumnElement, LargeBinary, and_, bindparam, delete, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.engine import execute_core
from app.db.models import ApiToken, AppUser, ConsoleSession, Role
from app.db.records import Principal
from app.ids import new_id

# How stale `last_seen_at` may get before a page writes it again: one UPDATE a minute per session at most, not one
# per page.
SEEN_EVERY = timedelta(seconds=60)


def live() -> ColumnElement[bool]:
    """Not ended, not expired (the database's clock)."""
    return and_(ConsoleSession.ended_at.is_(None), ConsoleSession.expires_at > func.now())


# Every console page runs it: one indexed lookup (the unique secret_hash), built once. The session is live, and so
# is what it signed in with: the token unrevoked and unexpired, the stored password hash the one that matched
# (a direct change of either ends it here, whichever path made it).
_LIVE_SESSION = (
    select(
        ConsoleSession.id.label("session_id"),
        ConsoleSession.kind,
        ConsoleSession.token_id,
        (ConsoleSession.last_seen_at < func.now() - SEEN_EVERY).label("stale"),
        AppUser.id.label("user_id"),
        AppUser.name,
        AppUser.role,
    )
    .join(AppUser, AppUser.id == ConsoleSession.user_id)
    .outerjoin(ApiToken, ApiToken.id == ConsoleSession.token_id)
    .where(
        ConsoleSession.secret_hash == bindparam("secret_hash", type_=LargeBinary),
        live(),
        or_(
            ConsoleSession.token_id.is_(None),
            and_(
                ApiToken.revoked_at.is_(None),
                or_(ApiToken.expires_at.is_(None), ApiToken.expires_at > func.now()),
            ),
        ),
        or_(
            ConsoleSession.password_mark.is_(None),
            ConsoleSession.password_mark == func.sha256(func.convert_to(AppUser.password_hash, "UTF8")),
        ),
    )
)


@dataclass(frozen=True)
class SessionMatch:
    """A live session: its user as they are now, how it signed in, and whether `last_seen_at` is due."""

    session_id: uuid.UUID
    kind: str
    principal: Principal
    stale: bool


@dataclass(frozen=True)
class EndedSession:
    user_id: uuid.UUID
    kind: str


class ConsoleSessionRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def insert(
        self,
        secret_hash: bytes,
        user_id: uuid.UUID,
        kind: str,
        lifetime: timedelta,
        token_id: uuid.UUID | None,
        password_mark: bytes | None,
    ) -> uuid.UUID:
        session_id = new_id()
        await self.session.execute(
            insert(ConsoleSession).values(
                id=session_id,
                secret_hash=secret_hash,
                user_id=user_id,
                kind=kind,
                token_id=token_id,
                password_mark=password_mark,
                expires_at=func.now() + lifetime,
            )
        )
        return session_id

    async def find_live(self, secret_hash: bytes) -> SessionMatch | None:
        row = (await execute_core(self.session, _LIVE_SESSION, {"secret_hash": secret_hash})).first()
        if row is None:
            return None
        principal = Principal(user_id=row.user_id, name=row.name, role=Role(row.role), token_id=row.token_id)
        return SessionMatch(row.session_id, row.kind, principal, bool(row.stale))

    async def touch(self, session_id: uuid.UUID) -> None:
        await self.session.execute(
            update(ConsoleSession).where(ConsoleSession.id == session_id).values(last_seen_at=func.now())
        )

    async def end_by_secret(self, secret_hash: bytes, reason: str) -> EndedSession | None:
        """End the live session with this secret; what it was, or None (unknown, already ended or expired)."""
        row = (
            await self.session.execute(
                update(ConsoleSession)
                .where(ConsoleSession.secret_hash == secret_hash, live())
                .values(ended_at=func.now(), ended_reason=reason)
                .returning(ConsoleSession.user_id, ConsoleSession.kind)
            )
        ).first()
        return EndedSession(row.user_id, row.kind) if row else None

    async def end_where(self, which: ColumnElement[bool], reason: str) -> int:
        """End every live session that matches; how many."""
        result = await self.session.execute(
            update(ConsoleSession).where(which, live()).values(ended_at=func.now(), ended_reason=reason)
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    async def end_of_user(self, user_id: uuid.UUID, reason: str) -> int:
        return await self.end_where(ConsoleSession.user_id == user_id, reason)

    async def end_of_token(self, token_id: uuid.UUID, reason: str) -> int:
        return await self.end_where(ConsoleSession.token_id == token_id, reason)

    async def purge(self) -> int:
        """Delete the expired sessions and those ended over a day ago; how many."""
        result = await self.session.execute(
            delete(ConsoleSession).where(
                or_(
                    ConsoleSession.expires_at < func.now(),
                    ConsoleSession.ended_at < func.now() - timedelta(days=1),
                )
            )
        )
        return int(result.rowcount)  # type: ignore[attr-defined]
