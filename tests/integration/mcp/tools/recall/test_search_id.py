"""memory_recall id lookup (contract "Id lookup"): forms, scopes, cluster shape, ambiguity, misses, standing."""

from __future__ import annotations

import uuid
from collections import defaultdict

import pytest

from tests.conftest import MODEL_CACHE
from tests.support.helpers import ToolCaller
from tests.support.search import (
    NO_CWD,
    archive,
    bulk,
    create,
    degraded_caller,
    execute,
    hit_count,
    id_not_found,
    ids_of,
    link,
    make_cluster,
    recall,
    register,
    search,
    seed_corpus,
)


def spellings(thought_id: str) -> list[str]:
    digits = thought_id.replace("-", "")
    return [
        thought_id,
        thought_id.upper(),
        digits,
        digits.upper(),
        "-".join(digits[i : i + 4] for i in range(0, 32, 4)),  # hyphens in unusual places
        f"{digits[:1]}-{digits[1:]}",
    ]


def _hyphenated_prefix(thought_id: str, hex_digits: int) -> str:
    """The canonical spelling of the first `hex_digits` digits (hyphens where the UUID has them)."""
    out, seen = [], 0
    for char in thought_id:
        if seen == hex_digits:
            break
        out.append(char)
        seen += char != "-"
    return "".join(out)


# ---------------------------------------------------------------- full ids


