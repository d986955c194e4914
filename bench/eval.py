"""Retrieval quality: recall of memory_recall search on a conversational corpus, against BM25 and dense references.

Run: `make eval` or `python -m bench.eval [--set conversation|old|both]` (needs the offline model: `make model`).

1. The conversation set (bench/data/conversation_set.json, made by bench/conversation_data.py: 10 generated
   multi-session dialogues between two people, 3,590 turns, 603 questions of four kinds — single-hop,
   temporal, multi-hop, open-domain — each with its evidence turns). Every turn is one thought
   `[<session date>] <speaker>: <text>`, stored through the real tool path: `memory_manage create` (a project with
   a local_path per dialogue), then `memory_store bulk_create` with that cwd. Every question then runs through
   `memory_recall action=search` (cwd of its dialogue, limit 10, compact false) in four modes:

   - hybrid_default: hybrid as an agent calls it (min_relevance omitted: the default gate);
   - hybrid: min_relevance 0;
   - vector: hybrid false, min_relevance 0 (the vector leg only);
   - lexical: min_relevance 0 on an AppContext whose EmbeddingRuntime has no embedder, so the service answers
     from the lexical leg (meta.degraded true, checked).

   In the same run, over the same texts and per dialogue, three reference rankings:

   - bm25: the `bm25s` package, Lucene variant, k1 1.5, b 0.75, its English stop words (Lucene's 33), Snowball
     English stemmer (`PyStemmer`);
   - dense: plain cosine between the offline model's query vector (EmbeddingRuntime.embed_query) and passage
     vectors (EmbeddingRuntime.embed_passages) — what the vector leg would rank with an exact scan;
   - rrf: reciprocal rank fusion, k 60, of bm25 (turns with a positive score) and dense (all turns).

   Score: R@5 and R@10 = the share of a question's evidence turns in the first 5 / 10 results, averaged over the
   questions, overall and by kind (MRR in the JSON too).
   `--check` (what `make eval` runs, on the served default model) exits 1 when the default call misses a target of
   the model's `Targets` (TARGETS below, each figure's origin beside it): R@5 at least the reference RRF's + a
   margin and the reference BM25's + a margin, no question kind under the reference BM25, at most so much R@5 lost
   to the default gate; or when a service mode's overall R@10 is more than 0.02 under its textbook reference's
   (vector ~ dense, lexical ~ bm25, hybrid ~ rrf); or, where the model has them, when the hand-written set's
   floors are missed (below). A model without targets is refused by `--check`. Without it the run only reports.

2. The old hand-written set (bench/data/retrieval_set.json: 223 thoughts about software projects, 93 queries),
   loaded with `memory_store link_batch` for its `replaces`/`contradicts` edges, scored with recall@5/10 and MRR
   in vector / lexical / hybrid modes and three diagnostics (standing re-order off, default gate). `--check` holds
   the default call's R@5 (hybrid_default_gate), overall and in the kinds the model's targets name, to its floors.

Each set gets a fresh embedded PostgreSQL in a temporary directory (deleted at the end) unless
SYNAPTO_DATABASE_URL is set (then it should be a scratch database: the run adds its projects there, and the old
set's queries without a project see every row, the conversation turns included).

Prints the tables and writes bench/results/eval.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import text

from app.config import EmbeddingSettings, SearchSettings, Settings
from app.db import migrations
from app.db.embedded import EmbeddedPostgres
from app.db.engine import Database, build_engine
from app.db.models import Role
from app.db.records import Principal
from app.embedding.profiles import OFFLINE_E5, OFFLINE_MINILM
from app.embedding.runtime import EmbeddingRuntime
from app.mcp.dispatch import dispatch
from app.mcp.tools.catalog import ALL_SPECS
from app.services.auth.tokens import AuthService
from app.services.context import AppContext
from bench import conversation_data
from bench.calibrate import DATASET, RESULTS, load_set, model_cache_dir
from bench.common import shipped_settings

SPECS = {spec.name: spec for spec in ALL_SPECS}
Loaded = tuple[dict[str, str], dict[str, str]]  # project name → cwd, thought id → key
LIMIT = 10
METRICS = ("recall@5", "recall@10", "mrr")
KINDS = ("paraphrase", "exact", "identifier", "multilingual", "superseded", "contradicted")
CONVERSATION_KINDS = conversation_data.KINDS
RRF_K = 60
BM25 = {"method": "lucene", "k1": 1.5, "b": 0.75, "stopwords": "en", "stemmer": "english"}


@dataclass(frozen=True)
class Mode:
    name: str
    lexical_only: bool  # run on the context without an embedder
    arguments: dict[str, Any]
    diagnostic: bool = False


# The conversation set: min_relevance None = omitted (the default gate).
SERVICE_MODES = (
    Mode("hybrid_default", False, {"hybrid": True, "min_relevance": None}),
    Mode("hybrid", False, {"hybrid": True, "min_relevance": 0}),
    Mode("vector", False, {"hybrid": False, "min_relevance": 0}),
    Mode("lexical", True, {"hybrid": True, "min_relevance": 0}),
)
REFERENCES = ("bm25", "dense", "rrf")
# The service mode each reference is the textbook version of (for the agreement line).
COUNTERPART = {"vector": "dense", "lexical": "bm25", "hybrid": "rrf"}


@dataclass(frozen=True)
class Targets:
    """What `--check` holds one model's run to (shortfalls). The conversation set, default call, R@5: at least the
    reference RRF's + `rrf_margin` and the reference BM25's + `bm25_margin` (references of the same run), every
    question kind at least the reference BM25's + `kind_margin`, at most `gate_loss` under `min_relevance 0`; every
    service mode's overall R@10 at most `tolerance` under its reference's. The hand-written set, default call
    (hybrid_default_gate), R@5: overall at least `hand_default`, and in each kind of `hand_kinds` at least its floor
    there (None: not held)."""

    rrf_margin: float
    bm25_margin: float
    kind_margin: float
    gate_loss: float
    tolerance: float
    hand_default: float | None = None
    hand_kinds: tuple[tuple[str, float], ...] = ()


# Allowance of a re-derived figure: issue 23's "no fall on the generated sets beyond 0.01 R@5".
ALLOWANCE = 0.01
TARGETS: dict[str, Targets] = {
    # The targets of issue 15 (0.05 / 0.08 / no kind under BM25 / gate ≤ 0.01) and the 0.02 agreement tolerance,
    # as stated there; met by MiniLM (docs/BENCHMARKS.md, eighth and eleventh rounds). The hand-written set unheld.
    OFFLINE_MINILM: Targets(rrf_margin=0.05, bm25_margin=0.08, kind_margin=0.0, gate_loss=0.01, tolerance=0.02),
    # The served default, re-derived the issue-15 way on its own run: each figure = what e5 measures at 518c2bc
    # (2026-12-02 02:22-02:38 UTC, deterministic: the eleventh round's figures) minus ALLOWANCE
    # (docs/BENCHMARKS.md, "make eval --check on e5"). On this generated set e5's dense leg beats BM25 by 0.12, so
    # the RRF of the two sits at 0.292 and the default call's margins are what e5 has, not what issue 15 asked of
    # MiniLM; the real-dialogue targets are LoCoMo's (bench.locomo), which e5 meets.
    OFFLINE_E5: Targets(
        rrf_margin=0.040,  # default 0.3425 − rrf 0.2922 = 0.0503, − 0.01
        bm25_margin=0.063,  # default 0.3425 − bm25 0.2687 = 0.0738, − 0.01 (rounded down)
        kind_margin=0.0,  # issue 15's "no kind under BM25", kept: e5's closest kind is open-domain, +0.008
        # gate: min_relevance 0 0.3858 − default 0.3425 = 0.0433, + 0.01 (rounded up). The e5 floors 0.83 / 0.85
        # keep off-topic queries silent on the hand-written set, and cost this here (ninth round: no floors meet
        # both sets; on LoCoMo the gate costs 0.000-0.006).
        gate_loss=0.054,
        tolerance=0.02,  # issue 15's; e5 measures vector − dense 0.000, lexical − bm25 −0.002, hybrid − rrf +0.130
        hand_default=0.862,  # hand-written default gate R@5 0.8728, − 0.01 (rounded down)
        hand_kinds=(),
    ),
}

MODES = (
    Mode("vector", False, {"hybrid": False}),
    Mode("lexical", True, {"hybrid": True}),
    Mode("hybrid", False, {"hybrid": True}),
    # diagnostics: what the standing re-order costs, and the default call (gate on, min_relevance omitted)
    Mode("hybrid_standing_off", False, {"supersession_mode": "off", "contradiction_mode": "off"}, True),
    Mode("vector_default_gate", False, {"hybrid": False, "min_relevance": None}, True),
    Mode("hybrid_default_gate", False, {"min_relevance": None}, True),
)


class Caller:
    """One principal calling tools through `dispatch`, as the MCP server does."""

    def __init__(self, context: AppContext, principal: Principal) -> None:
        self.context = context
        self.principal = principal

    async def __call__(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        answer = await dispatch(SPECS[tool], arguments, self.context, self.principal)
        text = "".join(getattr(block, "text", "") for block in answer.content)
        if answer.is_error or answer.structured_content is None:
            raise RuntimeError(f"{tool} {arguments.get('action')} failed: {text[:500]}")
        result: dict[str, Any] = answer.structured_content["result"]
        return result


@contextmanager
def database_url() -> Iterator[tuple[str, str]]:
    """(url, description): SYNAPTO_DATABASE_URL, else an embedded PostgreSQL in a temp dir."""
    configured = os.environ.get("SYNAPTO_DATABASE_URL")
    if configured:
        migrations.upgrade(configured)
        yield configured, "SYNAPTO_DATABASE_URL"
        return
    with tempfile.TemporaryDirectory(prefix="synapto-eval-") as data_dir:
        embedded = EmbeddedPostgres(Path(data_dir), delete_on_stop=True)
        url = embedded.start()
        try:
            migrations.upgrade(url)
            yield url, "embedded PostgreSQL (temporary directory)"
        finally:
            embedded.stop()


@dataclass
class Session:
    """A database with an admin principal, and a caller with the embedder and one without (lexical)."""

    database: Database
    callers: dict[bool, Caller]  # lexical_only → caller
    suffix: str  # appended to project names and paths on a shared database

    async def server(self) -> dict[str, str]:
        async with self.database.unit_of_work() as session:
            server = (await session.execute(text("SHOW server_version"))).scalar_one()
            vector = (
                await session.execute(text("SELECT extversion FROM pg_extension WHERE extname = 'vector'"))
            ).scalar_one()
        return {"postgresql": server, "pgvector": vector}


def search_settings(overrides: Sequence[str]) -> Settings:
    """The shipped settings with `name=value` overrides of the search group (`--search`, for comparing variants
    in a run; what a benchmark reports without them is the service as shipped)."""
    settings = shipped_settings()
    if not overrides:
        return settings
    fields = dict(item.split("=", 1) for item in overrides)
    search = SearchSettings.model_validate(settings.search.model_dump() | fields)
    return settings.model_copy(update={"search": search})


async def open_session(
    url: str, runtime: EmbeddingRuntime, lexical_runtime: EmbeddingRuntime, settings: Settings | None = None
) -> Session:
    database = Database(build_engine(url, pool_size=5))
    settings = settings or shipped_settings()
    async with database.unit_of_work() as session:
        principal = await AuthService(session).ensure_user(f"bench-eval-{uuid.uuid4().hex[:8]}", Role.admin)
    callers = {
        False: Caller(AppContext(database, runtime, settings), principal),
        True: Caller(AppContext(database, lexical_runtime, settings), principal),
    }
    suffix = "" if "SYNAPTO_DATABASE_URL" not in os.environ else f"-eval-{uuid.uuid4().hex[:8]}"
    return Session(database, callers, suffix)


def score(ranked: list[str], relevant: set[str]) -> dict[str, float]:
    first = next((rank for rank, key in enumerate(ranked, start=1) if key in relevant), None)
    return {
        "recall@5": len(relevant.intersection(ranked[:5])) / len(relevant),
        "recall@10": len(relevant.intersection(ranked[:10])) / len(relevant),
        "mrr": 0.0 if first is None else 1.0 / first,
    }


def mean_scores(rows: list[dict[str, float]]) -> dict[str, float]:
    return {metric: statistics.fmean(row[metric] for row in rows) for metric in METRICS}


# ---------------------------------------------------------------------------------------------- conversation set


def turn_rows(data: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """dialogue id → [(turn id, stored content)] in conversation order."""
    return {
        dialogue["id"]: [
            (turn["id"], conversation_data.content(session["date"], turn))
            for session in dialogue["sessions"]
            for turn in session["turns"]
        ]
        for dialogue in data["dialogues"]
    }


async def load_conversations(caller: Caller, data: dict[str, Any], suffix: str) -> Loaded:
    """A project per dialogue, its turns through bulk_create; returns (dialogue id → cwd, thought id → turn id)."""
    cwd_of: dict[str, str] = {}
    key_of: dict[str, str] = {}
    for dialogue_id, rows in turn_rows(data).items():
        speakers = next(d["speakers"] for d in data["dialogues"] if d["id"] == dialogue_id)
        local_path = f"/bench/conversations/{dialogue_id}{suffix}"
        await caller(
            "memory_manage",
            {
                "action": "create",
                "name": f"conversation-{dialogue_id}{suffix}",
                "local_path": local_path,
                "description": f"Chat sessions between {speakers[0]} and {speakers[1]}",
            },
        )
        cwd_of[dialogue_id] = local_path
        result = await caller(
            "memory_store",
            {"action": "bulk_create", "cwd": local_path, "thoughts": [{"content": content} for _, content in rows]},
        )
        failed = [item for item in result["items"] if item["status"] != "created"]
        if failed:
            raise RuntimeError(f"{dialogue_id}: bulk_create did not create {len(failed)} turns: {failed[:3]}")
        for item in result["items"]:
            key_of[item["thought"]["id"]] = rows[item["index"]][0]
    expected = sum(len(rows) for rows in turn_rows(data).values())
    if len(key_of) != expected:
        raise RuntimeError(f"{expected} turns in the set, {len(key_of)} distinct rows stored")
    return cwd_of, key_of


def english_stemmer() -> Any:
    import Stemmer  # PyStemmer (the `bench` extra)

    return Stemmer.Stemmer(BM25["stemmer"])


def bm25_orders(documents: Sequence[str], queries: Sequence[str]) -> list[list[int]]:
    """Per query, the indexes of the documents with a positive bm25s score (the BM25 reference's settings), best
    first (ties in document order): the reference of the conversation set and of LoCoMo."""
    import bm25s  # the `bench` extra

    stemmer = english_stemmer()
    corpus = bm25s.tokenize(list(documents), stopwords=BM25["stopwords"], stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25(method=BM25["method"], k1=BM25["k1"], b=BM25["b"])
    retriever.index(corpus, show_progress=False)
    if not queries:
        return []
    tokens = bm25s.tokenize(
        list(queries), stopwords=BM25["stopwords"], stemmer=stemmer, return_ids=False, show_progress=False
    )
    orders = []
    for query in tokens:
        scores = retriever.get_scores(query)
        orders.append([int(i) for i in np.argsort(-scores, kind="stable") if scores[i] > 0])
    return orders


def bm25_rankings(data: dict[str, Any]) -> dict[str, list[str]]:
    """question id → turn ids with a positive BM25 score, best first (ties in conversation order)."""
    rankings: dict[str, list[str]] = {}
    for dialogue_id, rows in turn_rows(data).items():
        questions = [q for q in data["questions"] if q["dialogue"] == dialogue_id]
        orders = bm25_orders([content for _, content in rows], [q["text"] for q in questions])
        for question, order in zip(questions, orders, strict=True):
            rankings[question["id"]] = [rows[i][0] for i in order]
    return rankings


async def dense_rankings(runtime: EmbeddingRuntime, data: dict[str, Any]) -> dict[str, list[str]]:
    """question id → every turn of its dialogue by cosine to the question, best first."""
    rankings: dict[str, list[str]] = {}
    for dialogue_id, rows in turn_rows(data).items():
        vectors = await runtime.embed_passages([content for _, content in rows])
        if vectors is None:
            raise RuntimeError("embedding the turns failed")
        passages = np.asarray(vectors, dtype=np.float64)
        passages /= np.linalg.norm(passages, axis=1, keepdims=True)
        for question in data["questions"]:
            if question["dialogue"] != dialogue_id:
                continue
            query = await runtime.embed_query(question["text"])
            if query is None:
                raise RuntimeError("embedding a question failed")
            vector = np.asarray(query, dtype=np.float64)
            cosine = passages @ (vector / np.linalg.norm(vector))
            rankings[question["id"]] = [rows[i][0] for i in np.argsort(-cosine, kind="stable")]
    return rankings


def rrf(*rankings: list[str], k: int = RRF_K) -> list[str]:
    fused: dict[str, float] = defaultdict(float)
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            fused[key] += 1.0 / (k + rank)
    return sorted(fused, key=lambda key: -fused[key])


async def scoped_search(
    session: Session, mode: Mode, query: str, cwd: str | None, question_id: str, limit: int = LIMIT
) -> tuple[dict[str, Any], float]:
    """One question of a dialogue set through `memory_recall search` in its dialogue's project (cwd None: over
    every project, the unscoped call), as `mode` asks (None arguments left out): the answer and its seconds.
    Refuses a run whose mode did not hold (a lexical-only call not degraded, or the reverse) or whose scope is not
    the one asked for (a cwd that did not resolve to its project, or no cwd answered within one)."""
    arguments = {
        key: value
        for key, value in {
            "action": "search",
            "query": query,
            "cwd": cwd,
            "limit": limit,
            "compact": False,
            **mode.arguments,
        }.items()
        if value is not None
    }
    started = time.perf_counter()
    result = await session.callers[mode.lexical_only]("memory_recall", arguments)
    seconds = time.perf_counter() - started
    meta = result["meta"]
    if mode.lexical_only != bool(meta["degraded"]):
        raise RuntimeError(f"{mode.name}: degraded={meta['degraded']} for {question_id}")
    if (meta.get("scope") or {}).get("global", True) != (cwd is None):
        raise RuntimeError(f"{question_id}: the answer's scope is not the one asked for (cwd {cwd}): {meta}")
    return result, seconds


async def run_conversation_queries(
    session: Session, data: dict[str, Any], cwd_of: dict[str, str], key_of: dict[str, str]
) -> tuple[dict[str, dict[str, list[str]]], dict[str, list[float]], dict[str, list[int]]]:
    """mode → question id → turn ids returned; mode → call latencies; mode → rows dropped by the gate."""
    ranked: dict[str, dict[str, list[str]]] = defaultdict(dict)
    timings: dict[str, list[float]] = defaultdict(list)
    filtered: dict[str, list[int]] = defaultdict(list)
    for number, question in enumerate(data["questions"], start=1):
        for mode in SERVICE_MODES:
            result, seconds = await scoped_search(
                session, mode, question["text"], cwd_of[question["dialogue"]], question["id"]
            )
            timings[mode.name].append(seconds)
            meta = result["meta"]
            ranked[mode.name][question["id"]] = [key_of.get(item["thought"]["id"], "?") for item in result["items"]]
            filtered[mode.name].append(meta["counts"].get("filtered_out", 0))
        if number % 100 == 0:
            print(f"  {number}/{len(data['questions'])} questions searched", file=sys.stderr, flush=True)
    return ranked, timings, filtered


def summarise(data: dict[str, Any], ranked: dict[str, dict[str, list[str]]]) -> dict[str, Any]:
    """mode → group (overall and each kind) → mean R@5, R@10, MRR."""
    summary: dict[str, Any] = {}
    for name, by_question in ranked.items():
        rows: dict[str, list[dict[str, float]]] = defaultdict(list)
        for question in data["questions"]:
            scored = score(by_question[question["id"]][:LIMIT], set(question["evidence"]))
            rows["overall"].append(scored)
            rows[question["kind"]].append(scored)
        summary[name] = {group: mean_scores(rows[group]) for group in ("overall", *CONVERSATION_KINDS)}
    return summary


def agreement(data: dict[str, Any], ranked: dict[str, dict[str, list[str]]]) -> dict[str, float]:
    """Mean overlap of the first 10 between each service mode and its textbook reference (1 = the same set)."""
    overlap: dict[str, float] = {}
    for mode, reference in COUNTERPART.items():
        shares = [
            len(set(ranked[mode][q["id"]][:LIMIT]) & set(ranked[reference][q["id"]][:LIMIT])) / LIMIT
            for q in data["questions"]
        ]
        overlap[f"{mode}~{reference}"] = round(statistics.fmean(shares), 3)
    return overlap


def shortfalls(summary: dict[str, Any], targets: Targets) -> list[str]:
    """The conversation set's targets this run misses (Targets): on the default call (hybrid_default), R@5 at least
    the reference RRF's and the reference BM25's + their margins, no question kind under the reference BM25's R@5
    + kind_margin, at most gate_loss R@5 lost to the gate (against min_relevance 0); and every service mode whose
    overall R@10 is more than `tolerance` under its textbook reference's."""
    found = []
    default = summary["hybrid_default"]
    for reference, margin in (("rrf", targets.rrf_margin), ("bm25", targets.bm25_margin)):
        got, want = default["overall"]["recall@5"], summary[reference]["overall"]["recall@5"] + margin
        if got < want:
            found.append(f"hybrid_default R@5 {got:.3f} < {reference} + {margin} = {want:.3f}")
    for kind in CONVERSATION_KINDS:
        got, want = default[kind]["recall@5"], summary["bm25"][kind]["recall@5"] + targets.kind_margin
        if got < want:
            found.append(f"hybrid_default {kind} R@5 {got:.3f} < bm25 + {targets.kind_margin} = {want:.3f}")
    lost = summary["hybrid"]["overall"]["recall@5"] - default["overall"]["recall@5"]
    if lost > targets.gate_loss:
        found.append(f"the default gate loses {lost:.3f} R@5 (> {targets.gate_loss})")
    for mode, reference in COUNTERPART.items():
        got, want = summary[mode]["overall"]["recall@10"], summary[reference]["overall"]["recall@10"]
        if got < want - targets.tolerance:
            found.append(f"{mode} R@10 {got:.3f} < {reference} {want:.3f} − {targets.tolerance}")
    return found


