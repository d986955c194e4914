"""Async engine and the unit of work: one transaction per tool call."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import Executable, event
from sqlalchemy.engine import Dialect, ExceptionContext, Result
from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from app.db.replicas import ReplicaLost, ReplicaSet, replica_failure
from app.db.vector import configure_vector_session
from app.db.visibility import caller_of, scoped
from app.db.visibility import install as install_visibility

CONNECT_TIMEOUT_SECONDS = 5  # an unreachable server fails the call fast instead of hanging in connect


def build_engine(url: str, pool_size: int, connect_timeout: float = CONNECT_TIMEOUT_SECONDS) -> AsyncEngine:
    engine = create_async_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_timeout=10,
        connect_args={
            "command_timeout": 60,
            "timeout": connect_timeout,
            "server_settings": {"application_name": "synaptomind"},
        },
    )
    event.listen(engine.sync_engine, "connect", _on_connect)
    event.listen(engine.sync_engine, "checkout", _refuse_closed)
    event.listen(engine.sync_engine, "do_connect", _connect_or_operational_error)
    event.listen(engine.sync_engine, "handle_error", _mark_server_gone)
    return engine


# The server went away or does not take connections right now: connection_exception (class 08),
# admin_shutdown, crash_shutdown, cannot_connect_now, too_many_connections.
_GONE_SQLSTATE_CLASSES = ("08",)
_GONE_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "53300"})


def _mark_server_gone(context: ExceptionContext) -> None:
    """Count a shutdown or refusal by the server as a disconnect: the pool drops the connection and the
    error carries `connection_invalidated`, which the tool boundary answers as a retryable 503.

    asyncpg reports these as plain PostgresErrors, so without this a call that is running (or
    connecting) while PostgreSQL shuts down fails as an unexpected 500 and its token check as a 401.
    """
    sqlstate = getattr(context.original_exception, "sqlstate", None)
    if isinstance(sqlstate, str) and (sqlstate in _GONE_SQLSTATES or sqlstate.startswith(_GONE_SQLSTATE_CLASSES)):
        context.is_disconnect = True


def _connect_or_operational_error(dialect: Dialect, _record: Any, cargs: Any, cparams: Any) -> Any:
    """A refused connection is an OperationalError (so: database unavailable, 503), whatever the socket said.

    asyncpg lets OS errors of the connect through unwrapped; on a Unix socket a stopped server is a
    FileNotFoundError (the socket file is gone), which is not a ConnectionError and would otherwise
    surface as an unexpected 500 instead of a retryable 503.
    """
    try:
        return dialect.connect(*cargs, **cparams)
    except (OSError, TimeoutError) as error:
        dbapi: Any = dialect.loaded_dbapi
        raise dbapi.OperationalError(f"cannot connect to the database: {type(error).__name__}: {error}") from error


def is_unavailable(error: BaseException) -> bool:
    """The database is down, unreachable, restarting or out of connections: a retryable condition."""
    if isinstance(error, OperationalError | InterfaceError | PoolTimeoutError | ConnectionError | TimeoutError):
        return True
    return isinstance(error, DBAPIError) and bool(error.connection_invalidated)


def _on_connect(dbapi_connection: Any, _record: Any) -> None:
    """Vectors travel in binary and HNSW scans run with the app's settings on every pooled connection."""
    dbapi_connection.run_async(configure_vector_session)


def _refuse_closed(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """The pool's pre-ping without a round trip: hand out no connection the server has closed.

    asyncpg sees the server close a pooled connection (a restart, an idle timeout) as soon as the event loop
    reads the socket's end; SQLAlchemy's pre-ping would instead spend three round trips (BEGIN, ping,
    ROLLBACK) on every checkout. A connection lost silently (no FIN) fails its first statement, which the
    tool boundary answers as a retryable 503, and the pool replaces it.
    """
    if dbapi_connection.driver_connection.is_closed():
        raise DisconnectionError("connection closed by the server")


class Database:
    """Owns the engine (and the read replicas' engines); hands out units of work (a session inside one transaction)."""

    def __init__(self, engine: AsyncEngine, replicas: ReplicaSet | None = None) -> None:
        self.engine = engine
        self.replicas = replicas
        self._sessions = async_sessionmaker(engine, expire_on_commit=False, autoflush=False)

    @asynccontextmanager
    async def unit_of_work(self) -> AsyncIterator[AsyncSession]:
        """Commits when the block ends normally, rolls back when it raises. Inside a tool call of a token's user,
        its statements see only what the caller may see (app.db.visibility)."""
        async with self._sessions() as session, session.begin():
            await install_visibility(session)
            yield session

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[AsyncSession]:
        """A unit of work that only reads: on a read replica that has every commit acknowledged before now
        (app.db.replicas), else on the primary, as `unit_of_work`. A replica's failure under the read raises
        `ReplicaLost`, which the tool boundary answers by running the call again on the primary."""
        acquired = await self.replicas.acquire(self.engine) if self.replicas is not None else None
        if acquired is None:
            async with self.unit_of_work() as session:
                yield session
            return
        assert self.replicas is not None
        connection, replica = acquired
        try:
            async with self.replicas.session_on(connection, replica) as session:
                await install_visibility(session)
                yield session
        except DBAPIError as error:
            if not replica_failure(error, is_unavailable(error)):
                raise
            self.replicas.lost(replica, error)
            raise ReplicaLost(f"replica {replica.number}: {type(error).__name__}") from error
        except (OSError, TimeoutError, PoolTimeoutError) as error:
            self.replicas.lost(replica, error)
            raise ReplicaLost(f"replica {replica.number}: {type(error).__name__}") from error

    @asynccontextmanager
    async def autocommit(self) -> AsyncIterator[AsyncSession]:
        """A session whose statements commit one by one: for a lone read, no BEGIN / COMMIT round trips. Inside a
        call of a token's user it sees what `unit_of_work` would (app.db.visibility)."""
        async with self.engine.connect() as connection:
            await connection.execution_options(isolation_level="AUTOCOMMIT")
            async with AsyncSession(bind=connection) as session:
                await install_visibility(session)
                yield session

    async def dispose(self) -> None:
        await self.engine.dispose()
        if self.replicas is not None:
            await self.replicas.dispose()


async def execute_core(
    session: AsyncSession,
    statement: Executable,
    parameters: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
) -> Result[Any]:
    """Run `statement` on the session's connection (SQLAlchemy Core), inside its transaction.

    For the hot reads that want plain rows (search, scope, token check): the ORM session's execution machinery
    cost ~0.1-0.2 ms per statement, and this app never has ORM objects pending to flush (docs/BENCHMARKS.md).
    A list of parameter sets is an executemany (batches of multi-row INSERTs); through the ORM session it
    would be an ORM bulk operation instead.
    """
    connection = await session.connection()
    # The ORM session's hook does not see Core execution: the same visibility rule applies here.
    statement, parameters = scoped(caller_of(session), statement, parameters, {})
    return await connection.execute(statement, parameters)
