"""Retrieval on real dialogue: LoCoMo through the tools, against bm25s, exact cosine and RRF over the same texts.

    make eval-locomo DATA=<path>          # or: python -m bench.locomo --data <path> [--model <id>] [--fresh]

LoCoMo (Maharana et al., "Evaluating Very Long-Term Conversational Memory of LLM Agents", ACL 2024; data from the
public repository snap-research/locomo, CC BY-NC 4.0) is never part of this repository: `--data` names either a
folder of one-dialogue files (`<sample id>.json`, each with `speaker_a`, `speaker_b`, `session_N_date_time`,
`session_N` and `qa`) or the upstream `locomo10.json` list (each item `{sample_id, conversation: {...}, qa}`;
`git show HEAD:data/locomo10.json` in a copy of that repository, or unzip its data/locomo10.zip).

What runs, in order:
1. Every turn is one thought `[<session date_time>] <speaker>: <text>` (image captions left out), each dialogue its
   own project (`memory_manage create` with a local_path), stored through the tool boundary with one
   `memory_store bulk_create` per dialogue (`dispatch`, as the MCP server calls it). The store is cached in
   bench/.data/locomo/<model>-<data digest>/ (gitignored) with an embedded PostgreSQL; a later run reuses it and
   reports the throughput of the run that stored it (`--fresh`: store again into a temporary database).
2. Every question of categories 1–4 (multi-hop, temporal, open-domain, single-hop; category 5, adversarial, has no
   answer in the dialogue and is left out, as is a question none of whose evidence ids names a turn) is asked
   through `memory_recall search` (limit 10, cwd of its dialogue, compact false) in four modes: the default call
   (min_relevance omitted), min_relevance 0, the vector leg alone (hybrid false, min_relevance 0) and the lexical
   leg alone (min_relevance 0 on a context whose embedder never loaded: the service answers degraded, checked).
3. References over the same stored texts, per dialogue: bm25s (Lucene, k1 1.5, b 0.75, English stop words,
   Snowball English stemmer via PyStemmer), exact cosine of the served model (numpy over the vectors the store
   holds, the query embedded by the same runtime), and RRF k 60 of those two.
4. The service's own legs once more, each at the pool of a limit-10 search (100 rows), written to
   bench/.data/locomo/legs-<model>.json: `python -m bench.fusion --locomo` replays fusions over them.

Scores, per question then averaged over the questions of a group (each category and overall, per half):
R@k = |evidence turns among the first k returned| / |evidence turns|; hit@k = 1 when at least one evidence turn
is among the first k. Halves: tuning = dialogues 26, 30, 41, 42, 43; held-out = 44, 47, 48, 49, 50 (every parameter
of the service is chosen on the tuning half only). Latency: the wall time of each in-process tool call (p50, p95).
Writes bench/results/locomo.json (per question rankings included; gitignored).

`--scope every` (or `both`) asks the same questions without a cwd instead (or as well): the unscoped call, whose
answer spans all ten dialogues' projects (5,882 turns), with the references over every turn too. That is real
dialogue for the search an agent makes outside a project (no cwd), the case the generated notes alone measured
before; its legs go to the legs file under "legs_unscoped" (`bench.fusion --locomo` replays both scopes).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import text

from app.db import migrations
from app.db.embedded import EmbeddedPostgres
from app.db.models import ThoughtStatus
from app.db.repositories.projects import ProjectRepository
from app.db.repositories.search import SearchRepository
from app.db.repositories.thoughts import ThoughtFilter
from app.embedding.runtime import EmbeddingRuntime
from app.services.recall.search import pool_size
from bench.calibrate import RESULTS
from bench.common import shipped_settings
from bench.eval import (
    BM25,
    RRF_K,
    SERVICE_MODES,
    Caller,
    Session,
    bm25_orders,
    model_runtimes,
    open_session,
    rrf,
    scoped_search,
    search_settings,
)

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}  # 5 (adversarial) left out
GROUPS = ("overall", "single-hop", "temporal", "multi-hop", "open-domain")
TUNING = ("26", "30", "41", "42", "43")
HELD_OUT = ("44", "47", "48", "49", "50")
HALVES = {"tuning": TUNING, "held_out": HELD_OUT}
LIMIT = 10
DEPTHS = (5, 10)
CACHE = Path(__file__).parent / ".data" / "locomo"
REFERENCES = ("bm25", "dense", "rrf")
CITATION = (
    "LoCoMo: Maharana et al., Evaluating Very Long-Term Conversational Memory of LLM Agents, ACL 2024 "
    "(snap-research/locomo, CC BY-NC 4.0)"
)
_SESSION = re.compile(r"^session_(\d+)$")
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")


@dataclass(frozen=True)
class Turn:
    key: str  # "<dialogue>/<dia_id>", e.g. "26/D1:3"
    content: str


@dataclass(frozen=True)
class Dialogue:
    id: str
    speakers: tuple[str, str]
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Question:
    id: str  # "<dialogue>/q<index in its qa list>"
    dialogue: str
    category: str
    text: str
    evidence: frozenset[str]  # turn keys


@dataclass(frozen=True)
class LoCoMo:
    dialogues: tuple[Dialogue, ...]
    questions: tuple[Question, ...]
    left_out: dict[str, int]  # why questions were not asked → how many
    digest: str  # of the stored texts and the questions: names the cache


def content(date_time: str, speaker: str, text_: str) -> str:
    return f"[{date_time}] {speaker}: {text_}"


def parse_dialogue(dialogue_id: str, conversation: dict[str, Any], qa: Sequence[dict[str, Any]]) -> tuple[
    Dialogue, list[Question], dict[str, int]
]:  # fmt: skip
    """One dialogue's turns in session order and its answerable questions with their evidence as turn keys."""
    sessions = sorted(
        (int(match.group(1)), value)
        for name, value in conversation.items()
        if (match := _SESSION.match(name)) and isinstance(value, list)
    )
    turns: list[Turn] = []
    for number, rows in sessions:
        date_time = str(conversation.get(f"session_{number}_date_time", "")).strip()
        for row in rows:
            turns.append(Turn(f"{dialogue_id}/{row['dia_id']}", content(date_time, row["speaker"], row["text"])))
    known = {turn.key for turn in turns}
    questions: list[Question] = []
    left_out: dict[str, int] = defaultdict(int)
    for index, item in enumerate(qa):
        category = CATEGORIES.get(int(item.get("category", 0)))
        if category is None:
            left_out["adversarial (category 5)"] += 1
            continue
        # A few upstream evidence entries hold several ids ("D8:6; D9:17"), a stray colon or zero ("D:11:26",
        # "D30:05"), or an id no turn has: read every D<session>:<turn> in them, keep those naming a turn.
        ids = {f"D{int(s)}:{int(t)}" for entry in item.get("evidence", []) for s, t in _EVIDENCE.findall(str(entry))}
        evidence = frozenset(key for key in (f"{dialogue_id}/{dia_id}" for dia_id in ids) if key in known)
        unknown = len(ids) - len(evidence)
        if unknown:
            left_out["evidence ids naming no turn (dropped from their question)"] += unknown
        if not evidence:
            left_out["no evidence id names a turn"] += 1
            continue
        questions.append(Question(f"{dialogue_id}/q{index}", dialogue_id, category, str(item["question"]), evidence))
    speakers = (str(conversation["speaker_a"]), str(conversation["speaker_b"]))
    return Dialogue(dialogue_id, speakers, tuple(turns)), questions, dict(left_out)


