"""The console's operations pages (admin only): counts per project and background job state, health with its
safe fix, and API tokens.

The overview reads through tools only: each project's thoughts by status are `memory_reflect action=timeline`
totals (limit 1, scoped by the project's path), the background jobs' settings and the embedder's state are the
lines of `memory_status action=config`.

Health reads through `memory_status action=health`; its fix has no MCP action, so it runs the service call the
`POST /api/health-check/fix` route runs, with the same audit event. Tokens use the `AuthService` calls of the
CLI's `synaptomind token …` commands, each in its own unit of work.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncSession
from starlette.requests import Request
from starlette.responses import Response

from app.db.models import Role
from app.db.records import Principal
from app.db.repositories.audit import AuditRepository
from app.db.visibility import Caller, acting_as
from app.errors import AppError
from app.http.ui.session import SessionData
from app.services.auth import AuthService, parse_expiry
from app.services.health import HealthService

if TYPE_CHECKING:
    from app.http.ui.console import Answer, Console, Form, PageHandler

logger = logging.getLogger(__name__)

COUNTED_STATUSES = ("active", "draft", "archived")
MAX_COUNTED_PROJECTS = 50  # 3 timeline calls each (rate limit: 1200 calls a minute per token by default)
JOB_KEYS = ("jobs.", "decay.", "embedder.")
ADMIN_ONLY = "Forbidden: the operations pages need the admin role; user '{name}' is a {role}."
DEFAULT_LIFETIME_DAYS = 90  # auth.token_lifetime_days when the settings view does not say


def _refusal(console: Console, request: Request, principal: Principal, session: SessionData | None) -> Response:
    message = ADMIN_ONLY.format(name=principal.name, role=principal.role.value)
    return console.render(request, "error.html", console.base(principal, session, message=message), 403)


def admin_only(handler: PageHandler) -> PageHandler:
    """An operations page: any other role gets the 403 page before a form is even read."""

    async def checked(
        console: Console, request: Request, principal: Principal, session: SessionData | None
    ) -> Response:
        if principal.role is not Role.admin:
            return _refusal(console, request, principal, session)
        return await handler(console, request, principal, session)

    return checked


async def overview(console: Console, request: Request, principal: Principal, session: SessionData | None) -> Response:
    projects = await console.projects(principal)
    counted = [project for project in projects.items if project.get("local_path")][:MAX_COUNTED_PROJECTS]
    scopes: list[str | None] = [None, *(str(project["local_path"]) for project in counted)]

    async def total(cwd: str | None, status: str) -> int | None:
        arguments: dict[str, Any] = {"action": "timeline", "status": status, "limit": 1, "fields": ["id"]}
        if cwd is not None:
            arguments["cwd"] = cwd
        answer = await console.call(principal, "memory_reflect", arguments)
        return None if answer.error else int((answer.meta.get("counts") or {}).get("total") or 0)

    config_call = console.call(principal, "memory_status", {"action": "config"})
    found: list[int | None] = list(
        await asyncio.gather(*(total(cwd, status) for cwd in scopes for status in COUNTED_STATUSES))
    )
    config = await config_call
    width = len(COUNTED_STATUSES)
    by_scope = [
        dict(zip(COUNTED_STATUSES, found[i * width : (i + 1) * width], strict=True)) for i in range(len(scopes))
    ]
    everywhere, rows = by_scope[0], []
    for project, counts in zip(counted, by_scope[1:], strict=True):
        rows.append({"project": project, "counts": counts, "total": _sum(counts)})
    rest = {status: _difference(everywhere[status], [row["counts"][status] for row in rows]) for status in everywhere}
    unpathed = [project for project in projects.items if not project.get("local_path")]
    values = console.base(
        principal,
        session,
        projects=projects,
        rows=rows,
        everywhere={"counts": everywhere, "total": _sum(everywhere)},
        rest={"counts": rest, "total": _sum(rest)},
        unpathed=unpathed,
        uncounted=[p for p in projects.items if p.get("local_path")][MAX_COUNTED_PROJECTS:],
        statuses=COUNTED_STATUSES,
        config=config,
        jobs=_job_lines(config),
    )
    return console.render(request, "operations.html", values, projects.status if projects.error else 200)


def _sum(counts: dict[str, int | None]) -> int | None:
    values = list(counts.values())
    return None if any(value is None for value in values) else sum(value or 0 for value in values)


def _difference(whole: int | None, parts: list[int | None]) -> int | None:
    if whole is None or any(part is None for part in parts):
        return None
    return whole - sum(part or 0 for part in parts)


def _job_lines(config: Answer) -> list[tuple[str, str]]:
    """The `key = value` lines of memory_status action=config about the background work."""
    text = str((config.item or {}).get("text") or "")
    pairs = [line.partition(" = ") for line in text.splitlines()]
    return [(key, value) for key, sep, value in pairs if sep and key.startswith(JOB_KEYS)]


async def health(console: Console, request: Request, principal: Principal, session: SessionData | None) -> Response:
    return await _health_page(console, request, principal, session, None)


async def _health_page(
    console: Console, request: Request, principal: Principal, session: SessionData | None, fixed: dict[str, int] | None
) -> Response:
    answer = await console.call(principal, "memory_status", {"action": "health", "include_details": True})
    values = console.base(principal, session, answer=answer, report=answer.item or {}, fixed=fixed)
    return console.render(request, "health.html", values, answer.status if answer.error else 200)


async def health_fix(
    console: Console, request: Request, principal: Principal, session: SessionData | None, form: Form
) -> Response:
    try:
        with acting_as(Caller(principal, "POST /api/health-check/fix", Role.admin)):
            async with console.context.db.unit_of_work() as db:  # what POST /api/health-check/fix runs, audit too
                fixed = await HealthService(db).autofix()
                await AuditRepository(db).record(principal.user_id, "api", "health_fix", [], None, dict(fixed))
    except AppError as error:  # an admin who cannot see every project
        page = console.base(principal, session, message=error.message)
        return console.render(request, "error.html", page, error.status_code)
    logger.info("console: user %r ran the safe health fixes: %s", principal.name, fixed)
    return await _health_page(console, request, principal, session, fixed)


async def tokens(console: Console, request: Request, principal: Principal, session: SessionData | None) -> Response:
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
    console: Console, request: Request, principal: Principal, session: SessionData | None, form: Form
) -> Response:
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
    console: Console, request: Request, principal: Principal, session: SessionData | None, form: Form
) -> Response:
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
    console: Console, request: Request, principal: Principal, session: SessionData | None, form: Form
) -> Response:
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