def hand_written_shortfalls(summary: dict[str, Any], targets: Targets) -> list[str]:
    """The hand-written set's floors this run misses (Targets.hand_default, hand_kinds), on the default call."""
    found = []
    default = summary["hybrid_default_gate"]
    floors = ([("overall", targets.hand_default)] if targets.hand_default is not None else []) + list(
        targets.hand_kinds
    )
    for group, floor in floors:
        got = default[group]["recall@5"]
        if got < floor:
            found.append(f"hand-written hybrid_default_gate {group} R@5 {got:.3f} < {floor}")
    return found


async def evaluate_conversation(session: Session, runtime: EmbeddingRuntime, data: dict[str, Any]) -> dict[str, Any]:
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    cwd_of, key_of = await load_conversations(session.callers[False], data, session.suffix)
    seconds["load"] = time.perf_counter() - started
    started = time.perf_counter()
    ranked, timings, filtered = await run_conversation_queries(session, data, cwd_of, key_of)
    seconds["service_searches"] = time.perf_counter() - started
    started = time.perf_counter()
    ranked["bm25"] = bm25_rankings(data)
    seconds["bm25"] = time.perf_counter() - started
    started = time.perf_counter()
    ranked["dense"] = await dense_rankings(runtime, data)
    seconds["dense"] = time.perf_counter() - started
    ranked["rrf"] = {key: rrf(ranked["bm25"][key], ranked["dense"][key]) for key in ranked["dense"]}
    summary = summarise(data, ranked)
    for mode in SERVICE_MODES:
        summary[mode.name]["latency_ms_p50"] = round(statistics.median(timings[mode.name]) * 1000, 2)
        summary[mode.name]["returned_mean"] = round(
            statistics.fmean(len(rows) for rows in ranked[mode.name].values()), 2
        )
        summary[mode.name]["filtered_out_mean"] = round(statistics.fmean(filtered[mode.name]), 2)
    questions = [
        {
            **{key: question[key] for key in ("id", "dialogue", "kind", "text", "evidence")},
            "ranked": {name: rows[question["id"]][:LIMIT] for name, rows in ranked.items()},
        }
        for question in data["questions"]
    ]
    return {
        "summary": summary,
        "agreement_top10": agreement(data, ranked),
        "seconds": {key: round(value, 1) for key, value in seconds.items()},
        "server": await session.server(),
        "questions": questions,
    }


