"""Measure the calibration floors of the offline model (mcp-tools.md "Calibrated relevance").

Run: `python -m bench.calibrate` (needs the offline models: `make model`) measures the served default model (e5);
`--model ID` another model `make model` prepares, e.g. sentence-transformers/all-MiniLM-L6-v2-int8-dynamic.
`--floors U/V` (repeatable) judges the default gate of other floors beside the profile's.

It embeds every thought of bench/data/retrieval_set.json with the real offline model and measures,
the way the contract measured e5-small:

- unrelated query/thought pairs (a query against every thought not relevant to it): p50/p95/max,
  and the per-query maximum of unrelated hits (p95/max) — the zero point `unrelated_floor`;
- self-relevant pairs (each thought with a query written to find it): p1/p5/p50 of the pair's
  cosine and of the query's top-1 hit — the strong-match floor `vector_floor`;
- what the default gate (0.4 on the calibrated scale) then drops: unrelated pairs that still pass
  it, and self-relevant top-1 hits that it removes;
- cosine distances of near-duplicates (a thought and a restatement of it) against distinct
  thoughts, for the auto_cluster distance.

Prints a report and writes bench/results/calibration.json. It never edits the model profile.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from app.embedding.embedder import FastEmbedEmbedder
from app.embedding.profiles import OFFLINE_MINILM, ModelProfile, profile_for
from app.embedding.runtime import offline_model_dir
from bench.dataset import served_default_model

Matrix = npt.NDArray[np.float64]
Embedded = tuple[Matrix, Matrix]  # passages, queries

BENCH_DIR = Path(__file__).resolve().parent
DATASET = BENCH_DIR / "data" / "retrieval_set.json"
RESULTS = BENCH_DIR / "results"
DEFAULT_GATE = 0.4
PERCENTILES = (1, 5, 50, 95, 99)


def model_cache_dir() -> Path:
    """The same cache the service and the tests use (SYNAPTO_EMBEDDING__CACHE_DIR)."""
    return Path(os.environ.get("SYNAPTO_EMBEDDING__CACHE_DIR", "~/.cache/synaptomind/models")).expanduser()


def load_set(path: Path = DATASET) -> dict[str, Any]:
    with path.open(encoding="utf-8") as handle:
        data: dict[str, Any] = json.load(handle)
    return data


def load_offline_embedder(batch_size: int | None = None, model_id: str = OFFLINE_MINILM) -> FastEmbedEmbedder:
    """A prepared model exactly as the service loads it (local files only, no network, its batch size)."""
    profile = profile_for(model_id)
    cache = model_cache_dir()
    if profile.local_dir is None:
        sys.exit(f"{model_id} is not a model `make model` prepares")
    model_dir = offline_model_dir(cache) if model_id == OFFLINE_MINILM else cache / profile.local_dir
    if not (model_dir / profile.model_file).exists():
        sys.exit(f"offline model not found in {model_dir}: run `make model` (synaptomind prepare-model)")
    return FastEmbedEmbedder.load(profile, model_dir, cache, threads=None, batch_size=batch_size)


def edge_neighbours(thoughts: list[dict[str, Any]]) -> dict[str, set[str]]:
    """key → keys joined to it by a `replaces` or `contradicts` edge (either direction)."""
    neighbours: dict[str, set[str]] = {row["key"]: set() for row in thoughts}
    for row in thoughts:
        for edge in ("replaces", "contradicts"):
            for other in row.get(edge, []):
                neighbours[row["key"]].add(other)
                neighbours[other].add(row["key"])
    return neighbours


def quantiles(values: npt.ArrayLike) -> dict[str, float]:
    array = np.asarray(values, dtype=np.float64)
    stats = {f"p{p}": float(np.percentile(array, p)) for p in PERCENTILES}
    stats.update(min=float(array.min()), max=float(array.max()), mean=float(array.mean()), n=int(array.size))
    return stats


@dataclass(frozen=True)
class Probe:
    """A query and the thoughts that are relevant (or too close to count as unrelated) to it."""

    text: str
    origin: str  # paraphrase | eval:<kind> | off_topic
    relevant: frozenset[str]  # counted as the answer
    related: frozenset[str]  # relevant + their edge neighbours: excluded from the unrelated pairs


def build_probes(data: dict[str, Any]) -> tuple[list[Probe], list[tuple[int, str]]]:
    """All queries, and the self-relevant (probe index, thought key) pairs."""
    thoughts = data["thoughts"]
    neighbours = edge_neighbours(thoughts)

    def close(keys: set[str]) -> frozenset[str]:
        return frozenset(keys.union(*(neighbours[key] for key in keys)))

    probes: list[Probe] = []
    self_pairs: list[tuple[int, str]] = []
    single_paraphrase = {
        query["relevant"][0]: query["text"]
        for query in data["queries"]
        if query["kind"] == "paraphrase" and len(query["relevant"]) == 1
    }
    for row in thoughts:
        # the set's own paraphrase query where there is one for this thought, else the thought's paraphrase
        text = single_paraphrase.get(row["key"], row["paraphrase"])
        self_pairs.append((len(probes), row["key"]))
        probes.append(Probe(text, "paraphrase", frozenset({row["key"]}), close({row["key"]})))
    for query in data["queries"]:
        if query["kind"] == "paraphrase" and len(query["relevant"]) == 1:
            continue  # already a self-relevant probe above
        relevant = set(query["relevant"])
        probes.append(Probe(query["text"], f"eval:{query['kind']}", frozenset(relevant), close(relevant)))
    for text in data["unrelated_queries"]:
        probes.append(Probe(text, "off_topic", frozenset(), frozenset()))
    return probes, self_pairs


async def embed_all(embedder: FastEmbedEmbedder, passages: list[str], queries: list[str]) -> Embedded:
    """Thoughts as passages, queries one by one as the service embeds them (`embed_query`)."""
    passage_vectors = await embedder.embed_passages(passages)
    query_vectors = [await embedder.embed_query(text) for text in queries]
    return _normalised(passage_vectors), _normalised(query_vectors)


def _normalised(vectors: list[list[float]]) -> Matrix:
    matrix = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    result: Matrix = matrix / np.where(norms == 0, 1.0, norms)
    return result


def raw_gate(unrelated_floor: float, vector_floor: float, gate: float = DEFAULT_GATE) -> float:
    """The raw cosine a cosine-only hit needs to reach `gate` on the calibrated scale."""
    return unrelated_floor + gate * (vector_floor - unrelated_floor)


@dataclass(frozen=True)
class Samples:
    """The cosine samples a gate is judged on."""

    unrelated: npt.NDArray[np.float64]  # every unrelated pair
    per_query_max: npt.NDArray[np.float64]  # each query's best unrelated hit
    off_topic: npt.NDArray[np.float64]  # pairs of the off-topic queries
    off_topic_max: npt.NDArray[np.float64]
    self_top1: npt.NDArray[np.float64]  # each self-relevant query's best hit
    self_pair: npt.NDArray[np.float64]  # each self-relevant query against its own thought
    self_top1_is_target: npt.NDArray[np.bool_]


def gate_report(unrelated_floor: float, vector_floor: float, samples: Samples) -> dict[str, Any]:
    threshold = raw_gate(unrelated_floor, vector_floor)
    top1_dropped = samples.self_top1 < threshold
    return {
        "unrelated_floor": unrelated_floor,
        "vector_floor": vector_floor,
        "gate": DEFAULT_GATE,
        "raw_threshold": round(threshold, 4),
        "unrelated_pairs_passing": float(np.mean(samples.unrelated >= threshold)),
        "queries_with_an_unrelated_hit_passing": float(np.mean(samples.per_query_max >= threshold)),
        "off_topic_pairs_passing": float(np.mean(samples.off_topic >= threshold)),
        "off_topic_queries_with_a_hit_passing": float(np.mean(samples.off_topic_max >= threshold)),
        "self_top1_dropped": float(np.mean(top1_dropped)),
        "self_top1_dropped_count": int(np.sum(top1_dropped)),
        "self_top1_correct_and_dropped": int(np.sum(samples.self_top1_is_target & top1_dropped)),
        "self_pair_dropped": float(np.mean(samples.self_pair < threshold)),
        "self_pair_dropped_count": int(np.sum(samples.self_pair < threshold)),
        "self_count": int(samples.self_top1.size),
    }


def round_to(value: float, step: float) -> float:
    return round(round(value / step) * step, 4)


def measure(
    data: dict[str, Any], embedder: FastEmbedEmbedder, candidates: Sequence[tuple[float, float]] = ()
) -> dict[str, Any]:
    """The report; `candidates` are (unrelated_floor, vector_floor) pairs whose default gate is judged as well."""
    thoughts = data["thoughts"]
    keys = [row["key"] for row in thoughts]
    index = {key: position for position, key in enumerate(keys)}
    probes, self_pairs = build_probes(data)
    restatements = data["restatements"]
    started = time.perf_counter()
    passages, queries = asyncio.run(
        embed_all(
            embedder,
            [row["content"] for row in thoughts] + [row["text"] for row in restatements],
            [probe.text for probe in probes],
        )
    )
    embed_seconds = time.perf_counter() - started
    corpus, restated = passages[: len(thoughts)], passages[len(thoughts) :]
    similarity = queries @ corpus.T  # probes × thoughts, cosine

    # unrelated pairs: each probe against every thought not related to it
    unrelated_mask = np.ones_like(similarity, dtype=bool)
    for row, probe in enumerate(probes):
        for key in probe.related:
            unrelated_mask[row, index[key]] = False
    unrelated = similarity[unrelated_mask]
    per_query_max = np.where(unrelated_mask, similarity, -np.inf).max(axis=1)
    by_origin: dict[str, dict[str, Any]] = {}
    for origin in ("paraphrase", "eval", "off_topic"):
        rows = np.array([probe.origin.split(":")[0] == origin for probe in probes])
        by_origin[origin] = {
            "pairs": quantiles(similarity[rows][unrelated_mask[rows]]),
            "per_query_max": quantiles(per_query_max[rows]),
        }
    cross_project = _cross_project_pairs(data, probes, similarity, unrelated_mask, index)

    # self-relevant: the thought's own probe
    self_rows = np.array([row for row, _ in self_pairs])
    self_cols = np.array([index[key] for _, key in self_pairs])
    self_pair = similarity[self_rows, self_cols]
    self_top1 = similarity[self_rows].max(axis=1)
    self_top1_is_target = similarity[self_rows].argmax(axis=1) == self_cols
    self_rank = (similarity[self_rows] > self_pair[:, None]).sum(axis=1) + 1

    unrelated_stats = quantiles(unrelated)
    self_top1_stats = quantiles(self_top1)
    chosen_unrelated = round_to(unrelated_stats["p95"], 0.01)
    chosen_vector = round_to(self_top1_stats["p50"], 0.05)
    off_topic_rows = np.array([probe.origin == "off_topic" for probe in probes])
    samples = Samples(
        unrelated=unrelated,
        per_query_max=per_query_max,
        off_topic=similarity[off_topic_rows].ravel(),
        off_topic_max=per_query_max[off_topic_rows],
        self_top1=self_top1,
        self_pair=self_pair,
        self_top1_is_target=self_top1_is_target,
    )
    current = embedder.profile
    gates = {
        "measured": gate_report(chosen_unrelated, chosen_vector, samples),
        "profile": gate_report(current.unrelated_floor, current.vector_floor, samples),
        "provisional": gate_report(0.2, 0.6, samples),
        **{f"{low}/{high}": gate_report(low, high, samples) for low, high in candidates},
    }
    sweep = [gate_report(chosen_unrelated, candidate, samples) for candidate in (0.4, 0.45, 0.5, 0.55, 0.6)]
    clustering = _cluster_distances(data, corpus, restated, similarity, self_rows, self_cols, index)
    return {
        "model": current.model_id,
        "dataset": {
            "thoughts": len(thoughts),
            "probes": len(probes),
            "self_relevant": len(self_pairs),
            "off_topic_queries": len(data["unrelated_queries"]),
            "restatements": len(restatements),
            "unrelated_pairs": int(unrelated.size),
        },
        "embed_seconds": round(embed_seconds, 2),
        "unrelated": {
            "pairs": unrelated_stats,
            "per_query_max": quantiles(per_query_max),
            "by_origin": by_origin,
            "cross_project": cross_project,
        },
        "self_relevant": {
            "pair": quantiles(self_pair),
            "top1": self_top1_stats,
            "top1_is_target": float(np.mean(self_top1_is_target)),
            "target_rank_p50": float(np.median(self_rank)),
            "target_in_top5": float(np.mean(self_rank <= 5)),
        },
        "chosen": {
            "unrelated_floor": chosen_unrelated,
            "vector_floor": chosen_vector,
            "auto_cluster_distance": clustering["chosen"],
            "rule": "unrelated_floor = p95 of unrelated pairs (0.01); "
            "vector_floor = p50 of self top-1 (0.05); "
            "auto_cluster_distance = halfway between the median restatement distance and the closest "
            "distinct thought pair, rounded down (0.05)",
        },
        "gate": gates,
        "vector_floor_sweep": sweep,
        "auto_cluster": clustering,
    }


def _cross_project_pairs(
    data: dict[str, Any],
    probes: list[Probe],
    similarity: Matrix,
    unrelated_mask: npt.NDArray[np.bool_],
    index: dict[str, int],
) -> dict[str, Any]:
    """Unrelated pairs whose thought lives in another project than the probe's answer (truly off-topic)."""
    project_of = {row["key"]: row["project"] for row in data["thoughts"]}
    thought_projects = np.array([row["project"] for row in data["thoughts"]])
    values: list[npt.NDArray[np.float64]] = []
    for row, probe in enumerate(probes):
        own = {project_of[key] for key in probe.relevant}
        if not own:
            continue
        other = ~np.isin(thought_projects, list(own)) & unrelated_mask[row]
        values.append(similarity[row][other])
    return quantiles(np.concatenate(values))


