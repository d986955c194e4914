"""Per-project membership, enforced in one place: what a caller's unit of work may see (docs/SECURITY.md,
"Per-project membership").

The rule. A caller sees the projects they are a member of — through their own `project_member` row or the
everyone row (user_id NULL) — with the lower of their global role and their strongest role there. A thought is
readable when its project is visible or it is global; an edge when both its ends are readable; hits, url links
and primers with their thought; proposals, statistics and claims with their project; slots with their
project, or when global. Whatever is not readable does not exist for the caller: reads leave it out and
lookups answer "not found", never "forbidden".

The mechanism. `dispatch` runs every tool call `acting_as(Caller(...))`, and the console every page;
`Database.unit_of_work()` and `Database.autocommit()` mark their session with a restricted caller (a token's
user). Every statement of that unit of work then goes through
`scoped()` — the ORM session's `do_orm_execute` hook for `session.execute`, and `app.db.engine.execute_core`
for Core execution — and reads the caller's memberships inside itself (a subquery on `project_member` keyed by
`:visible_to`, the caller's user id; nothing is cached across statements or calls, and no round trip is added):

- an ORM SELECT, UPDATE or DELETE (and an INSERT … SELECT) gets `with_loader_criteria` for every
  project-scoped entity, aliases included;
- a text() statement must say how it is scoped: `SHADOWED` prefixes CTEs named like the tables, which hide
  what the caller cannot read (so its SQL stays as written), `UNSCOPED` reads no project data (advisory
  locks, an update of rows already read through the rule);
- any other Core statement that names a project-scoped table is refused with `UnscopedStatement`: a statement
  that forgot the rule fails in the tests that call every action as a restricted caller, it never leaks.

Writes need a role in the project they change (app.services.admin.membership.require_role): the caller's roles in
those projects are read by the write that asks (`roles_in`), every project's only where a write picks among them
(`resolved`, once per unit of work). The local user (stdio, auth mode none),
the background jobs and the CLI run every statement unchanged.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Delete, Insert, Select, TextClause, Update, and_, any_, bindparam, event, exists, or_, select
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import ORMExecuteState, Session, with_loader_criteria
from sqlalchemy.sql import util as sql_util
from sqlalchemy.sql.expression import text

from app.db.models import (
    ContentClaim,
    Edge,
    LexicalCorpus,
    LexicalTerm,
    PlacementProposal,
    Primer,
    Project,
    ProjectMember,
    Role,
    Slot,
    Thought,
    ThoughtHit,
    ThoughtUrlLink,
)
from app.db.records import Principal

ROLE_RANK = {Role.reader: 0, Role.writer: 1, Role.admin: 2}

SCOPE_OPTION = "synaptomind_scope"
# Execution options of a text() statement run in a restricted unit of work (see the module's docstring).
SHADOWED: dict[str, Any] = {SCOPE_OPTION: "shadowed"}
UNSCOPED: dict[str, Any] = {SCOPE_OPTION: "unscoped"}


class UnscopedStatement(RuntimeError):
    """A statement that names project data without the visibility rule: a programming error."""


# ---------------------------------------------------------------- the caller


@dataclass(frozen=True)
class Caller:
    """Who runs a tool call, and how its role refusal words the call."""

    principal: Principal
    call: str = ""  # "memory_store action=create"
    needs: Role = Role.reader  # the action's role: what a write needs in the project it changes

    @property
    def restricted(self) -> bool:
        """A token's user: sees their projects only. The local user (stdio, auth mode none) sees everything."""
        return self.principal.user_id is not None and not self.principal.sees_everything


_CALLER: ContextVar[Caller | None] = ContextVar("synaptomind_caller", default=None)


@contextmanager
def acting_as(caller: Caller | None) -> Iterator[None]:
    """Every unit of work opened inside the block is the caller's (background jobs and the CLI run outside;
    None: outside any call again, e.g. for a test's own SQL in the middle of one)."""
    token = _CALLER.set(caller)
    try:
        yield
    finally:
        _CALLER.reset(token)


def current_caller() -> Caller | None:
    return _CALLER.get()


# ---------------------------------------------------------------- what a caller sees