def print_conversation_table(data: dict[str, Any], result: dict[str, Any]) -> None:
    summary = result["summary"]
    counts = {"overall": len(data["questions"])}
    counts.update({kind: sum(1 for q in data["questions"] if q["kind"] == kind) for kind in CONVERSATION_KINDS})
    names = [mode.name for mode in SERVICE_MODES] + list(REFERENCES)
    print(f"{'':<12}{'':>4}  " + " ".join(f"{name:^15}" for name in names))
    print(f"{'kind':<12}{'n':>4}  " + " ".join(f"{'R@5':>7}{'R@10':>7} " for _ in names))
    for group in ("overall", *CONVERSATION_KINDS):
        cells = " ".join(
            f"{summary[name][group]['recall@5']:7.3f}{summary[name][group]['recall@10']:7.3f} " for name in names
        )
        print(f"{group:<12}{counts[group]:>4}  {cells}")
    print("service: " + "; ".join(
        f"{mode.name} p50 {summary[mode.name]['latency_ms_p50']:.1f} ms, {summary[mode.name]['returned_mean']:.1f} "
        "rows" for mode in SERVICE_MODES
    ))  # fmt: skip
    overlap = ", ".join(f"{pair} {value:.2f}" for pair, value in result["agreement_top10"].items())
    print(f"top-10 overlap, service mode ~ reference: {overlap}")
    below = result["shortfalls"]
    if below is not None:
        print(f"targets missed (the model's --check targets): {'; '.join(below) if below else 'none'}")


