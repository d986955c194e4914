"""The lexical leg is Okapi BM25 (migration 0009): exact against a plain-Python BM25 over the same tsvector
lexemes, its statistics kept by every write, drift reported and repaired by the health check."""

from __future__ import annotations

import math
import random
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

from sqlalchemy import text

from app.config import Bm25Settings
from app.db.models import ThoughtStatus
from app.db.repositories import search as search_repository
from app.db.repositories.search import SearchRepository
from app.db.repositories.thoughts import ThoughtFilter
from app.services.context import AppContext
from app.services.status.health import HealthService
from tests.support.helpers import ToolCaller
from tests.support.search import bulk, create, execute, register, rows

K1, B = 1.2, 0.75
SEED = 20261201

# A vocabulary with a long tail, like real notes: a few words in most thoughts, most words in few.
PEOPLE = ("Alice", "Bruno", "Chiara", "Dmitri")
COMMON = ("went", "really", "think", "service", "deploy", "team", "today", "said", "good", "work")
RARE = tuple(
    f"{head}{tail}"
    for head in ("quor", "velt", "bram", "sist", "nolv", "trab", "gimp", "hesk", "lorn", "pavl", "drum", "fesk")
    for tail in ("ade", "ion", "ment", "ery", "ist", "ack", "ond", "ure", "ine", "oth", "ell", "ump")
)


def _thought(rng: random.Random, day: int) -> str:
    words = [rng.choice(COMMON) for _ in range(rng.randint(2, 6))]
    words += [rng.choice(RARE[: rng.randint(5, len(RARE))]) for _ in range(rng.randint(1, 6))]
    if rng.random() < 0.3:  # a repeated word: tf > 1
        words += [words[0]] * rng.randint(1, 3)
    rng.shuffle(words)
    return f"[2026-03-{day:02d}] {rng.choice(PEOPLE)}: {' '.join(words)}."


def _queries(rng: random.Random, count: int) -> list[str]:
    queries = []
    for _ in range(count):
        words = [rng.choice(RARE) for _ in range(rng.randint(1, 3))] + [rng.choice(COMMON)] * rng.randint(0, 2)
        if rng.random() < 0.2:
            words.append(rng.choice(PEOPLE))
        rng.shuffle(words)
        queries.append(" ".join(words))
    return queries


async def _insert(context: AppContext, project_id: uuid.UUID, contents: Sequence[str]) -> None:
    await execute(
        context,
        "INSERT INTO thought (id, project_id, content) "
        "SELECT gen_random_uuid(), :project, c FROM unnest(CAST(:contents AS text[])) AS c",
        project=project_id,
        contents=list(contents),
    )


async def _documents(context: AppContext, project_id: uuid.UUID | None) -> dict[uuid.UUID, Counter[str]]:
    """Each thought's lexemes with their occurrences, as PostgreSQL's own tsvector holds them."""
    found = await rows(
        context,
        "SELECT t.id, o.lexeme, coalesce(array_length(o.positions, 1), 1) AS tf "
        "FROM thought t CROSS JOIN LATERAL unnest(t.tsv) AS o "
        "WHERE CAST(:project AS uuid) IS NULL OR t.project_id = :project",
        project=project_id,
    )
    documents: dict[uuid.UUID, Counter[str]] = {}
    for row in found:
        documents.setdefault(row.id, Counter())[row.lexeme] = int(row.tf)
    return documents


def _reference(documents: dict[uuid.UUID, Counter[str]], lexemes: Sequence[str]) -> list[tuple[float, uuid.UUID]]:
    """Okapi BM25, Lucene's idf, length = distinct lexemes: (score, id), best first, ties by id."""
    n = len(documents)
    average = sum(len(terms) for terms in documents.values()) / n
    frequency = {lexeme: sum(1 for terms in documents.values() if lexeme in terms) for lexeme in lexemes}
    scored = []
    for thought_id, terms in documents.items():
        score = 0.0
        for lexeme in lexemes:
            tf = terms.get(lexeme, 0)
            if tf:
                idf = math.log(1 + (n - frequency[lexeme] + 0.5) / (frequency[lexeme] + 0.5))
                score += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(terms) / average))
        if score > 0:
            scored.append((score, thought_id))
    return sorted(scored, key=lambda pair: (-pair[0], pair[1]))


