"""Embeddings with the real offline model: stored vectors, pending writes, backfill, fallback, sanity."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pgvector import Vector as PgVector
from sqlalchemy import func, insert, select, text, update

from app.config import EmbeddingSettings, Settings
from app.db.engine import Database, build_engine
from app.db.locks import BACKFILL_LOCK_KEY
from app.db.models import Role, Thought
from app.db.repositories.projects import ProjectRepository
from app.embedding.backfill import backfill_all, backfill_once, moves_other_models, run_backfill_loop
from app.embedding.embedder import FastEmbedEmbedder
from app.embedding.profiles import E5_SMALL, OFFLINE_DIR_NAME, OFFLINE_E5, OFFLINE_E5_DIR_NAME, OFFLINE_MINILM
from app.embedding.runtime import EmbeddingRuntime
from app.ids import new_id
from app.services.auth.tokens import AuthService
from app.services.context import AppContext
from app.services.jobs.reembed import reembed_all
from tests.conftest import MODEL_CACHE
from tests.support.helpers import ToolCaller

CONTENTS = [
    "PostgreSQL advisory locks keep the backfill job single-writer across replicas",
    "The HNSW index uses cosine distance over 384-dimensional vectors",
    "Preview tokens expire after five minutes and are single-use",
]


async def _rows(db: Database) -> dict[str, tuple[Any, str | None]]:
    """content → (vector as a list of floats or None, embedding_model)."""
    async with db.unit_of_work() as session:
        rows = await session.execute(select(Thought.content, Thought.embedding, Thought.embedding_model))
        return {row.content: (row.embedding, row.embedding_model) for row in rows}


async def _caller(context: AppContext) -> ToolCaller:
    async with context.db.unit_of_work() as session:
        principal = await AuthService(session).ensure_user("writer", Role.writer)
    return ToolCaller(context, principal)


def _cosine(a: Any, b: Any) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.fixture
async def unloaded(clean_database: Database, settings: Settings) -> AppContext:
    """A service whose embedder never loaded (state `loading`): writes must not wait for it."""
    runtime = EmbeddingRuntime(EmbeddingSettings(cache_dir=MODEL_CACHE))
    assert runtime.state == "loading" and runtime.embedder is None
    return AppContext(clean_database, runtime, settings)


# ---------------------------------------------------------------- stored vectors


async def test_create_stores_a_vector_of_the_active_model(
    writer: ToolCaller, embedding_runtime: EmbeddingRuntime
) -> None:
    answer = await writer.ok("memory_store", {"action": "create", "content": CONTENTS[0]})
    assert answer.item["content"] == CONTENTS[0]
    vector, model = (await _rows(writer.context.db))[CONTENTS[0]]
    assert model == OFFLINE_E5  # the default model
    assert vector is not None and len(vector) == 384
    expected = await embedding_runtime.embed_passages([CONTENTS[0]])
    assert expected is not None
    assert _cosine(vector, expected[0]) == pytest.approx(1.0, abs=1e-5)


async def test_bulk_create_stores_one_vector_per_row(writer: ToolCaller) -> None:
    answer = await writer.ok(
        "memory_store", {"action": "bulk_create", "thoughts": [{"content": content} for content in CONTENTS]}
    )
    assert answer.meta["counts"]["created"] == 3
    rows = await _rows(writer.context.db)
    assert {content: model for content, (_, model) in rows.items()} == dict.fromkeys(CONTENTS, OFFLINE_E5)
    vectors = [rows[content][0] for content in CONTENTS]
    assert _cosine(vectors[0], vectors[1]) < 0.99  # each row got its own text's vector, not a copy


# ---------------------------------------------------------------- pending vectors and the backfill


async def test_writes_without_an_embedder_stay_pending_then_backfill_fills_them(
    unloaded: AppContext, embedding_runtime: EmbeddingRuntime
) -> None:
    writer = await _caller(unloaded)
    created = await writer.ok("memory_store", {"action": "create", "content": CONTENTS[0]})
    assert created.item["content"] == CONTENTS[0]
    bulk = await writer.ok(
        "memory_store",
        {"action": "bulk_create", "thoughts": [{"content": content} for content in CONTENTS[1:]]},
    )
    assert [item["status"] for item in bulk.items] == ["created", "created"]
    assert (await _rows(unloaded.db)) == dict.fromkeys(CONTENTS, (None, None))

    # An absent embedder makes the backfill a no-op, not an error.
    assert await backfill_all(unloaded.db, unloaded.embedding) == 0

    assert await backfill_all(unloaded.db, embedding_runtime, batch_size=2) == 3
    rows = await _rows(unloaded.db)
    expected = await embedding_runtime.embed_passages(CONTENTS)
    assert expected is not None
    for content, vector in zip(CONTENTS, expected, strict=True):
        stored, model = rows[content]
        assert model == OFFLINE_E5
        assert _cosine(stored, vector) == pytest.approx(1.0, abs=1e-5)
    assert await backfill_all(unloaded.db, embedding_runtime) == 0  # nothing left


async def test_reembed_moves_vectors_of_another_model_and_the_plain_backfill_leaves_them(
    writer: ToolCaller, embedding_runtime: EmbeddingRuntime
) -> None:
    await writer.ok(
        "memory_store", {"action": "bulk_create", "thoughts": [{"content": content} for content in CONTENTS]}
    )
    stale = [1.0] + [0.0] * 383
    async with writer.context.db.unit_of_work() as session:
        await session.execute(
            update(Thought)
            .where(Thought.content != CONTENTS[2])
            .values(embedding=stale, embedding_model="some-org/older-model")
        )
    assert await backfill_all(writer.context.db, embedding_runtime) == 0  # missing vectors only
    assert await backfill_all(writer.context.db, embedding_runtime, include_other_models=True) == 2
    rows = await _rows(writer.context.db)
    assert {model for _, model in rows.values()} == {OFFLINE_E5}
    for content in CONTENTS[:2]:
        assert _cosine(rows[content][0], stale) < 0.5


def test_the_loop_moves_other_models_only_while_the_configured_model_serves(
    embedding_runtime: EmbeddingRuntime, minilm_runtime: EmbeddingRuntime
) -> None:
    assert moves_other_models(embedding_runtime) and moves_other_models(minilm_runtime)
    fallback = EmbeddingRuntime(EmbeddingSettings(model=E5_SMALL, cache_dir=MODEL_CACHE))
    fallback.use(minilm_runtime.embedder, "fallback", "configured model not available")  # type: ignore[arg-type]
    assert not moves_other_models(fallback)  # it would undo the move to the configured model
    switched_off = EmbeddingRuntime(EmbeddingSettings(cache_dir=MODEL_CACHE, reembed_in_background=False))
    switched_off.use(embedding_runtime.embedder)  # type: ignore[arg-type]
    assert not moves_other_models(switched_off)


async def test_an_upgrade_to_the_default_moves_a_minilm_store_in_the_background(
    clean_database: Database, settings: Settings, embedding_runtime: EmbeddingRuntime, minilm_runtime: EmbeddingRuntime
) -> None:
    """A store written with MiniLM (the default before e5), served with the default: the serving loop moves every
    vector to e5 and says so in the embedder's note (memory_status config, /health)."""
    before = await _caller(AppContext(clean_database, minilm_runtime, settings))
    await before.ok("memory_store", {"action": "bulk_create", "thoughts": [{"content": c} for c in CONTENTS]})
    assert {model for _, model in (await _rows(clean_database)).values()} == {OFFLINE_MINILM}
    runtime = EmbeddingRuntime(EmbeddingSettings(cache_dir=MODEL_CACHE))
    runtime.use(embedding_runtime.embedder)  # type: ignore[arg-type]
    loop = asyncio.create_task(run_backfill_loop(clean_database, runtime, interval_seconds=0.05))
    try:
        for _ in range(1200):  # up to a minute on a loaded machine
            rows = await _rows(clean_database)
            if {model for _, model in rows.values()} == {OFFLINE_E5}:
                break
            await asyncio.sleep(0.05)
    finally:
        loop.cancel()
    assert {model for _, model in rows.values()} == {OFFLINE_E5}
    expected = await embedding_runtime.embed_passages(CONTENTS)
    assert expected is not None
    for content, vector in zip(CONTENTS, expected, strict=True):
        assert _cosine(rows[content][0], vector) == pytest.approx(1.0, abs=1e-5)
    assert runtime.note == f"re-embedded 3 thought(s) with {OFFLINE_E5} in the background"