# --------------------------------------------------------------------------------------------------- old set


async def load_dataset(caller: Caller, data: dict[str, Any], suffix: str) -> Loaded:
    """Projects, thoughts and edges through the tools; returns (project name → cwd, thought id → key)."""
    cwd_of: dict[str, str] = {}
    for project in data["projects"]:
        local_path = f"{project['local_path']}{suffix}"
        await caller(
            "memory_manage",
            {
                "action": "create",
                "name": f"{project['name']}{suffix}",
                "local_path": local_path,
                "description": project["description"],
            },
        )
        cwd_of[project["name"]] = local_path
    key_of: dict[str, str] = {}
    id_of: dict[str, str] = {}
    for project in data["projects"]:
        rows = [row for row in data["thoughts"] if row["project"] == project["name"]]
        result = await caller(
            "memory_store",
            {
                "action": "bulk_create",
                "cwd": cwd_of[project["name"]],
                "thoughts": [{"content": row["content"], "tags": row.get("tags", [])} for row in rows],
            },
        )
        failed = [item for item in result["items"] if item["status"] != "created"]
        if failed:
            raise RuntimeError(f"bulk_create failed for {len(failed)} thoughts: {failed[:3]}")
        for item in result["items"]:
            key = rows[item["index"]]["key"]
            id_of[key] = item["thought"]["id"]
            key_of[item["thought"]["id"]] = key
    if len(id_of) != len(data["thoughts"]):
        raise RuntimeError(f"{len(data['thoughts'])} thoughts in the set, {len(id_of)} distinct rows stored")
    links = [
        {"source": id_of[row["key"]], "target": id_of[other], "type": edge}
        for row in data["thoughts"]
        for edge in ("replaces", "contradicts")
        for other in row.get(edge, [])
    ]
    if links:
        result = await caller("memory_store", {"action": "link_batch", "links": links})
        if result["meta"]["counts"]["failed"]:
            raise RuntimeError(f"link_batch failed: {result['items']}")
    return cwd_of, key_of


