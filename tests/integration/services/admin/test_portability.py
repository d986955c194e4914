"""export / import: a populated database round-trips byte for byte, and import is idempotent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from app.db import migrations
from app.db.engine import Database, build_engine
from app.services.admin.portability import Portability
from tests.support.helpers import ToolCaller


@pytest.fixture
async def second_database(database_url: str) -> AsyncIterator[Database]:
    """A fresh, migrated database on the same server, dropped afterwards."""
    url = make_url(database_url)
    admin = create_async_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    async with admin.connect() as connection:
        await connection.execute(text("DROP DATABASE IF EXISTS portability_copy"))
        await connection.execute(text("CREATE DATABASE portability_copy"))
    copy_url = url.set(database="portability_copy").render_as_string(hide_password=False)
    await asyncio.to_thread(migrations.upgrade, copy_url)
    database = Database(build_engine(copy_url, pool_size=2))
    yield database
    await database.dispose()
    async with admin.connect() as connection:
        await connection.execute(text("DROP DATABASE IF EXISTS portability_copy WITH (FORCE)"))
    await admin.dispose()


async def populate(writer: ToolCaller) -> dict[str, Any]:
    await writer.ok("memory_manage", {"action": "create", "name": "Demo", "local_path": "/srv/demo"})
    made = await writer.ok(
        "memory_store",
        {
            "action": "bulk_create",
            "cwd": "/srv/demo",
            "thoughts": [
                {"content": "We deploy with docker compose", "tags": ["ops"]},
                {
                    "content": "Ünïcode survives: 日本語 and emoji 🚀",
                    "url_links": [{"text": "adr", "url": "https://example.org/adr"}],
                },
                {"content": "A draft idea", "status": "draft", "is_protected": True},
            ],
        },
    )
    ids = [row["thought"]["id"] for row in made.items]
    await writer.ok(
        "memory_store", {"action": "link", "source_id": ids[0], "target_id": ids[1], "edge_type": "supports"}
    )
    await writer.ok(
        "memory_reflect", {"action": "reflect", "cwd": "/srv/demo", "summary": "first session", "goals_add": ["ship"]}
    )
    await writer.ok("memory_reflect", {"action": "reflect", "summary": "global note"})
    for _ in range(5):  # the fifth hit promotes a primer
        await writer.ok("memory_recall", {"action": "get", "thought_id": ids[0]})
    return {"ids": ids}


async def export_lines(database: Database) -> list[str]:
    async with database.unit_of_work() as session:
        return [line async for line in Portability(session).export(None)]


async def test_round_trip_reexports_byte_identically_and_import_is_idempotent(
    writer: ToolCaller, second_database: Database
) -> None:
    await populate(writer)
    first = await export_lines(writer.context.db)
    kinds = {line.split('"kind":"')[1].split('"')[0] for line in first}
    assert kinds == {"project", "thought", "url_link", "edge", "slot", "primer"}

    async with second_database.unit_of_work() as session:
        inserted = await Portability(session).import_lines(first)
    assert sum(inserted.values()) == len(first)
    second = await export_lines(second_database)
    assert "\n".join(second).encode() == "\n".join(first).encode()

    async with second_database.unit_of_work() as session:
        again = await Portability(session).import_lines(first)
    assert again == {kind: 0 for kind in again}
    assert await export_lines(second_database) == first


async def test_one_project_export_keeps_only_its_rows(writer: ToolCaller) -> None:
    await populate(writer)
    await writer.ok("memory_store", {"action": "create", "content": "in the default project"})
    async with writer.context.db.unit_of_work() as session:
        project_id = (await session.execute(text("SELECT id FROM project WHERE name = 'Demo'"))).scalar_one()
        lines = [line async for line in Portability(session).export(project_id)]
    assert not any("in the default project" in line for line in lines)
    assert sum('"kind":"project"' in line for line in lines) == 1


async def test_a_row_that_lives_in_its_thoughts_project_is_imported_into_it(
    writer: ToolCaller, second_database: Database
) -> None:
    """An edge, url link or primer line naming another project than its thought's (a file written before migration
    0026, or by hand) is imported into its thought's project, where the service keeps such rows."""
    await populate(writer)
    lines = await export_lines(writer.context.db)
    default = next(line for line in lines if '"kind":"project"' in line and '"is_default":true' in line)
    default_id = default.split('"id":"')[1].split('"')[0]
    strayed = [
        line.replace(line.split('"project_id":"')[1].split('"')[0], default_id, 1)
        if any(f'"kind":"{kind}"' in line for kind in ("edge", "url_link", "primer"))
        else line
        for line in lines
    ]
    assert strayed != lines
    async with second_database.unit_of_work() as session:
        await Portability(session).import_lines(strayed)
    assert await export_lines(second_database) == lines
