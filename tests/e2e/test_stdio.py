"""End to end over stdio: `synaptomind stdio` as a subprocess, driven by the official MCP client."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult
from sqlalchemy import text

from app.db.engine import Database
from tests.conftest import MODEL_CACHE

# The code under test is this checkout's (the server's cwd is a temporary dir, away from a developer's .env).
CHECKOUT = Path(__file__).resolve().parents[2]
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


def payload(result: CallToolResult) -> Any:
    texts = "".join(getattr(block, "text", "") for block in result.content)
    assert not result.is_error, texts
    assert result.structured_content is not None
    assert json.loads(texts) == result.structured_content["result"]
    return result.structured_content["result"]


def stdio_server(database_url: str, data_dir: Path, **variables: str) -> StdioServerParameters:
    """`python -m app stdio` of this checkout on the test database and the prepared models, with these variables."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "app", "stdio"],
        env={
            "SYNAPTO_DATABASE_URL": database_url,
            "SYNAPTO_DATA_DIR": str(data_dir),
            "SYNAPTO_EMBEDDING__CACHE_DIR": str(MODEL_CACHE),
            "PYTHONPATH": str(CHECKOUT),
            **variables,
        },
        cwd=data_dir,
    )


async def test_stdio_lists_tools_and_round_trips_a_thought(
    database_url: str, clean_database: Database, tmp_path: Path
) -> None:
    params = stdio_server(database_url, tmp_path, SYNAPTO_LOG_LEVEL="WARNING")
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        initialized = await session.initialize()
        assert initialized.server_info.name == "synaptomind"
        listing = await session.list_tools()
        assert [tool.name for tool in listing.tools] == TOOL_NAMES

        created = payload(
            await session.call_tool(
                "memory_store", {"action": "create", "content": "stdio marker thought", "tags": ["stdio"]}
            )
        )
        thought = created["item"]
        assert created["meta"] == {
            "action": "create",
            "scope": None,
            "counts": {"total": 1, "returned": 1, "filtered_out": 0},
            "degraded": False,
            "warnings": [],
        }
        got = payload(
            await session.call_tool("memory_recall", {"action": "get", "thought_id": thought["id"], "compact": False})
        )

    async with clean_database.unit_of_work() as session_db:
        local = (await session_db.execute(text("SELECT id, role::text FROM app_user WHERE name = 'local'"))).one()
        default_id = (await session_db.execute(text("SELECT id FROM project WHERE is_default"))).scalar_one()
    assert local.role == "admin"
    expected = {
        "id": thought["id"],
        "content": "stdio marker thought",
        "status": "active",
        "tags": ["stdio"],
        "project": "default",
        "project_id": str(default_id),
        "importance": 1.0,
        "is_protected": False,
        "is_global": False,
        "is_cluster": False,
        "surface_after": None,
        "archived_at": None,
        "created_by": str(local.id),
        "created_at": thought["created_at"],
        "updated_at": thought["updated_at"],
    }
    assert thought == expected
    assert got == {
        "item": expected,
        "meta": {
            "action": "get",
            "scope": None,
            "counts": {"total": 1, "returned": 1, "filtered_out": 0},
            "degraded": False,
            "warnings": [],
        },
    }


async def test_stdio_starts_without_an_error_line_for_the_expected_model_fallback(
    database_url: str, clean_database: Database, tmp_path: Path
) -> None:
    """The shipped model settings on a cache without the configured model: the service falls back to the offline
    one, as documented. fastembed logs that probe as two ERROR lines (loguru, its own format); a start prints no
    ERROR for an expected condition, and every line in our format (issue 22). The handshake and tools/list answer
    while the embedder loads; a call during the load answers as for a loading embedder."""
    params = stdio_server(database_url, tmp_path, SYNAPTO_LOG_LEVEL="INFO", SYNAPTO_LOG_FORMAT="text")
    stderr = tmp_path / "stderr.txt"
    with stderr.open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            listing = await session.list_tools()
            assert [tool.name for tool in listing.tools] == TOOL_NAMES
            state = "loading"
            for _ in range(600):  # until the embedder's loading ended: its log lines are written by then
                config = await session.call_tool("memory_status", {"action": "config"})
                assert config.structured_content is not None and not config.is_error
                text = config.structured_content["result"]["item"]["text"]
                state = text.split("embedder.state = ", 1)[1].split("\n", 1)[0]
                if state != "loading":
                    break
                await asyncio.sleep(0.1)
            assert state in ("ready", "fallback"), state
    lines = [line for line in stderr.read_text().splitlines() if line and not line.startswith(" ")]
    assert lines, "no log line at INFO"
    odd = [line for line in lines if not re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ [\w.]+: ", line)]
    assert not odd, odd
    assert not [line for line in lines if " ERROR " in line or "Traceback" in line], lines