async def run_queries(
    callers: dict[bool, Caller], data: dict[str, Any], cwd_of: dict[str, str], key_of: dict[str, str]
) -> dict[str, Any]:
    per_query: list[dict[str, Any]] = []
    timings: dict[str, list[float]] = defaultdict(list)
    for query in data["queries"]:
        entry: dict[str, Any] = {key: query[key] for key in ("id", "kind", "project", "text", "relevant")}
        for mode in MODES:
            arguments: dict[str, Any] = {
                "action": "search",
                "query": query["text"],
                "compact": False,
                "min_relevance": 0,
                "limit": LIMIT,
                **mode.arguments,
            }
            arguments = {key: value for key, value in arguments.items() if value is not None}
            if query["project"] is not None:
                arguments["cwd"] = cwd_of[query["project"]]
            started = time.perf_counter()
            result = await callers[mode.lexical_only]("memory_recall", arguments)
            timings[mode.name].append(time.perf_counter() - started)
            meta = result["meta"]
            if mode.lexical_only != bool(meta["degraded"]):
                raise RuntimeError(f"{mode.name}: degraded={meta['degraded']} for {query['id']}")
            if query["project"] is not None and (meta.get("scope") or {}).get("global", True):
                raise RuntimeError(f"{query['id']}: cwd did not resolve to its project: {meta}")
            ranked = [key_of.get(item["thought"]["id"], "?") for item in result["items"]]
            entry[mode.name] = {
                "ranked": ranked,
                "sources": [item.get("match_source", []) for item in result["items"]],
                "filtered_out": meta["counts"].get("filtered_out", 0),
                **score(ranked, set(query["relevant"])),
            }
        per_query.append(entry)
    summary: dict[str, Any] = {}
    for mode in MODES:
        groups: dict[str, list[dict[str, float]]] = {"overall": [row[mode.name] for row in per_query]}
        for kind in KINDS:
            groups[kind] = [row[mode.name] for row in per_query if row["kind"] == kind]
        summary[mode.name] = {name: mean_scores(rows) for name, rows in groups.items() if rows}
        summary[mode.name]["latency_ms_p50"] = statistics.median(timings[mode.name]) * 1000
        returned = [len(row[mode.name]["ranked"]) for row in per_query]
        summary[mode.name]["returned_mean"] = statistics.fmean(returned)
    return {"summary": summary, "queries": per_query}