async def _query_lexemes(context: AppContext, query: str) -> list[str]:
    found = await rows(context, "SELECT tsvector_to_array(to_tsvector('english', :q)) AS lexemes", q=query)
    return list(found[0].lexemes)


async def _leg(context: AppContext, query: str, where: ThoughtFilter) -> list[Any]:
    """The first 10 rows of the leg as a search with limit 10 runs it (a pool of 100)."""
    async with context.db.unit_of_work() as session:
        return (await SearchRepository(session).lexical_leg(query, where, 100, Bm25Settings(k1=K1, b=B))).rows[:10]


async def test_the_leg_ranks_as_a_plain_bm25_over_the_same_lexemes(app_context: AppContext) -> None:
    rng = random.Random(SEED)
    projects = [uuid.uuid4(), uuid.uuid4()]
    for index, project_id in enumerate(projects):
        await execute(
            app_context, "INSERT INTO project (id, name) VALUES (:id, :name)", id=project_id, name=f"p{index}"
        )
    await _insert(app_context, projects[0], [_thought(rng, 1 + i % 28) for i in range(1600)])
    await _insert(app_context, projects[1], [_thought(rng, 1 + i % 28) for i in range(600)])
    scoped = ThoughtFilter(project_id=projects[0], statuses=(ThoughtStatus.active,))
    documents = {None: await _documents(app_context, None), projects[0]: await _documents(app_context, projects[0])}
    same, compared, worst = 0, 0, 0.0
    for number, query in enumerate(_queries(rng, 220)):
        where = scoped if number % 2 else ThoughtFilter(statuses=(ThoughtStatus.active,))
        expected = _reference(documents[where.project_id], await _query_lexemes(app_context, query))[:10]
        answered = await _leg(app_context, query, where)
        same += [row.id for row in answered] == [thought_id for _, thought_id in expected]
        reference = {thought_id: score for score, thought_id in expected}
        for row in answered:
            if row.id in reference:
                compared += 1
                worst = max(worst, abs(row.score - reference[row.id]) / reference[row.id])
    assert same >= 0.98 * 220, f"top-10 equal for {same} of 220 queries"
    assert compared >= 1000 and worst <= 1e-6, (compared, worst)


async def test_a_query_of_unknown_or_stop_words_matches_nothing(app_context: AppContext) -> None:
    project_id = uuid.uuid4()
    await execute(app_context, "INSERT INTO project (id, name) VALUES (:id, 'p')", id=project_id)
    await _insert(app_context, project_id, ["the quorade went well", "a veltion"])
    where = ThoughtFilter(project_id=project_id)
    assert await _leg(app_context, "the and of", where) == []
    assert await _leg(app_context, "zzzunknownword", where) == []
    assert [row.score > 0 for row in await _leg(app_context, "quorade zzzunknownword", where)] == [True]


async def test_a_lexeme_with_quotes_or_backslashes_is_matched_as_it_is(app_context: AppContext) -> None:
    project_id = uuid.uuid4()
    await execute(app_context, "INSERT INTO project (id, name) VALUES (:id, 'p')", id=project_id)
    await _insert(app_context, project_id, ["path C:\\tmp\\x and o'neill's file", "something else entirely"])
    where = ThoughtFilter(project_id=project_id)
    for query in ("C:\\tmp\\x", "o'neill's", "'|&!"):
        await _leg(app_context, query, where)  # no tsquery syntax error, whatever the lexemes
    assert len(await _leg(app_context, "o'neill's", where)) == 1


# ------------------------------------------------------------------ the statistics follow every write


