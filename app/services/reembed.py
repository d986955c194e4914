"""`synaptomind reembed`: move every vector to the active model, with a progress bar."""

from __future__ import annotations

import sys

from sqlalchemy import func, select
from tqdm import tqdm

from app.db.models import Thought
from app.embedding.backfill import backfill_once
from app.services.context import AppContext


async def reembed_all(context: AppContext, batch_size: int = 256) -> int:
    await context.embedding.load()
    profile = context.embedding.profile
    if profile is None:
        raise SystemExit(f"no embedder: {context.embedding.note}")
    async with context.db.unit_of_work() as session:
        pending = (
            await session.execute(
                select(func.count())
                .select_from(Thought)
                .where(Thought.embedding.is_(None) | (Thought.embedding_model != profile.model_id))
            )
        ).scalar_one()
    done = 0
    with tqdm(total=pending, unit="thought", desc=f"embedding with {profile.model_id}", file=sys.stderr) as bar:
        while (count := await backfill_once(context.db, context.embedding, batch_size, include_other_models=True)) > 0:
            done += count
            bar.update(count)
    await context.db.dispose()
    return done
