"""Users, roles and API tokens: random bearer tokens stored as SHA-256 hashes."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import re
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Role
from app.db.records import Principal
from app.db.repositories.users import TokenRow, UserRepository
from app.errors import AppError, bad_request, not_found
from app.formats import LATEST
from app.services.admin.users import UserService
from app.services.auth.sessions import TOKEN_REVOKED, TOKEN_ROTATED, ConsoleSessionService

if TYPE_CHECKING:
    from app.db.engine import Database

logger = logging.getLogger(__name__)

TOKEN_PREFIX = "smt_"


def generate_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


# How often `serve` writes the token uses it collected (TokenUsage.flushing): `token list` shows them to the
# minute, and one UPDATE a minute per process costs nothing, where a write per call would cost every request a
# round trip (and could fail it).
TOKEN_USE_INTERVAL_SECONDS = 60.0
# A client retrying with an expired token would otherwise log a warning per request.
EXPIRED_WARNING_INTERVAL_SECONDS = 3600.0

NEVER = "never"
_DURATION = re.compile(r"(\d{1,6})([hdwy])")
_UNITS = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1), "y": timedelta(days=365)}


def _expiry_refusal(value: str, reason: str) -> AppError:
    return bad_request(f'--expires "{value}": {reason}')


def parse_expiry(value: str | None, now: datetime, default_days: int) -> datetime | None:
    """When a token created `now` with `--expires value` expires; None = never.

    `value`: a lifetime (`12h`, `30d`, `2w`, `1y` = 365 days), an ISO date or date-time (a date means its
    start, UTC; a date-time without an offset is UTC), `never`, or None for `default_days`. A token that never
    expires must be asked for by name: nothing else (no 0, no empty value) means never.
    """
    if value is None:
        return now + timedelta(days=default_days)
    spelled = value.strip().lower()
    if spelled == NEVER:
        return None
    usage = "use a number of hours/days/weeks/years such as 12h, 90d or 1y, an ISO date such as 2027-06-30, or never"
    duration = _DURATION.fullmatch(spelled)
    try:
        if duration is not None:
            if int(duration[1]) == 0:
                raise _expiry_refusal(value, f"a lifetime must be longer than zero; {usage}")
            return now + int(duration[1]) * _UNITS[duration[2]]
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise _expiry_refusal(value, usage) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        beyond = moment.astimezone(UTC) > LATEST  # the one range of a time (app.formats), readable back
    except OverflowError:  # past the year 9999
        raise _expiry_refusal(value, f"too far in the future; {usage}") from None
    if beyond:
        raise _expiry_refusal(value, f"too far in the future; {usage}")
    if moment <= now:
        raise _expiry_refusal(value, f"that is not in the future (now is {now:%Y-%m-%d %H:%M} UTC); {usage}")
    return moment


class TokenUsage:
    """The token uses this process saw and has not written yet; `flush` writes them all in one UPDATE.

    The bearer check only records into this map: no request waits for a `last_used_at` write, and none fails
    by one. `flushing` writes the map every TOKEN_USE_INTERVAL_SECONDS and once more at shutdown.
    """

    def __init__(self, interval: float = TOKEN_USE_INTERVAL_SECONDS) -> None:
        self.interval = interval
        self._pending: dict[uuid.UUID, datetime] = {}
        self._warned: dict[uuid.UUID, float] = {}

    def record(self, token_id: uuid.UUID) -> None:
        self._pending[token_id] = datetime.now(UTC)

    def pending(self) -> dict[uuid.UUID, datetime]:
        return dict(self._pending)

    def warn_expired(self, token_id: uuid.UUID) -> bool:
        """True (and remembered) when this expired token was not reported within the last hour."""
        now = time.monotonic()
        if now - self._warned.get(token_id, -math.inf) < EXPIRED_WARNING_INTERVAL_SECONDS:
            return False
        self._warned[token_id] = now
        return True

    async def flush(self, db: Database) -> int:
        """Write the pending uses; the number of tokens whose `last_used_at` moved.

        On failure (the database away, a lock timeout) the uses go back into the map for the next flush,
        a newer use of a token winning, and the failure is logged: it is never a request's.
        """
        if not self._pending:
            return 0
        batch, self._pending = self._pending, {}
        try:
            async with db.unit_of_work() as session:
                return await UserRepository(session).record_token_uses(batch)
        except Exception as error:
            for token_id, used_at in batch.items():
                if self._pending.get(token_id, used_at) <= used_at:
                    self._pending[token_id] = used_at
            logger.warning("token last-use not written (%s); retrying in %.0fs", error, self.interval)
            return 0

    async def _flush_forever(self, db: Database) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.flush(db)

    @asynccontextmanager
    async def flushing(self, db: Database) -> AsyncIterator[None]:
        """Flush every `interval` while the block runs, and once at its end (before the engine is disposed)."""
        task = asyncio.create_task(self._flush_forever(db), name="token-last-use")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await self.flush(db)


class AuthService:
    def __init__(self, session: AsyncSession) -> None:
        self.users = UserRepository(session)

    async def verify(self, token: str, usage: TokenUsage | None = None) -> Principal | None:
        """The token's principal, or None (unknown, revoked and expired alike); `usage` records the use."""
        if not token or len(token) > 200:
            return None
        match = await self.users.token_for_hash(hash_token(token))
        if match is None:
            return None
        token_id = match.principal.token_id
        assert token_id is not None
        if match.expired:
            # The client only sees the 401 of an unknown token; the operator learns which one to rotate.
            if usage is None or usage.warn_expired(token_id):
                logger.warning(
                    "refused token %s of user %r: expired at %s (`synaptomind token rotate %s` issues a new one)",
                    token_id,
                    match.principal.name,
                    match.expires_at,
                    token_id,
                )
            return None
        if usage is not None:
            usage.record(token_id)
        return match.principal

    async def ensure_user(self, name: str, role: Role | None) -> Principal:
        """app.services.admin.users' `ensure_user` (the token commands create a user on first use)."""
        return await UserService(self.users.session).ensure_user(name, role)

    async def create_token(
        self, user_name: str, role: Role | None, label: str | None = None, expires_at: datetime | None = None
    ) -> tuple[str, Principal]:
        """A new token for the user (created if needed). `expires_at` None = never: the CLI resolves
        `--expires` and the configured default lifetime (parse_expiry) before calling this."""
        user = await self.ensure_user(user_name, role)
        assert user.user_id is not None
        token = generate_token()
        await self.users.insert_token(user.user_id, hash_token(token), label, expires_at)
        return token, user

    async def bootstrap_admin(self) -> str | None:
        """With no user at all, create `admin` and return its first token (else None).

        Replicas starting together on an empty database take turns: the second sees the first's admin.
        """
        await self.users.lock_user_creation()
        if await self.users.count() > 0:
            return None
        # Never expires: it may be the operator's only admin credential, and its expiry would surface as a
        # bare 401 months later. `token rotate` gives it a lifetime once the team's tokens exist (docs/DEPLOY.md).
        token, _ = await self.create_token("admin", Role.admin, "bootstrap")
        return token

    async def list_tokens(self) -> list[TokenRow]:
        return await self.users.list_tokens()

    async def revoke(self, token_id: str) -> None:
        """Revoke an unrevoked token, ending the console sessions signed in with it; refused when it is the last
        credential of the last admin who can sign in."""
        users = UserService(self.users.session)
        before = await users.admins_before_change()
        revoked_id = _token_id(token_id)
        user_name = await self.users.revoke_token(revoked_id)
        if user_name is None:
            raise not_found(f"No active token with id {token_id}")
        await users.refuse_lockout(before, f"revoking token {token_id}")
        await ConsoleSessionService(self.users.session).end_for_token(revoked_id, user_name, TOKEN_REVOKED)

    async def rotate(self, token_id: str, expires_at: datetime | None) -> RotatedToken:
        """Revoke an unrevoked token (expired ones included) and issue its successor: same user, label."""
        old_id = _token_id(token_id)
        found = await self.users.lock_active_token(old_id)
        if found is None:
            raise not_found(f"No active token with id {token_id} (see `synaptomind token list`)")
        user, label = found
        assert user.user_id is not None
        await self.users.revoke_token(old_id)
        # Its console sessions end with it: the successor is a new credential, to sign in with anew.
        await ConsoleSessionService(self.users.session).end_for_token(old_id, user.name, TOKEN_ROTATED)
        token = generate_token()
        new_id = await self.users.insert_token(user.user_id, hash_token(token), label, expires_at)
        return RotatedToken(token, new_id, user, expires_at)


@dataclass(frozen=True)
class RotatedToken:
    token: str  # shown once, never stored
    token_id: uuid.UUID
    user: Principal
    expires_at: datetime | None


def _token_id(token_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(token_id)
    except ValueError:
        raise bad_request(f"{token_id!r} is not a token id (see `synaptomind token list`)") from None