async def test_a_full_id_in_any_spelling_resolves_directly(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    target = ids["coffee"]
    for spelling in spellings(target):
        answer = await search(reader, spelling)
        assert ids_of(answer) == [target], spelling
        assert answer.items[0] == {"thought": answer.items[0]["thought"]}
        assert answer.meta == {
            "action": "search",
            "scope": None,
            "counts": {"total": 1, "returned": 1, "filtered_out": 0},
            "degraded": False,
            "warnings": [NO_CWD],
        }


async def test_an_id_hit_has_id_match_source_no_relevance_and_no_low_confidence(
    writer: ToolCaller, reader: ToolCaller
) -> None:
    ids = await seed_corpus(writer)
    answer = await search(reader, ids["coffee"], compact=False, min_relevance=1)  # never gated
    [item] = answer.items
    assert item["match_source"] == ["id"]
    assert item["standing"] == "current"
    assert item["low_confidence"] is False
    assert "relevance" not in item["scores"] and "similarity" not in item["scores"]
    assert answer.meta["counts"] == {"total": 1, "returned": 1, "filtered_out": 0}


async def test_a_full_id_ignores_status_cwd_tag_and_min_importance(writer: ToolCaller, reader: ToolCaller) -> None:
    await register(writer, "Demo", "/work/demo")
    other = await register(writer, "Other", "/work/other")
    stored = await create(writer, "archived low-importance thought in demo", cwd="/work/demo", tags=["x"])
    await archive(reader.context, stored["id"])
    await execute(reader.context, "UPDATE thought SET importance = 0.1 WHERE id = :id", id=uuid.UUID(stored["id"]))
    answer = await search(reader, stored["id"], cwd="/work/other", status="active", tag="not-x", min_importance=0.9)
    assert ids_of(answer) == [stored["id"]]
    assert answer.items[0]["thought"]["status"] == "archived"
    assert answer.meta["scope"] == {"project": other["id"], "project_name": "Other", "global": False}
    assert answer.meta["warnings"] == []
    assert "reason" not in answer.meta


async def test_is_cluster_constrains_a_full_id(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    await make_cluster(reader.context, ids["hnsw"])
    assert ids_of(await search(reader, ids["hnsw"], is_cluster=True)) == [ids["hnsw"]]
    assert ids_of(await search(reader, ids["coffee"], is_cluster=False)) == [ids["coffee"]]
    # A full id of the wrong shape is a miss: the fallback search runs and the warning says so.
    missed = await search(reader, ids["coffee"], is_cluster=True)
    assert ids["coffee"] not in ids_of(missed)
    assert missed.meta["warnings"] == [NO_CWD, id_not_found(ids["coffee"])]
    missed = await search(reader, ids["hnsw"], is_cluster=False)
    assert ids["hnsw"] not in ids_of(missed)
    assert id_not_found(ids["hnsw"]) in missed.meta["warnings"]


# ---------------------------------------------------------------- prefixes


async def test_a_prefix_of_13_or_more_hex_digits_resolves(writer: ToolCaller, reader: ToolCaller) -> None:
    stored = await create(writer, "a lone thought addressed by prefix")
    digits = stored["id"].replace("-", "")
    for length in (13, 16, 20, 31):
        for query in {digits[:length], digits[:length].upper(), _hyphenated_prefix(stored["id"], length)}:
            answer = await search(reader, query, compact=False)
            assert ids_of(answer) == [stored["id"]], query
            assert answer.items[0]["match_source"] == ["id"]
            assert "reason" not in answer.meta


async def test_twelve_hex_digits_are_an_ordinary_query(writer: ToolCaller, reader: ToolCaller) -> None:
    stored = await create(writer, "a thought whose id prefix is searched as a word")
    query = stored["id"].replace("-", "")[:12]
    answer = await search(reader, query, compact=False, min_relevance=0)
    assert all("id" not in item["match_source"] for item in answer.items)
    assert all("id_not_found" not in warning for warning in answer.meta["warnings"])


async def test_a_prefix_honours_status_and_cwd(writer: ToolCaller, reader: ToolCaller) -> None:
    await register(writer, "Demo", "/work/demo")
    await register(writer, "Other", "/work/other")
    stored = await create(writer, "prefix scoped thought", cwd="/work/demo", status="draft")
    prefix = stored["id"].replace("-", "")[:20]
    # Default status (active) misses the draft: an id miss, a fallback search, the warning.
    missed = await search(reader, prefix, cwd="/work/demo")
    assert stored["id"] not in ids_of(missed)
    assert missed.meta["warnings"] == [id_not_found(prefix)]
    assert ids_of(await search(reader, prefix, cwd="/work/demo", status="draft")) == [stored["id"]]
    assert ids_of(await search(reader, prefix, status="all")) == [stored["id"]]
    wrong_project = await search(reader, prefix, cwd="/work/other", status="all")
    assert stored["id"] not in ids_of(wrong_project)
    assert wrong_project.meta["warnings"] == [id_not_found(prefix)]
    # The other project has no thought at all: the fallback matched nothing either.
    assert wrong_project.meta["reason"] == "id_not_found"
    assert wrong_project.items == []


async def test_is_cluster_constrains_a_prefix(writer: ToolCaller, reader: ToolCaller) -> None:
    stored = await create(writer, "a cluster addressed by prefix")
    await make_cluster(reader.context, stored["id"])
    prefix = stored["id"].replace("-", "")[:20]
    assert ids_of(await search(reader, prefix, is_cluster=True)) == [stored["id"]]
    missed = await search(reader, prefix, is_cluster=False)
    assert missed.items == [] and missed.meta["reason"] == "id_not_found"


# ---------------------------------------------------------------- ambiguity


async def _shared_window(writer: ToolCaller, count: int) -> tuple[str, list[str]]:
    """bulk_create rows share the UUIDv7 millisecond: the 13-digit prefix and the ids it addresses."""
    created = await bulk(writer, [f"ambiguous id thought number {n}" for n in range(count)])
    windows: dict[str, list[str]] = defaultdict(list)
    for thought_id in created:
        windows[thought_id.replace("-", "")[:13]].append(thought_id)
    prefix, members = max(windows.items(), key=lambda pair: len(pair[1]))
    assert len(members) >= 4, windows
    return prefix, sorted(members)


async def test_a_prefix_addressing_several_thoughts_is_ambiguous(writer: ToolCaller, reader: ToolCaller) -> None:
    prefix, members = await _shared_window(writer, 30)
    answer = await search(reader, prefix, limit=100)
    assert ids_of(answer) == members  # all of them, in id order
    assert answer.meta["reason"] == "ambiguous_id"
    assert answer.meta["counts"] == {"total": len(members), "returned": len(members), "filtered_out": 0}
    assert answer.meta["warnings"] == [NO_CWD]
    hyphenated = _hyphenated_prefix(members[0], 13).upper()
    assert ids_of(await search(reader, hyphenated, limit=100)) == members


async def test_an_ambiguous_answer_is_capped_at_limit_and_stays_ambiguous(
    writer: ToolCaller, reader: ToolCaller
) -> None:
    prefix, members = await _shared_window(writer, 30)
    answer = await search(reader, prefix, limit=3)
    assert ids_of(answer) == members[:3]
    assert answer.meta["reason"] == "ambiguous_id"
    # total = the ids addressed, returned = after the limit slice; an id is never gated, so nothing is
    # "filtered out" (search's filtered_out counts gate drops only, not the limit slice).
    assert answer.meta["counts"] == {"total": len(members), "returned": 3, "filtered_out": 0}
    # The default limit (10) caps too; limit itself stops at the hard cap of 100.
    assert len((await search(reader, prefix)).items) == min(10, len(members))
    refused = await reader("memory_recall", {"action": "search", "query": prefix, "limit": 101})
    assert refused.error["statusCode"] == 400 and "limit" in refused.text


# ---------------------------------------------------------------- misses


async def test_an_unknown_full_id_falls_back_with_a_warning(writer: ToolCaller, reader: ToolCaller) -> None:
    unknown = "cafebabe-0000-7000-8000-0000000000ff"
    empty = await search(reader, unknown)
    assert empty.items == []
    assert empty.meta == {
        "action": "search",
        "scope": None,
        "counts": {"total": 0, "returned": 0, "filtered_out": 0},
        "degraded": False,
        "warnings": [NO_CWD, id_not_found(unknown)],
        "reason": "id_not_found",
    }
    # With rows to consider, the answer is that of an ordinary search: no reason, the warning kept.
    ids = await seed_corpus(writer)
    gated = await search(reader, unknown)
    assert gated.meta["warnings"] == [NO_CWD, id_not_found(unknown)]
    assert "reason" not in gated.meta
    assert gated.meta["counts"]["total"] > 0
    fallback = await search(reader, unknown, min_relevance=0, compact=False)
    assert len(fallback.items) == len(ids)
    assert all("id" not in item["match_source"] for item in fallback.items)
    assert "reason" not in fallback.meta
    assert fallback.meta["warnings"] == [NO_CWD, id_not_found(unknown)]


async def test_a_hex_word_miss_keeps_its_lexical_rows(writer: ToolCaller, reader: ToolCaller) -> None:
    word = "deadbeefcafe0123"  # 16 hex digits: id-shaped, but a word in this thought
    stored = await create(writer, f"the build fingerprint {word} is pinned in the lockfile")
    answer = await search(reader, word, compact=False)
    assert ids_of(answer) == [stored["id"]]
    assert answer.items[0]["match_source"] == ["embedding", "bm25"]
    assert answer.meta["warnings"] == [NO_CWD, id_not_found(word)]
    assert "reason" not in answer.meta


async def test_an_id_miss_with_a_cwd_reports_the_scope(writer: ToolCaller, reader: ToolCaller) -> None:
    demo = await register(writer, "Demo", "/work/demo")
    query = "01A172B4-EBD5-7"
    answer = await search(reader, query, cwd="/work/demo")
    assert answer.meta == {
        "action": "search",
        "scope": {"project": demo["id"], "project_name": "Demo", "global": False},
        "counts": {"total": 0, "returned": 0, "filtered_out": 0},
        "degraded": False,
        "warnings": [id_not_found(query)],
        "reason": "id_not_found",
    }


# ---------------------------------------------------------------- standing on id hits


async def test_suppress_degrades_to_flag_on_an_id_hit(writer: ToolCaller, reader: ToolCaller) -> None:
    old = await create(writer, "the deploy window is Tuesday")
    new = await create(writer, "the deploy window is Thursday")
    await link(writer, new["id"], old["id"], "replaces")
    answer = await search(reader, old["id"], supersession_mode="suppress")
    [item] = answer.items
    assert item["thought"]["id"] == old["id"]
    assert item["standing"] == "superseded"
    assert item["superseded_by"] == [new["id"]]
    assert "low_confidence" not in item
    assert answer.meta["counts"] == {"total": 1, "returned": 1, "filtered_out": 0}
    off = await search(reader, old["id"], supersession_mode="off")
    assert set(off.items[0]) == {"thought"}
    # The word search still suppresses it.
    worded = await search(reader, "deploy window", supersession_mode="suppress")
    assert ids_of(worded) == [new["id"]]


async def test_a_contradicted_id_hit_is_annotated(writer: ToolCaller, reader: ToolCaller) -> None:
    left = await create(writer, "the cache TTL is five minutes")
    right = await create(writer, "the cache TTL is one hour")
    await link(writer, left["id"], right["id"], "contradicts")
    full = await search(reader, right["id"], compact=False)
    [item] = full.items
    assert item["standing"] == "contradicted"
    assert item["contradicted_by"] == [left["id"]]
    assert item["low_confidence"] is False
    off = await search(reader, right["id"], contradiction_mode="off")
    assert set(off.items[0]) == {"thought"}


# ---------------------------------------------------------------- hits, degraded


async def test_id_hits_count_and_resolve_without_the_embedder(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    await search(reader, ids["keys"])
    assert await hit_count(reader.context, ids["keys"]) == 1
    down = degraded_caller(reader, MODEL_CACHE)
    answer = await search(down, ids["keys"].upper())
    assert ids_of(answer) == [ids["keys"]]
    assert await hit_count(reader.context, ids["keys"]) == 2


@pytest.mark.parametrize("query", ["01a172b4ebd5", "deadbeef", "01a172b4-ebd5"])
async def test_short_hex_runs_never_warn(reader: ToolCaller, query: str) -> None:
    answer = await search(reader, query)
    assert answer.meta["warnings"] == [NO_CWD]
    assert answer.meta["reason"] == "no_match"


async def test_url_links_ride_on_id_hits(writer: ToolCaller, reader: ToolCaller) -> None:
    stored = await create(writer, "linked by id", url_links=[{"text": "doc", "url": "https://example.org/doc"}])
    answer = await recall(reader, "search", query=stored["id"], include_url_links=True, fields=["id"])
    assert answer.items == [
        {
            "thought": {
                "id": stored["id"],
                "url_links": [{"text": "doc", "url": "https://example.org/doc", "label": "doc"}],
            }
        }
    ]
