"""The app's connection pool (HNSW scan settings per connection, no closed connection handed out) and first-run
user creation across replicas."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from app.db.engine import Database, build_engine
from app.db.repositories.search import SearchRepository
from app.db.repositories.thoughts import ThoughtFilter
from app.db.vector import EMBEDDING_DIM, HNSW_EF_SEARCH
from app.services.auth.tokens import AuthService


@pytest.fixture
async def one_connection(database_url: str) -> AsyncIterator[Database]:
    """A pool that reuses one connection for sequential units of work."""
    db = Database(build_engine(database_url, pool_size=1))
    yield db
    await db.dispose()


async def _show(db: Database, setting: str) -> str:
    async with db.unit_of_work() as session:
        return str((await session.execute(text(f"SHOW {setting}"))).scalar_one())


async def test_every_pooled_connection_carries_the_hnsw_scan_settings(one_connection: Database) -> None:
    assert await _show(one_connection, "hnsw.iterative_scan") == "relaxed_order"
    assert await _show(one_connection, "hnsw.ef_search") == str(HNSW_EF_SEARCH)


async def test_a_larger_pool_widens_ef_search_for_its_own_transaction_only(one_connection: Database) -> None:
    query = [0.0] * (EMBEDDING_DIM - 1) + [1.0]
    async with one_connection.unit_of_work() as session:
        await SearchRepository(session).vector_leg(query, "no-such-model", ThoughtFilter(), pool=500)
        assert (await session.execute(text("SHOW hnsw.ef_search"))).scalar_one() == "500"
    assert await _show(one_connection, "hnsw.ef_search") == str(HNSW_EF_SEARCH)


async def test_a_pooled_connection_the_server_closed_is_replaced_at_checkout(
    database_url: str, one_connection: Database
) -> None:
    """No pre-ping round trip, yet a connection whose backend is gone is never handed to a call."""
    async with one_connection.unit_of_work() as session:
        backend = (await session.execute(text("SELECT pg_backend_pid()"))).scalar_one()
    admin = create_async_engine(database_url, poolclass=NullPool)
    try:
        async with admin.connect() as connection:
            await connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": backend})
    finally:
        await admin.dispose()
    for _ in range(50):  # the event loop reads the closed socket of the idle pooled connection
        await asyncio.sleep(0.02)
    async with one_connection.unit_of_work() as session:
        replacement = (await session.execute(text("SELECT pg_backend_pid()"))).scalar_one()
    assert replacement != backend


async def test_replicas_starting_together_bootstrap_one_admin(clean_database: Database) -> None:
    """Two first runs at once on an empty database: one creates `admin`, the other sees it (no unique violation)."""

    async def first_run() -> str | None:
        async with clean_database.unit_of_work() as session:
            return await AuthService(session).bootstrap_admin()

    tokens = await asyncio.gather(first_run(), first_run())
    assert sorted(token is None for token in tokens) == [False, True]
    async with clean_database.unit_of_work() as session:
        assert (await session.execute(text("SELECT count(*) FROM app_user"))).scalar_one() == 1
