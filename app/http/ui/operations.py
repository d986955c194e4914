"""The console's operations pages (admin only): counts per project and background job state, health with its
safe fix, and API tokens.

The overview lists the projects `memory_manage action=list` answers with their thoughts by status, counted in one
grouped query (app.services.admin.operations.thought_counts: the tools would need a `memory_reflect timeline` total per
project and status, 3 × (projects + 1) calls); each background job's last run is app.services.jobs.runs'; the
jobs' settings and the embedder's state are the lines of `memory_status action=config`. Nothing of a project the
admin cannot see changes the page: the totals are the listed projects', and to an admin who is not a member of every
project a job's outcome line (counts of every project) is withheld, its time and success still shown.

Health shows the stored report (app.services.status.health_reports: what `memory_status action=health
include_details=true` answered when the background job, or an admin's Check now, last checked), since every check takes
~0.3 s at 100 k thoughts; Check now checks and stores it again. The fix has no MCP action, so it runs the service call
the `POST /api/health-check/fix` route runs (app.services.status.operations.fix_health, with its audit event), then
checks and stores the report again. Tokens use the operations of the CLI's `synaptomind token …` commands
(app.services.auth.operations: the same audit events, tool `console` here and `cli` there).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from app.errors import AppError, bad_request
from app.http.ui.session import SessionData
from app.services.actors import Actor
from app.services.admin.operations import thought_counts
from app.services.auth import operations as token_operations
from app.services.auth.tokens import parse_expiry
from app.services.jobs.operations import job_runs
from app.services.status.health_reports import check_now, latest_report
from app.services.status.operations import fix_health
from app.services.values import HealthReportRow, Principal, Role

if TYPE_CHECKING:
    from app.http.ui.console import Answer, Console, Form, PageHandler

logger = logging.getLogger(__name__)

COUNTED_STATUSES = ("active", "draft", "archived")
JOB_KEYS = ("jobs.", "decay.", "health.", "embedder.")
ADMIN_ONLY = "Forbidden: the operations pages need the admin role; user '{name}' is a {role}."


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
    projects, config, counts, runs = await asyncio.gather(
        console.projects(principal),
        console.call(principal, "memory_status", {"action": "config"}),
        thought_counts(console.context),
        job_runs(console.context),
    )
    by_project = {str(project_id): by_status for project_id, by_status in counts.items()}
    rows = []
    for project in projects.items:
        found = by_project.get(str(project.get("id")), {})
        row = {status: found.get(status, 0) for status in COUNTED_STATUSES}
        rows.append({"project": project, "counts": row, "total": sum(row.values())})
    # The listed rows' sum: the counts also hold the global thoughts of projects the admin does not see (readable,
    # but no row of theirs), which no total they get may count.
    everywhere = {status: sum(row["counts"][status] for row in rows) for status in COUNTED_STATUSES}
    values = console.base(
        principal,
        session,
        projects=projects,
        rows=rows,
        everywhere={"counts": everywhere, "total": sum(everywhere.values())},
        statuses=COUNTED_STATUSES,
        config=config,
        jobs=_job_lines(config),
        runs=runs,
    )
    return console.render(request, "operations.html", values, projects.status if projects.error else 200)


def _job_lines(config: Answer) -> list[tuple[str, str]]:
    """The `key = value` lines of memory_status action=config about the background work."""
    text = str((config.item or {}).get("text") or "")
    pairs = [line.partition(" = ") for line in text.splitlines()]
    return [(key, value) for key, sep, value in pairs if sep and key.startswith(JOB_KEYS)]


async def health(console: Console, request: Request, principal: Principal, session: SessionData | None) -> Response:
    stored = await latest_report(console.context.db)
    if stored is None:  # nothing checked yet (a new database, or no replica runs the jobs): check once, now
        stored = await check_now(console.context.db, principal.name)
    return _health_page(console, request, principal, session, stored)


async def health_check(
    console: Console, request: Request, principal: Principal, session: SessionData | None, form: Form
) -> Response:
    stored = await check_now(console.context.db, principal.name)
    logger.info("console: user %r checked health: score %s", principal.name, stored.report.get("health_score"))
    return _health_page(console, request, principal, session, stored)


def _health_page(
    console: Console,
    request: Request,
    principal: Principal,
    session: SessionData | None,
    stored: HealthReportRow,
    fixed: dict[str, int] | None = None,
) -> Response:
    settings = console.context.settings
    checked = {
        "ago": checked_ago(stored.age_seconds),
        "at": stored.checked_at,
        "seconds": stored.seconds,
        "replica": stored.replica,
        "requested_by": stored.requested_by,
    }
    values = console.base(
        principal,
        session,
        report=stored.report,
        checked=checked,
        interval_minutes=settings.health.report_interval_minutes,
        jobs_here=settings.jobs.enabled,
        fixed=fixed,
    )
    return console.render(request, "health.html", values)


def checked_ago(seconds: float) -> str:
    """`4 min ago`: how old a stored report is, as the health page says it."""
    minutes = int(seconds // 60)
    if minutes < 1:
        return "less than a minute ago"
    if minutes < 60:
        return f"{minutes} min ago"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min ago" if minutes else f"{hours} h ago"
    return f"{hours // 24} days ago"


async def health_fix(
    console: Console, request: Request, principal: Principal, session: SessionData | None, form: Form
) -> Response:
    try:
        fixed = await fix_health(console.context, principal)  # what POST /api/health-check/fix runs, audit too
    except AppError as error:  # an admin who cannot see every project
        page = console.base(principal, session, message=error.message)
        return console.render(request, "error.html", page, error.status_code)
    logger.info("console: user %r ran the safe health fixes: %s", principal.name, fixed)
    stored = await check_now(console.context.db, principal.name)  # the stored report predates the fixes
    return _health_page(console, request, principal, session, stored, fixed)


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
    rows = await token_operations.list_tokens(console.context, Actor.console(principal))
    return admin_page(console, request, "tokens.html", principal, session, status, rows=rows, **values)


def admin_page(
    console: Console,
    request: Request,
    template: str,
    principal: Principal,
    session: SessionData | None,
    status: int,
    **values: Any,
) -> Response:
    """A page of the tokens, users or members lists, with the roles its forms offer."""
    page = console.base(principal, session, roles=[role.value for role in Role], **values)
    return console.render(request, template, page, status)


def parse_role(value: str) -> Role:
    """A role field of the users and members forms: one of the roles, else the 400 that names them."""
    if value not in Role.__members__:
        raise bad_request(f"role: one of {', '.join(role.value for role in Role)} (not {value!r})")
    return Role(value)


def _expiry(console: Console, value: str) -> datetime | None:
    days = console.context.settings.auth.token_lifetime_days
    return parse_expiry(value.strip() or None, datetime.now(UTC), days)


async def token_create(
    console: Console, request: Request, principal: Principal, session: SessionData | None, form: Form
) -> Response:
    role = form.get("role")
    try:
        expires_at = _expiry(console, form.get("expires"))
        chosen = Role(role) if role in Role.__members__ else None
        created = await token_operations.create_token(
            console.context, Actor.console(principal), form.get("user"), chosen, form.get("label") or None, expires_at
        )
    except AppError as error:
        return await _tokens_page(console, request, principal, session, error.status_code, error=error.message)
    logger.info("console: user %r created a token for %r", principal.name, created.user.name)
    shown = _shown(created.token, created.user, created.expires_at, "created")
    return await _tokens_page(console, request, principal, session, created=shown)


async def token_revoke(
    console: Console, request: Request, principal: Principal, session: SessionData | None, form: Form
) -> Response:
    token_id = form.get("token_id")
    try:
        await token_operations.revoke_token(console.context, Actor.console(principal), token_id)
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
        rotated = await token_operations.rotate_token(console.context, Actor.console(principal), token_id, expires_at)
    except AppError as error:
        return await _tokens_page(console, request, principal, session, error.status_code, error=error.message)
    logger.info("console: user %r rotated token %s", principal.name, token_id)
    verb = f"rotated (token {token_id} is revoked; its successor is {rotated.token_id})"
    shown = _shown(rotated.token, rotated.user, rotated.expires_at, verb)
    return await _tokens_page(console, request, principal, session, created=shown)


def _shown(token: str, user: Principal, expires_at: datetime | None, verb: str) -> dict[str, Any]:
    """A new token as the tokens page shows it, once: the secret, whose it is, and what was done."""
    return {"token": token, "user": user.name, "role": user.role.value, "expires_at": expires_at, "verb": verb}
