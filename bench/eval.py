"""Retrieval quality: recall@5, recall@10 and MRR of memory_recall search on the labelled set.

Run: `make eval` or `python -m bench.eval` (needs the offline model: `make model`).

The set (bench/data/retrieval_set.json) is loaded through the real tool path — `memory_manage
create` for the projects, `memory_store bulk_create` for the thoughts and `memory_store link_batch`
for the `replaces`/`contradicts` edges — into a fresh database: an embedded PostgreSQL in a
temporary directory (deleted at the end) unless SYNAPTO_DATABASE_URL is set (then it should be a
scratch database: the run adds its projects there, and queries without a project see every row).

Every query then runs through `memory_recall action=search` (compact=false, min_relevance=0,
limit=10) three ways:

- vector: hybrid=false, the vector leg only;
- lexical: the same call on an AppContext whose EmbeddingRuntime has no embedder, so the service
  answers from the lexical leg (meta.degraded=true);
- hybrid: hybrid=true with the embedder, RRF of both legs.

Two diagnostic runs follow: hybrid with supersession_mode=off and contradiction_mode=off (what
the standing re-order — current, then contradicted, then superseded — costs), and hybrid as an
agent calls it by default (min_relevance omitted: the default gate 0.4 on the calibrated scale).

Prints the table and writes bench/results/eval.json.
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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import text

from app.db import migrations
from app.db.embedded import EmbeddedPostgres
from app.db.engine import Database, build_engine
from app.db.models import Role
from app.db.records import Principal
from app.embedding.profiles import OFFLINE_MINILM
from app.embedding.runtime import EmbeddingConfig, EmbeddingRuntime
from app.mcp.registry import dispatch
from app.mcp.tools.catalog import ALL_SPECS
from app.services.auth import AuthService
from app.services.context import AppContext, Limits
from bench.calibrate import DATASET, RESULTS, load_set, model_cache_dir

SPECS = {spec.name: spec for spec in ALL_SPECS}
Loaded = tuple[dict[str, str], dict[str, str]]  # project name → cwd, thought id → key
LIMIT = 10
METRICS = ("recall@5", "recall@10", "mrr")
KINDS = ("paraphrase", "exact", "identifier", "multilingual", "superseded", "contradicted")


@dataclass(frozen=True)
class Mode:
    name: str
    lexical_only: bool  # run on the context without an embedder
    arguments: dict[str, Any]
    diagnostic: bool = False


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


def score(ranked: list[str], relevant: set[str]) -> dict[str, float]:
    first = next((rank for rank, key in enumerate(ranked, start=1) if key in relevant), None)
    return {
        "recall@5": len(relevant.intersection(ranked[:5])) / len(relevant),
        "recall@10": len(relevant.intersection(ranked[:10])) / len(relevant),
        "mrr": 0.0 if first is None else 1.0 / first,
    }


def mean_scores(rows: list[dict[str, float]]) -> dict[str, float]:
    return {metric: statistics.fmean(row[metric] for row in rows) for metric in METRICS}


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


async def evaluate(url: str, data: dict[str, Any]) -> dict[str, Any]:
    database = Database(build_engine(url, pool_size=5))
    config = EmbeddingConfig(model=OFFLINE_MINILM, model_dir=None, cache_dir=model_cache_dir())
    runtime = EmbeddingRuntime(config)
    await runtime.load()
    if runtime.profile is None or runtime.profile.model_id != OFFLINE_MINILM:
        sys.exit(f"offline model not loadable: {runtime.note} (run `make model`)")
    lexical_runtime = EmbeddingRuntime(config)  # never loaded: no embedder, searches answer lexically
    limits = Limits()
    context = AppContext(database, runtime, limits)
    try:
        async with database.unit_of_work() as session:
            user = f"bench-eval-{uuid.uuid4().hex[:8]}"
            principal = await AuthService(session).ensure_user(user, Role.admin)
        callers = {
            False: Caller(context, principal),
            True: Caller(AppContext(database, lexical_runtime, limits), principal),
        }
        suffix = "" if "SYNAPTO_DATABASE_URL" not in os.environ else f"-eval-{uuid.uuid4().hex[:8]}"
        started = time.perf_counter()
        cwd_of, key_of = await load_dataset(callers[False], data, suffix)
        load_seconds = time.perf_counter() - started
        result = await run_queries(callers, data, cwd_of, key_of)
        result["load_seconds"] = round(load_seconds, 2)
        async with database.unit_of_work() as session:
            server = (await session.execute(text("SHOW server_version"))).scalar_one()
            vector = (
                await session.execute(text("SELECT extversion FROM pg_extension WHERE extname = 'vector'"))
            ).scalar_one()
        result["server"] = {"postgresql": server, "pgvector": vector}
        return result
    finally:
        await database.dispose()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.eval", description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--out", type=Path, default=RESULTS / "eval.json")
    args = parser.parse_args(argv)
    data = load_set(args.dataset)
    with database_url() as (url, where):
        result = asyncio.run(evaluate(url, data))
    result["setup"] = {
        "database": where,
        "model": OFFLINE_MINILM,
        "python": platform.python_version(),
        "thoughts": len(data["thoughts"]),
        "queries": len(data["queries"]),
        "limit": LIMIT,
        "min_relevance": 0,
        "modes": {mode.name: {"lexical_only": mode.lexical_only, **mode.arguments} for mode in MODES},
    }
    server = result["server"]
    python = platform.python_version()
    print(f"PostgreSQL {server['postgresql']}, pgvector {server['pgvector']}, Python {python}")
    print(
        f"{len(data['thoughts'])} thoughts in {len(data['projects'])} projects loaded through the tools in "
        f"{result['load_seconds']} s ({where}); {len(data['queries'])} queries, "
        f"limit {LIMIT}, min_relevance 0\n"
    )
    print_table(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
