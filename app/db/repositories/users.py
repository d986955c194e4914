"""Users and their API tokens (only SHA-256 hashes are stored)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    LargeBinary,
    and_,
    bindparam,
    exists,
    false,
    func,
    insert,
    or_,
    select,
    text,
    true,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.engine import execute_core
from app.db.locks import USER_ADMIN_LOCK_KEY, USER_CREATION_LOCK_KEY, hold_until_commit
from app.db.models import ApiToken, AppUser, ConsoleSession, Role
from app.db.records import Principal
from app.db.repositories.console_sessions import live as live_session
from app.ids import new_id

# The uses app.services.auth.tokens.TokenUsage collected, in one statement whatever their number. unnest over two
# arrays rather than a VALUES list: one statement text for any batch size (asyncpg prepares it once), typed by
# the casts. A later use never goes back in time: another replica may have written a newer one.
_RECORD_TOKEN_USES = text(
    "UPDATE api_token AS token SET last_used_at = used.at"
    " FROM unnest(CAST(:ids AS uuid[]), CAST(:ats AS timestamptz[])) AS used (id, at)"
    " WHERE token.id = used.id AND (token.last_used_at IS NULL OR token.last_used_at < used.at)"
)

# Every HTTP request checks its token: the statement is built once. An expired token is still found (and
# refused by the caller), so the server can log which token expired; the database's clock decides.
_TOKEN_FOR_HASH = (
    select(
        AppUser.id,
        AppUser.name,
        AppUser.role,
        ApiToken.id.label("token_id"),
        ApiToken.expires_at,
        func.coalesce(ApiToken.expires_at <= func.now(), false()).label("expired"),
    )
    .join(ApiToken, ApiToken.user_id == AppUser.id)
    .where(ApiToken.token_hash == bindparam("token_hash", type_=LargeBinary), ApiToken.revoked_at.is_(None))
)


@dataclass(frozen=True)
class TokenMatch:
    """An unrevoked token found by its hash; `expired` ones must be refused like unknown ones."""

    principal: Principal
    expires_at: datetime | None
    expired: bool


@dataclass(frozen=True)
class TokenRow:
    id: uuid.UUID
    user_name: str
    role: Role
    label: str | None
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    expires_at: datetime | None
    expired: bool  # by the database's clock, as the bearer check sees it


@dataclass(frozen=True)
class UserRow:
    """A user as the users page lists them: never the password hash, only whether there is one."""

    id: uuid.UUID
    name: str
    role: Role
    created_at: datetime
    has_password: bool
    active_tokens: int  # unrevoked and unexpired
    last_used_at: datetime | None  # the latest use of any of their tokens
    console_sessions: int  # not ended, not expired


@dataclass(frozen=True)
class AdminRow:
    name: str
    can_sign_in: bool  # a password, or an unrevoked and unexpired API token


def _active_token_of(user_id: Any) -> Any:
    return and_(
        ApiToken.user_id == user_id,
        ApiToken.revoked_at.is_(None),
        or_(ApiToken.expires_at.is_(None), ApiToken.expires_at > func.now()),
    )


class UserRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def lock_user_creation(self) -> None:
        """Serialise first-run user creation across replicas until this transaction ends."""
        await hold_until_commit(self.session, USER_CREATION_LOCK_KEY)

    async def lock_user_administration(self) -> None:
        """Serialise the changes that could leave no admin (two admins demoting each other) until commit."""
        await hold_until_commit(self.session, USER_ADMIN_LOCK_KEY)

    async def count(self) -> int:
        return int((await self.session.execute(select(func.count()).select_from(AppUser))).scalar_one())

    async def find(self, name: str) -> Principal | None:
        return await self._principal(AppUser.name == name)

    async def get(self, user_id: uuid.UUID) -> Principal | None:
        return await self._principal(AppUser.id == user_id)

    async def _principal(self, which: ColumnElement[bool]) -> Principal | None:
        row = (await self.session.execute(select(AppUser.id, AppUser.name, AppUser.role).where(which))).first()
        return Principal(user_id=row.id, name=row.name, role=row.role) if row else None

    async def insert(self, name: str, role: Role) -> Principal:
        user_id = new_id()
        await self.session.execute(insert(AppUser).values(id=user_id, name=name, role=role))
        return Principal(user_id=user_id, name=name, role=role)

    async def set_role(self, user_id: uuid.UUID, role: Role) -> None:
        await self.session.execute(update(AppUser).where(AppUser.id == user_id).values(role=role))

    async def password_hash(self, name: str) -> tuple[Principal, str | None] | None:
        """The user and their password hash (None: no password set); None when there is no such user."""
        return await self._with_password_hash(AppUser.name == name)

    async def _with_password_hash(self, which: ColumnElement[bool]) -> tuple[Principal, str | None] | None:
        row = (
            await self.session.execute(
                select(AppUser.id, AppUser.name, AppUser.role, AppUser.password_hash).where(which)
            )
        ).first()
        if row is None:
            return None
        return Principal(user_id=row.id, name=row.name, role=row.role), row.password_hash

    async def list_users(self) -> list[UserRow]:
        tokens = (
            select(
                func.count().filter(_active_token_of(AppUser.id)).label("active"),
                func.max(ApiToken.last_used_at).label("last_used_at"),
            )
            .where(ApiToken.user_id == AppUser.id)
            .lateral()
        )
        open_sessions = (
            select(func.count())
            .where(ConsoleSession.user_id == AppUser.id, live_session())
            .scalar_subquery()
            .label("console_sessions")
        )
        statement = (
            select(
                AppUser.id,
                AppUser.name,
                AppUser.role,
                AppUser.created_at,
                AppUser.password_hash.is_not(None).label("has_password"),
                tokens.c.active.label("active_tokens"),
                tokens.c.last_used_at,
                open_sessions,
            )
            .join(tokens, true())
            .order_by(AppUser.name)
        )
        return [UserRow(**row._mapping) for row in await self.session.execute(statement)]

    async def admins(self) -> list[AdminRow]:
        """Every admin and whether they can sign in (the rule that one always can, app.services.admin.users)."""
        can_sign_in = or_(AppUser.password_hash.is_not(None), exists().where(_active_token_of(AppUser.id))).label(
            "can_sign_in"
        )
        statement = select(AppUser.name, can_sign_in).where(AppUser.role == Role.admin).order_by(AppUser.name)
        return [AdminRow(row.name, bool(row.can_sign_in)) for row in await self.session.execute(statement)]

    async def set_password_hash(self, user_id: uuid.UUID, password_hash: str | None) -> None:
        await self.session.execute(update(AppUser).where(AppUser.id == user_id).values(password_hash=password_hash))

    async def insert_token(
        self, user_id: uuid.UUID, token_hash: bytes, label: str | None, expires_at: datetime | None = None
    ) -> uuid.UUID:
        token_id = new_id()
        await self.session.execute(
            insert(ApiToken).values(
                id=token_id, user_id=user_id, token_hash=token_hash, label=label, expires_at=expires_at
            )
        )
        return token_id

    async def token_for_hash(self, token_hash: bytes) -> TokenMatch | None:
        row = (await execute_core(self.session, _TOKEN_FOR_HASH, {"token_hash": token_hash})).first()
        if row is None:
            return None
        principal = Principal(user_id=row.id, name=row.name, role=row.role, token_id=row.token_id)
        return TokenMatch(principal, row.expires_at, bool(row.expired))

    async def record_token_uses(self, uses: Mapping[uuid.UUID, datetime]) -> int:
        """Write each token's last use in one UPDATE; the number of tokens whose date moved."""
        ids = sorted(uses)  # one lock order across replicas flushing overlapping sets
        result = await self.session.execute(_RECORD_TOKEN_USES, {"ids": ids, "ats": [uses[i] for i in ids]})
        return int(result.rowcount)  # type: ignore[attr-defined]

    async def lock_active_token(self, token_id: uuid.UUID) -> tuple[Principal, str | None] | None:
        """An unrevoked token's user and label, the row locked until commit (so one rotation wins)."""
        row = (
            await self.session.execute(
                select(AppUser.id, AppUser.name, AppUser.role, ApiToken.label)
                .join(ApiToken, ApiToken.user_id == AppUser.id)
                .where(ApiToken.id == token_id, ApiToken.revoked_at.is_(None))
                .with_for_update(of=ApiToken)
            )
        ).first()
        if row is None:
            return None
        return Principal(user_id=row.id, name=row.name, role=row.role), row.label

    async def list_tokens(self) -> list[TokenRow]:
        statement = (
            select(
                ApiToken.id,
                AppUser.name.label("user_name"),
                AppUser.role,
                ApiToken.label,
                ApiToken.created_at,
                ApiToken.last_used_at,
                ApiToken.revoked_at,
                ApiToken.expires_at,
                func.coalesce(ApiToken.expires_at <= func.now(), false()).label("expired"),
            )
            .join(AppUser, AppUser.id == ApiToken.user_id)
            .order_by(ApiToken.created_at)
        )
        return [TokenRow(**row._mapping) for row in await self.session.execute(statement)]

    async def revoke_token(self, token_id: uuid.UUID) -> str | None:
        """Revoke an unrevoked token; its user's name, or None when there was no such token to revoke."""
        row = (
            await self.session.execute(
                update(ApiToken)
                .where(ApiToken.id == token_id, ApiToken.revoked_at.is_(None), ApiToken.user_id == AppUser.id)
                .values(revoked_at=func.now())
                .returning(AppUser.name)
            )
        ).first()
        return str(row.name) if row else None
