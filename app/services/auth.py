"""Users, roles and API tokens: random bearer tokens stored as SHA-256 hashes."""

from __future__ import annotations

import hashlib
import math
import secrets
import time
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


# `api_token.last_used_at` is written at most this often per token and process: a write per call would cost
# every request a round trip for a date `token list` shows to the minute.
TOKEN_USE_INTERVAL_SECONDS = 60.0


class TokenUsage:
    """When this process last wrote each token's `last_used_at`."""

    def __init__(self, interval: float = TOKEN_USE_INTERVAL_SECONDS) -> None:
        self.interval = interval
        self._written: dict[uuid.UUID, float] = {}

    def due(self, token_id: uuid.UUID) -> bool:
        """True (and remembered as written) when the token's use was not written within the interval."""
        now = time.monotonic()
        if now - self._written.get(token_id, -math.inf) < self.interval:
            return False
        self._written[token_id] = now
        return True


class AuthService:
    def __init__(self, session: AsyncSession) -> None:
        self.users = UserRepository(session)

    async def verify(self, token: str, usage: TokenUsage | None = None) -> Principal | None:
        """The token's principal, or None; with `usage`, records when the token was last used."""
        if not token or len(token) > 200:
            return None
        principal = await self.users.principal_for_token(hash_token(token))
        token_id = principal.token_id if principal is not None else None
        if token_id is not None and usage is not None and usage.due(token_id):
            await self.users.touch_token(token_id)
        return principal

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
