"""The token and OAuth grant operations of every door (`synaptomind token …`/`oauth …`, the console's tokens
page): one unit of work each, the admin role checked, the audit event written in the change's transaction; and the
console's sign-in operations (a token or a password checked, a session opened, looked up, ended)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from app.db.engine import Database
from app.db.models import Role
from app.db.records import Principal
from app.db.repositories.console_sessions import SessionMatch
from app.db.repositories.oauth import GrantRow
from app.db.repositories.users import TokenRow
from app.services.actors import Actor
from app.services.auth.oauth_grants import OAuthGrantService
from app.services.auth.passwords import PasswordCheck, PasswordMatch
from app.services.auth.sessions import ConsoleSessionService
from app.services.auth.tokens import AuthService, RotatedToken
from app.services.context import AppContext

MANAGING_TOKENS = "managing API tokens"
MANAGING_GRANTS = "managing OAuth grants"


@dataclass(frozen=True)
class NewToken:
    token: str  # shown once, never stored
    user: Principal
    expires_at: datetime | None


async def create_token(
    app: AppContext, actor: Actor, user: str, role: Role | None, label: str | None, expires_at: datetime | None
) -> NewToken:
    """A new token for the user (created with `role` if needed); `expires_at` None: never."""
    actor.require_admin(MANAGING_TOKENS)
    async with app.db.unit_of_work() as session:
        token, owner = await AuthService(session).create_token(user, role, label, expires_at)
        await actor.audit(session, "token_create", {"user": owner.name})
    return NewToken(token, owner, expires_at)


async def rotate_token(app: AppContext, actor: Actor, token_id: str, expires_at: datetime | None) -> RotatedToken:
    actor.require_admin(MANAGING_TOKENS)
    async with app.db.unit_of_work() as session:
        rotated = await AuthService(session).rotate(token_id, expires_at)
        await actor.audit(session, "token_rotate", {"token_id": token_id, "successor": str(rotated.token_id)})
    return rotated


async def revoke_token(app: AppContext, actor: Actor, token_id: str) -> None:
    actor.require_admin(MANAGING_TOKENS)
    async with app.db.unit_of_work() as session:
        await AuthService(session).revoke(token_id)
        await actor.audit(session, "token_revoke", {"token_id": token_id})


async def list_tokens(app: AppContext, actor: Actor) -> list[TokenRow]:
    actor.require_admin(MANAGING_TOKENS)
    async with app.db.unit_of_work() as session:
        return await AuthService(session).list_tokens()


async def list_grants(app: AppContext, actor: Actor, user: str | None) -> list[GrantRow]:
    """The live OAuth grants (of one user, by name)."""
    actor.require_admin(MANAGING_GRANTS)
    async with app.db.unit_of_work() as session:
        return await OAuthGrantService(session).list_grants(user)


async def revoke_grants(app: AppContext, actor: Actor, grant_id: str | None, user: str | None) -> int:
    """End one grant (every token of it) or, with `user`, every grant of that user; how many tokens (grants) ended.
    Not audited, as before: the grant's rows say when it ended."""
    actor.require_admin(MANAGING_GRANTS)
    async with app.db.unit_of_work() as session:
        service = OAuthGrantService(session)
        if user is not None:
            return await service.revoke_user_grants(user)
        assert grant_id is not None
        return await service.revoke_grant(grant_id)


# ---------------------------------------------------------------- console sign-in and sessions


async def verify_token(app: AppContext, token: str) -> Principal | None:
    """The bearer check's verification of a pasted API token (its user and role), None when it is not accepted.
    No TokenUsage: its flusher belongs to the /mcp app; `token list` shows MCP use, not sign-ins."""
    async with app.db.autocommit() as session:
        return await AuthService(session).verify(token)


async def check_password(app: AppContext, passwords: PasswordCheck, name: str, password: str) -> PasswordMatch | None:
    """The sign-in forms' password check (throttled per user name; TooManyAttempts past the rate)."""
    return await passwords.check(app.db, name, password)


async def open_console_session(
    db: Database,
    user_id: uuid.UUID,
    kind: str,
    lifetime_seconds: int,
    *,
    token_id: uuid.UUID | None = None,
    password_hash: str | None = None,
) -> str:
    """A new console session for the user (`kind`: app.services.auth.sessions' TOKEN, PASSWORD or UPSTREAM; a token
    session names its token, a password session the hash it matched); the secret its cookie carries. Takes the
    database, not the context: the single sign-on's callback (app/http/oauth.py) opens one from the OAuth provider."""
    async with db.unit_of_work() as session:
        return await ConsoleSessionService(session).open(
            user_id, kind, lifetime_seconds, token_id=token_id, password_hash=password_hash
        )


async def console_session(app: AppContext, secret: str) -> SessionMatch | None:
    """The live session of that secret with its user, as every console page looks it up: one SELECT (and, once a
    minute, the last-seen UPDATE)."""
    async with app.db.autocommit() as session:
        return await ConsoleSessionService(session).current(secret)


async def end_console_session(app: AppContext, secret: str) -> bool:
    """Sign-out: the session ends on the server (audited), so a copy of its cookie is refused from now on."""
    async with app.db.unit_of_work() as session:
        return await ConsoleSessionService(session).sign_out(secret)
