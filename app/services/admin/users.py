"""User administration: who the users are, their global role and password, and the rule that some admin can
always sign in.

The console's users page, `synaptomind user …` and `synaptomind token create` (which creates a user on first
use) all go through this service. A change that would leave no admin — or no admin able to sign in, with a
password or an unrevoked, unexpired API token — is refused with 409 and writes nothing: the rule is checked
after the change, inside its transaction, under an advisory lock (two admins demoting each other take turns).
A global demotion is also held to the members rule (app.services.admin.membership): it may not leave a project with
no admin who can reach it — the CLI's `user role` too, since `member add` fixes that first in one command.

A lower role and a new or cleared password end the user's console sessions in the change's transaction
(app.services.auth.sessions); `end_sessions` is an admin's way to end them all.
"""

from __future__ import annotations

import asyncio
import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Role
from app.db.records import Principal
from app.db.repositories.members import MemberRepository
from app.db.repositories.projects import ProjectRepository
from app.db.repositories.users import AdminRow, UserRepository, UserRow
from app.db.visibility import ROLE_RANK
from app.errors import AppError, bad_request, conflict, not_found
from app.services.auth import sessions
from app.services.auth.passwords import hash_password, password_problem
from app.services.auth.sessions import ConsoleSessionService

MAX_NAME_LENGTH = 200  # app_user.name


def _no_user(name: str) -> AppError:
    return not_found(
        f"No user named {name!r}: create one with `synaptomind token create --user {name} --role …` "
        "or on the console's users page"
    )