async def test_the_advisory_lock_admits_one_backfill_at_a_time(
    unloaded: AppContext, embedding_runtime: EmbeddingRuntime
) -> None:
    writer = await _caller(unloaded)
    await writer.ok(
        "memory_store", {"action": "bulk_create", "thoughts": [{"content": content} for content in CONTENTS]}
    )
    db = unloaded.db

    # Another replica holds the lock (and no row lock): this one backs off and embeds nothing.
    async with db.unit_of_work() as holder:
        await holder.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": BACKFILL_LOCK_KEY})
        assert await backfill_once(db, embedding_runtime) == 0
        pending = await holder.execute(select(func.count()).where(Thought.embedding.is_(None)))
        assert pending.scalar_one() == 3
    # Released with the holder's transaction: now it proceeds.
    assert await backfill_once(db, embedding_runtime, batch_size=2) == 2

    # Two concurrent runs: exactly one embeds the remaining row, the other is turned away.
    results = await asyncio.gather(backfill_once(db, embedding_runtime), backfill_once(db, embedding_runtime))
    assert sorted(results) == [0, 1]
    assert {model for _, model in (await _rows(db)).values()} == {OFFLINE_E5}


async def test_reembed_waits_for_a_busy_backfill_instead_of_stopping_short(
    database_url: str, writer: ToolCaller, settings: Settings
) -> None:
    await writer.ok(
        "memory_store", {"action": "bulk_create", "thoughts": [{"content": content} for content in CONTENTS]}
    )
    async with writer.context.db.unit_of_work() as session:
        await session.execute(update(Thought).values(embedding=[1.0] + [0.0] * 383, embedding_model="old/model"))
    runtime = EmbeddingRuntime(EmbeddingSettings(cache_dir=MODEL_CACHE))
    context = AppContext(Database(build_engine(database_url, pool_size=2)), runtime, settings)  # reembed disposes it
    async with writer.context.db.unit_of_work() as holder:  # a serving replica's backfill holds the lock
        await holder.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": BACKFILL_LOCK_KEY})
        task = asyncio.create_task(reembed_all(context, batch_size=2, retry_seconds=0.05))
        assert await runtime.wait_ready(30)
        await asyncio.sleep(0.3)  # reembed has met the lock by now
        assert not task.done(), "reembed gave up while another backfill held the lock"
    assert await asyncio.wait_for(task, 30) == 3
    assert {model for _, model in (await _rows(writer.context.db)).values()} == {OFFLINE_E5}


