"""End to end over streamable HTTP: the real app under uvicorn, the official MCP client, bearer tokens."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest
from sqlalchemy import text

from app.db.engine import Database
from app.db.models import Role
from app.embedding.profiles import OFFLINE_E5
from app.services.auth.tokens import AuthService
from tests.support.contract import COMPACT_THOUGHT_KEYS, FULL_THOUGHT_KEYS
from tests.support.helpers import snapshot
from tests.support.http_server import RunningServer, payload, run_server
from tests.support.serving import mcp_session

TOOL_NAMES = [
    "memory_recall",
    "memory_store",
    "memory_supersede",
    "memory_status",
    "memory_manage",
    "edge_review",
    "retention_review",
    "memory_crystallize",
    "memory_reflect",
    "memory_primers",
    "memory_guide",
]
NO_CWD = "no cwd — the answer spans every project"
HOUR = timedelta(hours=1)


INVALID_TOKEN_CHALLENGE = (
    'Bearer realm="synaptomind", error="invalid_token", '
    'error_description="the bearer token is not valid (unknown, revoked or expired)"'
)


@pytest.fixture
async def server(database_url: str, clean_database: Database, tmp_path: Path) -> AsyncIterator[RunningServer]:
    async with run_server(database_url, clean_database, tmp_path) as running:
        yield running


# ---------------------------------------------------------------- tools/list


async def test_tools_list_advertises_the_eleven_tools(server: RunningServer) -> None:
    async with mcp_session(server.mcp_url, server.admin_token) as session:
        listing = await session.list_tools()
    assert [tool.name for tool in listing.tools] == TOOL_NAMES
    for tool in listing.tools:
        schema = tool.input_schema
        assert schema["type"] == "object"
        if tool.name == "memory_guide":
            assert "action" not in schema.get("properties", {})
        else:
            action = schema["properties"]["action"]
            # an enum of strings, its implied "type" left out (tests/unit/test_tool_schemas.py)
            assert action["enum"] and all(isinstance(name, str) for name in action["enum"]), tool.name
            assert schema["required"] == ["action"]
        # mcp-tools.md "Wire envelope": every tool declares the same output shape, {result: <payload>}
        assert tool.output_schema == {
            "type": "object",
            "properties": {"result": {"type": "object"}},
            "required": ["result"],
        }, tool.name
        # hints at the protocol's defaults are left out; a closed world is always said
        assert tool.annotations is not None and tool.annotations.open_world_hint is False, tool.name
        read_only = tool.name in {"memory_recall", "memory_status", "memory_guide"}
        assert bool(tool.annotations.read_only_hint) is read_only, tool.name
        assert tool.description, tool.name
    manage = next(tool for tool in listing.tools if tool.name == "memory_manage")
    assert manage.input_schema["properties"]["action"]["enum"] == [
        "list",
        "create",
        "update",
        "delete",
        "resolve",
    ]
    assert manage.input_schema["properties"]["fields"]["description"] == "only these project fields"
    listed = json.dumps(listing.model_dump(mode="json", by_alias=True, exclude_none=True), ensure_ascii=False)
    assert len(listed) < 24_000, len(listed)


# ---------------------------------------------------------------- writes and reads through the client


async def test_project_and_thoughts_round_trip(server: RunningServer) -> None:
    async with mcp_session(server.mcp_url, server.admin_token) as session:
        created = payload(
            await session.call_tool(
                "memory_manage",
                {"action": "create", "name": "E2E", "local_path": "/srv/e2e/", "description": "d"},
            )
        )
        project = created["item"]
        assert set(project) == {"id", "name", "local_path", "description", "is_default", "created_at"}
        assert (project["name"], project["local_path"], project["description"], project["is_default"]) == (
            "E2E",
            "/srv/e2e",
            "d",
            False,
        )
        assert created["meta"] == {
            "action": "create",
            "scope": None,
            "counts": {"total": 1, "returned": 1, "filtered_out": 0},
            "degraded": False,
            "warnings": [],
        }
        scope = {"project": project["id"], "project_name": "E2E", "global": False}

        one = payload(
            await session.call_tool(
                "memory_store",
                {
                    "action": "create",
                    "content": "E2E marker: the first thought",
                    "tags": ["e2e"],
                    "cwd": "/srv/e2e/src",
                },
            )
        )
        thought = one["item"]
        assert set(thought) == FULL_THOUGHT_KEYS
        admin_id = await _user_id(server.database, "admin")
        assert {key: thought[key] for key in ("content", "status", "tags", "project", "project_id", "created_by")} == {
            "content": "E2E marker: the first thought",
            "status": "active",
            "tags": ["e2e"],
            "project": "E2E",
            "project_id": project["id"],
            "created_by": admin_id,
        }
        assert (thought["is_protected"], thought["is_global"], thought["is_cluster"]) == (False, False, False)
        assert one["meta"] == {
            "action": "create",
            "scope": scope,
            "counts": {"total": 1, "returned": 1, "filtered_out": 0},
            "degraded": False,
            "warnings": [],
        }

        bulk = payload(
            await session.call_tool(
                "memory_store",
                {
                    "action": "bulk_create",
                    "cwd": "/srv/e2e",
                    "thoughts": [
                        {"content": "E2E bulk one", "tags": ["bulk"]},
                        {"content": ""},
                        {"content": "E2E bulk two", "status": "draft"},
                    ],
                },
            )
        )
        rows = bulk["items"]
        assert [(row["index"], row["status"]) for row in rows] == [
            (0, "created"),
            (1, "failed"),
            (2, "created"),
        ]
        assert rows[0]["thought"] == {
            "id": rows[0]["thought"]["id"],
            "content": "E2E bulk one",
            "status": "active",
            "tags": ["bulk"],
            "project": "E2E",
        }
        assert rows[2]["thought"]["status"] == "draft"
        assert set(rows[1]) == {"index", "status", "error"} and "thoughts[1].content" in rows[1]["error"]
        assert bulk["meta"] == {
            "action": "bulk_create",
            "scope": scope,
            "counts": {"created": 2, "failed": 1, "total": 3, "returned": 3, "filtered_out": 0},
            "degraded": False,
            "warnings": [],
        }

        got = payload(await session.call_tool("memory_recall", {"action": "get", "thought_id": thought["id"]}))
        assert got == {
            "item": {
                "id": thought["id"],
                "content": "E2E marker: the first thought",
                "status": "active",
                "tags": ["e2e"],
                "project": "E2E",
            },
            "meta": {
                "action": "get",
                "scope": None,
                "counts": {"total": 1, "returned": 1, "filtered_out": 0},
                "degraded": False,
                "warnings": [],
            },
        }

        listed = payload(await session.call_tool("memory_recall", {"action": "list", "limit": 2}))
        assert len(listed["items"]) == 2
        assert all(set(item) == COMPACT_THOUGHT_KEYS for item in listed["items"])
        assert listed["meta"] == {
            "action": "list",
            "scope": None,
            "counts": {"limit": 2, "offset": 0, "total": 3, "returned": 2, "filtered_out": 1},
            "degraded": False,
            "warnings": [NO_CWD],
        }
        scoped = payload(await session.call_tool("memory_recall", {"action": "list", "cwd": "/srv/e2e"}))
        assert sorted(item["content"] for item in scoped["items"]) == [
            "E2E bulk one",
            "E2E bulk two",
            "E2E marker: the first thought",
        ]
        assert scoped["meta"]["scope"] == scope and scoped["meta"]["warnings"] == []
    assert await server.count("thought") == 3


async def _user_id(database: Database, name: str) -> str:
    async with database.unit_of_work() as session:
        value = (await session.execute(text("SELECT id FROM app_user WHERE name = :n"), {"n": name})).scalar_one()
    return str(value)


# ---------------------------------------------------------------- roles


async def test_reader_cannot_create_and_nothing_is_written(server: RunningServer) -> None:
    reader = await server.token_for("rita", Role.reader)
    async with mcp_session(server.mcp_url, reader) as session:
        listed = payload(await session.call_tool("memory_manage", {"action": "list"}))
        before = await snapshot(server.context)
        refused = await session.call_tool("memory_store", {"action": "create", "content": "not allowed"})
        refused_bulk = await session.call_tool(
            "memory_store", {"action": "bulk_create", "thoughts": [{"content": "not allowed either"}]}
        )
    assert await snapshot(server.context) == before
    assert before["thought"] == 0
    assert [project["name"] for project in listed["items"]] == ["default"]
    for answer, action in ((refused, "create"), (refused_bulk, "bulk_create")):
        assert answer.is_error is True
        message = f"Forbidden: memory_store action={action} needs the writer role; user 'rita' is a reader"
        assert [getattr(block, "text", None) for block in answer.content] == [message]
        assert answer.structured_content == {
            "result": {"error": {"message": message, "statusCode": 403, "retryable": False}}
        }


# ---------------------------------------------------------------- plain HTTP: auth, health, host check

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "e2e", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def test_missing_bad_revoked_and_expired_tokens_get_the_same_401(server: RunningServer) -> None:
    revoked = await server.token_for("gone", Role.writer)
    async with server.database.unit_of_work() as session:
        expired, _ = await AuthService(session).create_token("late", Role.writer, "e2e", datetime.now(UTC) + HOUR)
    async with httpx2.AsyncClient(base_url=server.base_url, timeout=10) as http:
        for token in (revoked, expired):
            before = await http.get("/api/health-check", headers={"Authorization": f"Bearer {token}"})
            assert before.status_code == 200, before.text
        async with server.database.unit_of_work() as session:
            auth = AuthService(session)
            [row] = [row for row in await auth.list_tokens() if row.user_name == "gone"]
            await auth.revoke(str(row.id))
            # Its hour passes: expires_at is checked on every request, not when the token was first seen.
            await session.execute(
                text(
                    "UPDATE api_token SET expires_at = now() - interval '1 second'"
                    " FROM app_user WHERE app_user.id = api_token.user_id AND app_user.name = 'late'"
                )
            )
        cases: dict[str, dict[str, str]] = {
            "none": {},
            "bad": {"Authorization": "Bearer smt_not-a-real-token"},
            "empty": {"Authorization": "Bearer"},
            "not bearer": {"Authorization": f"Basic {server.admin_token}"},
            "revoked": {"Authorization": f"Bearer {revoked}"},
            "expired": {"Authorization": f"Bearer {expired}"},
        }
        for name, headers in cases.items():
            answer = await http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **headers})
            assert answer.status_code == 401, (name, answer.text)
            # RFC 6750 §3.1: a token was sent and is not valid (unknown, revoked, expired: told apart in no way)
            # → error="invalid_token"; no credentials → no error code.
            presented = name in ("bad", "revoked", "expired")
            assert answer.headers["www-authenticate"] == (
                INVALID_TOKEN_CHALLENGE if presented else 'Bearer realm="synaptomind"'
            )
            assert answer.json() == {
                "error": "Unauthorized: send 'Authorization: Bearer <token>' "
                "(create one with `synaptomind token create`)"
            }
            check = await http.get("/api/health-check", headers=headers)
            assert check.status_code == 401, (name, check.text)
        allowed = await http.get("/api/health-check", headers={"Authorization": f"Bearer {server.admin_token}"})
    assert allowed.status_code == 200
    assert {"health_score", "summary", "categories"} <= set(allowed.json())
    assert await server.count("thought") == 0


async def test_a_token_in_use_shows_when_it_was_last_used(
    database_url: str, clean_database: Database, tmp_path: Path
) -> None:
    """Not written by the requests: kept in memory, flushed once a minute and when the server stops."""
    async with clean_database.unit_of_work() as session:
        token, _ = await AuthService(session).create_token("user-of-the-day", Role.reader, "e2e")

    async def last_used() -> Any:
        async with clean_database.unit_of_work() as session:
            [row] = [row for row in await AuthService(session).list_tokens() if row.user_name == "user-of-the-day"]
            return row.last_used_at

    started = datetime.now(UTC)
    async with run_server(database_url, clean_database, tmp_path) as running:
        async with httpx2.AsyncClient(base_url=running.base_url, timeout=10) as http:
            headers = {"Authorization": f"Bearer {token}"}
            for _ in range(5):
                assert (await http.get("/api/health-check", headers=headers)).status_code == 200
        assert await last_used() is None  # within the minute: nothing written yet
    used = await last_used()  # the shutdown's flush
    assert used is not None and started < used < datetime.now(UTC)


async def test_health_needs_no_token(server: RunningServer) -> None:
    async with httpx2.AsyncClient(base_url=server.base_url, timeout=10) as http:
        answer = await http.get("/health")
    assert answer.status_code == 200
    body = answer.json()
    assert set(body) == {"status", "checks"}
    assert body["status"] == "ok"
    assert set(body["checks"]) == {"database", "embedder"}
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["embedder"]["state"] == "ready"
    assert body["checks"]["embedder"]["active_model"] == OFFLINE_E5


async def test_unknown_host_header_is_refused_with_421(server: RunningServer) -> None:
    auth = {**MCP_HEADERS, "Authorization": f"Bearer {server.admin_token}"}
    port = server.base_url.rsplit(":", 1)[1]
    async with httpx2.AsyncClient(base_url=server.base_url, timeout=10) as http:
        for host in (
            "evil.example:80",
            f"evil.example:{port}",
            "evil.example",
            f"localhost.evil.example:{port}",
        ):
            evil = await http.post("/mcp", json=INITIALIZE, headers={**auth, "Host": host})
            assert (evil.status_code, evil.text) == (421, "Invalid Host header"), host
        origin = await http.post("/mcp", json=INITIALIZE, headers={**auth, "Origin": "http://evil.example"})
        assert (origin.status_code, origin.text) == (403, "Invalid Origin header")
        for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
            good = await http.post("/mcp", json=INITIALIZE, headers={**auth, "Host": host})
            assert good.status_code == 200, (host, good.text)
            assert good.json()["result"]["serverInfo"]["name"] == "synaptomind"
        local_origin = await http.post("/mcp", json=INITIALIZE, headers={**auth, "Origin": f"http://localhost:{port}"})
        assert local_origin.status_code == 200, local_origin.text


async def test_first_start_bootstraps_an_admin_token_file(server: RunningServer, tmp_path: Path) -> None:
    token_file = tmp_path / "admin.token"
    assert token_file.stat().st_mode & 0o777 == 0o600
    assert server.admin_token.startswith("smt_")
    async with server.database.unit_of_work() as session:
        rows = (await session.execute(text("SELECT name, role::text FROM app_user"))).all()
        principal = await AuthService(session).verify(server.admin_token)
    assert [tuple(row) for row in rows] == [("admin", "admin")]
    assert principal is not None and (principal.name, principal.role) == ("admin", Role.admin)


async def test_no_bootstrap_admin_when_a_user_exists(
    database_url: str, clean_database: Database, tmp_path: Path
) -> None:
    async with clean_database.unit_of_work() as session:
        token, _ = await AuthService(session).create_token("ops", Role.admin, "pre-existing")
    async with run_server(database_url, clean_database, tmp_path) as running:
        assert not (tmp_path / "admin.token").exists()
        async with mcp_session(running.mcp_url, token) as session:
            listing = await session.list_tools()
    assert len(listing.tools) == 11
    async with clean_database.unit_of_work() as session:
        names = (await session.execute(text("SELECT name FROM app_user"))).scalars().all()
    assert names == ["ops"]
