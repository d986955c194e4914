"""The Embedder protocol and its fastembed implementation (batched, off the event loop)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from app.embedding.profiles import ModelProfile

logger = logging.getLogger(__name__)

Vector = list[float]


class Embedder(Protocol):
    profile: ModelProfile

    async def embed_passages(self, texts: Sequence[str]) -> list[Vector]: ...

    async def embed_query(self, text: str) -> Vector: ...


class FastEmbedEmbedder:
    """fastembed behind a lock: ONNX runs in a worker thread, one batch at a time."""

    def __init__(self, profile: ModelProfile, model: Any, batch_size: int = 64) -> None:
        self.profile = profile
        self._model = model
        self._batch_size = batch_size
        self._lock = asyncio.Lock()

    @classmethod
    def load(
        cls,
        profile: ModelProfile,
        model_dir: Path | None,
        cache_dir: Path,
        threads: int | None,
        batch_size: int,
        local_files_only: bool = True,
    ) -> FastEmbedEmbedder:
        from fastembed import TextEmbedding

        _register(profile)
        kwargs: dict[str, Any] = {
            "model_name": profile.model_id,
            "cache_dir": str(cache_dir),
            "threads": threads,
            "local_files_only": local_files_only,
        }
        if model_dir is not None:
            kwargs["specific_model_path"] = str(model_dir)
        model = TextEmbedding(lazy_load=False, **kwargs)
        _stop_spinning(model, threads)
        return cls(profile, model, batch_size)

    def _embed_sync(self, texts: list[str]) -> list[Vector]:
        return [vector.tolist() for vector in self._model.embed(texts, batch_size=self._batch_size)]

    async def _embed(self, texts: list[str]) -> list[Vector]:
        async with self._lock:
            return await asyncio.to_thread(self._embed_sync, texts)

    async def embed_passages(self, texts: Sequence[str]) -> list[Vector]:
        return await self._embed([self.profile.passage_prefix + text for text in texts])

    async def embed_query(self, text: str) -> Vector:
        return (await self._embed([self.profile.query_prefix + text]))[0]


def _stop_spinning(model: Any, threads: int | None) -> None:
    """Reopen the ONNX session with its worker threads sleeping between inferences.

    ONNX Runtime's thread pool spin-waits by default: measured here, a 2-thread query embedding of ~3 ms burnt
    ~15 ms of CPU, taken from PostgreSQL and the event loop on a small machine. Without spinning it costs
    ~4.5 ms of CPU for ~0.5 ms more latency. fastembed does not expose the option, so the session is rebuilt.
    """
    import onnxruntime as ort

    runner: Any = getattr(model, "model", None)
    session = getattr(runner, "model", None)
    if not isinstance(session, ort.InferenceSession):
        logger.warning("fastembed's ONNX session not found; its worker threads keep spin-waiting")
        return
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    runner.model = ort.InferenceSession(session._model_path, sess_options=options, providers=session.get_providers())


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