def parse(samples: Sequence[tuple[str, dict[str, Any], Sequence[dict[str, Any]]]]) -> LoCoMo:
    """(dialogue id, conversation, qa) per dialogue → the set, in dialogue id order."""
    dialogues: list[Dialogue] = []
    questions: list[Question] = []
    left_out: dict[str, int] = defaultdict(int)
    for dialogue_id, conversation, qa in sorted(samples, key=lambda sample: _order(sample[0])):
        dialogue, asked, dropped = parse_dialogue(dialogue_id, conversation, qa)
        dialogues.append(dialogue)
        questions.extend(asked)
        for reason, count in dropped.items():
            left_out[reason] += count
    digest = hashlib.sha256()
    for dialogue in dialogues:
        for turn in dialogue.turns:
            digest.update(f"{turn.key}\t{turn.content}\n".encode())
    for question in questions:
        digest.update(f"{question.id}\t{question.text}\t{sorted(question.evidence)}\n".encode())
    return LoCoMo(tuple(dialogues), tuple(questions), dict(left_out), digest.hexdigest()[:12])


def _order(dialogue_id: str) -> tuple[int, str]:
    return (int(dialogue_id), "") if dialogue_id.isdigit() else (1 << 30, dialogue_id)


def load(path: Path) -> LoCoMo:
    """A folder of one-dialogue files (`<id>.json`), or the upstream list (`locomo10.json`)."""
    samples: list[tuple[str, dict[str, Any], Sequence[dict[str, Any]]]] = []
    if path.is_dir():
        for file in sorted(path.glob("*.json")):
            item = json.loads(file.read_text(encoding="utf-8"))
            samples.append((file.stem, item.get("conversation", item), item["qa"]))
    else:
        items = json.loads(path.read_text(encoding="utf-8"))
        for number, item in enumerate(items):
            sample_id = str(item.get("sample_id", number)).removeprefix("conv-")
            samples.append((sample_id, item["conversation"], item["qa"]))
    if not samples:
        raise SystemExit(f"{path}: no dialogues (a folder of <id>.json files or a locomo10.json list)")
    return parse(samples)