class UserService:
    def __init__(self, session: AsyncSession) -> None:
        self.users = UserRepository(session)
        self.members = MemberRepository(session)
        self.projects = ProjectRepository(session)
        self.sessions = ConsoleSessionService(session)

    async def list_users(self) -> list[UserRow]:
        return await self.users.list_users()

    async def find(self, name: str) -> Principal:
        user = await self.users.find(name.strip())
        if user is None or user.user_id is None:
            raise _no_user(name.strip())
        return user

    async def ensure_user(self, name: str, role: Role | None) -> Principal:
        """The user named so, created with `role` (writer by default) if new; an existing user's role changes to
        `role` when given (as `token create --role` does), under the last-admin rule."""
        name = _checked_name(name)
        user = await self.users.find(name)
        if user is None:
            return await self.users.insert(name, role or Role.writer)
        if role is not None and role != user.role:
            return await self.set_role(name, role)
        return user

    async def upstream_user(self, name: str, create: bool) -> Principal | None:
        """The user an upstream (OpenID Connect) sign-in names; with `create`, an unknown one is created as a
        reader (the least role: an admin raises it), else None. Two first sign-ins at once create one user."""
        name = _checked_name(name)
        user = await self.users.find(name)
        if user is not None or not create:
            return user
        await self.users.lock_user_creation()
        return await self.users.find(name) or await self.users.insert(name, Role.reader)

    async def create_user(self, name: str, role: Role, password: str | None = None) -> Principal:
        """A new user; 409 when the name is taken (ensure_user is the idempotent form)."""
        name = _checked_name(name)
        if password is not None and (problem := password_problem(password)) is not None:
            raise bad_request(problem)
        if await self.users.find(name) is not None:
            raise conflict(f"A user named {name!r} already exists: change their role or password instead")
        user = await self.users.insert(name, role)
        if password is not None:
            assert user.user_id is not None
            await self.users.set_password_hash(user.user_id, await asyncio.to_thread(hash_password, password))
        return user

    async def set_role(self, name: str, role: Role) -> Principal:
        """Change the user's global role; refused when it would leave no admin, or none who can sign in, or a
        project with no admin who can reach it."""
        user = await self.find(name)
        assert user.user_id is not None
        if role == user.role:
            return user
        before = await self.admins_before_change()
        # Only a global admin's demotion can take a project's last admin: its admin memberships are the candidates.
        administered = await self.members.administered_by(user.user_id) if user.role is Role.admin else []
        await self.users.set_role(user.user_id, role)
        change = f"changing the role of {user.name!r} to {role.value}"
        await self.refuse_lockout(before, change)
        await self.refuse_orphaning(administered, change)
        if ROLE_RANK[role] < ROLE_RANK[user.role]:  # a raised role applies at the next page; a lowered one ends them
            await self.sessions.end_for_user(user.user_id, user.name, sessions.ROLE_LOWERED)
        return Principal(user.user_id, user.name, role)

    async def set_password(self, name: str, password: str | None) -> Principal:
        """Set (or, with None, clear) the user's password, ending all their console sessions; clearing the only
        credential of the last admin who can sign in is refused."""
        if password is not None and (problem := password_problem(password)) is not None:
            raise bad_request(problem)
        user = await self.find(name)
        assert user.user_id is not None
        if password is not None:
            await self.users.set_password_hash(user.user_id, await asyncio.to_thread(hash_password, password))
            await self.sessions.end_for_user(user.user_id, user.name, sessions.PASSWORD_SET)
            return user
        before = await self.admins_before_change()
        await self.users.set_password_hash(user.user_id, None)
        await self.refuse_lockout(before, f"clearing the password of {user.name!r}")
        await self.sessions.end_for_user(user.user_id, user.name, sessions.PASSWORD_CLEARED)
        return user

    async def end_sessions(self, name: str) -> tuple[Principal, int]:
        """End every console session of the user (an admin's sign-out of them everywhere); the user and how many
        ended. Their tokens and password stay: revoke or clear those to keep them out."""
        user = await self.find(name)
        assert user.user_id is not None
        return user, await self.sessions.end_for_user(user.user_id, user.name, sessions.BY_ADMIN)

    async def admins_before_change(self) -> list[AdminRow]:
        """The admins as they stand, with the lock taken until commit: call it before a change, then
        `refuse_lockout` after it."""
        await self.users.lock_user_administration()
        return await self.users.admins()

    async def refuse_lockout(self, before: list[AdminRow], change: str) -> None:
        """Raise (so the caller's transaction rolls the change back) when the change took the admins, or the admins
        who can sign in, from some to none."""
        after = await self.users.admins()
        if before and not after:
            raise conflict(
                f"Refused: {change} would leave no admin ({before[0].name!r} is the last one). "
                "Make another user an admin first."
            )
        could = [admin.name for admin in before if admin.can_sign_in]
        if could and not any(admin.can_sign_in for admin in after):
            raise conflict(
                f"Refused: {change} would leave no admin who can sign in ({could[0]!r} is the last admin with a "
                "password or an active API token). Give another admin a password or a token first."
            )

    async def refuse_orphaning(self, project_ids: list[uuid.UUID], change: str) -> None:
        """Raise (so the caller's transaction rolls the change back) when one of these projects is left with no
        admin who can reach it: the members page's rule (`MemberRepository.has_admin`). The membership changes
        guarded by it take the user-administration lock too, so they and a demotion take turns. A project the
        caller cannot see is counted, not named."""
        orphaned = [project_id for project_id in project_ids if not await self.members.has_admin(project_id)]
        if not orphaned:
            return
        seen = [project for project_id in orphaned if (project := await self.projects.get(project_id)) is not None]
        raise conflict(
            f"Refused: {change} would leave {_projects(sorted(p.name for p in seen), len(orphaned) - len(seen))} "
            "with no admin who can reach it and change its members (a member with the admin role whose global "
            "role is admin, or everyone as admin). Make another admin an admin member there first: "
            "`synaptomind member add PROJECT USER --role admin`."
        )


def _projects(names: list[str], unseen: int) -> str:
    """`project 'A'`, `projects 'A', 'B'`, with `and 2 projects you cannot see` for those the caller does not see."""
    parts = []
    if names:
        parts.append(("project " if len(names) == 1 else "projects ") + ", ".join(repr(name) for name in names))
    if unseen:
        parts.append("a project you cannot see" if unseen == 1 else f"{unseen} projects you cannot see")
    return " and ".join(parts)


def _checked_name(name: str) -> str:
    name = name.strip()
    if not name:
        raise bad_request("A user name must not be empty")
    if len(name) > MAX_NAME_LENGTH or "\x00" in name:
        raise bad_request(f"A user name has at most {MAX_NAME_LENGTH} characters and no NUL")
    return name
