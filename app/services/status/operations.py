"""memory_status's slots, frontier and health reads as units of work."""

from __future__ import annotations

from typing import Any

from app.db.repositories.projects import ProjectRepository
from app.services.context import AppContext
from app.services.scope import ReadScope, resolve_read_scope
from app.services.status.frontier import FrontierEntry, FrontierService
from app.services.status.health import HealthService
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
