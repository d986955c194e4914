"""The app under uvicorn in the test's event loop, and the official MCP client over streamable HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import uvicorn
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from app.config import Settings
from app.embedding.profiles import OFFLINE_MINILM
from app.main import build_context, create_http_app
from app.services.context import AppContext
from tests.conftest import MODEL_CACHE


class QuietServer(uvicorn.Server):
    """A uvicorn server that leaves the test runner's signal handlers alone."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@asynccontextmanager
async def serving(database_url: str, data_dir: Path, **overrides: Any) -> AsyncIterator[tuple[int, AppContext]]:
    """`create_http_app` under uvicorn on a free loopback port (token auth, offline model, these overrides).

    Yields the port and the server's context once uvicorn listens and the embedder is ready.
    """
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    values: dict[str, Any] = {
        "auth": {"mode": "token"},
        "database_url": database_url,
        "embedding": {"model": OFFLINE_MINILM, "cache_dir": MODEL_CACHE},
        "data_dir": data_dir,
        "port": port,
        "pool_size": 2,
        **overrides,
    }
    settings = Settings(_env_file=None, **values)  # no developer .env in the test
    context = build_context(settings, database_url)
    server = QuietServer(uvicorn.Config(create_http_app(settings, context), log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[listener]))
    try:
        async with asyncio.timeout(30):
            while not server.started:
                if task.done():
                    task.result()
                    raise RuntimeError("uvicorn stopped before it started")
                await asyncio.sleep(0.02)
        assert await context.embedding.wait_ready(30), context.embedding.note
        yield port, context
    finally:
        server.should_exit = True
        try:
            await asyncio.wait_for(task, 15)
        except TimeoutError:
            server.force_exit = True
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        listener.close()


@asynccontextmanager
async def mcp_session(url: str, token: str) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session