@dataclass(frozen=True)
class Visibility:
    """A caller's projects and roles, read once per unit of work (for the writes' role checks)."""

    caller: Caller
    roles: Mapping[uuid.UUID, Role]  # the effective role in every visible project
    sees_all: bool  # every project is visible

    def role_in(self, project_id: uuid.UUID) -> Role | None:
        """The caller's role in the project; None when it is not visible to them."""
        return self.roles.get(project_id)


# Every project with the caller's membership rows (their own and everyone's).
_MEMBERSHIPS = (
    select(Project.id, ProjectMember.role)
    .select_from(Project)
    .outerjoin(
        ProjectMember,
        and_(
            ProjectMember.project_id == Project.id,
            or_(
                ProjectMember.user_id == bindparam("user_id", type_=UUID(as_uuid=True)), ProjectMember.user_id.is_(None)
            ),
        ),
    )
)
# The same rows for some projects only: what a write's role check reads (`roles_in`).
_MEMBERSHIPS_OF = _MEMBERSHIPS.where(Project.id == any_(bindparam("project_ids", type_=ARRAY(UUID(as_uuid=True)))))
CALLER_KEY = "synaptomind.caller"
RESOLVED_KEY = "synaptomind.visibility"
ROLES_KEY = "synaptomind.roles"  # {project id: role} read by `roles_in` in this unit of work (visible ones only)
_BY_RANK = {rank: role for role, rank in ROLE_RANK.items()}


def _effective_roles(caller: Caller, rows: Sequence[Any]) -> tuple[dict[uuid.UUID, Role], set[uuid.UUID]]:
    """{project: role} of the projects visible to the caller among (project id, membership role) rows, each the
    lower of their global role and their strongest role there; and every project the rows name."""
    ceiling = ROLE_RANK[caller.principal.role]
    ranks: dict[uuid.UUID, int] = {}
    projects: set[uuid.UUID] = set()
    for project_id, role in rows:
        projects.add(project_id)
        if role is not None:
            ranks[project_id] = max(ranks.get(project_id, 0), min(ceiling, ROLE_RANK[Role(role)]))
    return {project_id: _BY_RANK[rank] for project_id, rank in ranks.items()}, projects


async def _resolve(session: AsyncSession, caller: Caller) -> Visibility:
    connection = await session.connection()
    rows = (await connection.execute(_MEMBERSHIPS, {"user_id": caller.principal.user_id})).all()
    roles, projects = _effective_roles(caller, rows)
    return Visibility(caller, roles, len(roles) == len(projects))


async def install(session: AsyncSession) -> None:
    """Scope the session's statements to the current caller (a no-op outside a restricted call)."""
    caller = current_caller()
    if caller is not None and caller.restricted:
        session.info[CALLER_KEY] = caller


def caller_of(session: AsyncSession | Session) -> Caller | None:
    """The restricted caller whose unit of work this is; None: it sees everything (local user, jobs, CLI)."""
    found = session.info.get(CALLER_KEY)
    return found if isinstance(found, Caller) else None


async def resolved(session: AsyncSession) -> Visibility | None:
    """The caller's projects and roles, read by the first write of the unit of work that asks (one query)."""
    caller = caller_of(session)
    if caller is None:
        return None
    found = session.info.get(RESOLVED_KEY)
    if not isinstance(found, Visibility):
        found = session.info[RESOLVED_KEY] = await _resolve(session, caller)
    return found


async def roles_in(
    session: AsyncSession, project_ids: Iterable[uuid.UUID]
) -> tuple[Caller, dict[uuid.UUID, Role | None]] | None:
    """The caller's role in each project given (None: not visible to them); None outside a restricted call.

    A write's role check needs the projects it changes, not all of them: reading every project's membership row
    for each call was ~12 ms of the ~28 ms of Python CPU a 1-row bulk_create took at 1,000 projects
    (docs/BENCHMARKS.md, "Many tenants"). So only the projects this unit of work has not yet seen visible are read
    (one query), as `resolved` would have read them again; its full read, when a call made one, answers too.
    """
    caller = caller_of(session)
    if caller is None:
        return None
    wanted = set(project_ids)
    full = session.info.get(RESOLVED_KEY)
    known: dict[uuid.UUID, Role] = dict(full.roles) if isinstance(full, Visibility) else {}
    known.update(session.info.get(ROLES_KEY, {}))
    missing = sorted(wanted - known.keys())
    if missing:
        connection = await session.connection()
        parameters = {"user_id": caller.principal.user_id, "project_ids": missing}
        rows = (await connection.execute(_MEMBERSHIPS_OF, parameters)).all()
        found, _ = _effective_roles(caller, rows)
        session.info.setdefault(ROLES_KEY, {}).update(found)
        known.update(found)
    return caller, {project_id: known.get(project_id) for project_id in wanted}


