"""The server and extension versions SynaptoMind needs, checked before migrating (`serve`, `stdio`, `migrate`).

Without the check an old server fails midway through a migration (PostgreSQL 14 on migration 0001's
`NULLS NOT DISTINCT` index), or worse, not at all: with pgvector 0.7 every migration runs, but
`SET hnsw.iterative_scan` is an unknown parameter, so project-filtered searches through the shared HNSW
index stop at ef_search candidates and return short or empty pages.

What needs what (the minimum is the newest of each column):

- PostgreSQL 15: unique indexes with `NULLS NOT DISTINCT` (migration 0001); the rest is older
  (stored generated columns 12, statement triggers with transition tables 10).
- pgvector 0.8.0: `hnsw.iterative_scan` (app.db.vector.configure_vector_session); `halfvec` and its HNSW
  operator class (migration 0005) need 0.7.0.
- btree_gin (PostgreSQL's contrib, any version): the GIN index over (project_id, tsv) of migration 0003.

Before the first migration the extensions are not created yet, so the versions the server would install
(`pg_available_extensions.default_version`) count when none is installed.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine
from sqlalchemy.pool import NullPool

Version = tuple[int, ...]

MIN_POSTGRES_MAJOR = 15
MIN_PGVECTOR: Version = (0, 8, 0)
PGVECTOR_FEATURE = "hnsw.iterative_scan"

_FACTS = text(
    "SELECT current_setting('server_version_num')::int AS version_num, "
    "current_setting('server_version') AS version, current_database() AS database, "
    "(SELECT extversion FROM pg_extension WHERE extname = 'vector') AS vector_installed, "
    "(SELECT default_version FROM pg_available_extensions WHERE name = 'vector') AS vector_available, "
    "EXISTS (SELECT FROM pg_available_extensions WHERE name = 'btree_gin') "
    "OR EXISTS (SELECT FROM pg_extension WHERE extname = 'btree_gin') AS btree_gin"
)


class DatabaseRequirementError(RuntimeError):
    """The database cannot serve SynaptoMind; the message names what is needed and what was found."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class DatabaseFacts:
    """What the check reads from the server, in one query."""

    where: str  # host/database, for the messages (never the credentials)
    database: str
    server_version_num: int  # e.g. 150018
    server_version: str  # e.g. "15.18 (Debian 15.18-0+deb12u1)"
    vector_installed: str | None  # pg_extension.extversion in this database
    vector_available: str | None  # the version CREATE EXTENSION / ALTER EXTENSION … UPDATE would install
    btree_gin_available: bool


def parse_version(value: str) -> Version:
    """'0.8.0' → (0, 8, 0); a suffix such as '-dev' or ' (Debian …)' is ignored."""
    match = re.match(r"\d+(?:\.\d+)*", value.strip())
    if match is None:
        raise ValueError(f"not a version: {value!r}")
    return tuple(int(part) for part in match.group().split("."))


def format_version(version: Version) -> str:
    return ".".join(str(part) for part in version)


def postgres_problem(server_version_num: int, server_version: str, where: str) -> str | None:
    """None when the server is new enough; otherwise the message naming both versions."""
    major = server_version_num // 10000  # 150018 → 15 (the numbering since PostgreSQL 10)
    if major >= MIN_POSTGRES_MAJOR:
        return None
    shown = server_version.split(" ", 1)[0]
    return (
        f"PostgreSQL {shown} at {where} is too old: SynaptoMind needs PostgreSQL {MIN_POSTGRES_MAJOR} or newer "
        "(unique indexes with NULLS NOT DISTINCT)"
    )


def pgvector_problem(installed: Version | None, available: Version | None, database: str) -> str | None:
    """None when the installed pgvector (or, before the first migration, the one the server offers) will do."""
    needed = f"SynaptoMind needs pgvector {format_version(MIN_PGVECTOR)} or newer ({PGVECTOR_FEATURE})"
    if installed is not None:
        if installed >= MIN_PGVECTOR:
            return None
        found = f"pgvector {format_version(installed)} is installed in {database}"
        if available is not None and available >= MIN_PGVECTOR:
            # The server already has the files of a newer version: only the extension in this database lags.
            return (
                f"{found}: {needed}; the server offers {format_version(available)}: "
                f"upgrade the extension (ALTER EXTENSION vector UPDATE in {database})"
            )
        return (
            f"{found}: {needed}; upgrade the pgvector package on the server, "
            f"then the extension (ALTER EXTENSION vector UPDATE in {database})"
        )
    if available is None:
        return (
            f"pgvector is not installed in {database} and the server does not offer it "
            f"(no 'vector' in pg_available_extensions): {needed}; install the pgvector package on the "
            "database server (e.g. postgresql-<major>-pgvector, or the pgvector/pgvector image)"
        )
    if available >= MIN_PGVECTOR:
        return None  # the first migration creates it (CREATE EXTENSION IF NOT EXISTS vector)
    return (
        f"pgvector {format_version(available)} is available (not yet installed) in {database}: {needed}; "
        "upgrade the pgvector package on the server"
    )


def btree_gin_problem(available: bool, database: str) -> str | None:
    if available:
        return None
    return (
        f"the btree_gin extension is not available in {database}: SynaptoMind needs it (the full-text index "
        "over project and words); install PostgreSQL's contrib package on the database server"
    )


def problems(facts: DatabaseFacts) -> list[str]:
    """Every unmet requirement, so one run names them all."""
    found = [
        postgres_problem(facts.server_version_num, facts.server_version, facts.where),
        pgvector_problem(
            parse_version(facts.vector_installed) if facts.vector_installed else None,
            parse_version(facts.vector_available) if facts.vector_available else None,
            facts.database,
        ),
        btree_gin_problem(facts.btree_gin_available, facts.database),
    ]
    return [problem for problem in found if problem is not None]


def describe_location(url: str) -> str:
    """host[:port]/database of a URL, for messages: a Unix socket's directory stands for the host."""
    parsed = make_url(url)
    socket, query_port = parsed.query.get("host"), parsed.query.get("port")
    host = parsed.host or (socket if isinstance(socket, str) else None) or "localhost"
    port_number = parsed.port or (query_port if isinstance(query_port, str) else None)
    port = f":{port_number}" if port_number else ""
    return f"{host}{port}/{parsed.database or ''}"


async def read_facts(connection: AsyncConnection, where: str) -> DatabaseFacts:
    row = (await connection.execute(_FACTS)).mappings().one()
    return DatabaseFacts(
        where=where,
        database=row["database"],
        server_version_num=row["version_num"],
        server_version=row["version"],
        vector_installed=row["vector_installed"],
        vector_available=row["vector_available"],
        btree_gin_available=row["btree_gin"],
    )


async def check_connection(connection: AsyncConnection, where: str) -> DatabaseFacts:
    """The facts when every requirement holds; raises DatabaseRequirementError naming the unmet ones."""
    facts = await read_facts(connection, where)
    unmet = problems(facts)
    if unmet:
        raise DatabaseRequirementError(unmet)
    return facts


async def check_url(url: str) -> DatabaseFacts:
    # A plain engine, not app.db.engine.build_engine: its connect hook registers the vector codec and sets
    # hnsw.iterative_scan, which is exactly what fails on the servers this check is there to report.
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as connection:
            return await check_connection(connection, describe_location(url))
    finally:
        await engine.dispose()


def check_database(url: str) -> DatabaseFacts:
    """The synchronous form for the CLI, which checks before it migrates (outside any event loop)."""
    return asyncio.run(check_url(url))
