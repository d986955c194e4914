"""The query-embedding cache (app.embedding.runtime.QueryVectorCache): a repeated query text of the same model is
answered without ONNX and with the same vector; another model or text is embedded; the oldest entry goes first."""

from __future__ import annotations

from collections.abc import Sequence

from app.config import EmbeddingSettings
from app.embedding.embedder import Embedder, Vector
from app.embedding.profiles import ModelProfile
from app.embedding.runtime import EmbeddingRuntime, QueryVectorCache


class Counting:
    """The real embedder, counting the queries that reached it."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.profile: ModelProfile = inner.profile
        self.queries: list[str] = []

    async def embed_passages(self, texts: Sequence[str]) -> list[Vector]:
        return await self.inner.embed_passages(texts)

    async def embed_query(self, text: str) -> Vector:
        self.queries.append(text)
        return await self.inner.embed_query(text)


async def test_a_repeated_query_is_answered_from_the_cache_with_the_same_vector(
    embedding_runtime: EmbeddingRuntime,
) -> None:
    assert embedding_runtime.embedder is not None
    counting = Counting(embedding_runtime.embedder)
    runtime = EmbeddingRuntime(EmbeddingSettings())
    runtime.use(counting)
    first = await runtime.embed_query("where do the workers keep the rate limit")
    again = await runtime.embed_query("where do the workers keep the rate limit")
    other = await runtime.embed_query("who runs the decay job")
    assert counting.queries == ["where do the workers keep the rate limit", "who runs the decay job"]
    assert again == first and again is not first  # a copy: a caller changing it cannot change the cache
    assert other != first
    assert (runtime.queries.hits, runtime.queries.misses) == (1, 2)


def test_the_cache_is_keyed_by_model_and_drops_the_least_recently_used() -> None:
    cache = QueryVectorCache(2)
    cache.put(("model-a", "q1"), [1.0])
    cache.put(("model-a", "q2"), [2.0])
    assert cache.get(("model-b", "q1")) is None  # another model's vector is never used
    assert cache.get(("model-a", "q1")) == (1.0,)  # q1 now most recent
    cache.put(("model-a", "q3"), [3.0])
    assert cache.get(("model-a", "q2")) is None
    assert cache.get(("model-a", "q1")) == (1.0,)
    assert cache.get(("model-a", "q3")) == (3.0,)
