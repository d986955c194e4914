"""Projects: CRUD, path resolution and deletion that moves thoughts to the default project.

The paths rule (docs/SECURITY.md, "Paths"): a caller may register a `local_path` (create, or update of a
project's path) at, inside or around another project's path only with the admin role in that project, so that no
one changes which project another user's cwd resolves to; a name or path taken by a project the caller cannot see
is refused with the text a visible one gets, naming no project.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.locks import PROJECT_PATHS_LOCK_KEY, hold_until_commit
from app.db.models import Edge, PlacementProposal, Primer, Role, Thought, ThoughtHit, ThoughtUrlLink
from app.db.records import Principal, ProjectRecord
from app.db.repositories.audit import AuditRepository
from app.db.repositories.members import MemberRepository
from app.db.repositories.projects import ProjectRepository
from app.db.visibility import UNSCOPED, refresh_visibility, resolved
from app.errors import bad_request, conflict, not_found
from app.services.admin.membership import require_role
from app.services.scope import normalize_path

# Tables whose rows follow their thought's project when a project is deleted.
_PROJECT_SCOPED = (Thought, Edge, ThoughtUrlLink, ThoughtHit, Primer, PlacementProposal)


def name_taken_refusal(name: str) -> str:
    """One text whether or not the caller sees the project of that name: it names no project and no id."""
    return (
        f"A project named '{name}' already exists (project names are unique on the server, also among projects "
        "you cannot see): choose another name"
    )


def path_overlap_refusal(path: str) -> str:
    """One text for a path at, inside or around a project where the caller is not an admin, seen or not: it
    tells neither which of the three, nor the project."""
    return (
        f"Refused: local_path '{path}' is the path of another project, or lies inside or around it, and you are "
        "not an admin of that project: registering it would change which project other users' cwd resolves to. "
        "Choose a path outside other projects' paths (or omit local_path), or ask an admin of that project"
    )


def taken_meanwhile(name: str | None, path: str | None) -> str:
    """A concurrent call took the name or path after the checks let this one through (the unique indexes)."""
    taken = ", ".join(f"{key} '{value}'" for key, value in (("name", name), ("local_path", path)) if value)
    return f"Another project took {taken} meanwhile; read the projects and retry"


@dataclass(frozen=True)
class DeletePlan:
    project: ProjectRecord
    thought_count: int
    default_project: ProjectRecord


class ProjectService:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session
        self.projects = ProjectRepository(session)

    async def list(self) -> list[ProjectRecord]:
        await self.projects.ensure_default()
        return await self.projects.list_all()

    async def get(self, project_id: uuid.UUID, *, for_update: bool = False) -> ProjectRecord:
        project = await self.projects.get(project_id, for_update=for_update)
        if project is None:
            raise not_found(f"Project {project_id} not found (list them with memory_manage action=list)")
        return project

    async def create(
        self, name: str, local_path: str | None, description: str | None, creator: uuid.UUID | None = None
    ) -> ProjectRecord:
        """A new project, open to everyone (the trigger of migration 0017), its creator (if a user) its admin."""
        path = (normalize_path(local_path) if local_path else None) or None  # blank = no path
        await self._refuse_taken(name, path, None)
        try:
            async with self.session.begin_nested():
                project_id = await self.projects.insert(name.strip(), path, description)
        except IntegrityError:
            raise conflict(taken_meanwhile(name.strip(), path)) from None
        if creator is not None:
            await MemberRepository(self.session).upsert(project_id, creator, Role.admin)
        return await self.get(project_id)

    async def update(self, project_id: uuid.UUID, values: dict[str, Any]) -> ProjectRecord:
        project = await self.get(project_id)
        await require_role(self.session, [project.id])  # an admin of the project
        if "local_path" in values and values["local_path"] is not None:
            values["local_path"] = normalize_path(values["local_path"]) or None
        if "name" in values:
            values["name"] = values["name"].strip()
        await self._refuse_taken(values.get("name"), values.get("local_path"), project)
        if values:
            try:  # the unique indexes decide between concurrent writers the check above let through
                async with self.session.begin_nested():
                    await self.projects.update_fields(project.id, values)
            except IntegrityError:
                raise conflict(taken_meanwhile(values.get("name"), values.get("local_path"))) from None
        return await self.get(project.id)

    async def plan_delete(self, project_id: uuid.UUID, *, lock: bool = False) -> DeletePlan:
        """What a delete would do; with `lock` (to execute it) the project row is locked first: writes into the
        project that are under way finish before (their thoughts move too), later ones wait and then fail."""
        project = await self.get(project_id, for_update=lock)
        await require_role(self.session, [project.id])  # an admin of the project
        if project.is_default:
            raise bad_request("The default project cannot be deleted (it receives the thoughts of deleted projects)")
        default = await self.projects.ensure_default()
        return DeletePlan(project, await self.projects.thought_count(project.id), default)

    async def delete(self, plan: DeletePlan, principal: Principal) -> int:
        """Move every thought (with its edges, links, hits, primers, proposals) to the default project.

        Every row of the project moves, also those the caller cannot read (an edge to a thought of a project they
        are not a member of): the project itself was read through the visibility rule and its admin checked, and
        a row left behind would go with the project (the foreign keys cascade)."""
        for table in _PROJECT_SCOPED:
            await self.session.execute(
                update(table)
                .where(table.project_id == plan.project.id)
                .values(project_id=plan.default_project.id)
                .execution_options(**UNSCOPED)
            )
        await self.projects.delete(plan.project.id)
        await AuditRepository(self.session).record(
            principal.user_id,
            "memory_manage",
            "delete",
            [plan.project.id],
            plan.project.id,
            {"thoughts_moved": plan.thought_count, "moved_to": str(plan.default_project.id)},
        )
        return plan.thought_count

    async def resolve(self, cwd: str) -> ProjectRecord | None:
        path = normalize_path(cwd)
        return await self.projects.find_for_path(path) if path else None

    async def _refuse_taken(self, name: str | None, path: str | None, own: ProjectRecord | None) -> None:
        """Refuse a name another project has, or a path the paths rule refuses (`own`: the project updated)."""
        own_id = own.id if own is not None else None
        if name and await self.projects.name_taken(name.strip(), own_id):
            raise conflict(name_taken_refusal(name.strip()))
        if path and (own is None or path != own.local_path):  # keeping its path changes no resolution
            await self._claim_path(path, own_id)

    async def _claim_path(self, path: str, own_id: uuid.UUID | None) -> None:
        """The paths rule. A cwd resolves to the project at its nearest registered ancestor among those the caller
        sees: a project registered at `path` takes the cwds below it from the projects at its ancestors (for
        every user who sees them), and those inside a project below it from each user who does not see that one.
        So every project at, above or below `path` must be one the caller is an admin of (the effective role);
        a project they cannot see counts like one they see without the role, and is never named. Registrations
        take turns (an advisory lock), so two of them cannot each pass the check the other would fail."""
        await hold_until_commit(self.session, PROJECT_PATHS_LOCK_KEY)
        near = await self.projects.registered_near(path, own_id)
        if not near:
            return
        visibility = await resolved(self.session)
        if visibility is not None:  # outside a restricted call (stdio, the CLI) every project is the caller's
            if any(visibility.role_in(project_id) is not Role.admin for project_id, _ in near):
                visibility = await refresh_visibility(self.session) or visibility  # one registered since
            if any(visibility.role_in(project_id) is not Role.admin for project_id, _ in near):
                raise conflict(path_overlap_refusal(path))
        same = next((project_id for project_id, registered in near if registered == path), None)
        if same is not None:  # one the caller administers (or any, outside a restricted call): it may be named
            raise conflict(f"Project '{(await self.get(same)).name}' is already registered at '{path}'")
