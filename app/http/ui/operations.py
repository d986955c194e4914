"""The console's operations pages (admin only): health with its safe fix, and API tokens.

Health reads through `memory_status action=health`; its fix has no MCP action, so it runs the service call the
`POST /api/health-check/fix` route runs, with the same audit event. Tokens use the `AuthService` calls of the
CLI's `synaptomind token …` commands, each in its own unit of work.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncSession
from starlette.requests import Request
from starlette.responses import Response

from app.db.models import Role
from app.db.records import Principal
from app.db.repositories.audit import AuditRepository
from app.errors import AppError
from app.http.ui.session import SessionData
from app.services.auth import AuthService, parse_expiry
from app.services.health import HealthService

if TYPE_CHECKING:
    from app.http.ui.console import Console

logger = logging.getLogger(__name__)

ADMIN_ONLY = "Forbidden: the operations pages need the admin role; user '{name}' is a {role}."
DEFAULT_LIFETIME_DAYS = 90  # auth.token_lifetime_days when the settings view does not say


def _refusal(console: Console, request: Request, principal: Principal, session: SessionData | None) -> Response:
    message = ADMIN_ONLY.format(name=principal.name, role=principal.role.value)
    return console.render(request, "error.html", console.base(principal, session, message=message), 403)


async def health(console: Console, request: Request, principal: Principal, session: SessionData | None) -> Response:
    if principal.role is not Role.admin:
        return _refusal(console, request, principal, session)
    return await _health_page(console, request, principal, session, None)


async def _health_page(
    console: Console, request: Request, principal: Principal, session: SessionData | None, fixed: dict[str, int] | None
) -> Response:
    answer = await console.call(principal, "memory_status", {"action": "health", "include_details": True})
    values = console.base(principal, session, answer=answer, report=answer.item or {}, fixed=fixed)
    return console.render(request, "health.html", values, answer.status if answer.error else 200)


async def health_fix(console: Console, request: Request, principal: Principal, session: SessionData | None) -> Response:
    if principal.role is not Role.admin:
        return _refusal(console, request, principal, session)
    form = await console.posted(request, session)
    if isinstance(form, Response):
        return form
    async with console.context.db.unit_of_work() as db:  # what POST /api/health-check/fix runs, audit included
        fixed = await HealthService(db).autofix()
        await AuditRepository(db).record(principal.user_id, "api", "health_fix", [], None, dict(fixed))
    logger.info("console: user %r ran the safe health fixes: %s", principal.name, fixed)
    return await _health_page(console, request, principal, session, fixed)


async def tokens(console: Console, request: Request, principal: Principal, session: SessionData | None) -> Response:
    if principal.role is not Role.admin:
        return _refusal(console, request, principal, session)
    return await _tokens_page(console, request, principal, session)


async def _tokens_page(
    console: Console,
    request: Request,
    principal: Principal,
    session: SessionData | None,
    status: int = 200,
    **values: Any,
) -> Response:
    async with console.context.db.unit_of_work() as db:
        rows = await AuthService(db).list_tokens()
    page = console.base(principal, session, rows=rows, roles=[role.value for role in Role], **values)
    return console.render(request, "tokens.html", page, status)


async def _audit(db: AsyncSession, principal: Principal, action: str, details: dict[str, Any]) -> None:
    """Token changes made from a browser are audited (tool `console`), beside the token rows themselves."""
    await AuditRepository(db).record(principal.user_id, "console", action, [], None, details)


def _expiry(console: Console, value: str) -> datetime | None:
    days = console.context.settings_view.get("auth.token_lifetime_days", DEFAULT_LIFETIME_DAYS)
    return parse_expiry(value.strip() or None, datetime.now(UTC), int(days))


async def token_create(
    console: Console, request: Request, principal: Principal, session: SessionData | None
) -> Response:
    if principal.role is not Role.admin:
        return _refusal(console, request, principal, session)
    form = await console.posted(request, session)
    if isinstance(form, Response):
        return form
    role = form.get("role")
    try:
        expires_at = _expiry(console, form.get("expires"))
        async with console.context.db.unit_of_work() as db:
            chosen = Role(role) if role in Role.__members__ else None
            label = form.get("label") or None
            token, user = await AuthService(db).create_token(form.get("user"), chosen, label, expires_at)
            await _audit(db, principal, "token_create", {"user": user.name})
    except AppError as error:
        return await _tokens_page(console, request, principal, session, error.status_code, error=error.message)
    logger.info("console: user %r created a token for %r", principal.name, user.name)
    shown = {"token": token, "user": user.name, "role": user.role.value, "expires_at": expires_at, "verb": "created"}
    return await _tokens_page(console, request, principal, session, created=shown)


async def token_revoke(
    console: Console, request: Request, principal: Principal, session: SessionData | None
) -> Response:
    if principal.role is not Role.admin:
        return _refusal(console, request, principal, session)
    form = await console.posted(request, session)
    if isinstance(form, Response):
        return form
    token_id = form.get("token_id")
    try:
        async with console.context.db.unit_of_work() as db:
            await AuthService(db).revoke(token_id)
            await _audit(db, principal, "token_revoke", {"token_id": token_id})
    except AppError as error:
        return await _tokens_page(console, request, principal, session, error.status_code, error=error.message)
    logger.info("console: user %r revoked token %s", principal.name, token_id)
    return await _tokens_page(console, request, principal, session, notice=f"Token {token_id} revoked.")


async def token_rotate(
    console: Console, request: Request, principal: Principal, session: SessionData | None
) -> Response:
    if principal.role is not Role.admin:
        return _refusal(console, request, principal, session)
    form = await console.posted(request, session)
    if isinstance(form, Response):
        return form
    token_id = form.get("token_id")
    try:
        expires_at = _expiry(console, form.get("expires"))
        async with console.context.db.unit_of_work() as db:
            rotated = await AuthService(db).rotate(token_id, expires_at)
            details = {"token_id": token_id, "successor": str(rotated.token_id)}
            await _audit(db, principal, "token_rotate", details)
    except AppError as error:
        return await _tokens_page(console, request, principal, session, error.status_code, error=error.message)
    logger.info("console: user %r rotated token %s", principal.name, token_id)
    shown = {
        "token": rotated.token,
        "user": rotated.user.name,
        "role": rotated.user.role.value,
        "expires_at": rotated.expires_at,
        "verb": f"rotated (token {token_id} is revoked; its successor is {rotated.token_id})",
    }
    return await _tokens_page(console, request, principal, session, created=shown)
