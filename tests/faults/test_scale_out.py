"""Scale-out check (issue 6, part 7): two `synaptomind serve` processes on one database, no shared memory.

The same check as `python -m bench.load --scale-out` (bench/faults.py), on the test database: a
preview issued by one replica is confirmed on the other, the background jobs run on exactly one
(decay and backfill raced from two engines; the decay's audit rows at most one per interval while
both replicas tick), and a short load run against both passes the invariants.
"""

from __future__ import annotations

from pathlib import Path

from app.db.engine import Database
from app.embedding.runtime import EmbeddingRuntime
from bench.faults import scale_out


async def test_two_replicas_share_previews_and_run_each_job_once(
    database_url: str, clean_database: Database, embedding_runtime: EmbeddingRuntime, tmp_path: Path
) -> None:
    assert embedding_runtime.embedder is not None
    result = await scale_out(database_url, tmp_path, embedding_runtime.embedder, clients=3, seconds=6)
    assert result.passed, result.line()
    assert result.details["decay_race_runs_per_round"] == [1, 1, 1]
    assert sorted(result.details["backfill_race"]) == [0, 40]
