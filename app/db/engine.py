"""Async engine and the unit of work: one transaction per tool call."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from app.db.vector import register_vector_codec


def build_engine(url: str, pool_size: int = 10) -> AsyncEngine:
    engine = create_async_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        pool_timeout=10,
        connect_args={"command_timeout": 60, "server_settings": {"application_name": "synaptomind"}},
    )
    event.listen(engine.sync_engine, "connect", _on_connect)
    return engine


def _on_connect(dbapi_connection: Any, _record: Any) -> None:
    """Vectors travel in binary on every connection of the app's pool (app.db.vector)."""
    dbapi_connection.run_async(register_vector_codec)


class Database:
    """Owns the engine; hands out units of work (a session inside one transaction)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._sessions = async_sessionmaker(engine, expire_on_commit=False, autoflush=False)

    @asynccontextmanager
    async def unit_of_work(self) -> AsyncIterator[AsyncSession]:
        """Commits when the block ends normally, rolls back when it raises."""
        async with self._sessions() as session, session.begin():
            yield session

    async def dispose(self) -> None:
        await self.engine.dispose()
