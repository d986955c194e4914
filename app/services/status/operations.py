"""memory_status's slots, frontier and health reads as units of work; the health report and safe fix of the ops plane
(`/api/health-check`, the console's health page) and the database probe of `/health`."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

from app.db.models import Role
from app.db.records import Principal
from app.db.repositories.audit import AuditRepository
from app.db.repositories.health_reports import HealthReportRow
from app.db.repositories.projects import ProjectRepository
from app.db.visibility import Caller, acting_as
from app.errors import forbidden
from app.services.context import AppContext
from app.services.scope import ReadScope, resolve_read_scope
from app.services.status.frontier import FrontierEntry, FrontierService
from app.services.status.health import HealthService
from app.services.status.health_reports import check_now, latest_report
from app.services.status.slots import SlotService, SlotView

DEFAULT_PENDING_PAGE = 50


async def read_slots(
    app: AppContext, cwd: str | None, limit: int | None, offset: int
) -> tuple[ReadScope, list[SlotView]]:
    """Every slot of the scope; `limit`/`offset` page the pending_items slot (default page 50)."""
    async with app.db.reading() as session:
        scope = await resolve_read_scope(ProjectRepository(session), cwd)
        project_id = scope.project.id if scope.project else None
        views = await SlotService(session, app.settings.slots.default_max_chars).read_all(
            project_id, limit or DEFAULT_PENDING_PAGE, offset
        )
    return scope, views


async def read_frontier(app: AppContext, cwd: str | None) -> tuple[ReadScope, list[FrontierEntry]]:
    async with app.db.reading() as session:
        scope = await resolve_read_scope(ProjectRepository(session), cwd)
        entries = await FrontierService(session).frontier(scope.project.id if scope.project else None)
    return scope, entries


async def health_report(app: AppContext, include_details: bool, severity: str | None) -> dict[str, Any]:
    async with app.db.unit_of_work() as session:
        return await HealthService(session).report(include_details, severity)


# ---------------------------------------------------------------- the ops plane: /api/health-check and the console

FIX_CALL = "POST /api/health-check/fix"
FIX_NEEDS_ADMIN = "Forbidden: the safe autofixes need the admin role"


async def caller_health_report(
    app: AppContext, principal: Principal, call: str, include_details: bool, severity: str | None
) -> dict[str, Any]:
    """The health report over the caller's projects, as memory_status action=health answers it."""
    with acting_as(Caller(principal, call)):
        return await health_report(app, include_details, severity)


async def fix_health(app: AppContext, principal: Principal) -> dict[str, int]:
    """The safe autofixes (admin; refused to an admin who cannot see every project), audited as `api` /
    `health_fix` whichever door ran them: `POST /api/health-check/fix` and the console's health page."""
    if principal.role is not Role.admin:
        raise forbidden(FIX_NEEDS_ADMIN)
    with acting_as(Caller(principal, FIX_CALL, Role.admin)):
        async with app.db.unit_of_work() as session:
            fixed = await HealthService(session).autofix()
            await AuditRepository(session).record(principal.user_id, "api", "health_fix", [], None, dict(fixed))
    return fixed


async def probe_database(app: AppContext) -> None:
    """A `SELECT 1` on a connection of its own (GET /health); raises when the database does not answer."""
    async with app.db.engine.connect() as connection:
        await connection.execute(text("SELECT 1"))


# the settings of the background work, as `memory_status action=config` lists them
BACKGROUND_SETTINGS = ("jobs.", "decay.", "health.", "embedder.")


def background_settings(app: AppContext) -> list[tuple[str, str]]:
    """The effective settings of the background jobs and the embedder's state, as `memory_status action=config`
    writes them (`key`, `value`): whether this process runs the periodic jobs, how often, and the embedder."""
    lines = [(key, str(value)) for key, value in app.settings_view.items() if key.startswith(BACKGROUND_SETTINGS)]
    status = app.embedding.status()
    lines.append(("embedder.state", str(status["state"])))
    lines.append(("embedder.active_model", str(status["active_model"] or "(none)")))
    if status["note"]:
        lines.append(("embedder.note", str(status["note"])))
    return lines


async def stored_health_report(app: AppContext) -> HealthReportRow | None:
    """The last stored health report (the background job's or an admin's Check now), None before the first."""
    return await latest_report(app.db)


async def check_health_now(app: AppContext, requested_by: str) -> HealthReportRow:
    """Check the health now (the caller's projects) and store the report."""
    return await check_now(app.db, requested_by)