# ---------------------------------------------------------------- choosing the model


@pytest.fixture
def offline_only_cache(tmp_path: Path) -> Path:
    """A cache dir that holds the MiniLM folder and nothing else."""
    source = MODEL_CACHE / OFFLINE_DIR_NAME
    assert (source / "model.onnx").is_file(), f"offline model missing in {source} (run `make model`)"
    (tmp_path / OFFLINE_DIR_NAME).symlink_to(source, target_is_directory=True)
    return tmp_path


@pytest.fixture
def prepared_cache(offline_only_cache: Path) -> Path:
    """A cache dir with both folders `prepare-model` builds."""
    (offline_only_cache / OFFLINE_E5_DIR_NAME).symlink_to(MODEL_CACHE / OFFLINE_E5_DIR_NAME, target_is_directory=True)
    return offline_only_cache


def test_the_default_model_is_the_e5_build_prepare_model_makes() -> None:
    assert EmbeddingSettings().model == OFFLINE_E5


async def test_an_unavailable_hub_model_falls_back_to_the_default_build(prepared_cache: Path) -> None:
    runtime = EmbeddingRuntime(EmbeddingSettings(model=E5_SMALL, cache_dir=prepared_cache, allow_download=False))
    await runtime.load()
    status = runtime.status()
    assert (status["state"], status["configured_model"], status["active_model"]) == ("fallback", E5_SMALL, OFFLINE_E5)
    note = str(status["note"])
    assert note.startswith(f"configured model {E5_SMALL} not available")
    assert f"serving with the offline model {OFFLINE_E5} (multilingual)" in note


async def test_an_unprepared_default_falls_back_to_minilm_and_says_how_to_prepare_it(offline_only_cache: Path) -> None:
    runtime = EmbeddingRuntime(EmbeddingSettings(cache_dir=offline_only_cache))
    await runtime.load()
    assert (runtime.state, runtime.profile and runtime.profile.model_id) == ("fallback", OFFLINE_MINILM)
    assert runtime.note.startswith(f"configured model {OFFLINE_E5} not available (run `synaptomind prepare-model`)")
    assert f"serving with the offline model {OFFLINE_MINILM} (English only)" in runtime.note
    assert "thoughts it embeds move to the configured model once that loads" in runtime.note


async def test_minilm_is_a_profile_one_setting_away(prepared_cache: Path) -> None:
    runtime = EmbeddingRuntime(EmbeddingSettings(model=OFFLINE_MINILM, cache_dir=prepared_cache))
    await runtime.load()
    assert (runtime.state, runtime.profile and runtime.profile.model_id, runtime.note) == ("ready", OFFLINE_MINILM, "")


