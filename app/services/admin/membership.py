"""Per-project membership: the role a write needs in the project it changes, and the CLI's member commands.

What a caller may read is decided once, in app.db.visibility; this module holds the write side of the rule
(`require_role`) and `synaptomind member add|remove|list` (docs/SECURITY.md, "Per-project membership").
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.locks import RowLock
from app.db.models import Role
from app.db.records import ProjectRecord
from app.db.repositories.members import MemberRepository, MemberRow
from app.db.repositories.projects import ProjectRepository
from app.db.repositories.thoughts import ThoughtRepository
from app.db.repositories.users import UserRepository
from app.db.visibility import ROLE_RANK, refresh_visibility, resolved, roles_in
from app.errors import bad_request, conflict, forbidden, not_found


def role_refusal(call: str, needs: Role, user: str, role: Role) -> str:
    """The contract's role refusal (docs/mcp-tools.md, "Calling a tool", step 2)."""
    return f"Forbidden: {call} needs the {needs.value} role; user '{user}' is a {role.value}"


async def require_role(session: AsyncSession, project_ids: Iterable[uuid.UUID], needs: Role | None = None) -> None:
    """Refuse the call unless the caller holds `needs` (default: the action's role) in every project given.

    Called by every write before it changes a row of those projects, with the projects of rows it has read
    (so visible ones). A global thought of a project the caller is not a member of is read-only to them: they
    are a reader there. Outside a restricted call (the local user, jobs, the CLI) everything is allowed. A
    project the unit of work has not met yet (created by another call since it began) is looked up again.
    """
    found = await roles_in(session, project_ids)
    if found is None:
        return
    caller, roles = found
    needed = needs or caller.needs
    for project_id in sorted(roles):
        role = roles[project_id] or Role.reader
        if ROLE_RANK[role] < ROLE_RANK[needed]:
            raise forbidden(role_refusal(caller.call, needed, caller.principal.name, role))


async def require_thought_roles(
    session: AsyncSession, thought_ids: Iterable[uuid.UUID], needs: Role | None = None, *, lock: RowLock | None = None
) -> dict[uuid.UUID, uuid.UUID]:
    """`require_role` in the project of every thought given, for a write that changes a row of those projects
    while it names the thoughts: a parent edge (it belongs to the parent's project), an edge changed through its
    other end, a rollback's edge or thought. Answers {thought id: project id} of those that exist (read through
    the visibility rule, optionally locked: an id the caller cannot see is left out, for their not-found)."""
    found = await ThoughtRepository(session).projects_of(list(thought_ids), lock=lock)
    await require_role(session, found.values(), needs)
    return found


async def may_write(session: AsyncSession, project_id: uuid.UUID, needs: Role | None = None) -> bool:
    """Whether `require_role` would let a write into the project through (for picking candidates)."""
    visibility = await resolved(session)
    if visibility is None:
        return True
    role = visibility.role_in(project_id) or Role.reader
    return ROLE_RANK[role] >= ROLE_RANK[needs or visibility.caller.needs]


async def writable_projects(session: AsyncSession, needs: Role | None = None) -> list[uuid.UUID] | None:
    """The projects where the caller holds `needs` (default: the action's role); None outside a restricted call
    (everything is writable). For a side effect that goes only where the caller may write (an importance bump of a
    link's ends), so one statement filters its rows instead of refusing the call."""
    visibility = await resolved(session)
    if visibility is None:
        return None
    needed = ROLE_RANK[needs or visibility.caller.needs]
    return sorted(project_id for project_id, role in visibility.roles.items() if ROLE_RANK[role] >= needed)


# ---------------------------------------------------------------- synaptomind member …


@dataclass(frozen=True)
class Membership:
    project: ProjectRecord
    user_name: str | None  # None: everyone
    role: Role


