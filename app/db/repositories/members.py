"""Project memberships (`project_member`): who may see a project, with which role there; user NULL = everyone."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

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
            )
            .join(Project, Project.id == ProjectMember.project_id)
            .outerjoin(AppUser, AppUser.id == ProjectMember.user_id)
            .order_by(Project.name, ProjectMember.user_id.is_not(None), AppUser.name)
        )
        if project_id is not None:
            statement = statement.where(ProjectMember.project_id == project_id)
        return [MemberRow(**row._mapping) for row in await self.session.execute(statement)]
