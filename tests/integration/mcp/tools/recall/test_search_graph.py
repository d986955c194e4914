"""memory_recall context / chain / clusters, and the hits (with primer promotion) every recall counts."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.conftest import MODEL_CACHE
from tests.support.contract import COMPACT_THOUGHT_KEYS
from tests.support.helpers import ToolCaller, count_rows
from tests.support.search import (
    CORPUS,
    NO_CWD,
    PARAPHRASE_OF_LUNCH,
    UNRELATED,
    archive,
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
    rows,
    search,
    seed_corpus,
)


def neighbour_ids(steps: list[dict[str, Any]]) -> list[str]:
    return [step["thought"]["id"] for step in steps]


# ---------------------------------------------------------------- context


async def test_context_by_query_is_the_best_match_and_its_neighbourhood(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    into = await link(writer, ids["pool"], ids["lunch"], "supports")
    out_of = await link(writer, ids["lunch"], ids["coffee"], "related")
    answer = await recall(reader, "context", query="lunch")
    item = answer.item
    assert set(item) == {"thought", "chain"}
    assert item["thought"]["id"] == ids["lunch"]
    assert set(item["thought"]) == COMPACT_THOUGHT_KEYS  # compact by default
    assert set(item["chain"]) == {"upstream", "downstream"}
    [up] = item["chain"]["upstream"]
    [down] = item["chain"]["downstream"]
    assert up["edge"]["id"] == into["id"] and up["thought"]["id"] == ids["pool"]
    assert down["edge"]["id"] == out_of["id"] and down["thought"]["id"] == ids["coffee"]
    assert answer.meta == {
        "action": "context",
        "scope": None,
        "counts": {"total": 1, "returned": 1, "filtered_out": 0},
        "degraded": False,
        "warnings": [NO_CWD],
    }


async def test_context_query_path_runs_with_the_gate_off(writer: ToolCaller, reader: ToolCaller) -> None:
    stored = await create(writer, CORPUS["coffee"])
    gated = await search(reader, UNRELATED)
    assert gated.items == [] and gated.meta["counts"]["filtered_out"] == 1
    answer = await recall(reader, "context", query=UNRELATED)
    assert answer.item["thought"]["id"] == stored["id"]
    assert "reason" not in answer.meta


async def test_context_query_honours_cwd(writer: ToolCaller, reader: ToolCaller) -> None:
    demo = await register(writer, "Demo", "/work/demo")
    await register(writer, "Empty", "/work/empty")
    here = await create(writer, "lunch plans of the demo team", cwd="/work/demo")
    await create(writer, "lunch plans of everybody else")
    answer = await recall(reader, "context", query="lunch plans of everybody else", cwd="/work/demo")
    assert answer.item["thought"]["id"] == here["id"]
    assert answer.meta["scope"] == {"project": demo["id"], "project_name": "Demo", "global": False}
    assert answer.meta["warnings"] == []
    empty = await recall(reader, "context", query="lunch", cwd="/work/empty")
    assert empty.item is None
    assert empty.meta["reason"] == "no_match"
    assert empty.meta["counts"] == {"total": 0, "returned": 0, "filtered_out": 0}


async def test_degraded_context_without_a_lexical_match_is_null(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    down = degraded_caller(reader, MODEL_CACHE)
    answer = await recall(down, "context", query=PARAPHRASE_OF_LUNCH)
    assert answer.item is None
    assert answer.meta == {
        "action": "context",
        "scope": None,
        "counts": {"total": 0, "returned": 0, "filtered_out": 0},
        "degraded": True,
        "warnings": [NO_CWD],
        "reason": "no_match",
    }
    lexical = await recall(down, "context", query="lunch")
    assert lexical.item["thought"]["id"] == ids["lunch"]
    assert lexical.meta["degraded"] is True and "reason" not in lexical.meta


async def test_context_by_thought_id_has_no_project_scope(writer: ToolCaller, reader: ToolCaller) -> None:
    await register(writer, "Demo", "/work/demo")
    stored = await create(writer, "a thought in demo", cwd="/work/demo")
    child = await create(writer, "its child", cwd="/work/demo", parent_id=stored["id"])
    answer = await recall(reader, "context", thought_id=stored["id"].upper(), compact=False, include_url_links=True)
    assert answer.item["thought"]["id"] == stored["id"]
    assert answer.item["thought"]["url_links"] == []
    assert neighbour_ids(answer.item["chain"]["downstream"]) == [child["id"]]
    assert answer.item["chain"]["downstream"][0]["thought"]["url_links"] == []
    assert answer.item["chain"]["upstream"] == []
    assert answer.meta["scope"] is None
    missing = await reader("memory_recall", {"action": "context", "thought_id": str(uuid.uuid4())})
    assert missing.error["statusCode"] == 404


async def test_context_needs_exactly_one_of_query_and_thought_id(writer: ToolCaller, reader: ToolCaller) -> None:
    stored = await create(writer, "either or")
    neither = await reader("memory_recall", {"action": "context"})
    both = await reader("memory_recall", {"action": "context", "query": "either", "thought_id": stored["id"]})
    for refused in (neither, both):
        assert refused.error["statusCode"] == 400
        assert "query" in refused.text and "thought_id" in refused.text


# ---------------------------------------------------------------- chain


async def _chain(writer: ToolCaller) -> dict[str, str]:
    """root → a → b → c → d over parent/develops, a develops branch b → e, and unfollowed edges."""
    names = ["root", "a", "b", "c", "d", "e", "side", "rival", "leaf"]
    made = {name: (await create(writer, f"chain node {name}"))["id"] for name in names}
    await link(writer, made["root"], made["a"], "parent")
    await link(writer, made["a"], made["b"], "develops")
    await link(writer, made["b"], made["c"], "parent")
    await link(writer, made["c"], made["d"], "develops")
    await link(writer, made["b"], made["e"], "develops")
    await link(writer, made["side"], made["b"], "supports")  # not followed
    await link(writer, made["b"], made["rival"], "related")  # not followed
    await link(writer, made["a"], made["leaf"], "depends_on")  # not followed, even further up
    return made


async def test_chain_walks_parent_and_develops_both_ways(writer: ToolCaller, reader: ToolCaller) -> None:
    made = await _chain(writer)
    names = {thought_id: name for name, thought_id in made.items()}
    answer = await recall(reader, "chain", thought_id=made["b"])
    item = answer.item
    assert set(item) == {"thought", "upstream", "downstream"}
    assert item["thought"]["id"] == made["b"]
    assert [(names[s["thought"]["id"]], s["depth"]) for s in item["upstream"]] == [("a", 1), ("root", 2)]
    down = sorted((names[s["thought"]["id"]], s["depth"]) for s in item["downstream"])
    assert down == [("c", 1), ("d", 2), ("e", 1)]
    for step in [*item["upstream"], *item["downstream"]]:
        assert step["edge"]["type"] in {"parent", "develops"}
    assert answer.meta == {
        "action": "chain",
        "scope": None,
        "counts": {"total": 1, "returned": 1, "filtered_out": 0},
        "degraded": False,
        "warnings": [],
    }
    leaf = await recall(reader, "chain", thought_id=made["d"])
    assert [names[s["thought"]["id"]] for s in leaf.item["upstream"]] == ["c", "b", "a", "root"]
    assert leaf.item["downstream"] == []


async def test_chain_is_bounded_by_max_degree(writer: ToolCaller, reader: ToolCaller) -> None:
    made = await _chain(writer)
    one = await recall(reader, "chain", thought_id=made["d"], max_degree=1)
    assert neighbour_ids(one.item["upstream"]) == [made["c"]]
    two = await recall(reader, "chain", thought_id=made["d"], max_degree=2)
    assert neighbour_ids(two.item["upstream"]) == [made["c"], made["b"]]
    four = await recall(reader, "chain", thought_id=made["root"], max_degree=4)
    assert sorted(neighbour_ids(four.item["downstream"])) == sorted(made[n] for n in ("a", "b", "c", "d", "e"))
    three = await recall(reader, "chain", thought_id=made["root"], max_degree=3)
    assert made["d"] not in neighbour_ids(three.item["downstream"])
    refused = await reader("memory_recall", {"action": "chain", "thought_id": made["d"], "max_degree": 0})
    assert refused.error["statusCode"] == 400 and "max_degree" in refused.text


async def test_chain_shapes_every_thought_and_rides_url_links(writer: ToolCaller, reader: ToolCaller) -> None:
    made = await _chain(writer)
    answer = await recall(reader, "chain", thought_id=made["b"], fields=["id"], include_url_links=True)
    for thought in [
        answer.item["thought"],
        *(s["thought"] for s in answer.item["upstream"] + answer.item["downstream"]),
    ]:
        assert thought == {"id": thought["id"], "url_links": []}


async def test_chain_survives_a_cycle(writer: ToolCaller, reader: ToolCaller) -> None:
    made = {name: (await create(writer, f"cycle node {name}"))["id"] for name in ("x", "y", "z")}
    await link(writer, made["x"], made["y"], "parent")
    await link(writer, made["y"], made["z"], "develops")
    await link(writer, made["z"], made["x"], "parent")
    answer = await recall(reader, "chain", thought_id=made["x"])
    assert neighbour_ids(answer.item["downstream"]) == [made["y"], made["z"]]
    assert neighbour_ids(answer.item["upstream"]) == [made["z"], made["y"]]


async def test_chain_of_a_missing_thought_is_a_404(reader: ToolCaller) -> None:
    missing = await reader("memory_recall", {"action": "chain", "thought_id": str(uuid.uuid4())})
    assert missing.error["statusCode"] == 404


# ---------------------------------------------------------------- clusters


async def test_clusters_searches_cluster_thoughts_only(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    made = await writer.ok(
        "memory_crystallize",
        {"action": "cluster", "thought_ids": [ids["lunch"], ids["coffee"]], "title": "Office lunch and coffee"},
    )
    cluster_id = made.item["cluster"]["id"]
    answer = await recall(reader, "clusters", query="lunch", min_relevance=0, compact=False)
    assert ids_of(answer) == [cluster_id]
    assert answer.items[0]["thought"]["is_cluster"] is True
    assert answer.meta["action"] == "clusters"
    assert answer.meta["warnings"] == [NO_CWD]
    assert answer.meta["counts"] == {"total": 1, "returned": 1, "filtered_out": 0}
    assert ids_of(await recall(reader, "clusters", query="lunch", is_cluster=True)) == [cluster_id]


async def test_clusters_refuses_is_cluster_false(reader: ToolCaller) -> None:
    refused = await reader("memory_recall", {"action": "clusters", "query": "lunch", "is_cluster": False})
    assert refused.error["statusCode"] == 400
    assert "is_cluster" in refused.text


async def test_clusters_id_lookup_keeps_the_cluster_constraint(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    # A non-cluster full id answers nothing: the fallback runs over clusters (none here) and reason explains it.
    answer = await recall(reader, "clusters", query=ids["lunch"])
    assert answer.items == []
    assert answer.meta["reason"] == "id_not_found"
    assert answer.meta["warnings"] == [NO_CWD, id_not_found(ids["lunch"])]
    # A cluster full id ignores status and project scope ...
    await register(writer, "Elsewhere", "/work/elsewhere")
    await make_cluster(reader.context, ids["keys"])
    await archive(reader.context, ids["keys"])
    found = await recall(reader, "clusters", query=ids["keys"].upper(), cwd="/work/elsewhere", compact=False)
    assert ids_of(found) == [ids["keys"]] and found.items[0]["match_source"] == ["id"]
    # ... while a prefix honours status.
    prefix = ids["keys"].replace("-", "")[:20]
    assert ids["keys"] not in ids_of(await recall(reader, "clusters", query=prefix))
    assert ids_of(await recall(reader, "clusters", query=prefix, status="archived")) == [ids["keys"]]
    # With other clusters around, the non-cluster id still never leaks.
    await make_cluster(reader.context, ids["camera"])
    leak = await recall(reader, "clusters", query=ids["lunch"], min_relevance=0)
    assert ids["lunch"] not in ids_of(leak)
    assert id_not_found(ids["lunch"]) in leak.meta["warnings"]


# ---------------------------------------------------------------- hits and primers


async def test_every_recalled_thought_counts_one_hit(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    answer = await search(reader, PARAPHRASE_OF_LUNCH, min_relevance=0, limit=3)
    returned = ids_of(answer)
    for thought_id in returned:
        assert await hit_count(reader.context, thought_id) == 1
    for thought_id in set(ids.values()) - set(returned):
        assert await hit_count(reader.context, thought_id) is None  # beyond the page: not returned, not counted
    gated = await search(reader, UNRELATED)
    assert gated.items == [] and await count_rows(reader.context, "thought_hit") == 3
    await recall(reader, "context", query="lunch")
    await recall(reader, "context", thought_id=ids["keys"])
    assert await hit_count(reader.context, ids["lunch"]) == 1 + (ids["lunch"] in returned)
    assert await hit_count(reader.context, ids["keys"]) == 1 + (ids["keys"] in returned)
    # A context answer returns the neighbourhood too: each neighbour counts one hit as well.
    before = {name: await hit_count(reader.context, ids[name]) or 0 for name in ("camera", "coffee", "deploy")}
    await link(writer, ids["camera"], ids["deploy"], "supports")
    await link(writer, ids["deploy"], ids["coffee"], "related")
    await recall(reader, "context", thought_id=ids["deploy"])
    assert await hit_count(reader.context, ids["deploy"]) == before["deploy"] + 1
    assert await hit_count(reader.context, ids["camera"]) == before["camera"] + 1
    assert await hit_count(reader.context, ids["coffee"]) == before["coffee"] + 1
    await recall(reader, "context", query=CORPUS["deploy"])
    assert await hit_count(reader.context, ids["deploy"]) == before["deploy"] + 2
    assert await hit_count(reader.context, ids["camera"]) == before["camera"] + 2
    [row] = await rows(
        reader.context, "SELECT project_id FROM thought_hit WHERE thought_id = :id", id=uuid.UUID(ids["keys"])
    )
    assert row.project_id is not None


async def test_the_fifth_recall_promotes_a_primer(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await seed_corpus(writer)
    await execute(reader.context, "UPDATE thought SET importance = 0.5 WHERE id = :id", id=uuid.UUID(ids["lunch"]))
    await search(reader, "lunch", limit=1)
    await search(reader, ids["lunch"])
    await recall(reader, "context", query="lunch")
    await recall(reader, "get", thought_id=ids["lunch"])
    assert await count_rows(reader.context, "primer") == 0
    await search(reader, "lunch", limit=1)
    assert await hit_count(reader.context, ids["lunch"]) == 5
    [primer] = await rows(reader.context, "SELECT thought_id FROM primer")
    assert str(primer.thought_id) == ids["lunch"]
    [(importance,)] = await rows(
        reader.context, "SELECT importance FROM thought WHERE id = :id", id=uuid.UUID(ids["lunch"])
    )
    assert importance == pytest.approx(0.65)
    await search(reader, "lunch", limit=1)
    assert await count_rows(reader.context, "primer") == 1