def print_table(result: dict[str, Any]) -> None:
    summary = result["summary"]
    counts = {"overall": len(result["queries"])}
    for kind in KINDS:
        counts[kind] = sum(1 for row in result["queries"] if row["kind"] == kind)
    modes = [mode.name for mode in MODES]
    header = f"{'kind':<14}{'n':>4}  " + "  ".join(f"{name:^23}" for name in modes)
    sub = f"{'':<14}{'':>4}  " + "  ".join(f"{'R@5':>7}{'R@10':>8}{'MRR':>8}" for _ in modes)
    print(header)
    print(sub)
    for group in ("overall", *KINDS):
        if counts[group] == 0:
            continue
        cells = []
        for name in modes:
            row = summary[name][group]
            cells.append(f"{row['recall@5']:7.3f}{row['recall@10']:8.3f}{row['mrr']:8.3f}")
        print(f"{group:<14}{counts[group]:>4}  " + "  ".join(cells))
    latency = "  ".join(f"{name} {summary[name]['latency_ms_p50']:.1f} ms" for name in modes)
    print(f"p50 latency per search call: {latency}")
    returned = "  ".join(f"{name} {summary[name]['returned_mean']:.1f}" for name in modes)
    print(f"mean rows returned (limit {LIMIT}): {returned}")
    print(
        "diagnostics: hybrid_standing_off = hybrid with supersession_mode=off, contradiction_mode=off; "
        "hybrid_default_gate = hybrid without min_relevance (the default gate)"
    )


