"""memory_manage's project calls and the console's thought counts, one unit of work each."""

from __future__ import annotations

import uuid
from typing import Any

from app.db.records import Principal, ProjectRecord
from app.db.repositories.projects import ProjectRepository
from app.services.admin.projects import ProjectService
from app.services.context import AppContext

# ---------------------------------------------------------------- memory_manage's calls, one unit of work each


async def list_projects(app: AppContext) -> list[ProjectRecord]:
    async with app.db.unit_of_work() as session:
        return await ProjectService(session).list()


async def create_project(
    app: AppContext, principal: Principal, name: str, local_path: str | None, description: str | None
) -> ProjectRecord:
    async with app.db.unit_of_work() as session:
        return await ProjectService(session).create(name, local_path, description, principal.user_id)


async def update_project(app: AppContext, project_id: uuid.UUID, values: dict[str, Any]) -> ProjectRecord:
    async with app.db.unit_of_work() as session:
        return await ProjectService(session).update(project_id, values)


async def resolve_project(app: AppContext, cwd: str) -> ProjectRecord | None:
    async with app.db.unit_of_work() as session:
        return await ProjectService(session).resolve(cwd)


async def thought_counts(app: AppContext) -> dict[uuid.UUID, dict[str, int]]:
    """Each project's thoughts by status (the console's operations page): one grouped count, where the tools
    would need a `memory_reflect timeline` total per project and status."""
    async with app.db.autocommit() as session:
        return await ProjectRepository(session).thought_counts_by_status()
