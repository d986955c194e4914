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

from app.db.models import Role
from app.db.records import ProjectRecord
from app.db.repositories.members import MemberRepository, MemberRow
from app.db.repositories.projects import ProjectRepository
from app.db.repositories.users import UserRepository
from app.db.visibility import ROLE_RANK, refresh_visibility, resolved
from app.errors import bad_request, forbidden, not_found


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
    visibility = await resolved(session)
    if visibility is None:
        return
    project_ids = set(project_ids)
    if any(visibility.role_in(project_id) is None for project_id in project_ids):
        visibility = await refresh_visibility(session) or visibility
    caller = visibility.caller
    needed = needs or caller.needs
    for project_id in sorted(set(project_ids)):
        role = visibility.role_in(project_id) or Role.reader
        if ROLE_RANK[role] < ROLE_RANK[needed]:
            raise forbidden(role_refusal(caller.call, needed, caller.principal.name, role))


async def may_write(session: AsyncSession, project_id: uuid.UUID, needs: Role | None = None) -> bool:
    """Whether `require_role` would let a write into the project through (for picking candidates)."""
    visibility = await resolved(session)
    if visibility is None:
        return True
    role = visibility.role_in(project_id) or Role.reader
    return ROLE_RANK[role] >= ROLE_RANK[needs or visibility.caller.needs]


# ---------------------------------------------------------------- synaptomind member …


@dataclass(frozen=True)
class Membership:
    project: ProjectRecord
    user_name: str | None  # None: everyone
    role: Role


class MemberService:
    """The CLI's member commands (an operator's, like `token`: they see every project)."""

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
                f"`synaptomind token create --user NAME --role …`"
            )
        return found.user_id, found.name

    async def add(self, project_ref: str, user_ref: str | None, role: Role) -> Membership:
        """Add a member (or, with `user_ref` None, open the project to everyone) or change their role there."""
        project = await self.project(project_ref)
        if user_ref is None:
            await self.members.upsert(project.id, None, role)
            return Membership(project, None, role)
        user_id, name = await self._user(user_ref)
        await self.members.upsert(project.id, user_id, role)
        return Membership(project, name, role)

    async def remove(self, project_ref: str, user_ref: str | None) -> Membership:
        """Remove a member (or, with `user_ref` None, close the project: only its members see it then)."""
        project = await self.project(project_ref)
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

    async def list(self, project_ref: str | None) -> list[MemberRow]:
        project = await self.project(project_ref) if project_ref else None
        return await self.members.list(project.id if project else None)