async def test_an_unavailable_configured_model_falls_back_to_the_offline_one(
    offline_only_cache: Path,
) -> None:
    runtime = EmbeddingRuntime(EmbeddingSettings(model=E5_SMALL, cache_dir=offline_only_cache, allow_download=False))
    await runtime.load()
    assert await runtime.wait_ready(1)
    status = runtime.status()
    assert (status["state"], status["configured_model"], status["active_model"]) == (
        "fallback",
        E5_SMALL,
        OFFLINE_MINILM,
    )
    note = str(status["note"])
    assert note.startswith(f"configured model {E5_SMALL} not available")
    assert f"offline model {OFFLINE_E5} not loadable from {offline_only_cache / OFFLINE_E5_DIR_NAME}" in note
    assert f"serving with the offline model {OFFLINE_MINILM}" in note
    vectors = await runtime.embed_passages(["still embeds"])
    assert vectors is not None and len(vectors[0]) == 384


async def test_an_unknown_model_id_falls_back_too(offline_only_cache: Path) -> None:
    runtime = EmbeddingRuntime(EmbeddingSettings(model="no-such-org/no-such-model", cache_dir=offline_only_cache))
    await runtime.load()
    assert (runtime.state, runtime.profile and runtime.profile.model_id) == ("fallback", OFFLINE_MINILM)
    assert "unknown embedding model 'no-such-org/no-such-model'" in runtime.note
    assert f"serving with the offline model {OFFLINE_MINILM}" in runtime.note


async def test_without_any_model_the_runtime_is_unavailable(tmp_path: Path) -> None:
    runtime = EmbeddingRuntime(EmbeddingSettings(model=E5_SMALL, cache_dir=tmp_path, allow_download=False))
    await runtime.load()
    assert (runtime.state, runtime.available) == ("unavailable", False)
    assert f"offline model {OFFLINE_E5} not loadable" in runtime.note
    assert f"offline model {OFFLINE_MINILM} not loadable" in runtime.note
    assert await runtime.wait_ready(1) is False
    assert await runtime.embed_passages(["x"]) is None


# ---------------------------------------------------------------- the vectors themselves


async def test_vectors_travel_in_binary_and_round_trip_exactly(clean_database: Database) -> None:
    """The app's engine registers pgvector's binary codec (app.db.vector): no float ↔ text round trip."""
    values = np.random.default_rng(7).normal(size=384).astype(np.float32)
    async with clean_database.unit_of_work() as session:
        raw = (await session.execute(text("SELECT '[1.5,-2,3.25]'::vector"))).scalar_one()
        assert isinstance(raw, PgVector), type(raw)  # decoded from the binary format
        assert raw.to_list() == [1.5, -2.0, 3.25]
        # A vector literal bound by hand as text still works (the encoder parses it).
        bound = await session.execute(text("SELECT vector_dims(CAST(:v AS vector))"), {"v": "[1,2,3,4]"})
        assert bound.scalar_one() == 4
        project = await ProjectRepository(session).ensure_default()
        await session.execute(
            insert(Thought).values(
                id=new_id(), project_id=project.id, content="binary", embedding=values, embedding_model="m"
            )
        )
        stored = (await session.execute(select(Thought.embedding))).scalar_one()
    assert np.array_equal(np.asarray(stored, dtype=np.float32), values)  # bit-exact float32


async def test_vectors_are_unit_length(writer: ToolCaller, embedding_runtime: EmbeddingRuntime) -> None:
    texts = [*CONTENTS, "a", "Ünïcödé and emoji 🚀 survive", "x " * 300]
    vectors = await embedding_runtime.embed_passages(texts)
    assert vectors is not None and len(vectors) == len(texts)
    for vector in vectors:
        assert len(vector) == 384
        assert math.sqrt(sum(value * value for value in vector)) == pytest.approx(1.0, abs=1e-4)
    query = await embedding_runtime.embed_query(CONTENTS[0])
    assert query is not None and math.sqrt(sum(v * v for v in query)) == pytest.approx(1.0, abs=1e-4)
    # And as stored: pgvector computes the same norm.
    await writer.ok("memory_store", {"action": "create", "content": CONTENTS[1]})
    async with writer.context.db.unit_of_work() as session:
        norm = (await session.execute(text("SELECT vector_norm(embedding) FROM thought"))).scalar_one()
    assert norm == pytest.approx(1.0, abs=1e-4)


