"""The locks the app takes in PostgreSQL, in one place: row-lock strengths and every advisory-lock key.

Advisory keys share one 64-bit space per database: each use has its own key here, so no two features
can block each other by accident.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypeVar

from sqlalchemy import Select, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.visibility import UNSCOPED

# `key share` keeps a row from being deleted (the lock a foreign key referencing it takes); `no key update` also
# from being updated, for a read-modify-write of its fields.
RowLock = Literal["key share", "no key update"]
SelectT = TypeVar("SelectT", bound=Select[*tuple[Any, ...]])

# Integer keys. Background jobs try them (one replica runs each job); the others wait for them.
BACKFILL_LOCK_KEY = 7_301_001
DECAY_LOCK_KEY = 7_301_002
EXPIRY_LOCK_KEY = 7_301_003
ESTIMATE_LOCK_KEY = 7_301_004
PROJECT_INDEX_LOCK_KEY = 7_301_005
HEALTH_REPORT_LOCK_KEY = 7_301_006
USER_CREATION_LOCK_KEY = 7_302_001  # replicas starting together bootstrap one admin
AUTO_CLUSTER_LOCK_KEY = 7_302_002  # auto_cluster confirms run one at a time
USER_ADMIN_LOCK_KEY = 7_302_003  # role, password and token changes that could leave no admin, one at a time
PROJECT_PATHS_LOCK_KEY = 7_302_004  # path registrations one at a time: the paths rule checks, then the row is written

# Seeds of text keys, hashtextextended(text, seed): one lock per edge pair, per slot and owner, per queue.
EDGE_PAIR_SEED = 7301
SLOT_SEED = 7303
PROPOSAL_QUEUE_SEED = 7304  # one project's placement queue: enqueues count, then insert
MEMBERSHIP_SEED = 7305  # one project's memberships: a console change, then the check that an admin remains


def row_locked(statement: SelectT, lock: RowLock, of: Any, *, skip_locked: bool = False) -> SelectT:
    """`statement` locking `of`'s rows until the transaction ends (`skip_locked`: leaving out rows held elsewhere).

    SQLAlchemy spells FOR KEY SHARE `read=True, key_share=True`; `key_share=True` alone is FOR NO KEY UPDATE.
    """
    return statement.with_for_update(of=of, read=lock == "key share", key_share=True, skip_locked=skip_locked)


async def hold_until_commit(session: AsyncSession, key: int) -> None:
    """Wait for the advisory lock `key`; it is released when the transaction ends."""
    await session.execute(select(func.pg_advisory_xact_lock(key)))


async def hold_text_until_commit(session: AsyncSession, key: str, seed: int) -> None:
    """`hold_until_commit` for a text key (hashed with one of the seeds above)."""
    await hold_texts_until_commit(session, [key], seed)


async def hold_texts_until_commit(session: AsyncSession, keys: Sequence[str], seed: int) -> None:
    """Text keys (hashed with one of the seeds above) held until commit, taken in one round trip in the order
    given (callers pass one global order, so two of them cannot deadlock)."""
    await session.execute(
        text(
            "SELECT pg_advisory_xact_lock(hashtextextended(k, :seed)) "
            "FROM unnest(CAST(:keys AS text[])) WITH ORDINALITY AS u(k, n) ORDER BY n"
        ).execution_options(**UNSCOPED),  # reads no project data
        {"keys": list(keys), "seed": seed},
    )
