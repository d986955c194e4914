"""Metrics (Prometheus text format), request ids and structured JSON logs."""

from __future__ import annotations

import contextvars
import json
import logging
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

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
