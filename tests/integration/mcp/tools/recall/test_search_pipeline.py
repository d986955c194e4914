"""memory_recall search with the real offline model: legs, filters, the gate, counts, calibration, scope, degraded."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from sqlalchemy import text

from app.db.repositories import search as search_repository
from app.db.repositories.search import SearchRepository
from tests.conftest import MODEL_CACHE, settings_with
from tests.support.helpers import ToolCaller, own_transaction
from tests.support.search import (
    CORPUS,
    LEXICAL_ONLY_DEPLOY,
    NO_CWD,
    PARAPHRASE_OF_LUNCH,
    PROFILE,
    UNRELATED,
    archive,
    bulk,
    by_id,
    calibrated,
    create,
    degraded_caller,
    execute,
    ids_of,
    make_cluster,
    register,
    search,
    seed_corpus,
    unknown_cwd_warning,
)

# ---------------------------------------------------------------- arguments


async def test_query_is_required(reader: ToolCaller) -> None:
    missing = await reader("memory_recall", {"action": "search"})
    assert missing.error["statusCode"] == 400 and "query" in missing.text
    empty = await reader("memory_recall", {"action": "search", "query": ""})
    assert empty.error["statusCode"] == 400 and "query" in empty.text


async def test_hybrid_fuses_both_legs(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    answer = await search(reader, "lunch", compact=False, min_relevance=0)
    top = answer.items[0]
    assert top["thought"]["id"] == ids["lunch"]
    assert top["match_source"] == ["embedding", "bm25"]
    # Rank 1 in both legs: rrf_score 1/(60+1) twice (reported); the fused score is normalised by the best one.
    assert top["scores"]["rrf_score"] == pytest.approx(2 / 61, abs=1e-4)
    assert top["scores"]["final_score"] == 1.0
    assert top["scores"]["bm25_score"] > 0
    rest = answer.items[1:]
    assert rest and all(item["match_source"] == ["embedding"] for item in rest)
    assert all("bm25_score" not in item["scores"] for item in rest)
    # Vector-only rows ranked 2.. carry 1/(60+rank) only. (Their order is the fused one: a row stored just before
    # a close one is lifted by it, so it need not be the vector leg's.)
    assert sorted((item["scores"]["rrf_score"] for item in rest), reverse=True) == [
        pytest.approx(1 / (60 + rank), abs=1e-4) for rank in range(2, 2 + len(rest))
    ]


async def test_the_lexical_leg_ors_the_query_words(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    # Neither row holds both words; each is still a BM25 anchor for the word it does hold.
    answer = await search(reader, "descaling kubernetes Fridays", compact=False, min_relevance=1)
    assert set(ids_of(answer)) == {ids["coffee"], ids["lunch"]}
    assert all("bm25" in item["match_source"] for item in answer.items)


async def test_rows_holding_every_word_suffice_for_a_page(writer: ToolCaller, reader: ToolCaller) -> None:
    """The lexical leg takes the rows with every word; rows with some words join only when those are too few."""
    both = await bulk(writer, ["zebra crossings need a yak permit", "a yak may not use zebra crossings"])
    [one] = await bulk(writer, ["zebra stripes confuse the flies"])
    only_anchors = {"compact": False, "min_relevance": 1, "hybrid": True}
    enough = await search(reader, "zebra yak", limit=2, **only_anchors)
    assert set(ids_of(enough)) == set(both)
    assert all(item["match_source"][-1] == "bm25" for item in enough.items)
    too_few = await search(reader, "zebra yak", limit=3, **only_anchors)
    assert set(ids_of(too_few)) == {*both, one}
    assert "bm25" in by_id(too_few)[one]["match_source"]


async def test_hybrid_false_is_the_vector_leg_only(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    answer = await search(reader, "lunch", compact=False, min_relevance=0, hybrid=False)
    assert answer.items[0]["thought"]["id"] == ids["lunch"]
    assert answer.meta["counts"] == {"total": len(CORPUS), "returned": len(CORPUS), "filtered_out": 0}
    for item in answer.items:
        assert item["match_source"] == ["embedding"]
        assert "bm25_score" not in item["scores"]
    # Without the lexical leg a word match is no anchor: the weak deploy row is gated like any other.
    lexical = await search(reader, LEXICAL_ONLY_DEPLOY, hybrid=False)
    assert lexical.items == []
    assert lexical.meta["counts"] == {"total": len(CORPUS), "returned": 0, "filtered_out": len(CORPUS)}
    assert "reason" not in lexical.meta


async def test_status_defaults_to_active(writer: ToolCaller, reader: ToolCaller) -> None:
    active = await create(writer, "the lunch menu for the offsite")
    draft = await create(writer, "lunch draft: sandwiches or pizza", status="draft")
    archived = await create(writer, "old lunch vendor contract")
    await archive(reader.context, archived["id"])

    async def found(**arguments: Any) -> set[str]:
        return set(ids_of(await search(reader, "lunch", **arguments)))

    assert await found() == {active["id"]}
    assert await found(status="active") == {active["id"]}
    assert await found(status="draft") == {draft["id"]}
    assert await found(status="archived") == {archived["id"]}
    assert await found(status="all") == {active["id"], draft["id"], archived["id"]}
    refused = await reader("memory_recall", {"action": "search", "query": "lunch", "status": "deleted"})
    assert refused.error["statusCode"] == 400 and "status" in refused.text


async def test_tag_is_cluster_and_min_importance_filter_candidates(writer: ToolCaller, reader: ToolCaller) -> None:
    ops = await create(writer, "lunch rota for the ops team", tags=["ops"])
    plain = await create(writer, "lunch budget for the quarter")
    cluster = await create(writer, "lunch logistics overview")
    await make_cluster(reader.context, cluster["id"])
    await execute(reader.context, "UPDATE thought SET importance = 0.2 WHERE id = :id", id=uuid.UUID(plain["id"]))

    async def found(**arguments: Any) -> set[str]:
        answer = await search(reader, "lunch", min_relevance=0, **arguments)
        assert answer.meta["counts"]["total"] == len(answer.items)  # filters shrink the candidates, not the gate
        return set(ids_of(answer))

    assert await found() == {ops["id"], plain["id"], cluster["id"]}
    assert await found(tag="ops") == {ops["id"]}
    assert await found(tag="nothing-tagged-so") == set()
    assert await found(is_cluster=True) == {cluster["id"]}
    assert await found(is_cluster=False) == {ops["id"], plain["id"]}
    assert await found(min_importance=0.5) == {ops["id"], cluster["id"]}
    assert await found(min_importance=0.2) == {ops["id"], plain["id"], cluster["id"]}
    for bad in (-0.1, 1.5):
        refused = await reader("memory_recall", {"action": "search", "query": "x", "min_importance": bad})
        assert refused.error["statusCode"] == 400 and "min_importance" in refused.text


async def test_limit_slices_the_page_and_is_bounded(writer: ToolCaller, reader: ToolCaller) -> None:
    await seed_corpus(writer)
    answer = await search(reader, "lunch", min_relevance=0, limit=3)
    assert len(answer.items) == 3
    assert answer.meta["counts"] == {"total": len(CORPUS), "returned": 3, "filtered_out": 0}
    default = await search(reader, "lunch", min_relevance=0)
    assert default.meta["counts"]["returned"] == len(CORPUS)  # default limit 10 > corpus
    for bad in (0, 101):
        refused = await reader("memory_recall", {"action": "search", "query": "x", "limit": bad})
        assert refused.error["statusCode"] == 400 and "limit" in refused.text
    assert (await search(reader, "lunch", min_relevance=0, limit=100)).meta["counts"]["returned"] == len(CORPUS)


# ---------------------------------------------------------------- the gate and meta.counts


async def test_default_gate_drops_unrelated_cosine_only_rows(writer: ToolCaller, reader: ToolCaller) -> None:
    await seed_corpus(writer)
    answer = await search(reader, UNRELATED)
    assert answer.items == []
    # Everything was considered and gated: no reason, the drops show in filtered_out.
    assert answer.meta == {
        "action": "search",
        "scope": None,
        "counts": {"total": len(CORPUS), "returned": 0, "filtered_out": len(CORPUS)},
        "degraded": False,
        "warnings": [NO_CWD],
    }


async def test_min_relevance_zero_turns_the_gate_off(writer: ToolCaller, reader: ToolCaller) -> None:
    await seed_corpus(writer)
    answer = await search(reader, UNRELATED, min_relevance=0)
    assert len(answer.items) == len(CORPUS)
    assert answer.meta["counts"] == {"total": len(CORPUS), "returned": len(CORPUS), "filtered_out": 0}


async def test_gate_runs_before_the_limit_slice(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    answer = await search(reader, PARAPHRASE_OF_LUNCH, limit=1)
    assert ids_of(answer) == [ids["lunch"]]
    # total = candidates, filtered_out = gated rows, returned = after the limit: not a partition here.
    assert answer.meta["counts"] == {"total": len(CORPUS), "returned": 1, "filtered_out": len(CORPUS) - 1}


async def test_gated_rows_are_backfilled_from_the_pool(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    # A thought written while the embedder is down has no vector: only the lexical leg finds it (BM25 rank 2).
    pending = await create(degraded_caller(writer, MODEL_CACHE), "the docker layer cache is pruned weekly")
    full = await search(reader, LEXICAL_ONLY_DEPLOY, compact=False, min_relevance=0)
    order = ids_of(full)
    # Fused order: deploy (both legs), then vector-only rows (hnsw, the vector leg's first, among them) ahead of
    # the pending row (BM25 rank 2, no cosine).
    assert order[0] == ids["deploy"]
    position = order.index(pending["id"])
    assert full.items[position]["match_source"] == ["bm25"] and "similarity" not in full.items[position]["scores"]
    ahead = full.items[1:position]
    assert ids["hnsw"] in order[1:position]
    assert all(item["match_source"] == ["embedding"] and item["scores"]["relevance"] < 0.4 for item in ahead)
    answer = await search(reader, LEXICAL_ONLY_DEPLOY, limit=2)
    # The rows ahead of it are gated; the next candidate backfills the page instead of the page shrinking.
    assert ids_of(answer) == [ids["deploy"], pending["id"]]
    assert answer.meta["counts"] == {"total": len(CORPUS) + 1, "returned": 2, "filtered_out": len(CORPUS) - 1}


async def test_min_relevance_is_a_value_on_the_calibrated_scale(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    query = "the database rejects clients when traffic peaks"  # pool row: vector-only, cosine ≈ 0.839, relevance ≈ 0.45
    full = await search(reader, query, compact=False, min_relevance=0)
    relevance = by_id(full)[ids["pool"]]["scores"]["relevance"]
    assert 0.1 < relevance < 0.9
    kept = await search(reader, query, min_relevance=round(relevance - 0.01, 4))
    assert ids_of(kept) == [ids["pool"]]
    assert kept.meta["counts"]["filtered_out"] == len(CORPUS) - 1
    dropped = await search(reader, query, min_relevance=round(relevance + 0.01, 4))
    assert dropped.items == []
    assert dropped.meta["counts"] == {"total": len(CORPUS), "returned": 0, "filtered_out": len(CORPUS)}
    for bad in (-0.1, 1.01):
        refused = await reader("memory_recall", {"action": "search", "query": "x", "min_relevance": bad})
        assert refused.error["statusCode"] == 400 and "min_relevance" in refused.text


async def test_bm25_anchored_rows_are_never_gated(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    answer = await search(reader, LEXICAL_ONLY_DEPLOY, compact=False, min_relevance=1)
    [item] = answer.items
    assert item["thought"]["id"] == ids["deploy"]
    assert item["scores"]["relevance"] == 0.0  # far under the bar, kept for its lexical anchor
    assert item["match_source"] == ["embedding", "bm25"]
    assert item["low_confidence"] is False
    assert answer.meta["counts"] == {"total": len(CORPUS), "returned": 1, "filtered_out": len(CORPUS) - 1}


async def test_no_match_only_when_nothing_was_considered(writer: ToolCaller, reader: ToolCaller) -> None:
    empty = await search(reader, "anything at all")
    assert empty.items == []
    assert empty.meta["reason"] == "no_match"
    assert empty.meta["counts"] == {"total": 0, "returned": 0, "filtered_out": 0}
    await seed_corpus(writer)
    # Filters that leave no candidate: nothing considered → no_match.
    tagged = await search(reader, "lunch", tag="no-such-tag")
    assert tagged.meta["reason"] == "no_match"
    assert tagged.meta["counts"] == {"total": 0, "returned": 0, "filtered_out": 0}
    # Candidates all gated: no reason.
    gated = await search(reader, UNRELATED)
    assert "reason" not in gated.meta and gated.meta["counts"]["filtered_out"] == len(CORPUS)
    # Ordinary hits: no reason.
    assert "reason" not in (await search(reader, "lunch")).meta


# ---------------------------------------------------------------- calibrated relevance


def _relevance_matches(items: list[dict[str, Any]], unrelated_floor: float, vector_floor: float) -> None:
    assert items
    # similarity is given to 4 decimals (±5e-5), which the calibration's slope magnifies: e5's floors are 0.02 apart
    tolerance = 1e-4 / (vector_floor - unrelated_floor) + 1e-4
    for item in items:
        scores = item["scores"]
        expected = calibrated(scores["similarity"], unrelated_floor, vector_floor)
        assert scores["relevance"] == pytest.approx(expected, abs=tolerance), item
        assert scores["distance"] == pytest.approx(1 - scores["similarity"], abs=2e-4)


async def test_relevance_uses_the_active_profile_floors(writer: ToolCaller, reader: ToolCaller) -> None:
    await seed_corpus(writer)
    assert reader.context.embedding.profile == PROFILE
    items: list[dict[str, Any]] = []
    for query in ("lunch", PARAPHRASE_OF_LUNCH, "the database rejects clients when traffic peaks", UNRELATED):
        items += (await search(reader, query, compact=False, min_relevance=0)).items
    _relevance_matches(items, PROFILE.unrelated_floor, PROFILE.vector_floor)
    relevances = {item["scores"]["relevance"] for item in items}
    assert 0.0 in relevances and 1.0 in relevances  # both clamps exercised
    assert any(0.0 < value < 1.0 for value in relevances)  # and the linear part


@pytest.mark.parametrize(
    "settings", [{"search": {"confidence": {"unrelated_floor": 0.75, "vector_floor": 0.8}}}], indirect=True
)
async def test_relevance_follows_overridden_floors(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    answer = await search(reader, PARAPHRASE_OF_LUNCH, compact=False, min_relevance=0)
    _relevance_matches(answer.items, 0.75, 0.8)
    scores = by_id(answer)
    # ≈ 0.841 cosine is over the overridden vector_floor: a strong, clean match now ...
    assert scores[ids["lunch"]]["scores"]["relevance"] == 1.0
    assert scores[ids["lunch"]]["low_confidence"] is False
    # ... and ≈ 0.765 (keys) sits inside the overridden span.
    assert 0.0 < scores[ids["keys"]]["scores"]["relevance"] < 1.0
    # The default gate (0.4) now applies on the overridden scale.
    gated = await search(reader, PARAPHRASE_OF_LUNCH, compact=False)
    assert all(item["scores"]["relevance"] >= 0.4 for item in gated.items)
    assert gated.meta["counts"]["filtered_out"] == sum(1 for item in answer.items if item["scores"]["relevance"] < 0.4)


# ---------------------------------------------------------------- recency


async def test_recency_pushes_older_rows_down(writer: ToolCaller, reader: ToolCaller) -> None:
    # Without the neighbour lift: ageing a row reorders which thought was stored just before which, so the lift
    # would move with it and blur what this test pins, the recency term alone (the lift: test_fusion.py).
    reader = reader.with_settings(settings_with(search={"neighbour_weight": 0}))
    first = await create(writer, "billing service retries failed invoices nightly")
    second = await create(writer, "billing service retries failed invoices hourly")
    query = "billing service retries failed invoices"
    plain = await search(reader, query, compact=False)
    leader, follower = ids_of(plain)
    assert {leader, follower} == {first["id"], second["id"]}
    assert all("recency_score" not in item["scores"] for item in plain.items)
    await execute(
        reader.context,
        "UPDATE thought SET created_at = now() - interval '90 days' WHERE id = :id",
        id=uuid.UUID(leader),
    )
    # Three half-lives: the fused scores are e^(fused − best), and two near-identical texts can stand ~0.5 apart
    # there (standardised legs), so one half-life (−0.5) need not overtake; three (−0.875) must.
    boosted = await search(reader, query, compact=False, recency_weight=1, recency_half_life_days=30)
    assert ids_of(boosted) == [follower, leader]
    items = by_id(boosted)
    assert items[leader]["scores"]["recency_score"] == pytest.approx(0.125, abs=1e-3)  # three half-lives old
    assert items[follower]["scores"]["recency_score"] == pytest.approx(1.0, abs=1e-3)
    plain_final = {item["thought"]["id"]: item["scores"]["final_score"] for item in plain.items}
    assert max(plain_final.values()) == 1.0  # the fused score over the best one
    for item in boosted.items:
        scores = item["scores"]
        # final = the fused score over the best one (as without recency) + weight × recency.
        fused = plain_final[item["thought"]["id"]]
        assert scores["final_score"] == pytest.approx(fused + scores["recency_score"], abs=2e-3)
    # weight 0 (the default) leaves the order and the scores alone
    again = await search(reader, query, compact=False, recency_weight=0)
    assert ids_of(again) == [leader, follower]
    assert all("recency_score" not in item["scores"] for item in again.items)
    for name, bad in (("recency_weight", 1.5), ("recency_half_life_days", 0), ("recency_half_life_days", 3651)):
        refused = await reader("memory_recall", {"action": "search", "query": "x", name: bad})
        assert refused.error["statusCode"] == 400 and name in refused.text


# ---------------------------------------------------------------- cwd scope


async def test_cwd_scopes_the_search(writer: ToolCaller, reader: ToolCaller) -> None:
    demo = await register(writer, "Demo", "/work/demo")
    await register(writer, "Other", "/work/other")
    here = await create(writer, "lunch in the demo project", cwd="/work/demo")
    there = await create(writer, "lunch in the other project", cwd="/work/other")
    scoped = await search(reader, "lunch", cwd="/work/demo/src")
    assert ids_of(scoped) == [here["id"]]
    assert scoped.meta["scope"] == {"project": demo["id"], "project_name": "Demo", "global": False}
    assert scoped.meta["warnings"] == []
    assert scoped.meta["counts"]["total"] == 1
    for cwd in (None, ""):
        arguments = {} if cwd is None else {"cwd": cwd}
        wide = await search(reader, "lunch", **arguments)
        assert set(ids_of(wide)) == {here["id"], there["id"]}
        assert wide.meta["scope"] is None and wide.meta["warnings"] == [NO_CWD]
    unknown = await search(reader, "lunch", cwd="/nowhere/at/all")
    assert set(ids_of(unknown)) == {here["id"], there["id"]}
    assert unknown.meta["scope"] == {"project": None, "project_name": None, "global": True}
    assert unknown.meta["warnings"] == [unknown_cwd_warning("/nowhere/at/all")]
    # A registered project with no thoughts considered nothing.
    await register(writer, "Empty", "/work/empty")
    empty = await search(reader, "lunch", cwd="/work/empty")
    assert empty.items == [] and empty.meta["reason"] == "no_match"


# ---------------------------------------------------------------- degraded


async def test_degraded_search_answers_from_the_lexical_leg(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    down = degraded_caller(reader, MODEL_CACHE)
    answer = await search(down, "lunch", compact=False)
    assert answer.meta["degraded"] is True
    [item] = answer.items
    assert item["thought"]["id"] == ids["lunch"]
    assert item["match_source"] == ["bm25"]
    assert set(item["scores"]) == {"rrf_score", "bm25_score", "final_score"}  # no cosine, so no relevance
    assert item["low_confidence"] is False
    assert answer.meta["counts"] == {"total": 1, "returned": 1, "filtered_out": 0}
    # hybrid=false cannot run its only leg: the lexical answer still comes back, degraded.
    vector_only = await search(down, "lunch", hybrid=False)
    assert ids_of(vector_only) == [ids["lunch"]] and vector_only.meta["degraded"] is True
    # Nothing lexical: no_match, still degraded.
    nothing = await search(down, PARAPHRASE_OF_LUNCH)
    assert nothing.items == [] and nothing.meta["reason"] == "no_match" and nothing.meta["degraded"] is True
    assert (await search(reader, "lunch")).meta["degraded"] is False


async def test_a_vector_row_the_budget_cut_from_the_lexical_leg_is_scored_and_anchored(
    writer: ToolCaller, reader: ToolCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the candidate budget cut the lexical leg, the vector leg's rows holding a query lexeme are scored by BM25
    too: `match_source` ["embedding", "bm25"], a `bm25_score`, never gated (a BM25 anchor), as any row of that leg."""
    monkeypatch.setattr(search_repository, "CANDIDATE_BUDGET", 5)  # the rare word's 2 holders spend it
    monkeypatch.setattr(search_repository, "WIDER_PASS_MAX_THOUGHTS", 0)  # no second pass at this small size
    await bulk(writer, ["zorblax handled it", "zorblax again", *(f"gateway note {i}" for i in range(20))])
    [target] = await bulk(writer, ["gateway gateway"])
    answer = await search(reader, "zorblax gateway", compact=False, limit=50, min_relevance=0.99)
    hit = by_id(answer)[target]
    assert hit["match_source"] == ["embedding", "bm25"]
    assert hit["scores"]["bm25_score"] > 0 and hit["low_confidence"] is False
    assert answer.meta["counts"]["filtered_out"] == 0  # every row holds a query word: all anchored, none gated


