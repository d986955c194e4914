"""Project rows and the path → project resolution."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from sqlalchemy import Text, and_, any_, bindparam, delete, func, insert, or_, select, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.engine import execute_core
from app.db.models import Project, ProjectMember, Role, Thought
from app.db.project_indexes import has_project_index
from app.db.records import ProjectRecord
from app.db.visibility import UNSCOPED, forget_roles
from app.ids import new_id

DEFAULT_PROJECT_NAME = "default"

# A project of at most this many live thoughts is searched exactly (app.db.repositories.search): a filtered HNSW
# walk through a small share of the table recalled 0.80 @10 in 30-40 ms for queries whose neighbours lie in
# other projects, where the exact scan of 3 000 thoughts took 2.5 ms (docs/BENCHMARKS.md, sixth round).
EXACT_SCAN_MAX_ROWS = 5000
# The background jobs count every tick (60 s by default). An older count (no replica runs them: `stdio` alone,
# or jobs disabled) could hide a project that grew: the plan is then PostgreSQL's. Judged by the database's
# clock, which stamped the count.
ESTIMATE_FRESH_FOR = timedelta(minutes=5)
_COUNTED_SMALL = func.coalesce(
    and_(
        Project.thought_estimate <= EXACT_SCAN_MAX_ROWS,
        Project.thought_estimate_at > func.now() - ESTIMATE_FRESH_FOR,
    ),
    False,
).label("counted_small")

_COLUMNS = (
    Project.id,
    Project.name,
    Project.local_path,
    Project.description,
    Project.is_default,
    Project.created_at,
    _COUNTED_SMALL,
    has_project_index(Project.id).label("has_project_index"),
)

# Every read call resolves its cwd: built once, one text[] parameter for the path and its ancestors.
_NEAREST_REGISTERED = (
    select(*_COLUMNS)
    .where(Project.local_path == any_(bindparam("paths", type_=ARRAY(Text))))
    .order_by(func.length(Project.local_path).desc())
    .limit(1)
)


def _record(row: Any) -> ProjectRecord:
    return ProjectRecord(**row._mapping)


def path_and_ancestors(path: str) -> list[str]:
    """A normalised path and every ancestor of it, nearest first: the paths whose project a cwd there resolves to.
    The paths rule (ProjectService) reads the same list, so what it guards is exactly what resolution matches."""
    candidates = [path]
    parent = path
    while "/" in parent.rstrip("/"):
        parent = parent.rstrip("/").rsplit("/", 1)[0] or "/"
        candidates.append(parent)
    return candidates


def _below(path: str) -> str:
    """The prefix of every path inside `path` ("/" for the root itself)."""
    return path.rstrip("/") + "/"


class ProjectRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def list_all(self) -> list[ProjectRecord]:
        rows = await self.session.execute(select(*_COLUMNS).order_by(Project.is_default.desc(), Project.name))
        return [_record(row) for row in rows]

    async def get(self, project_id: uuid.UUID, *, for_update: bool = False) -> ProjectRecord | None:
        statement = select(*_COLUMNS).where(Project.id == project_id)
        if for_update:
            statement = statement.with_for_update(of=Project)
        row = (await self.session.execute(statement)).first()
        return _record(row) if row else None

    async def find_by_name(self, name: str) -> ProjectRecord | None:
        row = (await self.session.execute(select(*_COLUMNS).where(Project.name == name))).first()
        return _record(row) if row else None

    async def name_taken(self, name: str, except_id: uuid.UUID | None = None) -> bool:
        """Whether another project has the name: any project, also one the caller cannot see (the name is unique
        on the server; the caller is told it is taken, never by which project)."""
        statement = select(Project.id).where(Project.name == name).execution_options(**UNSCOPED)
        if except_id is not None:
            statement = statement.where(Project.id != except_id)
        return (await self.session.execute(statement.limit(1))).first() is not None

    async def registered_near(self, path: str, except_id: uuid.UUID | None = None) -> list[tuple[uuid.UUID, str]]:
        """(id, path) of every project registered at `path`, at an ancestor of it or inside it, also those the
        caller cannot see: whose cwds a registration at `path` would take or give (the paths rule)."""
        statement = (
            select(Project.id, Project.local_path)
            .where(
                or_(
                    Project.local_path == any_(bindparam("paths", type_=ARRAY(Text))),
                    func.starts_with(Project.local_path, bindparam("below", type_=Text)),
                )
            )
            .order_by(Project.local_path, Project.id)
            .execution_options(**UNSCOPED)
        )
        if except_id is not None:
            statement = statement.where(Project.id != except_id)
        rows = await self.session.execute(statement, {"paths": path_and_ancestors(path), "below": _below(path)})
        return [(row.id, str(row.local_path)) for row in rows]

    async def find_for_path(self, path: str) -> ProjectRecord | None:
        """The project registered at `path` or at its nearest registered ancestor."""
        row = (await execute_core(self.session, _NEAREST_REGISTERED, {"paths": path_and_ancestors(path)})).first()
        return _record(row) if row else None

    async def insert(self, name: str, local_path: str | None, description: str | None) -> uuid.UUID:
        project_id = new_id()
        await self.session.execute(
            insert(Project).values(id=project_id, name=name, local_path=local_path, description=description)
        )
        await self._open_to_everyone(project_id)
        return project_id

    async def _open_to_everyone(self, project_id: uuid.UUID) -> None:
        """Every new project is open to everyone (role admin) until an admin closes it. On one node migration
        0017's trigger has written the row already (and still does for every path); Citus cannot run that trigger
        (scripts/citus/distribute.sql drops it), so the row is written here too, in the project's transaction."""
        await self.session.execute(
            pg_insert(ProjectMember)
            .values(id=new_id(), project_id=project_id, user_id=None, role=Role.admin)
            .on_conflict_do_nothing(index_elements=[ProjectMember.project_id, ProjectMember.user_id])
        )
        forget_roles(self.session)  # the caller's roles change

    async def update_fields(self, project_id: uuid.UUID, values: dict[str, Any]) -> None:
        await self.session.execute(
            update(Project).where(Project.id == project_id).values(**values, updated_at=func.now())
        )

    async def delete(self, project_id: uuid.UUID) -> None:
        await self.session.execute(delete(Project).where(Project.id == project_id))

    async def thought_count(self, project_id: uuid.UUID) -> int:
        statement = select(func.count()).select_from(Thought).where(Thought.project_id == project_id)
        return int((await self.session.execute(statement)).scalar_one())

    async def thought_counts_by_status(self) -> dict[uuid.UUID, dict[str, int]]:
        """Every project's thoughts by status (clusters included, as the timeline counts them), in one scan of
        `ix_thought_project_status_created` (index-only while the table's pages are all-visible)."""
        statement = select(Thought.project_id, Thought.status, func.count().label("n")).group_by(
            Thought.project_id, Thought.status
        )
        counts: dict[uuid.UUID, dict[str, int]] = {}
        for row in await self.session.execute(statement):
            counts.setdefault(row.project_id, {})[row.status.value] = int(row.n)
        return counts

    async def ensure_default(self) -> ProjectRecord:
        """The default project, created on first use (concurrent callers converge on one row)."""
        # Whoever asks: a caller who may not see it is refused by the write that needs it (require_role).
        default = select(*_COLUMNS).where(Project.is_default).execution_options(**UNSCOPED)
        row = (await self.session.execute(default)).first()
        if row:
            return _record(row)
        created = await self.session.execute(
            pg_insert(Project)
            .values(id=new_id(), name=DEFAULT_PROJECT_NAME, is_default=True)
            .on_conflict_do_nothing()
            .returning(Project.id)
        )
        created_id = created.scalar_one_or_none()
        if created_id is not None:
            await self._open_to_everyone(created_id)
        row = (await self.session.execute(default)).first()
        if row is None:  # the name 'default' is taken by an ordinary project
            raise RuntimeError("no default project and the name 'default' is taken")
        return _record(row)
