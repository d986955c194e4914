"""memory_recall search items: visibility rules of each key, standing modes, group_by_cluster, shaping, url links."""

from __future__ import annotations

from typing import Any

from tests.support.contract import COMPACT_THOUGHT_KEYS as COMPACT_KEYS
from tests.support.helpers import ToolCaller
from tests.support.search import (
    CORPUS,
    PARAPHRASE_OF_LUNCH,
    PROFILE,
    archive,
    by_id,
    create,
    ids_of,
    link,
    search,
    seed_corpus,
)

SCORE_KEYS = {"similarity", "distance", "rrf_score", "bm25_score", "relevance", "recency_score", "final_score"}

# ---------------------------------------------------------------- per-item keys


async def test_a_clean_compact_hit_is_the_thought_only(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    answer = await search(reader, "lunch")
    assert answer.items[0] == {
        "thought": {
            "id": ids["lunch"],
            "content": CORPUS["lunch"],
            "status": "active",
            "tags": [],
            "project": answer.items[0]["thought"]["project"],
        }
    }
    assert set(answer.items[0]["thought"]) == COMPACT_KEYS


async def test_low_confidence_shows_in_compact_output(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    answer = await search(reader, PARAPHRASE_OF_LUNCH)
    [item] = answer.items  # relevance ≈ 0.55 clears the gate; cosine ≈ 0.841 < vector_floor 0.85, no BM25 anchor
    assert item["thought"]["id"] == ids["lunch"]
    assert item["low_confidence"] is True
    assert set(item) == {"thought", "low_confidence"}


async def test_compact_false_carries_every_ranking_key(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    answer = await search(reader, "lunch", compact=False, min_relevance=0)
    for item in answer.items:
        assert set(item) == {"thought", "standing", "low_confidence", "scores", "match_source"}
        assert item["standing"] == "current"
        assert isinstance(item["low_confidence"], bool)
        assert set(item["scores"]) <= SCORE_KEYS
        assert {"similarity", "distance", "rrf_score", "relevance", "final_score"} <= set(item["scores"])
        assert "recency_score" not in item["scores"]
        assert set(item["match_source"]) <= {"embedding", "bm25", "id"}
        assert "project_id" in item["thought"] and "created_at" in item["thought"]  # the full thought
    top = by_id(answer)[ids["lunch"]]
    assert top["low_confidence"] is False and "bm25_score" in top["scores"]
    weak = by_id(answer)[ids["coffee"]]
    assert weak["low_confidence"] is True and weak["match_source"] == ["embedding"]


async def test_low_confidence_is_a_cosine_under_vector_floor_without_anchor(
    writer: ToolCaller, reader: ToolCaller
) -> None:
    await seed_corpus(writer)
    seen: list[dict[str, Any]] = []
    for query in ("lunch", PARAPHRASE_OF_LUNCH, "database ran out of connections", "layer"):
        seen += (await search(reader, query, compact=False, min_relevance=0)).items
    for item in seen:
        anchored = "bm25" in item["match_source"]
        weak = item["scores"]["similarity"] < PROFILE.vector_floor
        assert item["low_confidence"] is (not anchored and weak), item
    assert any(item["low_confidence"] for item in seen) and any(not item["low_confidence"] for item in seen)


async def test_fields_and_compact_shape_the_thought_only(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    selected = await search(reader, "lunch", fields=["id", "importance"])
    assert selected.items[0] == {"thought": {"id": ids["lunch"], "importance": 1.0}}
    full_fields = await search(reader, "lunch", fields=["id"], compact=False)
    item = full_fields.items[0]
    assert item["thought"] == {"id": ids["lunch"]}
    assert {"scores", "match_source", "standing", "low_confidence"} <= set(item)
    compact = await search(reader, "lunch", compact=True)
    assert set(compact.items[0]["thought"]) == COMPACT_KEYS


async def test_url_links_ride_on_every_hit(writer: ToolCaller, reader: ToolCaller) -> None:
    linked = await create(
        writer,
        "lunch vendor menu",
        url_links=[
            {"text": "menu", "url": "https://example.org/menu"},
            {"text": "map", "url": "https://example.org/m"},
        ],
    )
    bare = await create(writer, "lunch vendor invoice")
    plain = await search(reader, "lunch vendor")
    assert all("url_links" not in item["thought"] for item in plain.items)
    answer = await search(reader, "lunch vendor", include_url_links=True, fields=["id"])
    links = {item["thought"]["id"]: item["thought"]["url_links"] for item in answer.items}
    assert links == {
        linked["id"]: [
            {"text": "menu", "url": "https://example.org/menu", "label": "menu"},
            {"text": "map", "url": "https://example.org/m", "label": "map"},
        ],
        bare["id"]: [],
    }


# ---------------------------------------------------------------- standing: supersession


async def _superseded_pair(writer: ToolCaller) -> tuple[dict[str, Any], dict[str, Any]]:
    old = await create(writer, "the lunch budget is 10 euros per person")
    new = await create(writer, "the lunch budget is 15 euros per person")
    await link(writer, new["id"], old["id"], "replaces")
    return old, new


async def test_superseded_hits_are_flagged_and_ordered_after_current(writer: ToolCaller, reader: ToolCaller) -> None:
    old, new = await _superseded_pair(writer)
    # The old thought is the better match for this query, yet it comes after the current one.
    answer = await search(reader, "the lunch budget is 10 euros per person")
    assert ids_of(answer) == [new["id"], old["id"]]
    assert answer.items[0] == {"thought": answer.items[0]["thought"]}
    assert answer.items[1]["standing"] == "superseded"
    assert answer.items[1]["superseded_by"] == [new["id"]]
    assert "low_confidence" not in answer.items[1]
    assert answer.meta["counts"] == {"total": 2, "returned": 2, "filtered_out": 0}
    flagged = await search(reader, "the lunch budget is 10 euros per person", supersession_mode="flag")
    assert flagged.items == answer.items
    full = await search(reader, "lunch budget", compact=False)
    assert [item["standing"] for item in full.items] == ["current", "superseded"]


async def test_suppress_removes_superseded_hits_from_items_and_total(writer: ToolCaller, reader: ToolCaller) -> None:
    _old, new = await _superseded_pair(writer)
    answer = await search(reader, "lunch budget", supersession_mode="suppress")
    assert ids_of(answer) == [new["id"]]
    assert answer.meta["counts"] == {"total": 1, "returned": 1, "filtered_out": 0}


async def test_supersession_off_drops_the_annotation(writer: ToolCaller, reader: ToolCaller) -> None:
    old, new = await _superseded_pair(writer)
    answer = await search(reader, "the lunch budget is 10 euros per person", supersession_mode="off")
    assert ids_of(answer) == [old["id"], new["id"]]  # plain score order
    assert all(set(item) == {"thought"} for item in answer.items)
    full = await search(reader, "lunch budget", supersession_mode="off", compact=False)
    assert all(item["standing"] == "current" and "superseded_by" not in item for item in full.items)


async def test_an_archived_replacement_does_not_supersede(writer: ToolCaller, reader: ToolCaller) -> None:
    old, new = await _superseded_pair(writer)
    await archive(reader.context, new["id"])
    answer = await search(reader, "lunch budget")
    assert ids_of(answer) == [old["id"]]
    assert answer.items[0] == {"thought": answer.items[0]["thought"]}
    # The same rule in suppress mode and on an id hit.
    suppressed = await search(reader, "lunch budget", supersession_mode="suppress")
    assert ids_of(suppressed) == [old["id"]]
    by_id = await search(reader, old["id"], compact=False)
    assert by_id.items[0]["standing"] == "current" and "superseded_by" not in by_id.items[0]


async def test_supersession_mode_is_validated(reader: ToolCaller) -> None:
    refused = await reader("memory_recall", {"action": "search", "query": "x", "supersession_mode": "hide"})
    assert refused.error["statusCode"] == 400 and "supersession_mode" in refused.text
    refused = await reader("memory_recall", {"action": "search", "query": "x", "contradiction_mode": "suppress"})
    assert refused.error["statusCode"] == 400 and "contradiction_mode" in refused.text


# ---------------------------------------------------------------- standing: contradiction


async def test_contradicted_hits_are_flagged_at_both_ends(writer: ToolCaller, reader: ToolCaller) -> None:
    left = await create(writer, "the standup meeting starts at nine")
    right = await create(writer, "the standup meeting starts at ten")
    clean = await create(writer, "the standup meeting notes live in the wiki")
    await link(writer, left["id"], right["id"], "contradicts")
    answer = await search(reader, "standup meeting")
    items = by_id(answer)
    assert items[left["id"]]["standing"] == "contradicted"
    assert items[left["id"]]["contradicted_by"] == [right["id"]]
    assert items[right["id"]]["standing"] == "contradicted"
    assert items[right["id"]]["contradicted_by"] == [left["id"]]
    assert items[clean["id"]] == {"thought": items[clean["id"]]["thought"]}
    assert ids_of(answer)[0] == clean["id"]  # current before contradicted
    off = await search(reader, "standup meeting", contradiction_mode="off", compact=False)
    assert all(item["standing"] == "current" and "contradicted_by" not in item for item in off.items)


async def test_standing_order_is_current_contradicted_superseded(writer: ToolCaller, reader: ToolCaller) -> None:
    old, _new = await _superseded_pair(writer)
    disputed = await create(writer, "the lunch budget is unlimited on Fridays")
    rival = await create(writer, "the lunch budget is never unlimited")
    await link(writer, disputed["id"], rival["id"], "contradicts")
    answer = await search(reader, "the lunch budget is 10 euros per person", min_relevance=0, compact=False)
    standings = [item["standing"] for item in answer.items]
    assert standings == sorted(standings, key=["current", "contradicted", "superseded"].index)
    assert standings.count("superseded") == 1 and standings.count("contradicted") == 2
    assert answer.items[-1]["thought"]["id"] == old["id"]


# ---------------------------------------------------------------- group_by_cluster


async def test_group_by_cluster_puts_loose_hits_first_then_groups(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    made = await writer.ok(
        "memory_crystallize",
        {"action": "cluster", "thought_ids": [ids["pool"], ids["hnsw"]], "title": "Database operations notes"},
    )
    cluster = made.item["cluster"]
    answer = await search(
        reader, "database", group_by_cluster=True, min_relevance=0, include_url_links=True, fields=["id"]
    )
    flat = await search(reader, "database", min_relevance=0, fields=["id"])
    groups = [entry for entry in answer.items if "cluster" in entry]
    loose = [entry for entry in answer.items if "cluster" not in entry]
    assert answer.items == [*loose, *groups]  # un-clustered first
    [group] = groups
    assert set(group) == {"cluster", "items"}
    assert group["cluster"] == {"id": cluster["id"], "content": "Database operations notes"}
    members = [entry["thought"]["id"] for entry in group["items"]]
    assert sorted(members) == sorted([ids["pool"], ids["hnsw"]])
    assert all(entry["thought"]["url_links"] == [] for entry in [*loose, *group["items"]])
    loose_ids = [entry["thought"]["id"] for entry in loose]
    assert cluster["id"] in loose_ids  # the cluster thought itself belongs to no cluster
    # Same hits, same relative order inside each part; returned counts hits, not groups.
    order = ids_of(flat)
    assert loose_ids == [thought_id for thought_id in order if thought_id not in members]
    assert members == [thought_id for thought_id in order if thought_id in members]
    assert answer.meta["counts"] == flat.meta["counts"]
    assert answer.meta["counts"]["returned"] == len(CORPUS) + 1
    ungrouped = await search(reader, "database", min_relevance=0)
    assert all("cluster" not in entry for entry in ungrouped.items)
