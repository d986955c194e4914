"""Placement helpers shared by memory_status propose and edge_review enqueue (not a tool)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.records import ThoughtRecord
from app.embedding.profiles import E5_SMALL
from app.mcp.registry import CallContext
from app.services.placement import Subject


def neighbour_threshold(ctx: CallContext) -> float:
    profile = ctx.app.embedding.profile
    if profile is None or profile.model_id == E5_SMALL:
        return 0.75
    return profile.unrelated_floor + 0.1


async def placement_subject(
    ctx: CallContext, session: AsyncSession, thought: ThoughtRecord | None, content: str
) -> Subject:
    vector = None
    profile = ctx.app.embedding.profile
    if thought is not None and profile is not None and thought.embedding_model == profile.model_id:
        vector = await ctx.app.embedding.embed_passages([thought.content])
    elif profile is not None:
        vector = await ctx.app.embedding.embed_passages([content])
    return Subject(thought, content, thought.created_at if thought else None, vector[0] if vector else None)
