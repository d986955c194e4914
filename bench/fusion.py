"""How to fuse the two legs, decided by measurement: each leg runs once per question, fusions are replayed offline.

    python -m bench.fusion                    # the conversation set and the hand-written set (~2 min on 2 cores)
    python -m bench.fusion --notes 10000      # also bench.search's quality questions over its 10 k data set

Both sets are loaded through the tools into a temporary embedded PostgreSQL, exactly as `bench.eval` loads them.
For every question the service's own legs run once (`SearchRepository.vector_leg` / `lexical_leg`, the pool of a
limit-10 search: 100 rows each, the question's project as scope); then every fusion below is replayed over those
rows and scored by R@5 / R@10. The shipped fusion is `SearchService._fuse` (app/services/search.py), marked
"shipped" below; the rest is what it was chosen against (docs/BENCHMARKS.md, "Fusion").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from app.config import Bm25Settings
from app.db.engine import Database, build_engine
from app.db.models import ThoughtStatus
from app.db.repositories.projects import ProjectRepository
from app.db.repositories.search import LegRow, SearchRepository
from app.db.repositories.thoughts import ThoughtFilter
from app.services.search import pool_size
from bench import conversation_data, dataset, quality
from bench.calibrate import DATASET, RESULTS, load_set
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


Fusion = Callable[[Legs], list[str]]


def rrf(
    k: float = 60,
    lexical_weight: float = 1.0,
    vector_weight: float = 1.0,
    depth: int = 1000,
    lexical_depth: int | None = None,
    relative: float = 0.0,
    adaptive: float = 0.0,
) -> Fusion:
    """Σ weight / (k + rank) over the first `depth` rows of each leg (`lexical_depth` for the lexical one), lexical
    rows scoring under `relative` × the best BM25 left out; the rest follow in full-depth RRF order."""

    def fuse(legs: Legs) -> list[str]:
        scores: dict[str, tuple[float, float]] = {}
        top = legs.lexical[0][1] if legs.lexical else 0.0
        weight_of_lexical = lexical_weight
        if adaptive and legs.idf_mass > 0:
            weight_of_lexical *= min(1.0, top / legs.idf_mass) ** adaptive
        for weight, rows, cut in (
            (vector_weight, legs.vector, depth),
            (weight_of_lexical, [row for row in legs.lexical if row[1] >= relative * top], lexical_depth or depth),
        ):
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


def only(leg: str) -> Fusion:
    def fuse(legs: Legs) -> list[str]:
        return [key for key, _ in (legs.vector if leg == "vector" else legs.lexical)]

    return fuse


def with_feedback(fuse: Fusion) -> Fusion:
    """Pseudo-relevance feedback on the lexical leg: the same fusion over the leg rerun with the query's text
    plus the contents of its first two fused rows (a second lexical pass per search)."""

    def fused(legs: Legs) -> list[str]:
        if legs.feedback is None:
            return fuse(legs)
        return fuse(Legs(legs.kind, legs.relevant, legs.vector, legs.feedback, legs.feedback_mass))

    return fused


SHIPPED = rrf(depth=10, relative=0.7, adaptive=0.5)

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
    "shipped: rrf k60 depth 10 relative 0.7 adaptive 0.5": SHIPPED,
    "shipped + feedback (PRF) on the lexical leg": with_feedback(SHIPPED),
    "rrf k60 relative 0.7 adaptive 1": rrf(relative=0.7, adaptive=1.0),
    "rrf k20 depth 10": rrf(k=20, depth=10),
    "rrf k60 depth 10 lexical 0.7": rrf(depth=10, lexical_weight=0.7),
    "rrf k60 depth 10 lexical 1.3": rrf(depth=10, lexical_weight=1.3),
    "rrf k10": rrf(k=10),
    "rrf k10 lexical 0.5": rrf(k=10, lexical_weight=0.5),
    **{f"convex {alpha}": convex(alpha) for alpha in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)},
    **{f"convex {alpha} floor": convex(alpha, floor=-1.0) for alpha in (0.5, 0.7)},
}


def recall(ranked: Sequence[str], relevant: set[str], depth: int) -> float:
    return len(relevant.intersection(ranked[:depth])) / len(relevant)


def report(name: str, questions: list[Legs], kinds: Sequence[str]) -> dict[str, Any]:
    table: dict[str, Any] = {}
    print(f"\n{name}: {len(questions)} questions, R@5 / R@10")
    header = f"{'fusion':<44}{'overall':>14}" + "".join(f"{kind:>16}" for kind in kinds)
    print(header)
    for label, fuse in FUSIONS.items():
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
        print(f"{label:<44}{'/'.join(f'{v:.3f}' for v in row['overall']):>14}{cells}")
    return table


async def legs_of(
    database: Any, query: str, cwd: str | None, runtime: Any, key_of: dict[str, str], bm25: Bm25Settings
) -> Legs:
    """The question's legs as the service runs them, and the lexical leg once more with feedback."""
    pool = pool_size(LIMIT)
    vector = await runtime.embed_query(query)
    async with database.unit_of_work() as session:
        project = await ProjectRepository(session).find_for_path(cwd) if cwd else None
        where = ThoughtFilter(project_id=project.id if project else None, statuses=(ThoughtStatus.active,))
        repository = SearchRepository(session)
        vector_rows: list[LegRow] = await repository.vector_leg(vector, runtime.profile.model_id, where, pool)
        lexical_rows, mass = await repository.lexical_leg(query, where, pool, bm25)
        legs = Legs(
            "",
            set(),
            [(str(row.id), 1.0 - row.score) for row in vector_rows],
            [(str(row.id), row.score) for row in lexical_rows],
            mass,
        )
        first = [uuid.UUID(key) for key in SHIPPED(legs)[:2]]
        contents = [page.record.content for page in (await repository.page(first, None, None)).values()]
        feedback_rows, feedback_mass = await repository.lexical_leg(" ".join([query, *contents]), where, pool, bm25)

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
    )