def _cluster_distances(
    data: dict[str, Any],
    corpus: Matrix,
    restated: Matrix,
    similarity: Matrix,
    self_rows: npt.NDArray[np.int64],
    self_cols: npt.NDArray[np.int64],
    index: dict[str, int],
) -> dict[str, Any]:
    """Cosine distances: restatements (near-duplicates), paraphrase queries, distinct thought pairs."""
    restated_cols = np.array([index[row["key"]] for row in data["restatements"]])
    restatement_distance = 1.0 - np.sum(restated * corpus[restated_cols], axis=1)
    pairwise = corpus @ corpus.T
    neighbours = edge_neighbours(data["thoughts"])
    keys = [row["key"] for row in data["thoughts"]]
    distinct_mask = np.triu(np.ones_like(pairwise, dtype=bool), k=1)
    edge_pairs: list[float] = []
    for key, others in neighbours.items():
        for other in others:
            left, right = sorted((index[key], index[other]))
            if distinct_mask[left, right]:
                distinct_mask[left, right] = False
                edge_pairs.append(1.0 - float(pairwise[left, right]))
    distinct = 1.0 - pairwise[distinct_mask]
    closest = np.argsort(distinct)[:5]
    rows, cols = np.nonzero(distinct_mask)
    closest_pairs = [
        {"a": keys[rows[i]], "b": keys[cols[i]], "distance": round(float(distinct[i]), 4)} for i in closest
    ]
    paraphrase_distance = 1.0 - similarity[self_rows, self_cols]
    distinct_stats = quantiles(distinct)
    restatement_stats = quantiles(restatement_distance)
    p01 = float(np.percentile(distinct, 0.1))
    # conservative: halfway from the median restatement to the closest distinct pair, rounded down to 0.05
    midpoint = (restatement_stats["p50"] + distinct_stats["min"]) / 2
    chosen = float(np.floor(midpoint / 0.05 + 1e-9) * 0.05)
    return {
        "restatement_distance": restatement_stats,
        "paraphrase_query_distance": quantiles(paraphrase_distance),
        "distinct_thought_distance": {**distinct_stats, "p0.1": p01},
        "edge_pair_distance": quantiles(edge_pairs),
        "closest_distinct_pairs": closest_pairs,
        "restatements_joined": float(np.mean(restatement_distance < chosen)),
        "distinct_pairs_joined": int(np.sum(distinct < chosen)),
        "edge_pairs_joined": int(np.sum(np.asarray(edge_pairs) < chosen)),
        "chosen": round(chosen, 4),
    }


