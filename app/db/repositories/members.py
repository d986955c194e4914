"""Project memberships (`project_member`): who may see a project, with which role there; user NULL = everyone."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, or_, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.locks import MEMBERSHIP_SEED, hold_text_until_commit
from app.db.models import AppUser, Project, ProjectMember, Role
from app.ids import new_id


@dataclass(frozen=True)
class MemberRow:
    project_id: uuid.UUID
    project_name: str
    user_id: uuid.UUID | None  # None: everyone
    user_name: str | None
    role: Role
    created_at: datetime
    user_role: Role | None  # the user's global role (the ceiling of their role here); None: everyone


class MemberRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def upsert(self, project_id: uuid.UUID, user_id: uuid.UUID | None, role: Role) -> None:
        """The member's role in the project, whether they were a member or not (one row per user and project)."""
        statement = pg_insert(ProjectMember).values(id=new_id(), project_id=project_id, user_id=user_id, role=role)
        await self.session.execute(
            statement.on_conflict_do_update(
                index_elements=[ProjectMember.project_id, ProjectMember.user_id], set_={"role": role}
            )
        )

    async def lock(self, project_id: uuid.UUID) -> None:
        """Serialise the guarded changes of one project's memberships until commit (two admins removing each
        other must not both see the other still there)."""
        await hold_text_until_commit(self.session, str(project_id), MEMBERSHIP_SEED)

    async def role_of(self, project_id: uuid.UUID, user_id: uuid.UUID | None) -> Role | None:
        """The member's role in the project (user None: everyone's); None when they are not a member."""
        who = ProjectMember.user_id.is_(None) if user_id is None else ProjectMember.user_id == user_id
        found = await self.session.execute(
            select(ProjectMember.role).where(ProjectMember.project_id == project_id, who)
        )
        return found.scalar_one_or_none()

    async def has_admin(self, project_id: uuid.UUID) -> bool:
        """Whether someone is an admin in the project: everyone with the admin role (so every global admin), or a
        member with the admin role whose global role is admin too (the global role is the ceiling)."""
        global_admins = select(AppUser.id).where(AppUser.role == Role.admin)
        statement = (
            select(ProjectMember.id)
            .where(
                ProjectMember.project_id == project_id,
                ProjectMember.role == Role.admin,
                or_(ProjectMember.user_id.is_(None), ProjectMember.user_id.in_(global_admins)),
            )
            .limit(1)
        )
        return (await self.session.execute(statement)).first() is not None

    async def administered_by(self, user_id: uuid.UUID) -> list[uuid.UUID]:
        """The projects where the user is a member with the admin role (the ones whose `has_admin` may hang on
        their global role), in id order."""
        statement = (
            select(ProjectMember.project_id)
            .where(ProjectMember.user_id == user_id, ProjectMember.role == Role.admin)
            .order_by(ProjectMember.project_id)
        )
        return list((await self.session.execute(statement)).scalars())

    async def delete(self, project_id: uuid.UUID, user_id: uuid.UUID | None) -> Role | None:
        """Remove the membership; the role it had, None when there was none."""
        who = ProjectMember.user_id.is_(None) if user_id is None else ProjectMember.user_id == user_id
        removed = await self.session.execute(
            delete(ProjectMember).where(ProjectMember.project_id == project_id, who).returning(ProjectMember.role)
        )
        return removed.scalar_one_or_none()

    async def list(self, project_id: uuid.UUID | None) -> list[MemberRow]:
        """Memberships, by project name, everyone first, then by user name."""
        statement = (
            select(
                ProjectMember.project_id,
                Project.name.label("project_name"),
                ProjectMember.user_id,
                AppUser.name.label("user_name"),
                ProjectMember.role,
                ProjectMember.created_at,
                AppUser.role.label("user_role"),
            )
            .join(Project, Project.id == ProjectMember.project_id)
            .outerjoin(AppUser, AppUser.id == ProjectMember.user_id)
            .order_by(Project.name, ProjectMember.user_id.is_not(None), AppUser.name)
        )
        if project_id is not None:
            statement = statement.where(ProjectMember.project_id == project_id)
        return [MemberRow(**row._mapping) for row in await self.session.execute(statement)]
