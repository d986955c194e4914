"""Console sessions on the server (docs/SECURITY.md, "Sessions"): opened at sign-in, looked up on every
page, ended by signing out, by an admin, or by the change that takes the user's right to it away.

A session is a `console_session` row; the cookie carries a random 256-bit secret and the row only its SHA-256,
so neither a copy of the table nor of the cookie's signing key opens a session. Every page runs one indexed
lookup (`ConsoleSessionRepository.find_live`), which also checks what the session signed in with: a token
session lives while its token is unrevoked and unexpired, a password session while the stored hash is the one it
matched. The changes below end sessions explicitly too (`ended_at`, `ended_reason`, an audit event), in the
change's own transaction:

- signing out ends that session; an admin (`synaptomind user sign-out`, the users page) ends all of a user's;
- revoking or rotating a token ends the sessions signed in with it (the user's other sessions stay: they were
  not opened with that token);
- a lower global role, and a new or cleared password, end every session of the user;
- deleting a user deletes their sessions (foreign key, ON DELETE CASCADE).

Each ending is audited as tool `session`: `sign_out` (the user), `end` (details: user, sessions, reason), the
actor being the caller of the change (None from the CLI).
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.repositories.audit import AuditRepository
from app.db.repositories.console_sessions import ConsoleSessionRepository, SessionMatch
from app.db.visibility import current_caller

TOOL = "session"
TOKEN, PASSWORD, UPSTREAM = "token", "password", "upstream"  # console_session.kind: how the session signed in
# ended_reason, and the audit event's `reason`
SIGN_OUT = "sign_out"
BY_ADMIN = "admin"
TOKEN_REVOKED = "token_revoke"
TOKEN_ROTATED = "token_rotate"
ROLE_LOWERED = "role"
PASSWORD_SET = "password_set"
PASSWORD_CLEARED = "password_clear"


def secret_hash(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def password_mark(password_hash: str) -> bytes:
    """What a password session keeps of the hash it matched (the lookup compares it with the stored one's)."""
    return hashlib.sha256(password_hash.encode()).digest()


def _actor() -> uuid.UUID | None:
    caller = current_caller()
    return caller.principal.user_id if caller is not None else None


class ConsoleSessionService:
    def __init__(self, session: AsyncSession) -> None:
        self.sessions = ConsoleSessionRepository(session)
        self.audit = AuditRepository(session)

    async def open(
        self,
        user_id: uuid.UUID,
        kind: str,
        lifetime_seconds: int,
        *,
        token_id: uuid.UUID | None = None,
        password_hash: str | None = None,
    ) -> str:
        """A new session; the secret its cookie carries (shown once, never stored)."""
        secret = secrets.token_urlsafe(32)
        mark = password_mark(password_hash) if password_hash is not None else None
        lifetime = timedelta(seconds=lifetime_seconds)
        await self.sessions.insert(secret_hash(secret), user_id, kind, lifetime, token_id, mark)
        return secret

    async def current(self, secret: str) -> SessionMatch | None:
        """The live session with this secret and its user now; None for any other (nothing to tell apart). Marks
        it seen when its `last_seen_at` is over a minute old."""
        found = await self.sessions.find_live(secret_hash(secret))
        if found is not None and found.stale:
            await self.sessions.touch(found.session_id)
        return found

    async def sign_out(self, secret: str) -> bool:
        """End this session (its user signs out); False when it was not live."""
        ended = await self.sessions.end_by_secret(secret_hash(secret), SIGN_OUT)
        if ended is None:
            return False
        await self.audit.record(ended.user_id, TOOL, SIGN_OUT, [], None, {"kind": ended.kind})
        return True

    async def end_for_user(self, user_id: uuid.UUID, user_name: str, reason: str) -> int:
        """End every live session of the user; how many. Audited when any ended, and always when an admin asked."""
        ended = await self.sessions.end_of_user(user_id, reason)
        if ended or reason == BY_ADMIN:
            await self._audit_end(user_name, ended, reason)
        return ended

    async def end_for_token(self, token_id: uuid.UUID, user_name: str, reason: str) -> int:
        """End the live sessions signed in with this token; how many."""
        ended = await self.sessions.end_of_token(token_id, reason)
        if ended:
            await self._audit_end(user_name, ended, reason, token_id)
        return ended

    async def purge(self) -> int:
        """Delete the expired sessions, and the ended ones after a day (the expiry job)."""
        return await self.sessions.purge()

    async def _audit_end(self, user_name: str, ended: int, reason: str, token_id: uuid.UUID | None = None) -> None:
        details: dict[str, object] = {"user": user_name, "sessions": ended, "reason": reason}
        if token_id is not None:
            details["token_id"] = str(token_id)
        await self.audit.record(_actor(), TOOL, "end", [], None, details)