def _fmt(stats: dict[str, float], names: tuple[str, ...]) -> str:
    return "  ".join(f"{name} {stats[name]:.4f}" for name in names)


def _gate_row(gate: dict[str, Any]) -> str:
    count = gate["self_count"]
    cells = [
        f"{gate['unrelated_floor']:.2f}/{gate['vector_floor']:.2f}",
        f"{gate['raw_threshold']:.3f}",
        f"{gate['unrelated_pairs_passing']:9.2%}",
        f"{gate['queries_with_an_unrelated_hit_passing']:10.1%}",
        f"{gate['off_topic_pairs_passing']:9.2%}",
        f"{gate['off_topic_queries_with_a_hit_passing']:10.1%}",
        f"{gate['self_top1_dropped_count']:4d}/{count} ({gate['self_top1_dropped']:5.1%})",
        f"{gate['self_pair_dropped_count']:4d}/{count} ({gate['self_pair_dropped']:5.1%})",
    ]
    return "  ".join(cells)


def print_report(result: dict[str, Any]) -> None:
    data = result["dataset"]
    print(f"model {result['model']}  (embedding took {result['embed_seconds']} s)")
    print(
        f"{data['thoughts']} thoughts, {data['probes']} queries ({data['self_relevant']} self-relevant, "
        f"{data['off_topic_queries']} off-topic), {data['unrelated_pairs']} unrelated pairs, "
        f"{data['restatements']} restatements"
    )
    unrelated = result["unrelated"]
    print("\nunrelated query/thought pairs (cosine)")
    print("  all pairs          ", _fmt(unrelated["pairs"], ("p50", "p95", "p99", "max")))
    print("  per-query maximum  ", _fmt(unrelated["per_query_max"], ("p50", "p95", "max")))
    for origin, stats in unrelated["by_origin"].items():
        print(f"  {origin:<10} pairs   ", _fmt(stats["pairs"], ("p50", "p95", "max")))
        print(f"  {origin:<10} q-max   ", _fmt(stats["per_query_max"], ("p50", "p95", "max")))
    print("  other projects only", _fmt(unrelated["cross_project"], ("p50", "p95", "max")))
    selfrel = result["self_relevant"]
    print("\nself-relevant (query written for one thought)")
    print("  pair cosine        ", _fmt(selfrel["pair"], ("p1", "p5", "p50", "p95")))
    print("  top-1 cosine       ", _fmt(selfrel["top1"], ("p1", "p5", "p50", "p95")))
    top1, top5 = selfrel["top1_is_target"], selfrel["target_in_top5"]
    print(f"  top-1 is the target {top1:.1%}, target in top 5 {top5:.1%}")
    chosen = result["chosen"]
    floors = ("unrelated_floor", "vector_floor", "auto_cluster_distance")
    print("\nchosen: " + "  ".join(f"{name} {chosen[name]}" for name in floors))
    print(
        f"\ndefault gate {DEFAULT_GATE} on the calibrated scale   raw   unrel.pairs  q w/ unrel.  off-topic  "
        "off-topic q  self top-1 dropped  self pair dropped"
    )
    rows = [(f"{name} floors", gate) for name, gate in result["gate"].items()]
    rows += [("  sweep", gate) for gate in result["vector_floor_sweep"]]
    for label, gate in rows:
        print(f"  {label:<18} {_gate_row(gate)}")
    print("  (passing = a cosine-only hit kept by the gate; dropped = removed by it)")
    cluster = result["auto_cluster"]
    print("\nauto_cluster (cosine distance)")
    print("  restatements       ", _fmt(cluster["restatement_distance"], ("min", "p50", "p95", "max")))
    print("  paraphrase queries ", _fmt(cluster["paraphrase_query_distance"], ("p5", "p50", "p95")))
    print("  replaces/contradicts", _fmt(cluster["edge_pair_distance"], ("min", "p50", "max")))
    distinct = cluster["distinct_thought_distance"]
    print("  distinct thoughts  ", _fmt(distinct, ("min", "p0.1", "p1", "p5", "p50")))
    print(
        f"  at {cluster['chosen']}: restatements joined {cluster['restatements_joined']:.0%}, "
        f"distinct pairs joined {cluster['distinct_pairs_joined']}, "
        f"replaces/contradicts pairs joined {cluster['edge_pairs_joined']}"
    )
    for pair in cluster["closest_distinct_pairs"]:
        print(f"    closest distinct: {pair['a']} ~ {pair['b']}  {pair['distance']}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.calibrate", description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument(
        "--model",
        default=served_default_model(),
        help="a prepared model's id (default: the served default, %(default)s)",
    )
    parser.add_argument("--out", type=Path, help="default: bench/results/calibration[-<model folder>].json")
    parser.add_argument(
        "--floors", action="append", default=[], metavar="U/V", help="also judge these floors' gate (repeatable)"
    )
    args = parser.parse_args(argv)
    candidates = [(float(low), float(high)) for low, high in (pair.split("/") for pair in args.floors)]
    embedder = load_offline_embedder(model_id=args.model)
    profile: ModelProfile = embedder.profile
    if args.out is None:
        suffix = "" if profile.model_id == OFFLINE_MINILM else f"-{profile.local_dir}"
        args.out = RESULTS / f"calibration{suffix}.json"
    result = measure(load_set(args.dataset), embedder, candidates)
    print_report(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