async def _drift(context: AppContext) -> list[Any]:
    """Every (project, lexeme) whose stored frequency differs from a recount, and every project whose corpus row
    differs (an empty list when the statistics are exact)."""
    terms = await rows(
        context,
        "WITH actual AS (SELECT t.project_id, w.lexeme, count(*) AS thoughts FROM thought t "
        "CROSS JOIN LATERAL unnest(tsvector_to_array(t.tsv)) AS w(lexeme) GROUP BY 1, 2) "
        "SELECT coalesce(a.project_id, s.project_id) AS project_id, coalesce(a.lexeme, s.lexeme) AS lexeme, "
        "a.thoughts AS actual, s.thoughts AS stored FROM actual a "
        "FULL JOIN lexical_term s ON s.project_id = a.project_id AND s.lexeme = a.lexeme "
        "WHERE a.thoughts IS DISTINCT FROM s.thoughts",
    )
    corpus = await rows(
        context,
        "WITH actual AS (SELECT project_id, count(*) AS thoughts, sum(length(tsv)) AS tokens FROM thought "
        "GROUP BY project_id) "
        "SELECT * FROM actual a FULL JOIN lexical_corpus c ON c.project_id = a.project_id "
        "WHERE coalesce(a.thoughts, 0) <> coalesce(c.thoughts, 0) OR coalesce(a.tokens, 0) <> coalesce(c.tokens, 0)",
    )
    return [*terms, *corpus]


async def test_every_write_path_keeps_the_statistics_exact(
    app_context: AppContext, writer: ToolCaller, admin: ToolCaller
) -> None:
    project = await register(writer, "stats", "/srv/stats")
    cwd = {"cwd": "/srv/stats"}
    first = await create(writer, "quorade deploys on Fridays", **cwd)
    ids = await bulk(writer, ["veltion cache misses", "bramery cache hits", "sistack retries"], "/srv/stats")
    await bulk(writer, ["default project thought about nolvine"])
    assert await _drift(app_context) == []
    await writer.ok("memory_store", {"action": "update", "thought_id": first["id"], "content": "quorade deploys daily"})
    await writer.ok("memory_store", {"action": "update", "thought_id": ids[0], "tags": ["cache"]})  # no lexeme
    assert await _drift(app_context) == []
    merge = {
        "action": "merge",
        "source_id": ids[1],
        "target_id": ids[2],
        "merged_content": "bramery and sistack merged",
    }
    preview = await writer.ok("memory_supersede", merge)
    token = preview.item["preview_token"]
    await writer.ok("memory_supersede", {**merge, "confirm": True, "preview_token": token})
    assert await _drift(app_context) == []
    await execute(app_context, "DELETE FROM thought WHERE id = :id", id=uuid.UUID(ids[0]))
    assert await _drift(app_context) == []
    # A deleted project's thoughts move to the default project in one statement.
    preview = await admin.ok("memory_manage", {"action": "delete", "project_id": project["id"]})
    token = preview.item["preview_token"]
    await admin.ok(
        "memory_manage", {"action": "delete", "project_id": project["id"], "confirm": True, "preview_token": token}
    )
    assert await _drift(app_context) == []
    counted = await rows(app_context, "SELECT sum(thoughts) AS n FROM lexical_corpus")
    assert counted[0].n == (await rows(app_context, "SELECT count(*) AS n FROM thought"))[0].n


async def test_health_reports_drifted_statistics_and_the_fix_recounts_them(app_context: AppContext) -> None:
    project_id = uuid.uuid4()
    await execute(app_context, "INSERT INTO project (id, name) VALUES (:id, 'p')", id=project_id)
    await _insert(app_context, project_id, ["quorade veltion", "quorade bramery"])

    async def finding() -> dict[str, Any]:
        async with app_context.db.unit_of_work() as session:
            report = await HealthService(session).report(include_details=True)
        return dict(report["categories"]["data_drift"]["lexical_statistics_drift"])

    assert (await finding())["count"] == 0
    # Rows written with the triggers off, as a replica-mode restore would.
    async with app_context.db.unit_of_work() as session:
        await session.execute(text("SET LOCAL session_replication_role = replica"))
        await session.execute(
            text("INSERT INTO thought (id, project_id, content) VALUES (gen_random_uuid(), :p, 'quorade sistack')"),
            {"p": project_id},
        )
    drifted = await finding()
    assert drifted["severity"] == "warning" and drifted["count"] == 1
    assert drifted["details"][0]["project_id"] == str(project_id)
    async with app_context.db.unit_of_work() as session:
        fixed = await HealthService(session).autofix()
    assert fixed["lexical_statistics_rebuilt"] == 1
    assert (await finding())["count"] == 0
    assert await _drift(app_context) == []


