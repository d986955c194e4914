"""Streaming read replicas (`SYNAPTO_READ_DATABASE_URLS`): when a read may run on a standby, and on which.

The rule (read-your-writes, across every process of every server): a unit of work that only reads
(`Database.reading`) runs on a replica only once that replica has replayed the primary's WAL up to where the
primary had flushed it when the read began (`pg_current_wal_flush_lsn()` on the primary, then
`pg_last_wal_replay_lsn()` on the standby). Every commit acknowledged before the read started — the caller's own
writes, whichever process served them — has its commit record at or below that point, so the replica's snapshot
holds it. A replica that has not got there within `WAIT_SECONDS` is passed over, and the read runs on the primary.
A flushed position that ends inside a record (the WAL writer flushes whole pages) is flushed past first
(`_FLUSH_PAST`), since replay cannot reach it until the rest of that record is flushed.

Nothing here is remembered about who wrote what: the only state is each replica's health (down or behind: not
tried for a few seconds, in this process), which decides where a read is tried first, never what it sees.

The exceptions: hit counters are committed without waiting for the WAL flush (app/services/hits.py), so a read
may briefly miss the counts of the reads just before it; and a replica's clock gives its lag in seconds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

import asyncpg
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

logger = logging.getLogger(__name__)

WAIT_SECONDS = 0.010  # how long a read waits for a replica to replay the primary's flushed WAL (then: the primary)
POLL_SECONDS = 0.001
DOWN_SECONDS = 5.0  # a replica that failed to connect or answer is not tried again before this
BEHIND_SECONDS = 0.25  # nor one that could not catch up in WAIT_SECONDS (a short spike on a busy box)
CONNECT_TIMEOUT_SECONDS = 1  # a replica that does not answer costs a read this much once, then DOWN_SECONDS off

REPLICA_KEY = "synapto_replica"  # session.info: the replica (its number) the unit of work reads on

# As plain numbers (bytes since 0/0): asyncpg has no codec for pg_lsn, and lag is a difference of two of them.
_PRIMARY_FLUSHED = "SELECT pg_wal_lsn_diff(pg_current_wal_flush_lsn(), '0/0')::bigint"
_REPLAYED = "SELECT pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0')::bigint"  # NULL: not a standby
_POSITIONS = (
    "SELECT pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0')::bigint AS replayed,"
    " pg_wal_lsn_diff(pg_last_wal_receive_lsn(), '0/0')::bigint AS received"
)
# The WAL writer flushes whole pages of asynchronously committed WAL (the hit counters): the primary's flushed
# position then ends inside a record, which no standby can replay before the rest of it is flushed — up to the WAL
# writer's next round (wal_writer_delay, 200 ms by default). A replica that has received everything up to such a
# position is waiting for nothing else: this flushes the primary past it (a tiny non-transactional WAL record
# with flush, PostgreSQL 17+; one fsync) and answers the record's end, a position replay can reach.
_FLUSH_PAST = "SELECT pg_wal_lsn_diff(pg_logical_emit_message(false, 'synaptomind', '', true), '0/0')::bigint"
WAL_PAGE_BYTES = 8192  # wal_block_size as built by default; on another size no flush is forced (reads fall back)
# Seconds behind: 0 once it has replayed what the primary flushed (an idle primary writes no commits, and the
# time since the last replayed one would grow for ever), else the age of the last commit it replayed.
_LAG = (
    "SELECT pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0')::bigint AS replayed,"
    " extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 AS behind"
)

# What a replica's failure looks like from here: a driver or pool error, a lost socket, a slow connect.
REPLICA_FAILURES: tuple[type[BaseException], ...] = (
    SQLAlchemyError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    OSError,
    TimeoutError,
)
# Errors a replica raises that the primary would not: a query cancelled by a recovery conflict (40001), the
# database dropped under it by replay (57P04), a write in a read-only transaction (25006: a read that wrote).
_REPLICA_ONLY_SQLSTATES = frozenset({"40001", "57P04", "25006"})

Result = TypeVar("Result")


class ReplicaLost(ConnectionError):
    """A read that had started on a replica failed there: it is run again on the primary (`retried_on_primary`).

    A ConnectionError, so that where nothing retries it the tool boundary answers a retryable 503."""


_PRIMARY_ONLY: ContextVar[bool] = ContextVar("replicas_primary_only", default=False)


def on_replica(session: AsyncSession) -> bool:
    """Whether this unit of work reads on a replica (its writes, e.g. hit counts, then go to the primary)."""
    return REPLICA_KEY in session.info


def replica_failure(error: BaseException, unavailable: bool) -> bool:
    """A failure of the replica rather than of the read: the same read on the primary would not fail so."""
    sqlstate = getattr(getattr(error, "orig", None), "sqlstate", None) or getattr(error, "sqlstate", None)
    return unavailable or sqlstate in _REPLICA_ONLY_SQLSTATES


async def retried_on_primary(run: Callable[[], Awaitable[Result]], may_retry: Callable[[], bool]) -> Result:
    """Run `run`; if a read of it was lost on a replica (and `may_retry`: nothing of it committed yet), run it
    once more with every read on the primary — the same call, no failure seen by the caller."""
    try:
        return await run()
    except ReplicaLost as lost:
        if not may_retry():
            raise
        logger.warning("a read failed on a replica (%s); running it on the primary", lost)
        reset = _PRIMARY_ONLY.set(True)
        try:
            return await run()
        finally:
            _PRIMARY_ONLY.reset(reset)


async def _fetch(connection: AsyncConnection, sql: str) -> Any:
    """One statement on the driver connection itself, outside any transaction: no BEGIN / COMMIT round trips."""
    raw = await connection.get_raw_connection()
    return await raw.driver_connection.fetchval(sql)  # type: ignore[union-attr]


async def _fetchrow(connection: AsyncConnection, sql: str) -> Any:
    raw = await connection.get_raw_connection()
    return await raw.driver_connection.fetchrow(sql)  # type: ignore[union-attr]


@dataclass
class Replica:
    number: int  # 1-based: its name in /health, which is public and so shows no host
    engine: AsyncEngine
    skip_until: float = 0.0  # time.monotonic(): down or behind, not tried before then


@dataclass
class ReplicaSet:
    """The process's replica engines, tried round-robin; counts where each read went (`routed`)."""

    replicas: list[Replica]
    routed: Counter[str] = field(default_factory=Counter)  # replica, behind, skipped, down, lost, flushed
    _next: int = 0
    _forced: tuple[int, int] | None = None  # the last position flushed past, and the position that answered
    _can_force: bool = True

    @classmethod
    def of(cls, engines: list[AsyncEngine]) -> ReplicaSet:
        return cls([Replica(number, engine) for number, engine in enumerate(engines, start=1)])

    def _candidates(self) -> list[Replica]:
        now = time.monotonic()
        start = self._next % len(self.replicas)
        self._next += 1
        ordered = self.replicas[start:] + self.replicas[:start]
        return [replica for replica in ordered if replica.skip_until <= now]

    async def acquire(self, primary: AsyncEngine) -> tuple[AsyncConnection, Replica] | None:
        """A connection to a replica that holds every commit acknowledged before now; None: read on the primary."""
        if _PRIMARY_ONLY.get():
            return None
        candidates = self._candidates()
        if not candidates:
            self.routed["skipped"] += 1
            return None
        async with primary.connect() as connection:  # a primary that fails here fails the read as it would anyway
            target = int(await _fetch(connection, _PRIMARY_FLUSHED))
        for replica in candidates:
            caught_up = await self._caught_up(replica, target, primary)
            if caught_up is not None:
                self.routed["replica"] += 1
                return caught_up, replica
        return None

    async def _caught_up(self, replica: Replica, target: int, primary: AsyncEngine) -> AsyncConnection | None:
        connection: AsyncConnection | None = None
        try:
            connection = await replica.engine.connect()
            deadline = time.monotonic() + WAIT_SECONDS
            forced = False
            while True:
                row = await _fetchrow(connection, _POSITIONS)
                replayed, received = row["replayed"], row["received"]
                if replayed is not None and int(replayed) >= target:
                    return connection
                if replayed is None or time.monotonic() >= deadline:
                    break
                if not forced and received is not None and int(received) >= target and target % WAL_PAGE_BYTES == 0:
                    forced = True
                    target = await self._flushed_past(primary, target)
                    continue
                await asyncio.sleep(POLL_SECONDS)
            self.routed["behind"] += 1
            replica.skip_until = time.monotonic() + BEHIND_SECONDS
            logger.info("replica %d is behind the primary; reads go to the primary for a while", replica.number)
        except REPLICA_FAILURES as error:
            self.lost(replica, error, "down")
        if connection is not None:
            with suppress(*REPLICA_FAILURES):
                await connection.close()
        return None

    async def _flushed_past(self, primary: AsyncEngine, target: int) -> int:
        """A position past `target` that replay can reach (_FLUSH_PAST); concurrent reads of one process that wait
        for the same position share one flush. Without the function (before PostgreSQL 17): `target` as it is."""
        if self._forced is not None and self._forced[0] == target:
            return self._forced[1]
        if not self._can_force:
            return target
        try:
            async with primary.connect() as connection:
                past = int(await _fetch(connection, _FLUSH_PAST))
        except asyncpg.UndefinedFunctionError:
            self._can_force = False
            logger.info("pg_logical_emit_message with flush needs PostgreSQL 17+: reads wait for the WAL writer")
            return target
        self.routed["flushed"] += 1
        self._forced = (target, past)
        return past

    def lost(self, replica: Replica, error: BaseException, kind: str = "lost") -> None:
        """The replica failed: reads go to the primary for DOWN_SECONDS."""
        self.routed[kind] += 1
        replica.skip_until = time.monotonic() + DOWN_SECONDS
        name = type(error).__name__
        logger.warning("replica %d unavailable (%s: %s); reading on the primary", replica.number, name, error)

    @asynccontextmanager
    async def session_on(self, connection: AsyncConnection, replica: Replica) -> AsyncIterator[AsyncSession]:
        """A session in one transaction on the replica connection `acquire` handed out; closed with it."""
        try:
            session = AsyncSession(bind=connection, expire_on_commit=False, autoflush=False)
            async with session, session.begin():
                session.info[REPLICA_KEY] = replica.number
                yield session
        finally:
            with suppress(*REPLICA_FAILURES):
                await connection.close()

    async def status(self, primary: AsyncEngine) -> list[dict[str, Any]]:
        """Each replica's lag behind the primary, for /health: bytes of WAL not yet replayed, and seconds."""
        async with primary.connect() as connection:
            flushed = int(await _fetch(connection, _PRIMARY_FLUSHED))
        return [await self._lag(replica, flushed) for replica in self.replicas]

    async def _lag(self, replica: Replica, flushed: int) -> dict[str, Any]:
        answer: dict[str, Any] = {"replica": replica.number, "state": "unavailable", "lag_bytes": None}
        answer["lag_seconds"] = None
        try:
            async with replica.engine.connect() as connection:
                row = await _fetchrow(connection, _LAG)
        except REPLICA_FAILURES as error:
            logger.warning("replica %d check failed: %s", replica.number, type(error).__name__)
            return answer
        if row["replayed"] is None:  # answers, but is no standby (promoted, or not one)
            return {**answer, "state": "not_replaying"}
        behind_bytes = max(0, flushed - int(row["replayed"]))
        seconds = 0.0 if behind_bytes == 0 or row["behind"] is None else max(0.0, float(row["behind"]))
        state = "ok" if replica.skip_until <= time.monotonic() else "passed_over"
        return {**answer, "state": state, "lag_bytes": behind_bytes, "lag_seconds": round(seconds, 3)}

    async def dispose(self) -> None:
        for replica in self.replicas:
            await replica.engine.dispose()