async def test_a_paraphrase_is_closer_than_an_unrelated_sentence(embedding_runtime: EmbeddingRuntime) -> None:
    anchor = "The database connection pool is exhausted under heavy load"
    paraphrase = "Under high traffic we run out of connections to the database"
    unrelated = "My grandmother bakes apple pie every Sunday afternoon"
    vectors = await embedding_runtime.embed_passages([anchor, paraphrase, unrelated])
    assert vectors is not None
    close, far = _cosine(vectors[0], vectors[1]), _cosine(vectors[0], vectors[2])
    # e5's cosines sit in a narrow band (unrelated pairs ≈ 0.78; measured: close 0.92, far 0.78; MiniLM's margin
    # was 0.3 and more): the margin, not the level, is what the model promises.
    assert close > far + 0.1, (close, far)
    query = await embedding_runtime.embed_query("running out of database connections")
    assert query is not None
    assert _cosine(query, vectors[1]) > _cosine(query, vectors[2])


# ---------------------------------------------------------------- the data-parallel passage workers


def _offline_embedder(runtime: EmbeddingRuntime) -> FastEmbedEmbedder:
    assert isinstance(runtime.embedder, FastEmbedEmbedder)
    return runtime.embedder


async def test_passages_split_over_the_workers_come_back_in_order(embedding_runtime: EmbeddingRuntime) -> None:
    embedder = _offline_embedder(embedding_runtime)
    texts = [f"thought number {index}: {CONTENTS[index % 3]}" for index in range(3 * embedder.workers * 8 + 5)]
    together = await embedder.embed_passages(texts)
    alone = [(await embedder.embed_passages([text_]))[0] for text_ in texts]
    assert len(together) == len(texts)
    for index, (mine, reference) in enumerate(zip(together, alone, strict=True)):
        assert _cosine(mine, reference) > 0.9999, index


async def test_a_text_embeds_the_same_whatever_it_is_stored_with(
    embedding_runtime: EmbeddingRuntime, minilm_runtime: EmbeddingRuntime
) -> None:
    """MiniLM quantises its activations per ONNX run: batched with a longer text, a short one embedded at a cosine
    of ~0.993 to itself alone, so it embeds one text per run. e5's MatMulNBits quantises per token, so it runs in
    batches and its padding is masked: measured cosine 1 − 5e-9 between alone and crowded."""
    short = "Pin the Alembic head"
    minilm = _offline_embedder(minilm_runtime)
    assert minilm.batch_size == 1
    alone = (await minilm.embed_passages([short]))[0]
    crowded = await minilm.embed_passages([CONTENTS[1] * 4, short, CONTENTS[0]])
    assert crowded[1] == alone
    e5 = _offline_embedder(embedding_runtime)
    assert e5.batch_size == 8
    alone = (await e5.embed_passages([short]))[0]
    crowded = await e5.embed_passages([CONTENTS[1] * 4, short, CONTENTS[0]])
    assert _cosine(crowded[1], alone) > 0.99999


async def test_a_query_does_not_wait_behind_a_bulk_embedding(embedding_runtime: EmbeddingRuntime) -> None:
    embedder = _offline_embedder(embedding_runtime)
    bulk = asyncio.ensure_future(embedder.embed_passages([f"{CONTENTS[1]} ({index})" for index in range(600)]))
    await asyncio.sleep(0.05)  # the workers are busy with the bulk's batches
    query = await embedder.embed_query("which distance does the index use?")
    assert len(query) == 384
    assert not bulk.done()  # the query finished first: it has its own session, not a place in the queue
    assert len(await bulk) == 600


async def test_cancelling_a_bulk_embedding_drops_its_queued_batches(
    embedding_runtime: EmbeddingRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = _offline_embedder(embedding_runtime)
    batches: list[int] = []
    embed_batch = embedder._embed_batch

    def counted(texts: list[str]) -> Any:
        batches.append(len(texts))
        return embed_batch(texts)

    monkeypatch.setattr(embedder, "_embed_batch", counted)
    bulk = asyncio.ensure_future(embedder.embed_passages([f"{CONTENTS[2]} ({index})" for index in range(2000)]))
    await asyncio.sleep(0.1)
    bulk.cancel()
    with pytest.raises(asyncio.CancelledError):
        await bulk
    assert len(await embedder.embed_passages(["after the cancel"])) == 1  # queued behind what already ran
    assert 0 < len(batches) - 1 < 2000 // embedder.batch_size  # the cancelled call's unstarted batches never ran
