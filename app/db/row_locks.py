"""Row locks by id, taken one project at a time: the form a database sharded by project can run.

The tables that grow carry `project_id`, and on Citus they are distributed by it (scripts/citus/distribute.sql).
Citus runs FOR UPDATE/SHARE only in a statement routed to one shard, so a lock by id alone ("these thoughts")
is refused there. `lock_rows` therefore reads the rows' projects first, without a lock, then locks each project's
rows with `project_id = :project` in the statement: projects in id order, rows in id order within each, the one
lock order of every caller, so two callers locking overlapping sets cannot deadlock. On one node this costs one
round trip more than a single locked statement (the projects' read), and usually a single project is locked.

A row moved to another project between the two reads is missed by its first lock; it is looked up again and
locked in its new project (at most three rounds: a move needs the row's lock, which the caller already waits for).
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Collection, Mapping
from typing import Any, Literal

from sqlalchemy import Row, Select, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.id_lists import id_in
from app.db.locks import RowLock, row_locked

# `update`: FOR UPDATE, the strongest (a delete or a key change of the row follows).
Lock = RowLock | Literal["update"]
_ROUNDS = 3


def _locked(statement: Select[*tuple[Any, ...]], lock: Lock, of: Any, skip_locked: bool) -> Select[*tuple[Any, ...]]:
    if lock == "update":
        return statement.with_for_update(of=of, skip_locked=skip_locked)
    return row_locked(statement, lock, of, skip_locked=skip_locked)


async def lock_rows(
    session: AsyncSession,
    statement: Select[*tuple[Any, ...]],
    of: Any,
    ids: Collection[uuid.UUID],
    lock: Lock,
    *,
    skip_locked: bool = False,
    places: Mapping[uuid.UUID, uuid.UUID] | None = None,
) -> list[Row[Any]]:
    """The rows of `statement` (which selects `of`'s rows and may filter them further) whose ids are `ids`, locked
    with `lock` until the transaction ends; rows that do not exist (or the statement leaves out) are not answered,
    nor, with `skip_locked`, rows another transaction holds.
    `of`: a mapped class with `id` and `project_id` columns. `places`: {id: project} of `ids` the caller has just read,
    which saves the first read of the projects (a row moved since is looked up again all the same)."""
    answered: dict[Any, Row[Any]] = {}
    tried: dict[uuid.UUID, uuid.UUID] = {}  # id -> the project it was locked in
    wanted = set(ids)
    for _ in range(_ROUNDS):
        if places is None:
            read = await session.execute(select(of.id, of.project_id).where(id_in(of.id, wanted))) if wanted else ()
            places = {row.id: row.project_id for row in read}
        by_project: dict[uuid.UUID, set[uuid.UUID]] = defaultdict(set)
        for row_id, project_id in places.items():
            if row_id in wanted and tried.get(row_id) != project_id:  # new, or moved since its lock was tried
                by_project[project_id].add(row_id)
        if not by_project:
            break
        for project_id in sorted(by_project):
            group = by_project[project_id]
            routed = statement.where(of.project_id == project_id, id_in(of.id, group)).order_by(of.id)
            for row in await session.execute(_locked(routed, lock, of, skip_locked)):
                answered[row.id] = row
            tried.update(dict.fromkeys(group, project_id))
        # Not locked where it was read: moved meanwhile (look again), deleted, or left out by the statement.
        wanted = {row_id for group in by_project.values() for row_id in group if row_id not in answered}
        places = None
    return list(answered.values())
