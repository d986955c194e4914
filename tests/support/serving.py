"""The app under uvicorn in the test's event loop; the MCP client session is bench.common's."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from app.config import Settings
from app.main import build_context, create_http_app
from app.services.context import AppContext
from bench.common import loopback_listener, mcp_session, uvicorn_serving
from tests.conftest import MODEL_CACHE

__all__ = ["mcp_session", "serving"]


@asynccontextmanager
async def serving(database_url: str, data_dir: Path, **overrides: Any) -> AsyncIterator[tuple[int, AppContext]]:
    """`create_http_app` under uvicorn on a free loopback port (token auth, the default model, these overrides).

    Yields the port and the server's context once uvicorn listens and the embedder is ready.
    """
    listener, port = loopback_listener()
    values: dict[str, Any] = {
        "auth": {"mode": "token"},
        "database_url": database_url,
        "embedding": {"cache_dir": MODEL_CACHE},
        "data_dir": data_dir,
        "port": port,
        "pool_size": 2,
        **overrides,
    }
    settings = Settings(_env_file=None, **values)  # no developer .env in the test
    context = build_context(settings, database_url)
    try:
        async with uvicorn_serving(create_http_app(settings, context), listener):
            assert await context.embedding.wait_ready(30), context.embedding.note
            yield port, context
    finally:
        # The server froze what it held once its model was loaded (app.main.freeze_long_lived: once per process in
        # production). Here the process goes on to serve again, and the frozen server (its model, ~450 MB, and an
        # ONNX thread) would stay alive until the suite ends: 17.5 GB of RSS for `make test`.
        gc.unfreeze()
