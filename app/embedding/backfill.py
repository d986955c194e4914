"""Background backfill: embeds thoughts whose vector is pending or from another model.

One replica at a time: each batch runs under a transaction-scoped advisory lock.
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy import text

from app.db.engine import Database, is_unavailable
from app.db.locks import BACKFILL_LOCK_KEY
from app.db.repositories.thoughts import ThoughtRepository
from app.embedding.runtime import EmbeddingRuntime

logger = logging.getLogger(__name__)


async def backfill_once(
    db: Database, runtime: EmbeddingRuntime, batch_size: int = 256, include_other_models: bool = False
) -> int:
    """Embed one batch; returns how many thoughts got a vector (0 when idle, locked out or no embedder).

    The background loop fills missing vectors only; moving vectors of another model to the active one is
    `synaptomind reembed` (include_other_models), so replicas never fight over which model a vector has.
    """
    embedder = runtime.embedder
    if embedder is None:
        return 0
    model_id = embedder.profile.model_id
    async with db.unit_of_work() as session:
        locked = (
            await session.execute(text("SELECT pg_try_advisory_xact_lock(:key)"), {"key": BACKFILL_LOCK_KEY})
        ).scalar()
        if not locked:
            return 0
        thoughts = ThoughtRepository(session)
        pending = await thoughts.pending_embedding(model_id, batch_size, include_other_models)
        if not pending:
            return 0
        vectors = await embedder.embed_passages([content for _, content in pending])
        await thoughts.set_embeddings(
            {thought_id: vector for (thought_id, _), vector in zip(pending, vectors, strict=True)}, model_id
        )
    return len(pending)


async def backfill_all(
    db: Database, runtime: EmbeddingRuntime, batch_size: int = 256, include_other_models: bool = False
) -> int:
    total = 0
    while (done := await backfill_once(db, runtime, batch_size, include_other_models)) > 0:
        total += done
    return total


async def run_backfill_loop(db: Database, runtime: EmbeddingRuntime, interval_seconds: float = 5.0) -> None:
    """Runs until cancelled; a failure is logged and retried on the next tick."""
    while True:
        try:
            done = await backfill_all(db, runtime)
            if done:
                logger.info("backfill embedded %d thought(s)", done)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            if is_unavailable(error):  # an outage: one line per tick, not a traceback every 5 s
                logger.warning(
                    "embedding backfill: database unavailable (%s); retrying in %.0fs",
                    type(error).__name__,
                    interval_seconds,
                )
            else:
                logger.exception("embedding backfill failed; retrying in %.0fs", interval_seconds)
        await asyncio.sleep(interval_seconds)
