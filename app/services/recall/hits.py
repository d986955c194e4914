"""Recall hits: every thought an answer returns counts one; the threshold promotes it to a primer."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from sqlalchemy import bindparam, func, literal_column, select, update
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.engine import execute_core
from app.db.id_lists import id_in_param
from app.db.locks import row_locked
from app.db.models import Primer, Thought, ThoughtHit
from app.db.records import ThoughtRecord
from app.db.visibility import VISIBLE_PROJECTS, caller_of
from app.ids import new_id

PROMOTION_BONUS = 0.15


# One hit more for each thought (in id order: a stable lock order keeps concurrent callers deadlock-free). The
# thoughts are read FOR KEY SHARE: a delete under way makes the read wait for it and then leave the deleted row
# out, where counting it would fail the whole read on the foreign key. The SET LOCAL rides in the WHERE
# (evaluated on the rows it counts) to save a round trip; with no row matched nothing is written and the commit
# has nothing to flush anyway. Built once: every read call runs it.
def _count_hits(*only: Any) -> Any:
    counted = pg_insert(ThoughtHit).from_select(
        ["thought_id", "project_id", "hit_count"],
        row_locked(
            select(Thought.id, Thought.project_id, literal_column("1"))
            .where(
                Thought.project_id == bindparam("project", type_=UUID(as_uuid=True)),
                id_in_param(Thought.id),
                *only,
                func.set_config("synchronous_commit", "off", True) == "off",
            )
            .order_by(Thought.id),
            "key share",
            of=Thought,
        ),
    )
    return counted.on_conflict_do_update(
        # By name: its columns are (thought_id) on one node, (project_id, thought_id) on Citus (distribute.sql).
        constraint="pk_thought_hit",
        # excluded's is the column default, now(): Citus takes no volatile function in DO UPDATE SET. The 1s are SQL
        # constants, not parameters: Citus runs this upsert from an intermediate result, a statement of its own
        # that carries a parameter of the whole and cannot type it.
        set_={"hit_count": ThoughtHit.hit_count + literal_column("1"), "last_hit_at": counted.excluded.last_hit_at},
    ).returning(ThoughtHit.thought_id, ThoughtHit.project_id, ThoughtHit.hit_count)


_COUNT_HITS = _count_hits()
# A token user's read counts hits only in the projects they are a member of (any role: the hit is the read's own
# record): a global thought of a project they are not a member of counts none, so a non-member's reads change no
# row of that project, its primers and importance included. The visibility rule keeps every row they cannot see
# out of either statement.
_COUNT_MEMBER_HITS = _count_hits(Thought.project_id.in_(VISIBLE_PROJECTS))


class HitService:
    def __init__(self, session: AsyncSession, promote_threshold: int) -> None:
        self.session = session
        self.threshold = promote_threshold

    async def record(self, thoughts: Iterable[ThoughtRecord]) -> None:
        """Count one hit per thought (memory_recall's reads, whose only write this bookkeeping is), of the
        projects the caller is a member of (docs/SECURITY.md, "Every write checks every row").

        One statement per project, projects and then ids in order (a stable lock order keeps concurrent callers
        deadlock-free): a statement that names its project is what a store distributed by project routes to one
        shard (docs/DEPLOY.md, "Citus"); most reads count hits in one project.

        Their commit does not wait for the WAL flush (`synchronous_commit = off` for this transaction):
        1-8 ms per read call on this machine's disk, for counters a crash may set back by a fraction of a
        second. A transaction with writes that must be durable does not count hits.
        """
        by_project: dict[uuid.UUID, set[uuid.UUID]] = defaultdict(set)
        for thought in thoughts:
            by_project[thought.project_id].add(thought.id)
        # Core execution: through the ORM session a parameter dict for an INSERT would be a bulk insert.
        statement = _COUNT_HITS if caller_of(self.session) is None else _COUNT_MEMBER_HITS
        reached: list[tuple[uuid.UUID, uuid.UUID]] = []
        for project_id in sorted(by_project):
            parameters = {"project": project_id, "ids": sorted(by_project[project_id])}
            rows = (await execute_core(self.session, statement, parameters)).all()
            # Promotion happens at the moment the count reaches the threshold, once.
            reached += [(row.thought_id, row.project_id) for row in rows if row.hit_count == self.threshold]
        await self._promote(reached)

    async def _promote(self, reached: list[tuple[uuid.UUID, uuid.UUID]]) -> None:
        if not reached:
            return
        values = [
            {"id": new_id(), "thought_id": thought_id, "project_id": project_id} for thought_id, project_id in reached
        ]
        inserted = await self.session.execute(
            pg_insert(Primer).values(values).on_conflict_do_nothing().returning(Primer.thought_id)
        )
        fresh = [row.thought_id for row in inserted]
        if fresh:
            await self.session.execute(
                update(Thought)
                .where(Thought.id.in_(fresh), Thought.importance < 1.0)  # at the cap: no new row version
                .values(importance=func.least(1.0, Thought.importance + PROMOTION_BONUS))
            )
