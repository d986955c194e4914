"""The version check `serve`, `stdio` and `migrate` run before migrating (app/db/requirements.py).

The messages are pinned through the pure functions with parsed versions (no old server needed); the real
server must pass, and a database where pgvector is not created yet must count the version it would get.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from pydantic import SecretStr
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from app import cli
from app.config import Settings
from app.db import migrations, requirements
from app.db.requirements import (
    MIN_PGVECTOR,
    DatabaseFacts,
    DatabaseRequirementError,
    btree_gin_problem,
    check_database,
    check_url,
    describe_location,
    parse_version,
    pgvector_problem,
    postgres_problem,
    problems,
)

WHERE = "db.example.lan:5432/synaptomind"
NEEDS_PGVECTOR = "SynaptoMind needs pgvector 0.8.0 or newer (hnsw.iterative_scan)"


# ---------------------------------------------------------------- versions and messages


@pytest.mark.parametrize(
    ("value", "expected"),
    [("0.8.0", (0, 8, 0)), ("0.7", (0, 7)), ("0.8.1-dev", (0, 8, 1)), ("15.18 (Debian 15.18-0+deb12u1)", (15, 18))],
)
def test_versions_are_parsed_to_comparable_tuples(value: str, expected: tuple[int, ...]) -> None:
    assert parse_version(value) == expected


def test_a_version_that_is_not_one_is_refused() -> None:
    with pytest.raises(ValueError, match="not a version"):
        parse_version("devel")


def test_version_order_is_numeric_not_textual() -> None:
    assert parse_version("0.10.0") > MIN_PGVECTOR > parse_version("0.7.4")
    assert parse_version("0.8") < MIN_PGVECTOR  # (0, 8) < (0, 8, 0): a two-part version is not assumed equal


@pytest.mark.parametrize(("version_num", "version"), [(150000, "15.0"), (150018, "15.18"), (180006, "18.6")])
def test_postgresql_15_and_newer_pass(version_num: int, version: str) -> None:
    assert postgres_problem(version_num, version, WHERE) is None


def test_postgresql_14_is_too_old() -> None:
    assert postgres_problem(140009, "14.9 (Debian 14.9-1.pgdg120+1)", WHERE) == (
        "PostgreSQL 14.9 at db.example.lan:5432/synaptomind is too old: SynaptoMind needs PostgreSQL 15 or newer "
        "(unique indexes with NULLS NOT DISTINCT)"
    )


def test_postgresql_before_10_is_read_from_its_version_number() -> None:
    problem = postgres_problem(90624, "9.6.24", WHERE)
    assert problem is not None and problem.startswith("PostgreSQL 9.6.24 at ")


@pytest.mark.parametrize(
    ("installed", "available"),
    [((0, 8, 0), (0, 8, 0)), ((0, 8, 6), None), (None, (0, 8, 6)), (None, (0, 8, 0)), ((0, 9, 0), (0, 8, 6))],
)
def test_pgvector_0_8_installed_or_to_be_installed_passes(
    installed: tuple[int, ...] | None, available: tuple[int, ...] | None
) -> None:
    assert pgvector_problem(installed, available, "synaptomind") is None


def test_an_old_pgvector_with_a_newer_package_needs_the_extension_updated() -> None:
    assert pgvector_problem((0, 7, 0), (0, 8, 1), "synaptomind") == (
        f"pgvector 0.7.0 is installed in synaptomind: {NEEDS_PGVECTOR}; the server offers 0.8.1: "
        "upgrade the extension (ALTER EXTENSION vector UPDATE in synaptomind)"
    )


def test_an_old_pgvector_package_needs_the_package_then_the_extension_upgraded() -> None:
    expected = (
        f"pgvector 0.7.0 is installed in synaptomind: {NEEDS_PGVECTOR}; upgrade the pgvector package on the "
        "server, then the extension (ALTER EXTENSION vector UPDATE in synaptomind)"
    )
    assert pgvector_problem((0, 7, 0), (0, 7, 0), "synaptomind") == expected
    assert pgvector_problem((0, 7, 0), None, "synaptomind") == expected  # installed, package since removed


def test_an_old_pgvector_not_yet_created_is_reported_as_available() -> None:
    assert pgvector_problem(None, (0, 7, 4), "synaptomind") == (
        f"pgvector 0.7.4 is available (not yet installed) in synaptomind: {NEEDS_PGVECTOR}; "
        "upgrade the pgvector package on the server"
    )


def test_a_server_without_pgvector_is_reported_as_missing() -> None:
    assert pgvector_problem(None, None, "synaptomind") == (
        "pgvector is not installed in synaptomind and the server does not offer it (no 'vector' in "
        f"pg_available_extensions): {NEEDS_PGVECTOR}; install the pgvector package on the database server "
        "(e.g. postgresql-<major>-pgvector, or the pgvector/pgvector image)"
    )


def test_a_server_without_btree_gin_is_reported() -> None:
    assert btree_gin_problem(True, "synaptomind") is None
    assert btree_gin_problem(False, "synaptomind") == (
        "the btree_gin extension is not available in synaptomind: SynaptoMind needs it (the full-text index "
        "over project and words); install PostgreSQL's contrib package on the database server"
    )


FACTS = DatabaseFacts(
    where=WHERE,
    database="synaptomind",
    server_version_num=150018,
    server_version="15.18",
    vector_installed="0.8.0",
    vector_available="0.8.0",
    btree_gin_available=True,
)


def test_every_unmet_requirement_is_named_at_once() -> None:
    assert problems(FACTS) == []
    unmet = problems(replace(FACTS, server_version_num=140009, server_version="14.9", vector_installed="0.7.0"))
    assert [problem.split(" ", 2)[:2] for problem in unmet] == [["PostgreSQL", "14.9"], ["pgvector", "0.7.0"]]
    error = DatabaseRequirementError(unmet)
    assert str(error) == "\n".join(unmet) and error.problems == unmet


def test_the_location_names_host_port_and_database_never_the_password() -> None:
    assert describe_location("postgresql+asyncpg://u:secret@db.example.lan:5432/synaptomind") == WHERE
    assert describe_location("postgresql+asyncpg://u@db/x") == "db/x"
    socket = "postgresql+asyncpg://postgres@/synaptomind?host=%2Ftmp%2Fpg"
    assert describe_location(socket) == "/tmp/pg/synaptomind"
    assert describe_location(socket + "&port=5499") == "/tmp/pg:5499/synaptomind"


# ---------------------------------------------------------------- the real server


async def test_the_test_server_meets_the_requirements(database_url: str) -> None:
    facts = await check_url(database_url)
    assert facts.server_version_num // 10000 >= 15
    assert facts.vector_installed is not None and parse_version(facts.vector_installed) >= MIN_PGVECTOR
    assert facts.btree_gin_available
    # The CLI's synchronous form runs its own event loop, hence the thread.
    assert await asyncio.to_thread(check_database, database_url) == facts


@pytest.fixture(scope="module")
async def bare_url(database_url: str) -> AsyncIterator[str]:
    """A database where no migration ran: from template0, so no extension leaks in through template1."""
    name = f"synapto_requirements_{uuid.uuid4().hex[:12]}"
    admin = create_async_engine(database_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    async with admin.connect() as connection:
        await connection.execute(text(f'CREATE DATABASE "{name}" TEMPLATE template0'))
    try:
        yield make_url(database_url).set(database=name).render_as_string(hide_password=False)
    finally:
        async with admin.connect() as connection:
            await connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        await admin.dispose()


async def test_before_the_first_migration_the_version_the_server_offers_counts(bare_url: str) -> None:
    facts = await check_url(bare_url)
    assert facts.vector_installed is None  # not created yet: the first migration does it
    assert facts.vector_available is not None and parse_version(facts.vector_available) >= MIN_PGVECTOR
    assert facts.database == make_url(bare_url).database
    assert facts.where.endswith("/" + facts.database)
    # Were that version too old, the message would say it is available, not installed.
    old = problems(replace(facts, vector_available="0.7.0"))
    assert old == [pgvector_problem(None, (0, 7, 0), facts.database)]
    assert "is available (not yet installed) in " + facts.database in old[0]


# ---------------------------------------------------------------- the CLI


def test_the_cli_exits_with_the_message_before_migrating(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Checked before migrating: a server too old is left untouched, and the process exits non-zero."""
    unmet = [pgvector_problem((0, 7, 0), (0, 7, 0), "synaptomind") or ""]

    def too_old(url: str) -> DatabaseFacts:
        raise DatabaseRequirementError(unmet)

    migrated: list[str] = []
    monkeypatch.setattr(requirements, "check_database", too_old)
    monkeypatch.setattr(migrations, "upgrade", migrated.append)
    settings = Settings(_env_file=None, database_url=SecretStr(database_url))
    with pytest.raises(SystemExit) as exit_info:
        cli.cmd_migrate(argparse.Namespace(), settings)
    assert exit_info.value.code == unmet[0]  # SystemExit with a message: printed to stderr, status 1
    assert migrated == []