class MemberService:
    """The CLI's member commands (an operator's, like `token`: they see every project) and the console's
    memberships page (as its admin: their projects only, changes only where they are an admin)."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session
        self.members = MemberRepository(session)
        self.projects = ProjectRepository(session)
        self.users = UserRepository(session)

    async def project(self, reference: str) -> ProjectRecord:
        """A project by id or by name."""
        project = None
        with contextlib.suppress(ValueError):
            project = await self.projects.get(uuid.UUID(reference))
        project = project or await self.projects.find_by_name(reference.strip())
        if project is None:
            raise not_found(f"No project {reference!r} (by id or name; see memory_manage action=list)")
        return project

    async def _user(self, reference: str) -> tuple[uuid.UUID, str]:
        found = None
        with contextlib.suppress(ValueError):
            found = await self.users.get(uuid.UUID(reference))
        found = found or await self.users.find(reference.strip())
        if found is None or found.user_id is None:
            raise not_found(
                f"No user {reference!r} (by id or name): create one with "
                f"`synaptomind token create --user NAME --role …`",
                argument="user",
                reason=f"no user {reference!r}",
            )
        return found.user_id, found.name

    async def add(self, project_ref: str, user_ref: str | None, role: Role) -> Membership:
        """Add a member (or, with `user_ref` None, open the project to everyone) or change their role there."""
        return (await self._set(await self.project(project_ref), user_ref, role))[0]

    async def remove(self, project_ref: str, user_ref: str | None) -> Membership:
        """Remove a member (or, with `user_ref` None, close the project: only its members see it then)."""
        return await self._remove(await self.project(project_ref), user_ref)

    async def operator_set(self, project_ref: str, user_ref: str | None, role: Role) -> MembershipChange:
        """`add` with the role it replaced, as the audit event records it (`synaptomind member add`)."""
        membership, before = await self._set(await self.project(project_ref), user_ref, role)
        return MembershipChange(membership.project, membership.user_name, role, before, True)

    async def operator_drop(self, project_ref: str, user_ref: str | None) -> MembershipChange:
        """`remove` as a change, as the audit event records it (`synaptomind member remove`)."""
        removed = await self.remove(project_ref, user_ref)
        return MembershipChange(removed.project, removed.user_name, None, removed.role, True)

    async def _set(self, project: ProjectRecord, user_ref: str | None, role: Role) -> tuple[Membership, Role | None]:
        """The membership set, and the role it had before (None: no member)."""
        user_id, name = (None, None) if user_ref is None else await self._user(user_ref)
        before = await self.members.role_of(project.id, user_id)
        await self.members.upsert(project.id, user_id, role)
        return Membership(project, name, role), before

    async def _remove(self, project: ProjectRecord, user_ref: str | None) -> Membership:
        if user_ref is None and project.is_default:
            raise bad_request(
                "The default project stays open to everyone: it receives the writes without a cwd and the "
                "thoughts of deleted projects"
            )
        user_id, name = (None, None) if user_ref is None else await self._user(user_ref)
        removed = await self.members.delete(project.id, user_id)
        if removed is None:
            who = "everyone" if name is None else f"user {name!r}"
            raise not_found(f"Project {project.name!r} has no membership for {who} (see `synaptomind member list`)")
        return Membership(project, name, removed)

    # ------------------------------------------------------------ the console's memberships page

    async def overview(self) -> list[ProjectMembers]:
        """Every project the caller sees (all of them outside a restricted call) with its memberships."""
        projects = await self.projects.list_all()
        by_project: dict[uuid.UUID, list[MemberRow]] = {}
        for row in await self.members.list(None):
            by_project.setdefault(row.project_id, []).append(row)
        found = []
        for project in projects:
            rows = by_project.get(project.id, [])
            everyone = next((row.role for row in rows if row.user_id is None), None)
            members = [row for row in rows if row.user_id is not None]
            found.append(
                ProjectMembers(project, everyone, members, await may_write(self.session, project.id, Role.admin))
            )
        return found

    async def set_member(self, project_ref: str, user_ref: str | None, role: Role) -> MembershipChange:
        """The console's add, role change and opening to everyone (`user_ref` None): by an admin in the project
        only, and never leaving it without an admin."""
        project = await self._administered(project_ref)
        membership, before = await self._set(project, user_ref, role)
        if user_ref is None:
            change = f"opening project {project.name!r} to everyone as {role.value}"
        else:
            change = f"making {membership.user_name!r} a {role.value} of project {project.name!r}"
        await self._refuse_orphaning(project, change)
        return MembershipChange(project, membership.user_name, role, before, await self._visible(project))

    async def drop_member(self, project_ref: str, user_ref: str | None) -> MembershipChange:
        """The console's removal of a member, or closing of a project (`user_ref` None): by an admin in the
        project only, and never leaving it without an admin."""
        project = await self._administered(project_ref)
        removed = await self._remove(project, user_ref)
        if user_ref is None:
            change = f"closing project {project.name!r}"
        else:
            change = f"removing {removed.user_name!r} from project {project.name!r}"
        await self._refuse_orphaning(project, change)
        return MembershipChange(project, removed.user_name, None, removed.role, await self._visible(project))

    async def _administered(self, project_ref: str) -> ProjectRecord:
        """The project (one the caller sees), once the caller is an admin there; its memberships (and the users'
        roles) locked until commit."""
        project = await self.project(project_ref)
        # A global demotion checks the same rule (UserService.set_role) under this lock: the two take turns.
        await self.users.lock_user_administration()
        await self.members.lock(project.id)
        await require_role(self.session, [project.id], Role.admin)
        return project

    async def _refuse_orphaning(self, project: ProjectRecord, change: str) -> None:
        """Raise (so the caller's transaction rolls the change back) when nobody would be an admin in the project:
        then no one could reach a closed project, or change the members of an open one, except on the server host.
        The CLI is not held to it: it is that way back in."""
        if not await self.members.has_admin(project.id):
            raise conflict(
                f"Refused: {change} would leave it with no admin who can reach it and change its members (a "
                "member with the admin role whose global role is admin, or everyone as admin). Make such a user "
                "an admin member first."
            )

    async def _visible(self, project: ProjectRecord) -> bool:
        """Whether the caller still sees the project (closing it, or leaving it, may hide it from them)."""
        visibility = await refresh_visibility(self.session)
        return visibility is None or visibility.role_in(project.id) is not None

    async def list(self, project_ref: str | None) -> list[MemberRow]:
        project = await self.project(project_ref) if project_ref else None
        return await self.members.list(project.id if project else None)


@dataclass(frozen=True)
class ProjectMembers:
    """A project as the memberships page shows it."""

    project: ProjectRecord
    everyone: Role | None  # the everyone row's role; None: closed (only its members see it)
    members: list[MemberRow]  # the users' rows, by name
    administered: bool  # the caller is an admin there: may change its members


@dataclass(frozen=True)
class MembershipChange:
    """A membership changed on the console: as it is now (role None: removed) and as it was (before None: none)."""

    project: ProjectRecord
    user_name: str | None  # None: everyone
    role: Role | None
    before: Role | None
    still_visible: bool  # the caller still sees the project