async def evaluate_old(session: Session, data: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    cwd_of, key_of = await load_dataset(session.callers[False], data, session.suffix)
    load_seconds = time.perf_counter() - started
    result = await run_queries(session.callers, data, cwd_of, key_of)
    result["load_seconds"] = round(load_seconds, 2)
    result["server"] = await session.server()
    return result


# ------------------------------------------------------------------------------------------------------ main


def machine() -> dict[str, Any]:
    memory = ""
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        total = next((line for line in meminfo.read_text().splitlines() if line.startswith("MemTotal")), "")
        memory = f"{int(total.split()[1]) / 1024 / 1024:.1f} GiB" if total else ""
    versions = {}
    for package in ("bm25s", "PyStemmer", "numpy"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "memory": memory,
        "python": platform.python_version(),
        "packages": versions,
    }


async def model_runtimes(model: str) -> tuple[EmbeddingRuntime, EmbeddingRuntime]:
    """The prepared model's runtime, loaded (the run stops when it cannot be), and a runtime of the same settings
    never loaded: no embedder, so the searches it serves answer lexically (the lexical leg alone)."""
    settings = EmbeddingSettings(model=model, cache_dir=model_cache_dir())
    runtime = EmbeddingRuntime(settings)
    await runtime.load()
    if runtime.profile is None or runtime.profile.model_id != model:
        sys.exit(f"model {model} not loadable: {runtime.note} (run `make model`)")
    return runtime, EmbeddingRuntime(settings)


async def run(
    sets: list[str],
    conversation: dict[str, Any] | None,
    old: dict[str, Any] | None,
    model: str | None = None,
    search: Sequence[str] = (),
) -> dict[str, Any]:
    model = model or shipped_settings().embedding.model  # the served default
    runtime, lexical_runtime = await model_runtimes(model)
    results: dict[str, Any] = {}
    for name in sets:
        started = time.perf_counter()
        with ExitStack() as stack:
            # in a thread: the migrations run their own event loop
            url, where = await asyncio.to_thread(stack.enter_context, database_url())
            session = await open_session(url, runtime, lexical_runtime, search_settings(search))
            try:
                if name == "conversation":
                    assert conversation is not None
                    results[name] = await evaluate_conversation(session, runtime, conversation)
                else:
                    assert old is not None
                    results[name] = await evaluate_old(session, old)
            finally:
                await session.database.dispose()
        results[name]["database"] = where
        results[name]["total_seconds"] = round(time.perf_counter() - started, 1)
    return results


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.eval", description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=("conversation", "old", "both"), default="both")
    parser.add_argument("--conversation", type=Path, default=conversation_data.PATH, help="the conversation set")
    parser.add_argument("--dataset", type=Path, default=DATASET, help="the old hand-written set")
    parser.add_argument("--out", type=Path, default=RESULTS / "eval.json")
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when a target is missed (see the module's docstring)"
    )
    parser.add_argument(
        "--model",
        default=shipped_settings().embedding.model,
        help=f"an offline profile's id (prepare-model builds them; default: the served default), e.g. {OFFLINE_MINILM}",
    )
    parser.add_argument(
        "--search", action="append", default=[], metavar="NAME=VALUE", help="a search setting for this run"
    )
    args = parser.parse_args(argv)
    if args.check and args.model not in TARGETS:
        parser.error(f"--check: no targets for {args.model} (measured for: {', '.join(sorted(TARGETS))})")
    return args


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    targets = TARGETS.get(args.model)
    sets = ["conversation", "old"] if args.set == "both" else [args.set]
    conversation = conversation_data.load(args.conversation) if "conversation" in sets else None
    old = load_set(args.dataset) if "old" in sets else None
    started = time.perf_counter()
    results = asyncio.run(run(sets, conversation, old, args.model, args.search))
    output: dict[str, Any] = {
        "setup": {
            "machine": machine(),
            "model": args.model,
            "search": args.search,
            "targets": None if targets is None else asdict(targets),
            "limit": LIMIT,
            "seconds": round(time.perf_counter() - started, 1),
        }
    }
    missed: list[str] = []
    if conversation is not None:
        result = results["conversation"]
        result["shortfalls"] = None if targets is None else shortfalls(result["summary"], targets)
        missed += result["shortfalls"] or []
        server = result["server"]
        counts = conversation["counts"]
        output["conversation"] = {
            "data": {
                "file": args.conversation.name,
                "name": conversation["name"],
                "origin": conversation["origin"],
                "counts": counts,
            },
            "service_modes": {
                mode.name: {"lexical_only": mode.lexical_only, **mode.arguments} for mode in SERVICE_MODES
            },
            "references": {
                "bm25": BM25,
                "dense": "cosine of EmbeddingRuntime.embed_query and embed_passages",
                "rrf": {"k": RRF_K, "of": ["bm25", "dense"]},
            },
            **result,
        }
        print(
            f"PostgreSQL {server['postgresql']}, pgvector {server['pgvector']}, Python {platform.python_version()}, "
            f"{os.cpu_count()} cores"
        )
        print(
            f"Conversation set: {counts['dialogues']} dialogues, {counts['sessions']} sessions, "
            f"{counts['turns']} turns (generated, seed {conversation['seed']}); {counts['questions']} questions"
        )
        took = result["seconds"]
        print(
            f"stored through the tools in {took['load']} s; {len(SERVICE_MODES)} searches per question in "
            f"{took['service_searches']} s; references: bm25 {took['bm25']} s, dense {took['dense']} s\n"
        )
        print_conversation_table(conversation, result)
    if old is not None:
        result = results["old"]
        result["shortfalls"] = None if targets is None else hand_written_shortfalls(result["summary"], targets)
        missed += result["shortfalls"] or []
        output["old"] = {
            "data": {"file": str(args.dataset), "thoughts": len(old["thoughts"]), "queries": len(old["queries"])},
            "min_relevance": 0,
            "modes": {mode.name: {"lexical_only": mode.lexical_only, **mode.arguments} for mode in MODES},
            **result,
        }
        print(
            f"\nOld hand-written set: {len(old['thoughts'])} thoughts in {len(old['projects'])} projects loaded in "
            f"{result['load_seconds']} s; {len(old['queries'])} queries, limit {LIMIT}, min_relevance 0\n"
        )
        print_table(result)
        if result["shortfalls"] is not None:
            below = result["shortfalls"]
            print(f"floors missed (the model's --check targets): {'; '.join(below) if below else 'none'}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(output, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\n{output['setup']['seconds']} s in all; wrote {args.out}")
    if args.check and missed:
        sys.exit(f"check failed ({args.model}): " + "; ".join(missed))


if __name__ == "__main__":
    main()