# ---------------------------------------------------------------------------------------------------- scores


def recall_at(ranked: Sequence[str], evidence: frozenset[str], depth: int) -> float:
    """The share of the evidence turns among the first `depth` results."""
    return len(evidence.intersection(ranked[:depth])) / len(evidence)


def hit_at(ranked: Sequence[str], evidence: frozenset[str], depth: int) -> float:
    """1 when at least one evidence turn is among the first `depth` results."""
    return 1.0 if evidence.intersection(ranked[:depth]) else 0.0


def scores(ranked: Sequence[str], evidence: frozenset[str]) -> dict[str, float]:
    values = {f"R@{depth}": recall_at(ranked, evidence, depth) for depth in DEPTHS}
    values |= {f"hit@{depth}": hit_at(ranked, evidence, depth) for depth in DEPTHS}
    return values


def table(questions: Sequence[Question], ranked: dict[str, Sequence[str]]) -> dict[str, dict[str, Any]]:
    """group (overall and each category) → n and the mean of each score over its questions."""
    rows: dict[str, list[dict[str, float]]] = defaultdict(list)
    for question in questions:
        scored = scores(ranked[question.id], question.evidence)
        rows["overall"].append(scored)
        rows[question.category].append(scored)
    return {
        group: {"n": len(rows[group])}
        | {name: statistics.fmean(row[name] for row in rows[group]) for name in rows[group][0]}
        for group in GROUPS
        if rows[group]
    }


def by_half(data: LoCoMo, rankings: dict[str, dict[str, Sequence[str]]]) -> dict[str, dict[str, Any]]:
    """half (tuning, held_out, all) → ranking name → group → scores."""
    halves = {**HALVES, "all": tuple(dialogue.id for dialogue in data.dialogues)}
    return {
        half: {
            name: table([question for question in data.questions if question.dialogue in members], ranked)
            for name, ranked in rankings.items()
        }
        for half, members in halves.items()
    }


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def adjacency(legs: dict[str, Any]) -> dict[str, tuple[str | None, ...]]:
    """turn key → the keys of the turns just before and after it in its session, for the rows of one question's
    legs (a replay's stand-in for SearchRepository.adjacent: bulk_create stores a dialogue's turns in order, so
    the thought before a turn is the turn before it, the last of the previous session before a session's first —
    which the replay leaves out)."""
    result: dict[str, tuple[str | None, ...]] = {}
    for key, _ in (*legs["vector"], *legs["lexical"]):
        dialogue, dia_id = key.split("/", 1)
        session, turn = dia_id[1:].split(":")
        result[key] = (f"{dialogue}/D{session}:{int(turn) - 1}", f"{dialogue}/D{session}:{int(turn) + 1}")
    return result


# ---------------------------------------------------------------------------------------------------- the store


