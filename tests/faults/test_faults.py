"""Fault tests (issue 6, part 2): PostgreSQL stopped under load, the embedder failing, a client hanging up.

Each runs the same check as its harness mode (`python -m bench.load --fault postgres|embedder|disconnect`,
see bench/faults.py) on a smaller scale, so `make test` proves them on every run.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from app.db.engine import Database
from app.embedding.runtime import EmbeddingRuntime
from bench.faults import disconnect_fault, embedder_fault, postgres_fault


async def test_postgres_stopped_and_restarted_under_load() -> None:
    """Its own embedded cluster (the shared test database stays up): a retryable 503 while down, < 2 s each;
    recovery by itself after the restart; nothing acknowledged lost."""
    with tempfile.TemporaryDirectory(prefix="synapto-pgfault-") as work_dir:
        result = await postgres_fault(Path(work_dir), clients=3, phase=2.0)
    assert result.passed, result.line()
    assert result.details["calls_while_down"] > 0
    assert result.details["lost"] == 0


async def test_embedder_unavailable_then_failing_then_back(
    database_url: str, clean_database: Database, embedding_runtime: EmbeddingRuntime, tmp_path: Path
) -> None:
    """Writes accepted with the vector pending, searches `degraded: true`, the backfill fills every vector."""
    assert embedding_runtime.embedder is not None
    result = await embedder_fault(database_url, tmp_path, embedding_runtime.embedder)
    assert result.passed, result.line()
    assert result.details["pending_while_down"] == result.details["written_while_down"] == 46


async def test_client_disconnect_mid_bulk_create_commits_or_rolls_back_whole(
    database_url: str, clean_database: Database, tmp_path: Path
) -> None:
    """2000 thoughts (with url links) cut mid-transaction and at arbitrary moments: 0 or 2000 rows, never between."""
    result = await disconnect_fault(database_url, tmp_path)
    assert result.passed, result.line()
    assert set(result.details) >= {"cut-locked", "cut-0.3", "cut-1.0"}


class _ServerError(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


class _Context:
    def __init__(self, sqlstate: str) -> None:
        self.original_exception = _ServerError(sqlstate)
        self.is_disconnect = False


def test_shutdown_and_refusal_sqlstates_count_as_disconnects() -> None:
    """Regression (found by the PostgreSQL fault test): a call running or connecting while the server shuts down
    failed as an unexpected 500; these SQLSTATEs now invalidate the connection, which answers a retryable 503."""
    from app.db.engine import _mark_server_gone

    for sqlstate in ("57P01", "57P02", "57P03", "53300", "08006", "08001"):
        context = _Context(sqlstate)
        _mark_server_gone(context)  # type: ignore[arg-type]
        assert context.is_disconnect, sqlstate
    for sqlstate in ("23505", "40P01", "42P01"):
        context = _Context(sqlstate)
        _mark_server_gone(context)  # type: ignore[arg-type]
        assert not context.is_disconnect, sqlstate
