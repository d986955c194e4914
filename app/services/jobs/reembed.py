"""`synaptomind reembed`: move every vector to the active model, with a progress bar."""

from __future__ import annotations

import asyncio
import sys

from sqlalchemy import func, select
from tqdm import tqdm

from app.db.models import Thought
from app.embedding.backfill import backfill_once
from app.services.context import AppContext


async def _pending(context: AppContext, model_id: str) -> int:
    async with context.db.unit_of_work() as session:
        statement = (
            select(func.count())
            .select_from(Thought)
            .where(Thought.embedding.is_(None) | (Thought.embedding_model != model_id))
        )
        return int((await session.execute(statement)).scalar_one())


async def reembed_all(context: AppContext, batch_size: int = 256, retry_seconds: float = 0.5) -> int:
    await context.embedding.load()
    profile = context.embedding.profile
    if profile is None:
        raise SystemExit(f"no embedder: {context.embedding.note}")
    pending = await _pending(context, profile.model_id)
    done = 0
    with tqdm(total=pending, unit="thought", desc=f"embedding with {profile.model_id}", file=sys.stderr) as bar:
        while True:
            count = await backfill_once(context.db, context.embedding, batch_size, include_other_models=True)
            if count:
                done += count
                bar.update(count)
                continue
            # 0 also means "another replica's backfill holds the lock (or the rows) right now": only
            # stop once nothing is left, so a running server never cuts a reembed short.
            if await _pending(context, profile.model_id) == 0:
                break
            await asyncio.sleep(retry_seconds)
    await context.db.dispose()
    return done
