"""memory_manage's project calls, and the user, membership, export and import operations of every door
(`synaptomind user|member|export|import`, the console's users and members pages), one unit of work each: the role
checked, the audit event written in the change's transaction, a typed result."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

from app.db.models import Role
from app.db.records import Principal, ProjectRecord
from app.db.repositories.members import MemberRow
from app.db.repositories.projects import ProjectRepository
from app.db.repositories.users import UserRepository, UserRow
from app.errors import not_found
from app.services.actors import Actor
from app.services.admin.membership import MemberService, MembershipChange, ProjectMembers
from app.services.admin.portability import Portability
from app.services.admin.projects import ProjectService
from app.services.admin.users import UserService
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


# ---------------------------------------------------------------- users: `synaptomind user …`, the console's users page

MANAGING_USERS = "managing users"
CHANGING_MEMBERS = "changing a project's members"  # the console's role refusal words a membership change so


@dataclass(frozen=True)
class RoleChange:
    user: Principal  # with the role they have now
    before: Role


@dataclass(frozen=True)
class SessionsEnded:
    user: Principal
    ended: int


async def list_users(app: AppContext, actor: Actor) -> list[UserRow]:
    actor.require_admin(MANAGING_USERS)
    async with app.db.autocommit() as session:
        return await UserService(session).list_users()


async def create_user(app: AppContext, actor: Actor, name: str, role: Role, password: str | None) -> Principal:
    actor.require_admin(MANAGING_USERS)
    async with app.db.unit_of_work() as session:
        user = await UserService(session).create_user(name, role, password)
        details = {"user": user.name, "role": role.value, "password": password is not None}
        await actor.audit(session, "user_create", details)
    return user


async def set_user_role(app: AppContext, actor: Actor, name: str, role: Role) -> RoleChange:
    """The user's global role (audited when it changes); a lower one ends their console sessions."""
    actor.require_admin(MANAGING_USERS)
    async with app.db.unit_of_work() as session:
        service = UserService(session)
        before = await service.find(name)
        user = await service.set_role(before.name, role)
        if before.role != role:
            await actor.audit(session, "user_role", {"user": user.name, "from": before.role.value, "to": role.value})
    return RoleChange(user, before.role)


async def set_user_password(app: AppContext, actor: Actor, name: str, password: str | None) -> Principal:
    """Set (None: clear) the user's password; their console sessions end."""
    actor.require_admin(MANAGING_USERS)
    action = "user_password_set" if password is not None else "user_password_clear"
    async with app.db.unit_of_work() as session:
        user = await UserService(session).set_password(name, password)
        await actor.audit(session, action, {"user": user.name})
    return user


async def end_user_sessions(app: AppContext, actor: Actor, name: str) -> SessionsEnded:
    """End every console session of the user (audited by the sessions service: `session` / `end`)."""
    actor.require_admin(MANAGING_USERS)
    async with app.db.unit_of_work() as session:
        user, ended = await UserService(session).end_sessions(name)
    return SessionsEnded(user, ended)


# ---------------------------------------------------------------- memberships: `synaptomind member …`, the members page


@dataclass(frozen=True)
class MembersOverview:
    projects: list[ProjectMembers]  # the projects the actor sees, with their memberships
    users: list[UserRow]


async def members_overview(app: AppContext, actor: Actor) -> MembersOverview:
    actor.require_admin(CHANGING_MEMBERS)
    with actor.acting(CHANGING_MEMBERS):
        async with app.db.autocommit() as session:
            return MembersOverview(await MemberService(session).overview(), await UserService(session).list_users())


async def list_members(app: AppContext, actor: Actor, project: str | None) -> list[MemberRow]:
    """The memberships of every project the actor sees, or of one (by id or name)."""
    actor.require_admin(CHANGING_MEMBERS)
    with actor.acting(CHANGING_MEMBERS):
        async with app.db.unit_of_work() as session:
            return await MemberService(session).list(project)


async def set_member(app: AppContext, actor: Actor, project: str, user: str | None, role: Role) -> MembershipChange:
    """Make the user (None: everyone) a member of the project with `role`, or change their role there: from the
    console by an admin of the project only and never leaving it without one; the operator is held to neither (it
    is the way back in). Audited when the role changes."""
    actor.require_admin(CHANGING_MEMBERS)
    with actor.acting(CHANGING_MEMBERS, Role.admin):
        async with app.db.unit_of_work() as session:
            service = MemberService(session)
            if actor.principal is None:
                changed = await service.operator_set(project, user, role)
            else:
                changed = await service.set_member(project, user, role)
            if changed.before != role:
                action = "member_open" if user is None else ("member_add" if changed.before is None else "member_role")
                await actor.audit(session, action, membership_details(changed))
    return changed


async def drop_member(app: AppContext, actor: Actor, project: str, user: str | None) -> MembershipChange:
    """Remove the user's membership (None: close the project to all but its members), under `set_member`'s rules."""
    actor.require_admin(CHANGING_MEMBERS)
    with actor.acting(CHANGING_MEMBERS, Role.admin):
        async with app.db.unit_of_work() as session:
            service = MemberService(session)
            if actor.principal is None:
                changed = await service.operator_drop(project, user)
            else:
                changed = await service.drop_member(project, user)
            action = "member_close" if user is None else "member_remove"
            await actor.audit(session, action, membership_details(changed))
    return changed


def membership_details(changed: MembershipChange) -> dict[str, Any]:
    """The audit event's details: the project (id and name), the user (None: everyone), the role before and after."""
    return {
        "project_id": str(changed.project.id),
        "project": changed.project.name,
        "user": changed.user_name,
        "from": changed.before.value if changed.before else None,
        "to": changed.role.value if changed.role else None,
    }


# ---------------------------------------------------------------- `synaptomind export` and `import`


@dataclass(frozen=True)
class Export:
    total: int  # rows the export will write
    lines: AsyncIterator[str]  # one JSON line per row, read inside the export's transaction


@contextlib.asynccontextmanager
async def export_rows(app: AppContext, project: str | None, user: str | None) -> AsyncIterator[Export]:
    """Every row (of one project, by name), as JSONL; with `user`, only what that user may read (their projects
    and the global thoughts: the export's unit of work runs as them)."""
    reader = None
    if user is not None:
        async with app.db.unit_of_work() as session:
            reader = await UserRepository(session).find(user.strip())
        if reader is None:
            raise not_found(f"no user named {user!r} (see `synaptomind token list`)")
    with Actor(reader, "cli").acting("export"):
        async with app.db.unit_of_work() as session:
            project_id = None
            if project:
                found = await ProjectRepository(session).find_by_name(project)
                if found is None:
                    raise not_found(f"no project named {project!r} (see memory_manage action=list)")
                project_id = found.id
            portability = Portability(session)
            yield Export(await portability.count(project_id), portability.export(project_id))


async def import_rows(app: AppContext, lines: Iterable[str]) -> dict[str, int]:
    """Insert every row of a JSONL export whose id is new, in one transaction; how many of each kind."""
    async with app.db.unit_of_work() as session:
        return await Portability(session).import_lines(lines)
