"""Thought rows: every read joins the project for its name and honours the caller's scope."""

from __future__ import annotations

import enum
import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import (
    ColumnElement,
    Float,
    Select,
    Text,
    and_,
    any_,
    bindparam,
    func,
    insert,
    literal,
    literal_column,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.id_lists import id_in
from app.db.locks import RowLock, row_locked
from app.db.models import TEXT_SEARCH_CONFIG, Edge, EdgeType, Project, Thought, ThoughtStatus
from app.db.records import ProjectRecord, ThoughtRecord
from app.db.row_locks import lock_rows

# The project's name through its table, not its ORM entity: the visibility rule (app.db.visibility) leaves the
# join alone, so a global thought of a project the caller cannot see still reads with its project's name.
_PROJECT = Project.__table__

THOUGHT_COLUMNS = (
    Thought.id,
    Thought.project_id,
    _PROJECT.c.name.label("project_name"),
    Thought.content,
    Thought.status,
    Thought.tags,
    Thought.is_protected,
    Thought.is_global,
    Thought.is_cluster,
    Thought.importance,
    Thought.surface_after,
    Thought.archived_at,
    Thought.created_by,
    Thought.created_at,
    Thought.updated_at,
    Thought.embedding_model,
)


def content_md5(content: str) -> str:
    """As PostgreSQL's md5(content) spells it (the key of ix_thought_project_content_md5 and of content claims)."""
    return hashlib.md5(content.encode(), usedforsecurity=False).hexdigest()


# The content's facts (migration 0024), written with it: the health report reads them from indexes (the checks stay
# exact for a row written around this module: app.db.models.CONTENT_FACTS_STALE). `tsv` is generated from the content
# with this configuration (models.Thought.tsv), and BM25 queries are parsed with it (app.db.repositories.search); its
# length is the number of distinct lexemes.
TSV_CONFIG: ColumnElement[Any] = literal_column(f"'{TEXT_SEARCH_CONFIG}'::regconfig")
LEXEMES_OF = "lexemes_of"  # an executemany's content again, bound for the lexeme count (`content` is the column's)


def lexeme_count(content: Any) -> ColumnElement[int]:
    """length(tsv) of a thought of this content, computed where it is written."""
    return func.length(func.to_tsvector(TSV_CONFIG, content))


def content_facts(content: str) -> dict[str, Any]:
    """The facts of one content, as values of an INSERT or UPDATE of one row."""
    return {"lexemes": lexeme_count(content), "content_md5": uuid.UUID(content_md5(content))}


def with_facts(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of an executemany of INSERT_THOUGHTS: each with its content's hash, and its content for the lexemes."""
    return [{**row, LEXEMES_OF: row["content"], "content_md5": uuid.UUID(content_md5(row["content"]))} for row in rows]


INSERT_THOUGHTS = insert(Thought).values(lexemes=lexeme_count(bindparam(LEXEMES_OF, type_=Text)))


def thought_select() -> Select[*tuple[Any, ...]]:
    return select(*THOUGHT_COLUMNS).join(_PROJECT, _PROJECT.c.id == Thought.project_id)


def to_record(row: Any) -> ThoughtRecord:
    return ThoughtRecord(**row._mapping)


def status_filter(status: str) -> tuple[ThoughtStatus, ...]:
    """A status argument as a filter: `all` filters nothing."""
    return () if status == "all" else (ThoughtStatus(status),)


class FilterShape(NamedTuple):
    """Which filters a ThoughtFilter applies, without their values: the key of a cached statement.

    Statuses and is_cluster are few values and part of the shape; project, tag and importance are parameters.
    """

    project: bool
    statuses: tuple[ThoughtStatus, ...]
    tag: bool
    is_cluster: bool | None
    min_importance: bool

    def clauses(self, values: Mapping[str, Any] | None = None) -> list[Any]:
        """The filter with bound parameters named as in ThoughtFilter.parameters(), unset or set to `values`."""

        def param(name: str, type_: Any) -> Any:
            return bindparam(name, type_=type_) if values is None else bindparam(name, values[name], type_=type_)

        clauses: list[Any] = []
        if self.project:
            clauses.append(Thought.project_id == param("filter_project", UUID(as_uuid=True)))
        if self.statuses:
            # A bound parameter per status, not an expanding IN: a statement built once keeps its SQL text, where an
            # expanding list is rendered into it again at every execution (docs/BENCHMARKS.md, "Twelfth round").
            clauses.append(Thought.status.in_([literal(status, Thought.status.type) for status in self.statuses]))
        if self.tag:
            clauses.append(Thought.tags.contains(param("filter_tags", ARRAY(Text))))
        if self.is_cluster is not None:
            clauses.append(Thought.is_cluster.is_(self.is_cluster))
        if self.min_importance:
            clauses.append(Thought.importance >= param("filter_min_importance", Float))
        return clauses


class VectorScan(enum.Enum):
    """How the vector leg reads a scope (app.db.repositories.search)."""

    SHARED_INDEX = "shared_index"  # the HNSW index of every thought, the filter inside the walk
    EXACT = "exact"  # a project counted small: its rows sorted by full-precision distance
    PROJECT_INDEX = "project_index"  # the project's own HNSW index (app.db.project_indexes)

    @classmethod
    def of(cls, project: ProjectRecord | None) -> VectorScan:
        if project is None:
            return cls.SHARED_INDEX
        if project.counted_small:
            return cls.EXACT
        return cls.PROJECT_INDEX if project.has_project_index else cls.SHARED_INDEX


@dataclass(frozen=True)
class ThoughtFilter:
    project_id: uuid.UUID | None = None
    statuses: tuple[ThoughtStatus, ...] = ()
    tag: str | None = None
    is_cluster: bool | None = None
    min_importance: float | None = None
    vector_scan: VectorScan = VectorScan.SHARED_INDEX  # VectorScan.of(the project)

    @property
    def shape(self) -> FilterShape:
        return FilterShape(
            self.project_id is not None,
            self.statuses,
            self.tag is not None,
            self.is_cluster,
            self.min_importance is not None,
        )

    def parameters(self) -> dict[str, Any]:
        """Values for the bound parameters of `shape.clauses()`."""
        values: dict[str, Any] = {}
        if self.project_id is not None:
            values["filter_project"] = self.project_id
        if self.tag is not None:
            values["filter_tags"] = [self.tag]
        if self.min_importance is not None:
            values["filter_min_importance"] = self.min_importance
        return values

    def clauses(self) -> list[Any]:
        """The filter with its values bound: the shape's clauses, for statements built per call."""
        return self.shape.clauses(self.parameters())


# A thought's standing as the console's browse page filters it: what the edges into it and its flags say.
STANDINGS = ("superseded", "contradicted", "protected", "global")


@dataclass(frozen=True)
class Narrowing:
    """What a browse of the inventory adds to a ThoughtFilter: a creation date range (from inclusive, before
    exclusive), an edge type the thought has at either end, and a standing (STANDINGS)."""

    created_from: datetime | None = None
    created_before: datetime | None = None
    edge_type: EdgeType | None = None
    standing: str | None = None

    def edge_filters(self) -> list[tuple[EdgeType, bool]]:
        """The edges a thought must have, each as (type, only as its target): an edge type at either end, a
        `replaces` edge pointing at it (superseded), a `contradicts` edge at either end (it is symmetric)."""
        wanted: list[tuple[EdgeType, bool]] = []
        if self.edge_type is not None:
            wanted.append((self.edge_type, False))
        if self.standing == "superseded":
            wanted.append((EdgeType.replaces, True))
        elif self.standing == "contradicted":
            wanted.append((EdgeType.contradicts, False))
        return wanted

    def clauses(self, ends: set[uuid.UUID] | None = None) -> list[Any]:
        """The filter; `ends`: the ids at the ends of the edges `edge_filters` names, read first (the edges of a
        type are few): as a subquery of the thought statement, with the edges' visibility rule, a page of the
        50 k-thought project took 1.9 s (docs/BENCHMARKS.md, "Console pages at 100 k")."""
        clauses: list[Any] = []
        if self.created_from is not None:
            clauses.append(Thought.created_at >= self.created_from)
        if self.created_before is not None:
            clauses.append(Thought.created_at < self.created_before)
        if ends is not None:
            clauses.append(id_in(Thought.id, ends) if ends else literal(False))
        if self.standing == "protected":
            # The bare column, not `IS true`: only it matches ix_thought_project_protected_created's predicate.
            clauses.append(Thought.is_protected)
        elif self.standing == "global":
            clauses.append(Thought.is_global.is_(True))
        return clauses


class ThoughtRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def insert_many(self, rows: Sequence[dict[str, Any]]) -> None:
        if rows:
            await self.session.execute(INSERT_THOUGHTS, with_facts(rows))

    async def insert_returning(self, rows: Sequence[dict[str, Any]], project_name: str) -> list[ThoughtRecord]:
        """Insert rows of one project and answer their records (no read-back query)."""
        if not rows:
            return []
        columns = [column for column in THOUGHT_COLUMNS if column.key != "project_name"]
        inserted = await self.session.execute(
            INSERT_THOUGHTS.returning(*columns, sort_by_parameter_order=True), with_facts(rows)
        )
        return [ThoughtRecord(project_name=project_name, **row._mapping) for row in inserted]

    async def get(self, thought_id: uuid.UUID, *, for_update: bool = False) -> ThoughtRecord | None:
        if for_update:
            rows = await lock_rows(self.session, thought_select(), Thought, [thought_id], "update")
            return to_record(rows[0]) if rows else None
        row = (await self.session.execute(thought_select().where(Thought.id == thought_id))).first()
        return to_record(row) if row else None

    async def get_many(
        self, thought_ids: Sequence[uuid.UUID], *, lock: RowLock | None = None
    ) -> dict[uuid.UUID, ThoughtRecord]:
        """The thoughts that exist, optionally locked until the transaction ends (app.db.row_locks: project by
        project, in id order, so two callers locking overlapping sets cannot deadlock): `key share` keeps them
        from being deleted, `no key update` also from being updated, for a read-modify-write of their fields."""
        if not thought_ids:
            return {}
        if lock is not None:
            rows = await lock_rows(self.session, thought_select(), Thought, set(thought_ids), lock)
            return {row.id: to_record(row) for row in rows}
        statement = thought_select().where(id_in(Thought.id, set(thought_ids)))
        return {row.id: to_record(row) for row in await self.session.execute(statement)}

    async def projects_of(
        self, thought_ids: Sequence[uuid.UUID], *, lock: RowLock | None = None
    ) -> dict[uuid.UUID, uuid.UUID]:
        """{id: project id} of the ids that exist, optionally locked as in `get_many`: a write that changes a row
        of their projects checks the caller's role there (app.services.admin.membership.require_role)."""
        if not thought_ids:
            return {}
        statement = select(Thought.id, Thought.project_id)
        if lock is not None:
            rows = await lock_rows(self.session, statement, Thought, set(thought_ids), lock)
            return {row.id: row.project_id for row in rows}
        return {
            row.id: row.project_id
            for row in await self.session.execute(statement.where(id_in(Thought.id, set(thought_ids))))
        }

    async def find_live_by_content(
        self, project_id: uuid.UUID, contents: Sequence[str], *, lock: RowLock | None = None
    ) -> dict[str, ThoughtRecord]:
        """Draft/active thoughts of a project whose content equals one of `contents` (oldest wins), optionally
        locked as in `get_many`. A row a concurrent call holds is read once it is released, with the filter
        checked again (READ COMMITTED): one deleted or archived meanwhile is not found."""
        if not contents:
            return {}
        unique = sorted(set(contents))
        hashes = [content_md5(content) for content in unique]
        statement = (
            thought_select()
            .where(
                Thought.project_id == project_id,
                func.md5(Thought.content) == any_(literal(hashes, ARRAY(Text))),  # ix_thought_project_content_md5
                Thought.content == any_(literal(unique, ARRAY(Text))),
                Thought.status.in_((ThoughtStatus.draft, ThoughtStatus.active)),
            )
            .order_by(Thought.id)  # ids grow with time: the first row of a content is the oldest
        )
        if lock is not None:
            statement = row_locked(statement, lock, Thought)
        found: dict[str, ThoughtRecord] = {}
        for row in await self.session.execute(statement):
            found.setdefault(row.content, to_record(row))
        return found

    async def count(self, where: ThoughtFilter) -> int:
        return await self._count(where, [])

    async def _count(self, where: ThoughtFilter, extra: list[Any]) -> int:
        statement = select(func.count()).select_from(Thought).where(and_(True, *where.clauses(), *extra))
        return int((await self.session.execute(statement)).scalar_one())

    async def page(self, where: ThoughtFilter, limit: int, offset: int) -> list[ThoughtRecord]:
        return await self._page(where, limit, offset, [])

    async def _page(self, where: ThoughtFilter, limit: int, offset: int, extra: list[Any]) -> list[ThoughtRecord]:
        statement = (
            thought_select()
            .where(*where.clauses(), *extra)
            .order_by(Thought.created_at.desc(), Thought.id.desc())
            .limit(limit)
            .offset(offset)
        )
        return [to_record(row) for row in await self.session.execute(statement)]

    async def page_with_total(
        self, where: ThoughtFilter, limit: int, offset: int, narrowing: Narrowing | None = None
    ) -> tuple[list[ThoughtRecord], int]:
        extra = await self._narrowed(narrowing)
        total = await self._count(where, extra)
        rows = await self._page(where, limit, offset, extra) if offset < total else []
        return rows, total

    async def page_with_capped_total(
        self, where: ThoughtFilter, limit: int, offset: int, cap: int, narrowing: Narrowing | None = None
    ) -> tuple[list[ThoughtRecord], int, bool]:
        """A page and its total counted up to a bound: max(cap, offset + limit). Answers (rows, total, capped):
        `capped` means more rows match than `total`, the bound (so a next page exists); otherwise `total` is
        exact. The count stops at bound + 1 rows instead of reading every match (50 000 in the largest project
        at 100 k thoughts: ~50 ms, docs/BENCHMARKS.md "Twelfth round")."""
        extra = await self._narrowed(narrowing)
        bound = max(cap, offset + limit)
        matching = select(literal(1)).select_from(Thought).where(and_(True, *where.clauses(), *extra)).limit(bound + 1)
        counted = int((await self.session.execute(select(func.count()).select_from(matching.subquery()))).scalar_one())
        rows = await self._page(where, limit, offset, extra) if offset < counted else []
        return rows, min(counted, bound), counted > bound

    async def _narrowed(self, narrowing: Narrowing | None) -> list[Any]:
        if narrowing is None:
            return []
        found: set[uuid.UUID] | None = None
        for edge_type, target_only in narrowing.edge_filters():
            ends = await self._edge_ends(edge_type, target_only)
            found = ends if found is None else found & ends
        return narrowing.clauses(found)

    async def _edge_ends(self, edge_type: EdgeType, target_only: bool) -> set[uuid.UUID]:
        statement = select(Edge.source_id, Edge.target_id).where(Edge.type == edge_type)
        rows = await self.session.execute(statement)
        if target_only:
            return {row.target_id for row in rows}
        return {end for row in rows for end in (row.source_id, row.target_id)}

    async def update_fields(self, thought_id: uuid.UUID, values: dict[str, Any]) -> None:
        if "content" in values:
            values = {**values, **content_facts(values["content"])}
        await self.session.execute(
            update(Thought).where(Thought.id == thought_id).values(**values, updated_at=func.now())
        )

    async def set_embeddings(self, vectors: dict[uuid.UUID, list[float]], model_id: str) -> None:
        for thought_id, vector in vectors.items():
            await self.session.execute(
                update(Thought)
                .where(Thought.id == thought_id)
                .values(embedding=vector, embedding_model=model_id)
                .execution_options(synchronize_session=False)
            )

    async def pending_embedding(
        self, model_id: str, limit: int, include_other_models: bool = False
    ) -> list[tuple[uuid.UUID, str]]:
        """Thoughts whose vector is missing (or, for reembed, from another model), locked for this job: the first
        `limit` by id, then locked project by project (app.db.row_locks), leaving out rows a writer holds."""
        pending: ColumnElement[bool] = Thought.embedding.is_(None)
        if include_other_models:
            pending = pending | (Thought.embedding_model != model_id)
        first = select(Thought.id, Thought.project_id).where(pending).order_by(Thought.id).limit(limit)
        places = {row.id: row.project_id for row in await self.session.execute(first)}
        statement = select(Thought.id, Thought.content).where(pending)  # pending still, once locked
        rows = await lock_rows(self.session, statement, Thought, places, "update", skip_locked=True, places=places)
        return [(row.id, row.content) for row in rows]
