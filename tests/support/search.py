"""Shared helpers of the test_search_*.py files (memory_recall search / id lookup / graph reads)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import text

from app.config import EmbeddingSettings
from app.embedding.profiles import OFFLINE_E5, OFFLINE_MINILM, profile_for
from app.embedding.runtime import EmbeddingRuntime
from app.services.context import AppContext
from tests.support.helpers import Answer, ToolCaller, own_transaction

NO_CWD = "no cwd — the answer spans every project"
PROFILE = profile_for(OFFLINE_E5)  # the default model's; floors 0.83 / 0.85, so the default gate is a cosine of 0.838

# A small corpus with known behaviour under the default model (cosines measured once, rounded):
CORPUS = {
    "pool": "PostgreSQL connection pool exhausted under load; raise max_connections",
    "deploy": "The deploy pipeline runs on Forgejo Actions with a cached docker layer",
    "hnsw": "Use the pgvector HNSW index for nearest neighbour search of embeddings",
    "lunch": "Team lunch is on Fridays at the Italian restaurant downtown",
    "keys": "Rotate the API signing keys every ninety days",
    "camera": "The mobile app crashes when the camera permission is denied",
    "coffee": "Coffee machine on the third floor needs descaling",
}
# A paraphrase without a shared word: a vector-only hit, cosine ≈ 0.841 to the lunch row (every other row ≤ 0.79),
# relevance ≈ 0.55 but under the profile's vector_floor (0.85), so it is low-confidence and still clears the default
# gate (0.4, a cosine of 0.838). e5's cosines sit in a narrow band, so the gate's margin is small; MiniLM's
# "where do we eat together at the end of the week" lands at 0.826 with e5, under the unrelated floor.
PARAPHRASE_OF_LUNCH = "where we eat together before the weekend"
# Unrelated to every corpus row: every cosine (≤ 0.78) under the unrelated floor, so the default gate drops them all.
UNRELATED = "kitten photography tips for beginners"
# Shares one word with the deploy row (a BM25 anchor) while its cosine to it (≈ 0.805) is under the unrelated floor.
LEXICAL_ONLY_DEPLOY = "layer"


def unknown_cwd_warning(path: str) -> str:
    return (
        f'cwd "{path}" matches no known project (check it with memory_manage action=resolve)'
        " — the answer spans every project"
    )


def id_not_found(query: str) -> str:
    return (
        f'id_not_found: "{query}" is id-shaped but no thought carries it — the answer is a normal search for that text'
    )


def clamp01(value: float) -> float:
    return min(1.0, max(0.0, value))


def calibrated(similarity: float, unrelated_floor: float, vector_floor: float) -> float:
    return clamp01((similarity - unrelated_floor) / (vector_floor - unrelated_floor))


async def rows(context: AppContext, query: str, **params: Any) -> Sequence[Any]:
    async with own_transaction(context) as session:
        return (await session.execute(text(query), params)).all()


async def execute(context: AppContext, query: str, **params: Any) -> None:
    async with own_transaction(context) as session:
        await session.execute(text(query), params)


async def create(caller: ToolCaller, content: str, **arguments: Any) -> dict[str, Any]:
    answer = await caller.ok("memory_store", {"action": "create", "content": content, **arguments})
    return dict(answer.item)


async def bulk(caller: ToolCaller, contents: Sequence[str], cwd: str | None = None) -> list[str]:
    arguments: dict[str, Any] = {"action": "bulk_create", "thoughts": [{"content": c} for c in contents]}
    if cwd is not None:
        arguments["cwd"] = cwd
    answer = await caller.ok("memory_store", arguments)
    assert all(item["status"] == "created" for item in answer.items), answer.items
    return [item["thought"]["id"] for item in answer.items]


async def seed_corpus(caller: ToolCaller, cwd: str | None = None) -> dict[str, str]:
    """The corpus in one bulk_create: name → id."""
    ids = await bulk(caller, list(CORPUS.values()), cwd)
    return dict(zip(CORPUS, ids, strict=True))


async def register(caller: ToolCaller, name: str, path: str) -> dict[str, Any]:
    answer = await caller.ok("memory_manage", {"action": "create", "name": name, "local_path": path})
    return dict(answer.item)


async def link(caller: ToolCaller, source: str, target: str, edge_type: str) -> dict[str, Any]:
    answer = await caller.ok(
        "memory_store", {"action": "link", "source_id": source, "target_id": target, "edge_type": edge_type}
    )
    return dict(answer.item)


async def archive(context: AppContext, thought_id: str) -> None:
    await execute(
        context,
        "UPDATE thought SET status = 'archived', archived_at = now() WHERE id = :id",
        id=uuid.UUID(thought_id),
    )


async def make_cluster(context: AppContext, thought_id: str) -> None:
    await execute(context, "UPDATE thought SET is_cluster = true WHERE id = :id", id=uuid.UUID(thought_id))


async def search(caller: ToolCaller, query: str, **arguments: Any) -> Answer:
    return await caller.ok("memory_recall", {"action": "search", "query": query, **arguments})


async def recall(caller: ToolCaller, action: str, **arguments: Any) -> Answer:
    return await caller.ok("memory_recall", {"action": action, **arguments})


def ids_of(answer: Answer) -> list[str]:
    return [item["thought"]["id"] for item in answer.items]


def by_id(answer: Answer) -> dict[str, dict[str, Any]]:
    return {item["thought"]["id"]: item for item in answer.items}


async def hit_count(context: AppContext, thought_id: str) -> int | None:
    found = await rows(context, "SELECT hit_count FROM thought_hit WHERE thought_id = :id", id=uuid.UUID(thought_id))
    return int(found[0].hit_count) if found else None


def degraded_caller(caller: ToolCaller, cache_dir: Path) -> ToolCaller:
    """The same database and user, behind an EmbeddingRuntime that never loaded a model (embedder down)."""
    runtime = EmbeddingRuntime(EmbeddingSettings(model=OFFLINE_MINILM, cache_dir=cache_dir))
    assert not runtime.available
    context = AppContext(caller.context.db, runtime, caller.context.settings)
    return ToolCaller(context, caller.principal)
