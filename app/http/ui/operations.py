"""The console's operations pages (admin only): counts per project and background job state, health with its
safe fix, and API tokens.

The overview lists the projects `memory_manage action=list` answers with their thoughts by status, counted in one
grouped query (app.services.admin.operations.thought_counts: the tools would need a `memory_reflect timeline` total per
project and status, 3 × (projects + 1) calls); each background job's last run is app.services.jobs.runs'; the
jobs' settings and the embedder's state are app.services.status.operations.background_settings (what
`memory_status action=config` lists about them). Nothing of a project the
admin cannot see changes the page: the totals are the listed projects', and to an admin who is not a member of every
project a job's outcome line (counts of every project) is withheld, its time and success still shown.

Health shows the stored report (app.services.status.health_reports: what `memory_status action=health
include_details=true` answered when the background job, or an admin's Check now, last checked), since every check takes
~0.3 s at 100 k thoughts; Check now checks and stores it again (app.services.status.operations). The fix has no MCP
action, so it runs the operation the `POST /api/health-check/fix` route runs (`fix_health`, with its audit event), then
checks and stores the report again. Tokens use the operations of the CLI's `synaptomind token …` commands
(app.services.auth.operations: the same audit events, tool `console` here and `cli` there).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

from starlette.responses import Response

from app.errors import AppError, bad_request
from app.http.ui.forms import Form
from app.http.ui.page import Page, PageHandler
from app.services.admin.operations import thought_counts
from app.services.auth import operations as token_operations
from app.services.auth.tokens import parse_expiry
from app.services.jobs.operations import job_runs
from app.services.status import operations as status_operations
from app.services.values import HealthReportRow, Principal, Role

logger = logging.getLogger(__name__)

COUNTED_STATUSES = ("active", "draft", "archived")
ADMIN_ONLY = "Forbidden: the operations pages need the admin role; user '{name}' is a {role}."


def _refusal(page: Page) -> Response:
    message = ADMIN_ONLY.format(name=page.principal.name, role=page.principal.role.value)
    return page.render("error.html", page.values(message=message), 403)


def admin_only(handler: PageHandler) -> PageHandler:
    """An operations page: any other role gets the 403 page before a form is even read."""

    async def checked(page: Page) -> Response:
        if page.principal.role is not Role.admin:
            return _refusal(page)
        return await handler(page)

    return checked


async def overview(page: Page) -> Response:
    projects, counts, runs = await asyncio.gather(page.projects(), thought_counts(page.context), job_runs(page.context))
    by_project = {str(project_id): by_status for project_id, by_status in counts.items()}
    rows: list[dict[str, Any]] = []
    for project in projects:
        found = by_project.get(str(project.id), {})
        row = {status: found.get(status, 0) for status in COUNTED_STATUSES}
        rows.append({"project": project, "counts": row, "total": sum(row.values())})
    # The listed rows' sum: the counts also hold the global thoughts of projects the admin does not see (readable,
    # but no row of theirs), which no total they get may count.
    everywhere = {status: sum(row["counts"][status] for row in rows) for status in COUNTED_STATUSES}
    values = page.values(
        projects=projects,
        rows=rows,
        everywhere={"counts": everywhere, "total": sum(everywhere.values())},
        statuses=COUNTED_STATUSES,
        jobs=status_operations.background_settings(page.context),
        runs=runs,
    )
    return page.render("operations.html", values)


async def health(page: Page) -> Response:
    stored = await status_operations.stored_health_report(page.context)
    if stored is None:  # nothing checked yet (a new database, or no replica runs the jobs): check once, now
        stored = await status_operations.check_health_now(page.context, page.principal.name)
    return _health_page(page, stored)


async def health_check(page: Page, form: Form) -> Response:
    stored = await status_operations.check_health_now(page.context, page.principal.name)
    logger.info("console: user %r checked health: score %s", page.principal.name, stored.report.get("health_score"))
    return _health_page(page, stored)


def _health_page(
    page: Page,
    stored: HealthReportRow,
    fixed: dict[str, int] | None = None,
) -> Response:
    settings = page.context.settings
    checked = {
        "ago": checked_ago(stored.age_seconds),
        "at": stored.checked_at,
        "seconds": stored.seconds,
        "replica": stored.replica,
        "requested_by": stored.requested_by,
    }
    values = page.values(
        report=stored.report,
        checked=checked,
        interval_minutes=settings.health.report_interval_minutes,
        jobs_here=settings.jobs.enabled,
        fixed=fixed,
    )
    return page.render("health.html", values)


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


async def health_fix(page: Page, form: Form) -> Response:
    try:
        # what POST /api/health-check/fix runs, audit too
        fixed = await status_operations.fix_health(page.context, page.principal)
    except AppError as error:  # an admin who cannot see every project
        return page.error(error.message, error.status_code)
    logger.info("console: user %r ran the safe health fixes: %s", page.principal.name, fixed)
    stored = await status_operations.check_health_now(page.context, page.principal.name)  # predates the fixes
    return _health_page(page, stored, fixed)


async def tokens(page: Page) -> Response:
    return await _tokens_page(page)


async def _tokens_page(
    page: Page,
    status: int = 200,
    **values: Any,
) -> Response:
    rows = await token_operations.list_tokens(page.context, page.actor)
    return admin_page(page, "tokens.html", status, rows=rows, **values)


def admin_page(page: Page, template: str, status: int, **values: Any) -> Response:
    """A page of the tokens, users or members lists, with the roles its forms offer."""
    return page.render(template, page.values(roles=[role.value for role in Role], **values), status)


def parse_role(value: str) -> Role:
    """A role field of the users and members forms: one of the roles, else the 400 that names them."""
    if value not in Role.__members__:
        names = ", ".join(role.value for role in Role)
        # the argument as data, so a form says it beside its role field (forms.FieldErrors.refused)
        raise bad_request(f"role: one of {names} (not {value!r})", argument="role", reason=f"choose one of {names}")
    return Role(value)


def _expiry(page: Page, value: str) -> datetime | None:
    days = page.context.settings.auth.token_lifetime_days
    return parse_expiry(value.strip() or None, datetime.now(UTC), days)


async def token_create(page: Page, form: Form) -> Response:
    role = form.get("role")
    try:
        expires_at = _expiry(page, form.get("expires"))
        chosen = Role(role) if role in Role.__members__ else None
        created = await token_operations.create_token(
            page.context, page.actor, form.get("user"), chosen, form.get("label") or None, expires_at
        )
    except AppError as error:  # the form again with what was typed
        typed = form.typed("user", "role", "label", "expires")
        return await _tokens_page(page, error.status_code, error=error.message, typed=typed)
    logger.info("console: user %r created a token for %r", page.principal.name, created.user.name)
    shown = _shown(created.token, created.user, created.expires_at, "created")
    return await _tokens_page(page, created=shown)


async def token_revoke(page: Page, form: Form) -> Response:
    token_id = form.get("token_id")
    try:
        await token_operations.revoke_token(page.context, page.actor, token_id)
    except AppError as error:
        return await _tokens_page(page, error.status_code, error=error.message)
    logger.info("console: user %r revoked token %s", page.principal.name, token_id)
    return await _tokens_page(page, notice=f"Token {token_id} revoked.")


async def token_rotate(page: Page, form: Form) -> Response:
    token_id = form.get("token_id")
    try:
        expires_at = _expiry(page, form.get("expires"))
        rotated = await token_operations.rotate_token(page.context, page.actor, token_id, expires_at)
    except AppError as error:
        return await _tokens_page(page, error.status_code, error=error.message)
    logger.info("console: user %r rotated token %s", page.principal.name, token_id)
    verb = f"rotated (token {token_id} is revoked; its successor is {rotated.token_id})"
    shown = _shown(rotated.token, rotated.user, rotated.expires_at, verb)
    return await _tokens_page(page, created=shown)


def _shown(token: str, user: Principal, expires_at: datetime | None, verb: str) -> dict[str, Any]:
    """A new token as the tokens page shows it, once: the secret, whose it is, and what was done."""
    return {"token": token, "user": user.name, "role": user.role.value, "expires_at": expires_at, "verb": verb}