@contextmanager
def store_database(data: LoCoMo, model: str, fresh: bool) -> Iterator[tuple[str, Path | None]]:
    """(url, cache folder or None): the cached embedded PostgreSQL of this data and model, or a temporary one."""
    if fresh:
        with tempfile.TemporaryDirectory(prefix="synapto-locomo-") as folder:
            embedded = EmbeddedPostgres(Path(folder), delete_on_stop=True)
            url = embedded.start()
            try:
                migrations.upgrade(url)
                yield url, None
            finally:
                embedded.stop()
        return
    folder = CACHE / f"{re.sub(r'[^A-Za-z0-9.-]+', '_', model)}-{data.digest}"
    embedded = EmbeddedPostgres(folder)
    url = embedded.start()
    try:
        migrations.upgrade(url)  # a newer migration applies to the cached store too
        yield url, folder
    finally:
        embedded.stop()


async def store(caller: Caller, data: LoCoMo, suffix: str) -> tuple[dict[str, str], dict[str, str], float]:
    """A project per dialogue, its turns in one bulk_create; (dialogue → cwd, thought id → turn key, seconds)."""
    cwd_of: dict[str, str] = {}
    key_of: dict[str, str] = {}
    started = time.perf_counter()
    for dialogue in data.dialogues:
        local_path = f"/bench/locomo/{dialogue.id}{suffix}"
        await caller(
            "memory_manage",
            {
                "action": "create",
                "name": f"locomo-{dialogue.id}{suffix}",
                "local_path": local_path,
                "description": f"Chat sessions between {dialogue.speakers[0]} and {dialogue.speakers[1]}",
            },
        )
        cwd_of[dialogue.id] = local_path
        result = await caller(
            "memory_store",
            {"action": "bulk_create", "cwd": local_path, "thoughts": [{"content": t.content} for t in dialogue.turns]},
        )
        failed = [item for item in result["items"] if item["status"] != "created"]
        if failed:
            raise RuntimeError(f"{dialogue.id}: bulk_create did not create {len(failed)} turns: {failed[:3]}")
        for item in result["items"]:
            key_of[item["thought"]["id"]] = dialogue.turns[item["index"]].key
    seconds = time.perf_counter() - started
    expected = sum(len(dialogue.turns) for dialogue in data.dialogues)
    if len(key_of) != expected:
        raise RuntimeError(f"{expected} turns in the set, {len(key_of)} distinct rows stored")
    return cwd_of, key_of, seconds


