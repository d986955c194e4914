"""Users and their API tokens (only SHA-256 hashes are stored)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import LargeBinary, bindparam, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.engine import execute_core
from app.db.locks import USER_CREATION_LOCK_KEY, hold_until_commit
from app.db.models import ApiToken, AppUser, Role
from app.db.records import Principal
from app.ids import new_id

_TOUCH_TOKEN = (
    update(ApiToken).where(ApiToken.id == bindparam("token_id")).values(last_used_at=func.now())
).execution_options(synchronize_session=False)

# Every HTTP request checks its token: the statement is built once.
_PRINCIPAL_FOR_TOKEN = (
    select(AppUser.id, AppUser.name, AppUser.role, ApiToken.id.label("token_id"))
    .join(ApiToken, ApiToken.user_id == AppUser.id)
    .where(ApiToken.token_hash == bindparam("token_hash", type_=LargeBinary), ApiToken.revoked_at.is_(None))
)


@dataclass(frozen=True)
class TokenRow:
    id: uuid.UUID
    user_name: str
    role: Role
    label: str | None
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class UserRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def lock_user_creation(self) -> None:
        """Serialise first-run user creation across replicas until this transaction ends."""
        await hold_until_commit(self.session, USER_CREATION_LOCK_KEY)

    async def count(self) -> int:
        return int((await self.session.execute(select(func.count()).select_from(AppUser))).scalar_one())

    async def find(self, name: str) -> Principal | None:
        row = (
            await self.session.execute(select(AppUser.id, AppUser.name, AppUser.role).where(AppUser.name == name))
        ).first()
        return Principal(user_id=row.id, name=row.name, role=row.role) if row else None

    async def insert(self, name: str, role: Role) -> Principal:
        user_id = new_id()
        await self.session.execute(insert(AppUser).values(id=user_id, name=name, role=role))
        return Principal(user_id=user_id, name=name, role=role)

    async def set_role(self, user_id: uuid.UUID, role: Role) -> None:
        await self.session.execute(update(AppUser).where(AppUser.id == user_id).values(role=role))

    async def insert_token(self, user_id: uuid.UUID, token_hash: bytes, label: str | None) -> uuid.UUID:
        token_id = new_id()
        await self.session.execute(
            insert(ApiToken).values(id=token_id, user_id=user_id, token_hash=token_hash, label=label)
        )
        return token_id

    async def principal_for_token(self, token_hash: bytes) -> Principal | None:
        row = (await execute_core(self.session, _PRINCIPAL_FOR_TOKEN, {"token_hash": token_hash})).first()
        return Principal(user_id=row.id, name=row.name, role=row.role, token_id=row.token_id) if row else None

    async def touch_token(self, token_id: uuid.UUID) -> None:
        await self.session.execute(_TOUCH_TOKEN, {"token_id": token_id})

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
            )
            .join(AppUser, AppUser.id == ApiToken.user_id)
            .order_by(ApiToken.created_at)
        )
        return [TokenRow(**row._mapping) for row in await self.session.execute(statement)]

    async def revoke_token(self, token_id: uuid.UUID) -> bool:
        result = await self.session.execute(
            update(ApiToken).where(ApiToken.id == token_id, ApiToken.revoked_at.is_(None)).values(revoked_at=func.now())
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]
