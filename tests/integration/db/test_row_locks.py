"""app/db/row_locks.py: rows locked by id, one project at a time (the form Citus can route), all of them, and a row
moved to another project while the lock waited is locked where it went."""

from __future__ import annotations

import asyncio
import uuid

from sqlalchemy import select, text, update
from sqlalchemy.exc import DBAPIError

from app.db.models import Thought
from app.db.repositories.thoughts import ThoughtRepository
from app.db.row_locks import lock_rows
from app.services.context import AppContext
from tests.support.helpers import ToolCaller
from tests.support.search import create, register


async def _projects(caller: ToolCaller) -> tuple[list[uuid.UUID], uuid.UUID, uuid.UUID]:
    """Two thoughts in /srv/alpha and one in /srv/beta: their ids and the two projects' ids."""
    await register(caller, "alpha", "/srv/alpha")
    await register(caller, "beta", "/srv/beta")
    ids = [
        uuid.UUID((await create(caller, content, cwd=cwd))["id"])
        for content, cwd in (("Alpha one", "/srv/alpha"), ("Alpha two", "/srv/alpha"), ("Beta one", "/srv/beta"))
    ]
    alpha, beta = await _project_ids(caller, ids[0], ids[2])
    return ids, alpha, beta


async def _project_ids(caller: ToolCaller, *thought_ids: uuid.UUID) -> list[uuid.UUID]:
    async with caller.context.db.unit_of_work() as session:
        found = await ThoughtRepository(session).projects_of(thought_ids)
    return [found[thought_id] for thought_id in thought_ids]


async def _is_locked(context: AppContext, thought_id: uuid.UUID) -> bool:
    async with context.db.unit_of_work() as session:
        try:
            await session.execute(
                select(Thought.id).where(Thought.id == thought_id).with_for_update(nowait=True, key_share=True)
            )
        except DBAPIError:  # lock_not_available: another transaction holds it
            await session.rollback()
            return True
        return False


async def test_every_row_of_every_project_is_locked_and_missing_ones_are_left_out(writer: ToolCaller) -> None:
    ids, _, _ = await _projects(writer)
    missing = uuid.uuid4()
    async with writer.context.db.unit_of_work() as session:
        rows = await lock_rows(session, select(Thought.id, Thought.content), Thought, [*ids, missing], "update")
        assert sorted(row.content for row in rows) == ["Alpha one", "Alpha two", "Beta one"]
        assert all([await _is_locked(writer.context, thought_id) for thought_id in ids])
    assert not any([await _is_locked(writer.context, thought_id) for thought_id in ids])  # released at the end


async def test_a_row_moved_while_the_lock_waited_is_locked_in_its_new_project(writer: ToolCaller) -> None:
    ids, alpha, beta = await _projects(writer)
    moved = ids[0]
    async with writer.context.db.unit_of_work() as mover:
        # The move holds the row, uncommitted: the locker reads it in alpha and waits on alpha's lock.
        await mover.execute(update(Thought).where(Thought.id == moved).values(project_id=beta))
        async with writer.context.db.unit_of_work() as locker:
            pid = (await locker.execute(text("SELECT pg_backend_pid()"))).scalar_one()
            waiting = asyncio.create_task(
                lock_rows(locker, select(Thought.id, Thought.project_id), Thought, [moved, ids[1]], "no key update")
            )
            for _ in range(6000):  # up to a minute on a slow machine; it waits within milliseconds here
                async with writer.context.db.unit_of_work() as probe:
                    state = await probe.execute(
                        text("SELECT wait_event_type FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid}
                    )
                    if state.scalar_one_or_none() == "Lock":
                        break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("the lock never waited for the move")
            await mover.commit()
            rows = await waiting
            assert {row.id: row.project_id for row in rows} == {moved: beta, ids[1]: alpha}


async def test_skip_locked_leaves_out_a_row_another_transaction_holds(writer: ToolCaller) -> None:
    ids, _, _ = await _projects(writer)
    async with writer.context.db.unit_of_work() as holder:
        await holder.execute(select(Thought.id).where(Thought.id == ids[2]).with_for_update())
        async with writer.context.db.unit_of_work() as session:
            rows = await lock_rows(session, select(Thought.id), Thought, ids, "update", skip_locked=True)
    assert sorted(row.id for row in rows) == sorted(ids[:2])


async def test_places_read_before_a_move_are_looked_up_again(writer: ToolCaller) -> None:
    """`places` the caller read earlier save the first read; one that is stale by the lock's time is read again."""
    ids, alpha, beta = await _projects(writer)
    async with writer.context.db.unit_of_work() as session:
        await session.execute(update(Thought).where(Thought.id == ids[0]).values(project_id=beta))
        stale = {ids[0]: alpha, ids[1]: alpha}
        rows = await lock_rows(session, select(Thought.id, Thought.project_id), Thought, stale, "update", places=stale)
    assert {row.id: row.project_id for row in rows} == {ids[0]: beta, ids[1]: alpha}