async def stored(session: Session, data: LoCoMo, model: str, folder: Path | None) -> dict[str, Any]:
    """The store's manifest (cwd_of, key_of, how long storing took, when), storing first when it is not cached."""
    manifest_file = folder / "stored.json" if folder is not None else None
    if manifest_file is not None and manifest_file.exists():
        manifest: dict[str, Any] = json.loads(manifest_file.read_text(encoding="utf-8"))
        return manifest | {"cached": True}
    cwd_of, key_of, seconds = await store(session.callers[False], data, session.suffix)
    manifest = {
        "model": model,
        "cwd_of": cwd_of,
        "key_of": key_of,
        "turns": len(key_of),
        "store_seconds": round(seconds, 2),
        "stored_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if manifest_file is not None:
        manifest_file.write_text(json.dumps(manifest) + "\n", encoding="utf-8")
    return manifest | {"cached": False}


# ---------------------------------------------------------------------------------------------------- the runs


async def service_rankings(
    session: Session, data: LoCoMo, cwd_of: dict[str, str], key_of: dict[str, str], unscoped: bool = False
) -> tuple[dict[str, dict[str, list[str]]], dict[str, list[float]]]:
    """mode → question id → turn keys returned; mode → seconds per call (`unscoped`: asked without a cwd)."""
    ranked: dict[str, dict[str, list[str]]] = defaultdict(dict)
    timings: dict[str, list[float]] = defaultdict(list)
    for number, question in enumerate(data.questions, start=1):
        for mode in SERVICE_MODES:
            result, seconds = await scoped_search(
                session, mode, question.text, None if unscoped else cwd_of[question.dialogue], question.id, LIMIT
            )
            timings[mode.name].append(seconds)
            ranked[mode.name][question.id] = [key_of.get(item["thought"]["id"], "?") for item in result["items"]]
        if number % 250 == 0:
            print(f"  {number}/{len(data.questions)} questions searched", file=sys.stderr, flush=True)
    return ranked, timings


async def stored_vectors(
    session: Session, project_path: str | None, key_of: dict[str, str]
) -> tuple[list[str], np.ndarray]:
    """(turn keys, unit rows) of the vectors the store holds for a dialogue's project (None: every project's)."""
    where = "" if project_path is None else "p.local_path = :path AND "
    statement = text(
        "SELECT t.id::text AS id, t.embedding::text AS embedding FROM thought t JOIN project p ON p.id = t.project_id "
        f"WHERE {where}t.status = 'active' AND t.embedding IS NOT NULL ORDER BY t.created_at, t.id"
    )
    async with session.database.unit_of_work() as db:
        rows = (await db.execute(statement, {"path": project_path})).all()
    matrix = np.asarray([np.fromstring(row.embedding.strip("[]"), sep=",") for row in rows], dtype=np.float64)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return [key_of[row.id] for row in rows], matrix


def bm25_rankings(data: LoCoMo, unscoped: bool = False) -> dict[str, list[str]]:
    """question id → turn keys with a positive bm25s score, best first (ties in conversation order); over its
    dialogue's turns, or with `unscoped` over every turn of the set."""
    rankings: dict[str, list[str]] = {}
    if unscoped:
        turns = [turn for dialogue in data.dialogues for turn in dialogue.turns]
        orders = bm25_orders([turn.content for turn in turns], [q.text for q in data.questions])
        return {q.id: [turns[i].key for i in order] for q, order in zip(data.questions, orders, strict=True)}
    for dialogue in data.dialogues:
        questions = [question for question in data.questions if question.dialogue == dialogue.id]
        orders = bm25_orders([turn.content for turn in dialogue.turns], [q.text for q in questions])
        for question, order in zip(questions, orders, strict=True):
            rankings[question.id] = [dialogue.turns[i].key for i in order]
    return rankings


@dataclass
class Queries:
    """Each question's vector from the served runtime, embedded once for the dense reference and the legs."""

    vectors: dict[str, list[float]]


async def query_vectors(runtime: EmbeddingRuntime, data: LoCoMo) -> Queries:
    vectors: dict[str, list[float]] = {}
    for question in data.questions:
        vector = await runtime.embed_query(question.text)
        if vector is None:
            raise RuntimeError("embedding a question failed")
        vectors[question.id] = list(vector)
    return Queries(vectors)


async def dense_rankings(
    session: Session,
    data: LoCoMo,
    queries: Queries,
    cwd_of: dict[str, str],
    key_of: dict[str, str],
    unscoped: bool = False,
) -> dict[str, list[str]]:
    """question id → every turn of its dialogue (`unscoped`: of the set) by exact cosine of the stored vectors,
    best first."""
    rankings: dict[str, list[str]] = {}
    if unscoped:
        keys, matrix = await stored_vectors(session, None, key_of)
        for question in data.questions:
            vector = np.asarray(queries.vectors[question.id], dtype=np.float64)
            cosine = matrix @ (vector / np.linalg.norm(vector))
            rankings[question.id] = [keys[i] for i in np.argsort(-cosine, kind="stable")[: 10 * LIMIT]]
        return rankings
    for dialogue in data.dialogues:
        keys, matrix = await stored_vectors(session, cwd_of[dialogue.id], key_of)
        for question in data.questions:
            if question.dialogue != dialogue.id:
                continue
            vector = np.asarray(queries.vectors[question.id], dtype=np.float64)
            cosine = matrix @ (vector / np.linalg.norm(vector))
            rankings[question.id] = [keys[i] for i in np.argsort(-cosine, kind="stable")]
    return rankings


async def leg_rows(
    session: Session,
    data: LoCoMo,
    queries: Queries,
    cwd_of: dict[str, str],
    key_of: dict[str, str],
    model: str,
    unscoped: bool = False,
) -> dict[str, Any]:
    """question id → the service's vector leg (key, cosine) and lexical leg (key, BM25) at a limit-10 pool, and
    the lexical leg's Σ idf (for bench.fusion's replay); in its dialogue's project or (`unscoped`) over all."""
    pool = pool_size(LIMIT)
    settings = session.callers[False].context.settings.search.bm25
    legs: dict[str, Any] = {}
    async with session.database.unit_of_work() as db:
        projects = ProjectRepository(db)
        repository = SearchRepository(db)
        project_of = {}
        for dialogue_id, cwd in cwd_of.items():
            project = await projects.find_for_path(cwd)
            assert project is not None
            project_of[dialogue_id] = project.id
        for question in data.questions:
            project_id = None if unscoped else project_of[question.dialogue]
            where = ThoughtFilter(project_id=project_id, statuses=(ThoughtStatus.active,))
            vector_rows = await repository.vector_leg(queries.vectors[question.id], model, where, pool)
            lexical = await repository.lexical_leg(question.text, where, pool, settings)
            lexical = await repository.with_scores_of(lexical, [row.id for row in vector_rows], settings)
            legs[question.id] = {
                "vector": [(key_of[str(row.id)], round(1.0 - row.score, 6)) for row in vector_rows],
                "lexical": [(key_of[str(row.id)], round(row.score, 6)) for row in lexical.rows],
                "idf_mass": lexical.idf_mass,
            }
    return legs


SCOPES = {"dialogue": (False,), "every": (True,), "both": (False, True)}  # --scope → unscoped passes, in order


async def scope_pass(
    session: Session,
    data: LoCoMo,
    manifest: dict[str, Any],
    queries: Queries,
    model: str,
    unscoped: bool,
) -> dict[str, Any]:
    """Every question through the service in each mode, the references and the legs, in one scope: its
    dialogue's project, or (`unscoped`) no cwd, every project."""
    cwd_of, key_of = manifest["cwd_of"], manifest["key_of"]
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    ranked, timings = await service_rankings(session, data, cwd_of, key_of, unscoped)
    seconds["service_searches"] = time.perf_counter() - started
    started = time.perf_counter()
    ranked["dense"] = await dense_rankings(session, data, queries, cwd_of, key_of, unscoped)
    seconds["dense"] = time.perf_counter() - started
    started = time.perf_counter()
    ranked["bm25"] = bm25_rankings(data, unscoped)
    seconds["bm25"] = time.perf_counter() - started
    ranked["rrf"] = {key: rrf(ranked["bm25"][key], ranked["dense"][key]) for key in ranked["dense"]}
    legs = await leg_rows(session, data, queries, cwd_of, key_of, model, unscoped)
    rankings = {name: {key: rows[:LIMIT] for key, rows in by_question.items()} for name, by_question in ranked.items()}
    latency = {
        name: {"p50_ms": round(percentile(values, 0.5) * 1000, 2), "p95_ms": round(percentile(values, 0.95) * 1000, 2)}
        for name, values in timings.items()
    }
    return {
        "latency": latency,
        "seconds": {key: round(value, 1) for key, value in seconds.items()},
        "scores": by_half(data, rankings),
        "rankings": rankings,
        "legs": legs,
    }


async def run(
    data: LoCoMo, model: str, url: str, folder: Path | None, search: Sequence[str] = (), scope: str = "dialogue"
) -> dict[str, Any]:
    runtime, lexical_runtime = await model_runtimes(model)
    session = await open_session(url, runtime, lexical_runtime, search_settings(search))
    passes: dict[str, dict[str, Any]] = {}
    try:
        manifest = await stored(session, data, model, folder)
        queries = await query_vectors(runtime, data)
        for unscoped in SCOPES[scope]:
            name = "unscoped" if unscoped else "scoped"
            print(f"  asking every question {name}", file=sys.stderr, flush=True)
            passes[name] = await scope_pass(session, data, manifest, queries, model, unscoped)
        server = await session.server()
    finally:
        await session.database.dispose()
    store_ = {key: manifest[key] for key in ("turns", "store_seconds", "stored_at", "cached")}
    store_["thoughts_per_second"] = round(manifest["turns"] / manifest["store_seconds"], 1)
    # The scoped pass stays at the top level (as before --scope); an unscoped pass under "unscoped".
    result: dict[str, Any] = {"store": store_, "server": server, **passes.pop("scoped", {})}
    if "unscoped" in passes:
        result["unscoped"] = passes["unscoped"]
    return result


# ---------------------------------------------------------------------------------------------------- report

ROWS = {
    "hybrid_default": "search (default call)",
    "hybrid": "search, min_relevance 0",
    "vector": "vector leg alone (hybrid false)",
    "lexical": "lexical leg alone (no embedder)",
    "bm25": "reference bm25s",
    "dense": "reference exact cosine",
    "rrf": "reference RRF k 60",
}


def print_report(data: LoCoMo, model: str, result: dict[str, Any]) -> None:
    print(CITATION)
    counts = {half: sum(1 for q in data.questions if q.dialogue in members) for half, members in HALVES.items()}
    turns = sum(len(dialogue.turns) for dialogue in data.dialogues)
    left = ", ".join(f"{reason}: {count}" for reason, count in data.left_out.items())
    print(
        f"{len(data.dialogues)} dialogues, {turns} turns, {len(data.questions)} questions ({counts}); left out: {left}"
    )
    store_ = result["store"]
    cached = f" (cached store of {store_['stored_at']})" if store_["cached"] else ""
    print(f"model {model}; bulk_create {store_['thoughts_per_second']} thoughts/s{cached}")
    for label, scope_result in (("asked in its dialogue's project", result), ("unscoped", result.get("unscoped"))):
        if scope_result is not None and "scores" in scope_result:
            print(f"\n=== {label}")
            print_scope(scope_result)


def print_scope(result: dict[str, Any]) -> None:
    for half, by_name in result["scores"].items():
        print(f"\n{half}: R@5 / R@10 (hit@5)")
        print(f"{'ranking':<36}" + "".join(f"{group:>22}" for group in GROUPS))
        for name, label in ROWS.items():
            groups = by_name[name]
            cells = "".join(
                f"{groups[g]['R@5']:.3f}/{groups[g]['R@10']:.3f} ({groups[g]['hit@5']:.3f})".rjust(22)
                if g in groups
                else " " * 22
                for g in GROUPS
            )
            print(f"{label:<36}{cells}")
    latency = "; ".join(
        f"{name} p50 {value['p50_ms']:.1f} ms, p95 {value['p95_ms']:.1f} ms"
        for name, value in result["latency"].items()
    )
    print(f"\nlatency per call (in-process dispatch): {latency}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.locomo", description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="a folder of <id>.json dialogues or locomo10.json")
    parser.add_argument("--model", default=shipped_settings().embedding.model, help="default: the served default")
    parser.add_argument("--fresh", action="store_true", help="store into a temporary database, not the cache")
    parser.add_argument("--out", type=Path, default=RESULTS / "locomo.json")
    parser.add_argument(
        "--search", action="append", default=[], metavar="NAME=VALUE", help="a search setting for this run"
    )
    parser.add_argument("--no-legs", action="store_true", help="do not rewrite the legs file (bench.fusion's input)")
    parser.add_argument(
        "--scope",
        choices=sorted(SCOPES),
        default="dialogue",
        help="ask in each question's dialogue (default), without a cwd over every dialogue (every), or both",
    )
    args = parser.parse_args(argv)
    data = load(args.data)
    started = time.perf_counter()
    with store_database(data, args.model, args.fresh) as (url, folder):  # migrations run their own event loop
        result = asyncio.run(run(data, args.model, url, folder, args.search, args.scope))
    written = {"legs": result.pop("legs", None), "legs_unscoped": result.get("unscoped", {}).pop("legs", None)}
    CACHE.mkdir(parents=True, exist_ok=True)
    legs_file = CACHE / f"legs-{re.sub(r'[^A-Za-z0-9.-]+', '_', args.model)}.json"
    if not args.no_legs:
        questions = {
            q.id: {"category": q.category, "dialogue": q.dialogue, "evidence": sorted(q.evidence)}
            for q in data.questions
        }
        # A pass of one scope keeps the other scope's legs of the same questions.
        kept = json.loads(legs_file.read_text(encoding="utf-8")) if legs_file.exists() else {}
        legs = {"questions": questions} | {
            name: rows if rows is not None else kept.get(name)
            for name, rows in written.items()
            if rows is not None or (kept.get("questions") == questions and kept.get(name) is not None)
        }
        legs_file.write_text(json.dumps(legs) + "\n", encoding="utf-8")
    output = {
        "data": {"citation": CITATION, "path": str(args.data), "digest": data.digest, "left_out": data.left_out},
        "setup": {
            "model": args.model,
            "search": args.search,
            "limit": LIMIT,
            "halves": HALVES,
            "references": {"bm25": BM25, "rrf_k": RRF_K},
        },
        **result,
        "total_seconds": round(time.perf_counter() - started, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(output, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print_report(data, args.model, result)
    print(f"\n{output['total_seconds']} s in all; wrote {args.out}" + ("" if args.no_legs else f" and {legs_file}"))


if __name__ == "__main__":
    main()
