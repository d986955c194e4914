"""cwd → project scope, with the contract's exact warning texts."""

from __future__ import annotations

import posixpath
import uuid
from dataclasses import dataclass, field
from typing import Any

from app.db.records import ProjectRecord
from app.db.repositories.projects import ProjectRepository
from app.errors import not_found

NO_CWD_WARNING = "no cwd — the answer spans every project"


def unknown_cwd_prefix(path: str) -> str:
    return f'cwd "{path}" matches no known project (check it with memory_manage action=resolve)'


def unknown_cwd_warning(path: str) -> str:
    return f"{unknown_cwd_prefix(path)} — the answer spans every project"


def normalize_path(path: str) -> str:
    """One spelling per directory: no trailing slash, no `.`/`..`, no doubled separators."""
    cleaned = path.strip()
    if not cleaned:
        return ""
    normalized = posixpath.normpath(cleaned)
    # POSIX keeps exactly two leading slashes; a working directory never means that.
    return "/" + normalized.lstrip("/") if normalized.startswith("//") else normalized


def scope_of(project: ProjectRecord) -> dict[str, Any]:
    return {"project": str(project.id), "project_name": project.name, "global": False}


UNRESOLVED_SCOPE: dict[str, Any] = {"project": None, "project_name": None, "global": True}


@dataclass(frozen=True)
class ReadScope:
    project: ProjectRecord | None
    scope: dict[str, Any] | None
    warnings: list[str] = field(default_factory=list)
    cwd_given: bool = False


async def resolve_read_scope(projects: ProjectRepository, cwd: str | None) -> ReadScope:
    """A read never fails on cwd: absent widens with a note, unknown widens with another."""
    path = normalize_path(cwd or "")
    if not path:
        return ReadScope(project=None, scope=None, warnings=[NO_CWD_WARNING])
    project = await projects.find_for_path(path)
    if project is None:
        return ReadScope(None, dict(UNRESOLVED_SCOPE), [unknown_cwd_warning(cwd or path)], cwd_given=True)
    return ReadScope(project, scope_of(project), [], cwd_given=True)


async def resolve_project_scope(projects: ProjectRepository, project_id: uuid.UUID) -> ReadScope:
    """A read scoped to a project by its id, for callers that name the project itself (the console), since a
    project without a `local_path` cannot be named as a cwd. A project the caller may not see is not found."""
    project = await projects.get(project_id)
    if project is None:
        raise not_found(f"Project {project_id} not found")
    return ReadScope(project, scope_of(project), [], cwd_given=False)


async def resolve_write_project(
    projects: ProjectRepository, cwd: str | None
) -> tuple[ProjectRecord, dict[str, Any] | None]:
    """A write lands in the project cwd names, else in the default project; no warning either way."""
    path = normalize_path(cwd or "")
    project = await projects.find_for_path(path) if path else None
    if project is not None:
        return project, scope_of(project)
    return await projects.ensure_default(), None
