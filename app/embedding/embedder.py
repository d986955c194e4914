"""The Embedder protocol and its fastembed implementation (batched, data-parallel, off the event loop)."""

from __future__ import annotations

import asyncio
import copy
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from app.embedding.profiles import ModelProfile
from app.observability import route_loguru

Vector = list[float]


class Embedder(Protocol):
    profile: ModelProfile

    async def embed_passages(self, texts: Sequence[str]) -> list[Vector]: ...

    async def embed_query(self, text: str) -> Vector: ...


class FastEmbedEmbedder:
    """fastembed's tokenizer and pooling over two ONNX sessions, run off the event loop.

    Passages: one single-threaded session that `workers` threads run at once, each on its own batch of
    `batch_size` texts. Measured here (docs/BENCHMARKS.md), this data parallelism embeds ~20 % faster than
    one session's intra-op threads, and when PostgreSQL takes a core it slows down in proportion instead
    of stalling every operator at the threads' barrier. Queries: a second session with `threads` intra-op
    threads, since a single short text cannot be split between workers; one query at a time, so a
    search never waits behind a bulk write's passages.
    """

    def __init__(
        self, profile: ModelProfile, passage_model: Any, query_model: Any, workers: int, batch_size: int
    ) -> None:
        self.profile = profile
        self.workers = workers
        self._passage_model = passage_model
        self._query_model = query_model
        self.batch_size = batch_size
        self._passage_pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="embed-passages")
        self._query_lock = asyncio.Lock()

    @classmethod
    def load(
        cls,
        profile: ModelProfile,
        model_dir: Path | None,
        cache_dir: Path,
        threads: int | None,
        batch_size: int | None,
        local_files_only: bool = True,
    ) -> FastEmbedEmbedder:
        route_loguru()  # fastembed logs with loguru: through our one handler and format instead
        from fastembed import TextEmbedding

        _register(profile)
        kwargs: dict[str, Any] = {
            "model_name": profile.model_id,
            "cache_dir": str(cache_dir),
            "local_files_only": local_files_only,
        }
        if model_dir is not None:
            kwargs["specific_model_path"] = str(model_dir)
        # One intra-op thread: no thread pool, so nothing spin-waits, and concurrent runs stay independent.
        passage_model = TextEmbedding(lazy_load=False, threads=1, **kwargs)
        query_model = _with_query_session(passage_model, threads)
        workers = threads or available_cores()
        return cls(profile, passage_model, query_model, workers, batch_size or profile.passage_batch_size)

    def _embed_batch(self, texts: list[str]) -> list[Vector]:
        return [vector.tolist() for vector in self._passage_model.embed(texts, batch_size=len(texts))]

    async def embed_passages(self, texts: Sequence[str]) -> list[Vector]:
        # A batch is padded to its longest text, so texts of like length go together (by characters, a proxy
        # for tokens): measured on mixed lengths with e5's batches of 8, 11.3 ms of CPU a text sorted against
        # 26.3 ms in arrival order (docs/BENCHMARKS.md). Padding is masked, so a vector does not depend on its
        # batch; the answer comes back in the callers' order.
        order = sorted(range(len(texts)), key=lambda index: len(texts[index]))
        prefixed = [self.profile.passage_prefix + texts[index] for index in order]
        loop = asyncio.get_running_loop()
        batches = [prefixed[start : start + self.batch_size] for start in range(0, len(prefixed), self.batch_size)]
        # Cancelling the gather cancels the batches no worker has started yet.
        results = await asyncio.gather(
            *(loop.run_in_executor(self._passage_pool, self._embed_batch, batch) for batch in batches)
        )
        vectors: list[Vector] = [[] for _ in texts]
        for index, vector in zip(order, (vector for batch_vectors in results for vector in batch_vectors), strict=True):
            vectors[index] = vector
        return vectors

    def _embed_query_sync(self, text: str) -> Vector:
        vector: Vector = next(iter(self._query_model.embed([text], batch_size=1))).tolist()
        return vector

    async def embed_query(self, text: str) -> Vector:
        async with self._query_lock:
            return await asyncio.to_thread(self._embed_query_sync, self.profile.query_prefix + text)


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _with_query_session(model: Any, threads: int | None) -> Any:
    """A shallow copy of fastembed's model sharing its tokenizer, over a multi-threaded session.

    ONNX Runtime's thread pool spin-waits by default: measured here, a 2-thread query embedding of ~3 ms burnt
    ~15 ms of CPU, taken from PostgreSQL and the event loop on a small machine. Without spinning it costs
    ~4.5 ms of CPU for ~0.5 ms more latency. fastembed does not expose the option, so the session is built here.
    """
    import onnxruntime as ort

    runner: Any = getattr(model, "model", None)
    session = getattr(runner, "model", None)
    if not isinstance(session, ort.InferenceSession):
        raise RuntimeError("fastembed's ONNX session not found; this fastembed version is not supported")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    query_runner = copy.copy(runner)
    providers = session.get_providers()
    query_runner.model = ort.InferenceSession(session._model_path, sess_options=options, providers=providers)
    query_model = copy.copy(model)
    query_model.model = query_runner
    return query_model


def _register(profile: ModelProfile) -> None:
    """Make fastembed know our model id (idempotent)."""
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    known = {entry["model"].lower() for entry in TextEmbedding.list_supported_models()}
    if profile.model_id.lower() in known:
        return
    TextEmbedding.add_custom_model(
        model=profile.model_id,
        pooling=PoolingType.MEAN,
        normalization=True,
        sources=ModelSource(hf=profile.hub_source or profile.model_id),
        dim=profile.dim,
        model_file=profile.model_file,
    )
