"""Users, roles and API tokens: random bearer tokens stored as SHA-256 hashes."""

from __future__ import annotations

import hashlib
import secrets
import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Role
from app.db.records import Principal
from app.db.repositories.users import TokenRow, UserRepository
from app.errors import bad_request, not_found

TOKEN_PREFIX = "smt_"


def generate_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class AuthService:
    def __init__(self, session: AsyncSession) -> None:
        self.users = UserRepository(session)

    async def verify(self, token: str) -> Principal | None:
        if not token or len(token) > 200:
            return None
        return await self.users.principal_for_token(hash_token(token))

    async def ensure_user(self, name: str, role: Role | None) -> Principal:
        name = name.strip()
        if not name:
            raise bad_request("A user name must not be empty")
        user = await self.users.find(name)
        if user is None:
            return await self.users.insert(name, role or Role.writer)
        if role is not None and role != user.role and user.user_id is not None:
            await self.users.set_role(user.user_id, role)
            return Principal(user.user_id, user.name, role)
        return user

    async def create_token(self, user_name: str, role: Role | None, label: str | None = None) -> tuple[str, Principal]:
        user = await self.ensure_user(user_name, role)
        assert user.user_id is not None
        token = generate_token()
        await self.users.insert_token(user.user_id, hash_token(token), label)
        return token, user

    async def bootstrap_admin(self) -> str | None:
        """With no user at all, create `admin` and return its first token (else None).

        Replicas starting together on an empty database take turns: the second sees the first's admin.
        """
        await self.users.lock_user_creation()
        if await self.users.count() > 0:
            return None
        token, _ = await self.create_token("admin", Role.admin, "bootstrap")
        return token

    async def list_tokens(self) -> list[TokenRow]:
        return await self.users.list_tokens()

    async def revoke(self, token_id: str) -> None:
        try:
            parsed = uuid.UUID(token_id)
        except ValueError:
            raise bad_request(f"{token_id!r} is not a token id (see `synaptomind token list`)") from None
        if not await self.users.revoke_token(parsed):
            raise not_found(f"No active token with id {token_id}")
