"""Read replicas (`SYNAPTO_READ_DATABASE_URLS`, app/db/replicas.py) on loopback: a `pg_basebackup -R` standby of
the embedded test server. Read-your-writes holds on every read, a replica behind the write is passed over, a
replica lost under a read or killed mid-run costs no call, and /health shows each replica's lag."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError
from sqlalchemy import text
from starlette.requests import Request

from app.config import Settings
from app.db.engine import Database, build_engine
from app.db.models import Role
from app.db.replicas import CONNECT_TIMEOUT_SECONDS, ReplicaSet, on_replica, retried_on_primary
from app.http.app import health_endpoint
from app.main import settings_view
from app.services.context import AppContext
from tests.conftest import make_user
from tests.support.helpers import ToolCaller, own_transaction
from tests.support.standby import Standby, standby_of
from tests.support.team import team

ROUNDS = 1000  # the count: write, then read at once
WRITERS = 4  # at once, each on its own thought: the replica replays the others' writes meanwhile


def _started(database_url: str, port_offset: int) -> Standby:
    standby = standby_of(database_url, port_offset)
    if standby is None:
        pytest.skip("a standby is made of the embedded test server only (pg_basebackup with its own binaries)")
    # Throwaway data: without the fsync of each WAL write it receives, the standby replays within the wait bound
    # more often on a loaded machine, so more of the reads below take the replica path.
    standby.server_options = "-c fsync=off"
    return standby.start()


@pytest.fixture(scope="module")
def standby(database_url: str) -> Iterator[Standby]:
    running = _started(database_url, 1)
    yield running
    running.remove()


def _with_replica(context: AppContext, standby: Standby) -> AppContext:
    engine = build_engine(standby.url(), pool_size=5, connect_timeout=CONNECT_TIMEOUT_SECONDS)
    # The primary engine is the suite's (not disposed here); only the replica's is this test's.
    return dataclasses.replace(context, db=Database(context.db.engine, ReplicaSet.of([engine])))


@pytest.fixture
async def replicated(app_context: AppContext, standby: Standby) -> AsyncIterator[AppContext]:
    context = _with_replica(app_context, standby)
    yield context
    assert context.db.replicas is not None
    await context.db.replicas.dispose()


def routed(context: AppContext) -> dict[str, int]:
    assert context.db.replicas is not None
    return dict(context.db.replicas.routed)


async def writer_of(context: AppContext) -> ToolCaller:
    return ToolCaller(context, await make_user(context, "writer", Role.writer))


async def create(writer: ToolCaller, content: str) -> str:
    return str((await writer.ok("memory_store", {"action": "create", "content": content})).item["id"])


async def tag_then_read(writer: ToolCaller, thought_id: str, tag: str) -> list[str]:
    """Write, then read at once: the tags the read sees."""
    await writer.ok("memory_store", {"action": "update", "thought_id": thought_id, "tags": [tag]})
    answer = await writer.ok("memory_recall", {"action": "get", "thought_id": thought_id})
    return list(answer.item["tags"])


async def health(context: AppContext) -> tuple[int, dict[str, Any]]:
    response = await health_endpoint(context)(Request({"type": "http", "method": "GET", "headers": []}))
    return response.status_code, json.loads(bytes(response.body))


async def caught_up(context: AppContext) -> dict[str, Any]:
    """The replica's /health entry once it has replayed all the primary flushed (the box may be busy): up to 30 s,
    each read after forgetting a pass-over that a read behind it meanwhile made, so a busy box cannot leave it
    `passed_over` at the one read that counts."""
    assert context.db.replicas is not None
    replica: dict[str, Any] = {}
    for _ in range(600):
        for each in context.db.replicas.replicas:
            each.skip_until = 0.0
        (replica,) = (await health(context))[1]["checks"]["replicas"]
        if replica["lag_bytes"] == 0 and replica["state"] == "ok":
            break
        await asyncio.sleep(0.05)
    return dict(replica)


async def test_every_read_sees_the_write_just_before_it(replicated: AppContext) -> None:
    writer = await writer_of(replicated)
    thoughts = [
        await create(writer, f"The release checklist of team {n} lives in the ops wiki") for n in range(WRITERS)
    ]
    await caught_up(replicated)

    async def rounds(thought_id: str) -> list[int]:
        tag = thought_id[-6:]
        return [
            n
            for n in range(ROUNDS // WRITERS)
            if await tag_then_read(writer, thought_id, f"{tag}-{n}") != [f"{tag}-{n}"]
        ]

    stale = await asyncio.gather(*(rounds(thought_id) for thought_id in thoughts))
    assert stale == [[]] * WRITERS
    # The reads did run on the replica (on this shared box some may wait past the bound and go to the primary).
    assert routed(replicated).get("replica", 0) > 0, routed(replicated)


async def test_a_replica_behind_the_write_is_passed_over(replicated: AppContext, standby: Standby) -> None:
    writer = await writer_of(replicated)
    thought_id = await create(writer, "Staging deploys run from the release branch")
    await asyncio.to_thread(standby.psql, "SELECT pg_wal_replay_pause()")
    try:
        # Read on the paused replica, the write would be missing: the read waits its few ms, then runs on the primary.
        assert await tag_then_read(writer, thought_id, "while-paused") == ["while-paused"]
        assert routed(replicated).get("behind", 0) >= 1
        status, body = await health(replicated)
        assert status == 200 and body["status"] == "ok"
        (replica,) = body["checks"]["replicas"]
        assert replica["replica"] == 1 and replica["lag_bytes"] > 0
        assert isinstance(replica["lag_seconds"], float) and replica["lag_seconds"] >= 0
    finally:
        await asyncio.to_thread(standby.psql, "SELECT pg_wal_replay_resume()")


async def test_a_replica_read_sees_only_the_callers_projects(replicated: AppContext) -> None:
    crew = await team(replicated)
    await caught_up(replicated)
    before = routed(replicated).get("replica", 0)
    secret_id = crew.secret.thought_ids[0]
    refused = await crew.bob("memory_recall", {"action": "get", "thought_id": secret_id})
    assert refused.error["statusCode"] == 404 and refused.error["message"] == f"Thought {secret_id} not found"
    found = await crew.bob.ok("memory_recall", {"action": "search", "query": "master key note"})
    ids = {item["thought"]["id"] for item in found.items}
    assert crew.global_thought_id in ids and not ids & set(crew.secret.thought_ids + crew.vault.thought_ids)
    assert (await crew.carl.ok("memory_recall", {"action": "get", "thought_id": secret_id})).item["id"] == secret_id
    assert routed(replicated).get("replica", 0) > before  # the reads above did take the replica path
    # Hits counted on the primary after a replica read follow the same rule: bob is no member of `secret`, so the
    # global thought of it he found counts none; carl, a member, counts his get.
    hits = await count_hits(replicated)
    assert crew.global_thought_id not in hits and hits.get(secret_id) == 1


async def count_hits(context: AppContext) -> dict[str, int]:
    async with own_transaction(context) as session:
        found = await session.execute(text("SELECT thought_id::text, hit_count FROM thought_hit"))
        return {row.thought_id: row.hit_count for row in found}


async def test_health_reports_each_replica_beside_the_existing_checks(replicated: AppContext) -> None:
    status, body = await health(replicated)
    assert status == 200
    assert body["status"] == "ok" and body["checks"]["database"] == "ok" and "state" in body["checks"]["embedder"]
    (replica,) = body["checks"]["replicas"]
    assert set(replica) == {"replica", "state", "lag_bytes", "lag_seconds"}
    assert await caught_up(replicated) == {"replica": 1, "state": "ok", "lag_bytes": 0, "lag_seconds": 0.0}


async def test_health_without_replicas_keeps_its_shape(app_context: AppContext) -> None:
    status, body = await health(app_context)
    assert status == 200 and set(body["checks"]) == {"database", "embedder"}


async def test_a_read_lost_on_the_replica_runs_again_on_the_primary(replicated: AppContext, standby: Standby) -> None:
    where: list[bool] = []
    terminate = (
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
        " WHERE application_name = 'synaptomind' AND pid <> pg_backend_pid()"
    )

    await caught_up(replicated)

    async def read() -> int:
        async with replicated.db.reading() as session:
            where.append(on_replica(session))
            if on_replica(session):  # the replica's backend goes away under the open unit of work
                await asyncio.to_thread(standby.psql, terminate)
            return int((await session.execute(text("SELECT 1"))).scalar_one())

    assert await retried_on_primary(read, lambda: True) == 1
    assert where == [True, False]
    assert routed(replicated).get("lost", 0) == 1


async def test_a_killed_replica_costs_no_call(app_context: AppContext, database_url: str) -> None:
    standby = _started(database_url, 2)
    context = _with_replica(app_context, standby)
    try:
        writer = await writer_of(context)
        thoughts = [await create(writer, f"Service {n} pages the on-call rota first") for n in range(4)]
        failures: list[str] = []
        killed = asyncio.Event()

        async def run(thought_id: str, rounds: int, kill_at: int | None) -> None:
            for n in range(rounds):
                if n == kill_at:
                    await asyncio.to_thread(standby.stop, "immediate")
                    killed.set()
                tag = f"{thought_id[-6:]}-{n}"
                answer = await writer("memory_store", {"action": "update", "thought_id": thought_id, "tags": [tag]})
                read = await writer("memory_recall", {"action": "get", "thought_id": thought_id})
                if answer.is_error or read.is_error or read.item["tags"] != [tag]:
                    failures.append(f"round {n}: {answer.text[:200]} / {read.text[:200]}")

        await asyncio.gather(*(run(t, 30, 10 if i == 0 else None) for i, t in enumerate(thoughts)))
        assert killed.is_set()
        assert failures == []
        counts = routed(context)
        assert counts.get("down", 0) + counts.get("lost", 0) >= 1, counts
        status, body = await health(context)
        assert status == 200 and body["checks"]["replicas"] == [
            {"replica": 1, "state": "unavailable", "lag_bytes": None, "lag_seconds": None}
        ]
    finally:
        assert context.db.replicas is not None
        await context.db.replicas.dispose()
        await asyncio.to_thread(standby.remove)


def test_the_read_urls_setting_is_a_comma_separated_list() -> None:
    urls = "postgresql+asyncpg://app:pw1@replica-a:5432/synaptomind, postgresql+asyncpg://app:pw2@replica-b/synaptomind"
    settings = Settings(_env_file=None, read_database_urls=SecretStr(urls))  # type: ignore[call-arg]
    assert settings.read_urls() == [
        "postgresql+asyncpg://app:pw1@replica-a:5432/synaptomind",
        "postgresql+asyncpg://app:pw2@replica-b/synaptomind",
    ]
    shown = settings_view(settings, "postgresql+asyncpg://app:pw@primary/synaptomind")["read_database_urls"]
    assert (
        shown
        == "postgresql+asyncpg://app:****@replica-a:5432/synaptomind,postgresql+asyncpg://app:****@replica-b/synaptomind"
    )
    assert Settings(_env_file=None, read_database_urls=SecretStr("")).read_urls() == []  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="read database URLs"):
        Settings(_env_file=None, read_database_urls=SecretStr("replica-a:5432"))  # type: ignore[call-arg]