async def test_search_answers_the_bm25_score_of_the_leg(app_context: AppContext, writer: ToolCaller) -> None:
    """`scores.bm25_score` is the Okapi BM25 score (4 places), and `match_source` names the leg."""
    await register(writer, "scores", "/srv/scores")
    await bulk(writer, ["quorade veltion quorade", "veltion bramery", "sistack nolvine"], "/srv/scores")
    project = (await rows(app_context, "SELECT id FROM project WHERE name = 'scores'"))[0].id
    lexemes = await _query_lexemes(app_context, "quorade veltion")
    expected = {thought_id: score for score, thought_id in _reference(await _documents(app_context, project), lexemes)}
    assert len(expected) == 2
    answer = await writer.ok(
        "memory_recall",
        {"action": "search", "query": "quorade veltion", "cwd": "/srv/scores", "compact": False, "min_relevance": 0},
    )
    scored = {uuid.UUID(item["thought"]["id"]): item for item in answer.items if "bm25" in item["match_source"]}
    assert set(scored) == set(expected)
    for thought_id, item in scored.items():
        assert item["scores"]["bm25_score"] == round(expected[thought_id], 4)


async def test_rows_the_budget_left_out_are_scored_on_request(app_context: AppContext, monkeypatch: Any) -> None:
    """A thought holding only the query's commoner lexemes is not a candidate of the leg once the budget is spent on
    the rarer ones; with_scores_of (a hybrid search passes the vector leg's rows) adds it at its own BM25 score,
    leaves out a thought holding no query lexeme, does not repeat a row the leg ranked, and leaves a leg the budget
    did not cut as it is."""
    monkeypatch.setattr(search_repository, "CANDIDATE_BUDGET", 5)
    monkeypatch.setattr(search_repository, "WIDER_PASS_MAX_THOUGHTS", 0)  # no second pass: the budget binds
    project_id = uuid.uuid4()
    await execute(app_context, "INSERT INTO project (id, name) VALUES (:id, 'budget')", id=project_id)
    filler = [f"note {i}: the gateway retries twice" for i in range(40)]
    await _insert(app_context, project_id, ["zorblax handled it", "zorblax again", *filler, "gateway gateway"])
    ids = {row.content: row.id for row in await rows(app_context, "SELECT id, content FROM thought")}
    target, holder = ids["gateway gateway"], ids["zorblax again"]
    # The notes tie on score and ties go by id: the note of the largest id ranks last of all the holders.
    stranger = max(thought_id for content, thought_id in ids.items() if content.startswith("note "))
    nothing = (await rows(app_context, "SELECT gen_random_uuid() AS id"))[0].id  # holds no lexeme: no row at all
    where = ThoughtFilter(project_id=project_id, statuses=(ThoughtStatus.active,))
    settings = Bm25Settings(k1=K1, b=B)
    async with app_context.db.unit_of_work() as session:
        repository = SearchRepository(session)
        leg = await repository.lexical_leg("zorblax gateway", where, 100, settings)
        assert {row.id for row in leg.rows} == {ids["zorblax handled it"], holder}  # the rarer lexeme's holders
        assert leg.cut
        widened = await repository.with_scores_of(leg, [target, holder, stranger, nothing], settings)
        # A leg the budget did not cut (every lexeme probed) is complete up to its pool: nothing is added to it.
        monkeypatch.setattr(search_repository, "CANDIDATE_BUDGET", 500)
        complete = await repository.lexical_leg("zorblax gateway", where, 10, settings)
        assert not complete.cut and stranger not in {row.id for row in complete.rows}
        assert await repository.with_scores_of(complete, [stranger], settings) == complete
    expected = dict(
        (thought_id, score)
        for score, thought_id in _reference(
            await _documents(app_context, project_id), await _query_lexemes(app_context, "zorblax gateway")
        )
    )
    assert [row.id for row in widened.rows][:2] == [row.id for row in leg.rows]  # zorblax outranks both others
    assert {row.id for row in widened.rows} == {*(row.id for row in leg.rows), target, stranger}
    assert len(widened.rows) == 4
    for row in widened.rows:
        assert math.isclose(row.score, expected[row.id], rel_tol=1e-9)
    assert [row.score for row in widened.rows] == sorted((row.score for row in widened.rows), reverse=True)