async def run(url: str) -> dict[str, Any]:
    runtime = await offline_runtime()
    results: dict[str, Any] = {}
    session = await open_session(url, runtime, runtime)  # the legs are called directly: one runtime
    caller: Caller = session.callers[False]
    started = time.perf_counter()
    conversations = conversation_data.load()
    cwd_of, key_of = await load_conversations(caller, conversations, session.suffix)
    questions = []
    for question in conversations["questions"]:
        legs = await legs_of(
            session.database, question["text"], cwd_of[question["dialogue"]], runtime, key_of, Bm25Settings()
        )
        questions.append(replace(legs, kind=question["kind"], relevant=set(question["evidence"])))
    results["conversation"] = report("conversation set", questions, conversation_data.KINDS)
    old = load_set(DATASET)
    cwd_old, key_old = await load_dataset(caller, old, session.suffix)
    old_questions = []
    for query in old["queries"]:
        cwd = cwd_old[query["project"]] if query["project"] is not None else None
        legs = await legs_of(session.database, query["text"], cwd, runtime, key_old, Bm25Settings())
        old_questions.append(replace(legs, kind=query["kind"], relevant=set(query["relevant"])))
    results["old"] = report("hand-written set", old_questions, ("paraphrase", "exact", "identifier"))
    await session.database.dispose()
    results["seconds"] = round(time.perf_counter() - started, 1)
    return results


async def run_notes(url: str, thoughts: int) -> dict[str, Any]:
    """bench.search's quality questions (paraphrases of notes, targets drawn from the whole store), scoped."""
    runtime = await offline_runtime()
    database = Database(build_engine(url, pool_size=2))
    store = await quality.read_store(database)
    facts = quality.parse_thoughts(list(zip(store.projects, store.contents, strict=True)))
    rows = list(zip(store.ids, store.projects, store.contents, strict=True))
    questions, _ = quality.make_questions(facts, rows, 200, quality.SEED)
    cwd_of = {project.name: project.cwd for project in dataset.PROJECTS}
    key_of = {str(thought_id): str(thought_id) for thought_id in store.ids}
    replayed = []
    for question in questions:
        legs = await legs_of(database, question.text, cwd_of[question.project], runtime, key_of, Bm25Settings())
        replayed.append(replace(legs, kind=question.form, relevant={str(question.target)}))
    await database.dispose()
    return report(f"notes at {thoughts} (hit@5 / hit@10)", replayed, ("short", "full"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, help="also replay bench.search's quality questions at this size")
    args = parser.parse_args(argv)
    with database_url() as (url, _):  # migrates synchronously: outside the event loop
        results = asyncio.run(run(url))
    if args.notes:
        with dataset.open_dataset(args.notes) as notes:
            results[f"notes_{args.notes}"] = asyncio.run(run_notes(notes.url, args.notes))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "fusion.json").write_text(json.dumps(results, indent=2))
    print(f"\nwritten {RESULTS / 'fusion.json'}", file=sys.stderr)


if __name__ == "__main__":
    main()
