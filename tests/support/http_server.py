"""A real `synaptomind serve` on a loopback port for e2e tests, and the payload of a tool answer."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_types import CallToolResult
from sqlalchemy import text

from app.db.engine import Database
from app.db.models import Role
from app.services.auth.tokens import AuthService
from app.services.context import AppContext
from tests.support.serving import serving


@dataclass(frozen=True)
class RunningServer:
    base_url: str
    admin_token: str
    database: Database
    context: AppContext  # the server's context, on the test's own engine: for `snapshot`

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}/mcp"

    async def token_for(self, name: str, role: Role) -> str:
        async with self.database.unit_of_work() as session:
            token, _ = await AuthService(session).create_token(name, role, "e2e")
        return token

    async def count(self, table: str) -> int:
        async with self.database.unit_of_work() as session:
            return int((await session.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one())


@asynccontextmanager
async def run_server(database_url: str, database: Database, data_dir: Path) -> AsyncIterator[RunningServer]:
    """`serve` in-process: the app of `create_http_app` under uvicorn on a free loopback port."""
    async with serving(database_url, data_dir) as (port, context):
        token_file = data_dir / "admin.token"
        token = token_file.read_text().strip() if token_file.exists() else ""
        view = dataclasses.replace(context, db=database)
        yield RunningServer(f"http://127.0.0.1:{port}", token, database, view)


def payload(result: CallToolResult) -> Any:
    """The envelope of a successful call; content[].text mirrors structuredContent.result."""
    texts = "".join(getattr(block, "text", "") for block in result.content)
    assert not result.is_error, texts
    assert result.structured_content is not None
    assert json.loads(texts) == result.structured_content["result"]
    return result.structured_content["result"]