def forget_roles(session: AsyncSession) -> None:
    """The caller's roles are read again when next asked (a project was created in this unit of work)."""
    session.info.pop(RESOLVED_KEY, None)
    session.info.pop(ROLES_KEY, None)


async def refresh_visibility(session: AsyncSession) -> Visibility | None:
    """Read the caller's roles again (a project was created since they were read)."""
    forget_roles(session)
    return await resolved(session)


# ---------------------------------------------------------------- the criteria

_members = ProjectMember.__table__
# The projects the caller is a member of (their row or everyone's), read inside each statement: a hashed subplan
# of a few index entries. Through the table, not the entity: the criteria below never apply to it.
VISIBLE_TO = bindparam("visible_to", type_=UUID(as_uuid=True))
VISIBLE_PROJECTS = select(_members.c.project_id).where(
    or_(_members.c.user_id == VISIBLE_TO, _members.c.user_id.is_(None))
)
_readable = Thought.__table__.alias("readable_thought")


def _readable_thought(thought_id: Any, project_id: Any = None) -> Any:
    """The thought `thought_id` is readable (its own alias: never correlated with the statement's thoughts).
    `project_id`: the row's own project, for a row that lives in its thought's project (a link, hit or primer, an
    edge's source; migration 0026's trigger moves them with it). Naming it finds the same thought, and lets a store
    distributed by project answer the lookup on the row's own shard (docs/DEPLOY.md, "Citus")."""
    same_project = [] if project_id is None else [_readable.c.project_id == project_id]
    return (
        exists()
        .where(
            _readable.c.id == thought_id,
            *same_project,
            or_(_readable.c.project_id.in_(VISIBLE_PROJECTS), _readable.c.is_global),
        )
        .correlate_except(_readable)
    )


def _criteria(entity: Any, rule: Any) -> Any:
    return with_loader_criteria(entity, rule, include_aliases=True, track_closure_variables=False)


CRITERIA = (
    _criteria(Thought, lambda cls: or_(cls.project_id.in_(VISIBLE_PROJECTS), cls.is_global)),
    _criteria(Project, lambda cls: cls.id.in_(VISIBLE_PROJECTS)),
    _criteria(
        Edge, lambda cls: and_(_readable_thought(cls.source_id, cls.project_id), _readable_thought(cls.target_id))
    ),
    _criteria(ThoughtUrlLink, lambda cls: _readable_thought(cls.thought_id, cls.project_id)),
    _criteria(ThoughtHit, lambda cls: _readable_thought(cls.thought_id, cls.project_id)),
    _criteria(Primer, lambda cls: _readable_thought(cls.thought_id, cls.project_id)),
    _criteria(PlacementProposal, lambda cls: cls.project_id.in_(VISIBLE_PROJECTS)),
    _criteria(Slot, lambda cls: or_(cls.project_id.is_(None), cls.project_id.in_(VISIBLE_PROJECTS))),
    _criteria(LexicalCorpus, lambda cls: cls.project_id.in_(VISIBLE_PROJECTS)),
    _criteria(LexicalTerm, lambda cls: cls.project_id.in_(VISIBLE_PROJECTS)),
    _criteria(ContentClaim, lambda cls: cls.project_id.in_(VISIBLE_PROJECTS)),
)
SCOPED_TABLES = frozenset(
    model.__table__.name  # type: ignore[attr-defined]
    for model in (
        Thought,
        Project,
        Edge,
        ThoughtUrlLink,
        ThoughtHit,
        Primer,
        PlacementProposal,
        Slot,
        LexicalCorpus,
        LexicalTerm,
        ContentClaim,
        ProjectMember,
    )
)

