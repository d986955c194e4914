"""`synaptomind export` / `import`: lossless JSONL of projects, thoughts, url links, edges, slots and primers.

One JSON object per line, `kind` first; rows sorted by kind then id, keys sorted, full-precision
timestamps — so exporting what an import wrote gives the same bytes. Import is idempotent by id.
Vectors are not exported: imported thoughts embed through the backfill (or `synaptomind reembed`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Edge, Primer, Project, Slot, Thought, ThoughtUrlLink
from app.db.repositories.thoughts import content_facts
from app.formats import clamped

# Each kind with its model: exports select the ORM entities' columns, so an export `--user` sees only what that
# user may read (app.db.visibility).
KINDS: tuple[tuple[str, Any, tuple[str, ...]], ...] = (
    (
        "project",
        Project,
        ("id", "name", "local_path", "description", "is_default", "created_at", "updated_at"),
    ),
    (
        "thought",
        Thought,
        (
            "id",
            "project_id",
            "content",
            "status",
            "tags",
            "is_protected",
            "is_global",
            "is_cluster",
            "importance",
            "surface_after",
            "archived_at",
            "created_at",
            "updated_at",
        ),
    ),
    (
        "url_link",
        ThoughtUrlLink,
        ("id", "thought_id", "project_id", "text", "url", "label", "sort_order", "created_at"),
    ),
    ("edge", Edge, ("id", "project_id", "source_id", "target_id", "type", "created_at")),
    ("slot", Slot, ("id", "project_id", "name", "content", "updated_at")),
    ("primer", Primer, ("id", "thought_id", "project_id", "promoted_at", "created_at")),
)
# Rows that live in their thought's project (migration 0026; docs/ARCHITECTURE.md, "Data model"): kind -> its column
# naming the thought.
_THOUGHT_OF = {"url_link": "thought_id", "edge": "source_id", "primer": "thought_id"}
_TIMESTAMPS = {"created_at", "updated_at", "archived_at", "surface_after", "promoted_at"}
_UUIDS = {"id", "project_id", "thought_id", "source_id", "target_id"}


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if hasattr(value, "value") and not isinstance(value, int | float | str | bool):
        return value.value  # enums
    return value


def _decode(column: str, value: Any) -> Any:
    if value is None:
        return None
    if column in _TIMESTAMPS:  # held to the range a time may have (an export of an earlier release may hold ±infinity)
        return clamped(datetime.fromisoformat(value))
    if column in _UUIDS:
        return uuid.UUID(value)
    return value


def encode_row(kind: str, row: dict[str, Any]) -> str:
    return json.dumps(
        {"kind": kind, **{key: _encode(value) for key, value in row.items()}},
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
    )


class Portability:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def count(self, project_id: uuid.UUID | None) -> int:
        total = 0
        for kind, model, columns in KINDS:
            subquery = self._select(kind, model, columns, project_id).subquery()
            total += int((await self.session.execute(select(func.count()).select_from(subquery))).scalar_one())
        return total

    def _select(self, kind: str, model: Any, columns: tuple[str, ...], project_id: uuid.UUID | None) -> Any:
        statement = select(*(getattr(model, name) for name in columns)).order_by(model.id)
        if project_id is None:
            return statement
        if kind == "project":
            return statement.where(model.id == project_id)
        if kind == "edge":  # only edges whose two ends are inside the project
            inside = select(Thought.id).where(Thought.project_id == project_id)
            return statement.where(model.source_id.in_(inside), model.target_id.in_(inside))
        return statement.where(model.project_id == project_id)

    async def export(self, project_id: uuid.UUID | None) -> AsyncIterator[str]:
        for kind, model, columns in KINDS:
            result = await self.session.stream(self._select(kind, model, columns, project_id))
            async for row in result:
                yield encode_row(kind, dict(row._mapping))

    async def import_lines(self, lines: Iterable[str]) -> dict[str, int]:
        """Insert every row whose id is new; returns how many rows of each kind were inserted."""
        tables = {kind: (model.__table__, columns) for kind, model, columns in KINDS}
        inserted = {kind: 0 for kind in tables}
        project_map: dict[uuid.UUID, uuid.UUID] = {}  # an imported project that matched an existing one
        homes: dict[uuid.UUID, uuid.UUID | None] = {}  # a thought's project, as stored here
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            record = json.loads(line)
            kind = record.pop("kind", None)
            if kind not in tables:
                raise ValueError(f"line {number}: unknown kind {kind!r}")
            table, columns = tables[kind]
            values = {column: _decode(column, record.get(column)) for column in columns if column in record}
            if values.get("project_id") in project_map:
                values["project_id"] = project_map[values["project_id"]]
            if (thought_id := values.get(_THOUGHT_OF.get(kind, ""))) is not None:
                # Its thought's project as stored here (the thought may have existed already, elsewhere; a file
                # from before migration 0026 may name a project a move left behind).
                home = await self._project_of(thought_id, homes)
                values["project_id"] = home if home is not None else values.get("project_id")
            if kind == "thought" and isinstance(values.get("content"), str):
                values.update(content_facts(values["content"]))  # as every write of a content does
            statement = pg_insert(table).values(**values).on_conflict_do_nothing().returning(table.c.id)
            if (await self.session.execute(statement)).first() is not None:
                inserted[kind] += 1
            elif kind == "project":
                await self._map_project(values, project_map)
        return inserted

    async def _project_of(self, thought_id: uuid.UUID, homes: dict[uuid.UUID, uuid.UUID | None]) -> uuid.UUID | None:
        if thought_id not in homes:
            found = select(Thought.project_id).where(Thought.id == thought_id)
            homes[thought_id] = (await self.session.execute(found)).scalar_one_or_none()
        return homes[thought_id]

    async def _map_project(self, values: dict[str, Any], project_map: dict[uuid.UUID, uuid.UUID]) -> None:
        """A project that exists under another id (same name, or both default) takes its rows in."""
        clauses = [Project.name == values["name"]]
        if values.get("is_default"):
            clauses.append(Project.is_default.is_(True))
        existing = (await self.session.execute(select(Project.id).where(or_(*clauses)).limit(1))).scalar_one_or_none()
        if existing is not None and existing != values["id"]:
            project_map[values["id"]] = existing