async def test_a_degraded_search_widens_a_lexical_leg_the_budget_cut(
    writer: ToolCaller, reader: ToolCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a vector leg, nothing stands in for the thoughts the candidate budget left out: where it cut the leg,
    the leg runs again with DEGRADED_WIDEN times the budget, and the thought holding only the commoner word is found."""
    monkeypatch.setattr(search_repository, "CANDIDATE_BUDGET", 5)  # the rare word's 2 holders spend it
    monkeypatch.setattr(search_repository, "WIDER_PASS_MAX_THOUGHTS", 0)  # no second pass at this small size
    await bulk(writer, ["zorblax handled it", "zorblax again", *(f"gateway note {i}" for i in range(20))])
    [target] = await bulk(writer, ["gateway gateway"])
    down = degraded_caller(reader, MODEL_CACHE)
    answer = await search(down, "zorblax gateway", limit=5)
    assert answer.meta["degraded"] is True and target in ids_of(answer)
    monkeypatch.setattr(search_repository, "DEGRADED_WIDEN", 1)  # the same search without the wider pass
    narrow = await search(down, "zorblax gateway", limit=5)
    assert target not in ids_of(narrow)  # the cut leg alone: only the rare word's holders


async def test_a_row_deleted_between_the_legs_and_the_page_read_is_left_out(
    writer: ToolCaller, reader: ToolCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """READ COMMITTED: the page read sees a delete committed after the legs ran; the search must not fail."""
    ids = await bulk(writer, ["The lunch order goes to the office manager", "Lunch is served at noon on Fridays"])
    await execute(writer.context, "UPDATE thought SET status = 'archived', archived_at = now()")
    vector_leg = SearchRepository.vector_leg

    async def then_delete(self: SearchRepository, *args: Any, **kwargs: Any) -> Any:
        rows = await vector_leg(self, *args, **kwargs)
        await execute(writer.context, "DELETE FROM thought WHERE id = :id", id=uuid.UUID(ids[0]))  # own transaction
        return rows

    monkeypatch.setattr(SearchRepository, "vector_leg", then_delete)
    answer = await search(reader, "lunch", status="archived", min_relevance=0)
    assert ids_of(answer) == [ids[1]]
    assert answer.meta["counts"] == {"total": 1, "returned": 1, "filtered_out": 0}


@pytest.mark.parametrize("counted_before", [False, True], ids=["first hit", "hit row exists"])
async def test_a_row_deleted_while_its_hit_is_counted_is_skipped_and_the_read_answers(
    writer: ToolCaller, reader: ToolCaller, monkeypatch: pytest.MonkeyPatch, counted_before: bool
) -> None:
    """The page read saw the thought, then a delete of it commits while the call's hit INSERT waits on the row:
    the read still answers (not a 409 for a foreign key) and counts the hits of the rows that remain."""
    ids = await bulk(writer, ["The lunch order goes to the office manager", "Lunch is served at noon on Fridays"])
    gone = uuid.UUID(ids[0])
    if counted_before:
        await search(reader, "lunch", min_relevance=0)
    page = SearchRepository.page
    deleting: list[asyncio.Task[None]] = []

    async def delete_while_counting(self: SearchRepository, *args: Any, **kwargs: Any) -> Any:
        rows = await page(self, *args, **kwargs)
        deleted = asyncio.Event()

        async def delete() -> None:
            async with own_transaction(writer.context) as session:
                await session.execute(text("DELETE FROM thought WHERE id = :id"), {"id": gone})
                deleted.set()
                await _until_a_call_waits_on_a_lock(writer)  # the hit INSERT, on the deleted row

        deleting.append(asyncio.create_task(delete()))
        await deleted.wait()
        return rows

    monkeypatch.setattr(SearchRepository, "page", delete_while_counting)
    answer = await search(reader, "lunch", min_relevance=0)
    await deleting[0]
    assert set(ids_of(answer)) == set(ids)  # both were read before the delete committed
    async with writer.context.db.unit_of_work() as session:
        hits = dict((await session.execute(text("SELECT thought_id, hit_count FROM thought_hit"))).all())
    assert hits == {uuid.UUID(ids[1]): 2 if counted_before else 1}


async def _until_a_call_waits_on_a_lock(caller: ToolCaller) -> None:
    for _ in range(100):
        async with own_transaction(caller.context) as session:
            waiting = await session.execute(
                text("SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%thought_hit%'")
            )
            if waiting.first() is not None:
                return
        await asyncio.sleep(0.02)
    raise AssertionError("the search's hit INSERT never waited on the deleted row")