# The same rule for text(): CTEs named like the tables shadow them in the statement (a non-recursive CTE's own
# body still reads the table; later ones read the earlier CTEs). NOT MATERIALIZED: PostgreSQL plans them inline.
_IDS = "SELECT project_id FROM project_member WHERE user_id = CAST(:visible_to AS uuid) OR user_id IS NULL"
_SHADOWS = ", ".join(
    f"{name} AS NOT MATERIALIZED (SELECT * FROM {name} WHERE {rule})"
    for name, rule in (
        ("project", f"id IN ({_IDS})"),
        ("thought", f"project_id IN ({_IDS}) OR is_global"),
        ("edge", "source_id IN (SELECT id FROM thought) AND target_id IN (SELECT id FROM thought)"),
        ("thought_url_link", "thought_id IN (SELECT id FROM thought)"),
        ("thought_hit", "thought_id IN (SELECT id FROM thought)"),
        ("primer", "thought_id IN (SELECT id FROM thought)"),
        ("placement_proposal", f"project_id IN ({_IDS})"),
        ("slot", f"project_id IS NULL OR project_id IN ({_IDS})"),
        ("lexical_corpus", f"project_id IN ({_IDS})"),
        ("lexical_term", f"project_id IN ({_IDS})"),
        ("thought_content_claim", f"project_id IN ({_IDS})"),
    )
)


def _shadowed(statement: TextClause) -> TextClause:
    sql = statement.text.strip()
    head = sql[:15].upper()
    if head.startswith("WITH RECURSIVE"):  # its CTE list is recursive: the shadows go around it instead
        rewritten = f"WITH {_SHADOWS} SELECT * FROM ({sql}) AS shadowed"
    elif head.startswith("WITH "):
        rewritten = f"WITH {_SHADOWS}, {sql[5:]}"
    else:
        rewritten = f"WITH {_SHADOWS} {sql}"
    return text(rewritten).bindparams(*statement._bindparams.values())


Parameters = Mapping[str, Any] | Sequence[Mapping[str, Any]] | None


def _with_visible(parameters: Parameters, caller: Caller) -> Parameters:
    value = {VISIBLE_TO.key: caller.principal.user_id}
    if parameters is None:
        return value
    if isinstance(parameters, Mapping):
        return {**parameters, **value}
    return [{**row, **value} for row in parameters]  # an executemany


# The hot statements are built once and reused (app.db.repositories.search): so is their scoped copy, whose
# SQLAlchemy cache key is then computed once instead of on every execution (~50-110 µs a statement).
_SCOPED_COPIES: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _with_criteria(statement: Any) -> Any:
    scoped_copy = _SCOPED_COPIES.get(statement)
    if scoped_copy is None:
        scoped_copy = _SCOPED_COPIES[statement] = statement.options(*CRITERIA)
    return scoped_copy


def _orm_enabled(statement: Any) -> bool:
    return bool(statement._propagate_attrs.get("compile_state_plugin") == "orm")


def scoped(
    caller: Caller | None, statement: Any, parameters: Parameters, options: Mapping[str, Any]
) -> tuple[Any, Parameters]:
    """The statement and its parameters as the caller may run them (see the module's docstring)."""
    if caller is None:
        return statement, parameters
    mode = options.get(SCOPE_OPTION) or statement._execution_options.get(SCOPE_OPTION)
    if mode == "unscoped":
        return statement, parameters
    if isinstance(statement, TextClause):
        if mode != "shadowed":
            raise UnscopedStatement(
                f"text() without SHADOWED or UNSCOPED in a restricted call: {statement.text[:80]!r}"
            )
        return _shadowed(statement), _with_visible(parameters, caller)
    if isinstance(statement, Insert) and statement.select is None:
        return statement, parameters  # a write: the service checked the caller's role in its project
    if _orm_enabled(statement) and isinstance(statement, Select | Update | Delete | Insert):
        return _with_criteria(statement), _with_visible(parameters, caller)
    named = {table.name for table in sql_util.find_tables(statement, include_aliases=True, include_crud=True)}
    if named & SCOPED_TABLES:
        raise UnscopedStatement(f"a Core statement on {sorted(named & SCOPED_TABLES)} in a restricted call")
    return statement, parameters


@event.listens_for(Session, "do_orm_execute")
def _scope_session_statement(state: ORMExecuteState) -> None:
    """Every `session.execute` of a restricted unit of work runs under the rule."""
    caller = caller_of(state.session)
    if caller is not None:
        state.statement, state.parameters = scoped(caller, state.statement, state.parameters, state.execution_options)
