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

    include_other_models also takes vectors of another model (`synaptomind reembed`, and the background loop
    while the configured model serves: `moves_other_models`).
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


def moves_other_models(runtime: EmbeddingRuntime) -> bool:
    """Whether the background loop re-embeds vectors of another model: only while the configured model itself
    serves (a replica on a fallback model leaves them, so it never undoes a move to the configured one), and
    unless `embedding.reembed_in_background` is off. Replicas naming different models would undo each other's
    moves: every replica of a deployment names one model (docs/CONFIG.md)."""
    return runtime.state == "ready" and runtime.settings.reembed_in_background


async def run_backfill_loop(db: Database, runtime: EmbeddingRuntime, interval_seconds: float = 5.0) -> None:
    """Runs until cancelled; a failure is logged and retried on the next tick.

    After a model change (e.g. an upgrade to the e5 default over a store written with MiniLM) the thoughts with
    the old model's vectors move batch by batch; until each moves, only the lexical leg finds it, and the
    embedder's status note says how many have moved.
    """
    while True:
        try:
            moving = moves_other_models(runtime)
            done = 0
            while (batch := await backfill_once(db, runtime, include_other_models=moving)) > 0:
                done += batch
                if moving:
                    runtime.note = (
                        f"re-embedding in the background: {done} thought(s) without a vector of "
                        f"{runtime.settings.model} embedded so far; until a thought has one, only the lexical "
                        "leg finds it"
                    )
            if done:
                logger.info("backfill embedded %d thought(s)", done)
                if moving:
                    runtime.note = f"re-embedded {done} thought(s) with {runtime.settings.model} in the background"
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
