"""memory_crystallize: graph (the envelope exception), cluster and auto_cluster (preview → confirm)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from app.config import EmbeddingSettings
from app.db.records import Principal
from app.db.repositories import neighbours
from app.embedding.profiles import OFFLINE_E5, OFFLINE_MINILM
from app.embedding.runtime import EmbeddingRuntime
from app.services.context import AppContext
from tests.conftest import MODEL_CACHE
from tests.support.contract import COMPACT_THOUGHT_KEYS, FULL_THOUGHT_KEYS
from tests.support.crystallize import BILLING, DEPLOY, age, project, thought
from tests.support.helpers import ToolCaller, execute, rows, snapshot

NO_CWD = "no cwd — the answer spans every project"
NODE_KEYS = {"id", "label", "title", "group", "tags", "category", "status", "is_cluster", "project_name"}
LONER = "Cats like to sleep in warm sunny windows"


async def link(caller: ToolCaller, source: str, target: str, edge_type: str = "related") -> dict[str, Any]:
    answer = await caller.ok(
        "memory_store", {"action": "link", "source_id": source, "target_id": target, "edge_type": edge_type}
    )
    return dict(answer.item)


def scope_of(project_row: dict[str, Any]) -> dict[str, Any]:
    return {"project": project_row["id"], "project_name": project_row["name"], "global": False}


# ---------------------------------------------------------------- graph


async def _graph_fixture(writer: ToolCaller) -> dict[str, Any]:
    graph = await project(writer, "Graph")
    other = await project(writer, "Other")
    nodes = [await thought(writer, f"Graph node number {n} about queues", "/srv/graph") for n in range(4)]
    draft = await thought(writer, "Graph draft node about queues", "/srv/graph", status="draft")
    gone = await thought(writer, "Graph node that will be archived", "/srv/graph")
    foreign = await thought(writer, "A thought in the other project", "/srv/other")
    edges = [
        await link(writer, nodes[0]["id"], nodes[1]["id"], "supports"),
        await link(writer, nodes[1]["id"], nodes[2]["id"]),
        await link(writer, nodes[2]["id"], draft["id"], "depends_on"),
        await link(writer, nodes[3]["id"], gone["id"], "develops"),
    ]
    await execute(
        writer,
        "UPDATE thought SET status = 'archived', archived_at = now() WHERE id = :id",
        id=gone["id"],
    )
    return {
        "graph": graph,
        "other": other,
        "nodes": nodes,
        "draft": draft,
        "gone": gone,
        "foreign": foreign,
        "edges": edges,
    }


async def test_graph_answers_nodes_in_items_and_edges_beside_them(writer: ToolCaller, reader: ToolCaller) -> None:
    world = await _graph_fixture(writer)
    answer = await reader.ok("memory_crystallize", {"action": "graph", "cwd": "/srv/graph"})
    result = answer.result
    assert set(result) == {"items", "edges", "meta"}
    live = sorted([*world["nodes"], world["draft"]], key=lambda row: row["id"])
    assert [item["id"] for item in result["items"]] == [row["id"] for row in live]
    assert all(set(item) == NODE_KEYS for item in result["items"])
    first = next(item for item in result["items"] if item["id"] == world["nodes"][0]["id"])
    assert first == {
        "id": world["nodes"][0]["id"],
        "label": "Graph node number 0 about queues",
        "title": "Graph node number 0 about queues",
        "group": "Graph",
        "tags": [],
        "category": "concept",
        "status": "active",
        "is_cluster": False,
        "project_name": "Graph",
    }
    draft = next(item for item in result["items"] if item["id"] == world["draft"]["id"])
    assert draft["status"] == "draft"
    # the edge to the archived node is left out: only edges whose two ends are both nodes
    expected_edges = sorted(world["edges"][:3], key=lambda edge: edge["id"])
    assert result["edges"] == [
        {"id": e["id"], "source": e["source_id"], "target": e["target_id"], "type": e["type"]} for e in expected_edges
    ]
    assert result["meta"] == {
        "action": "graph",
        "scope": scope_of(world["graph"]),
        "counts": {"edges": 3, "total": 5, "returned": 5, "filtered_out": 0},
        "degraded": False,
        "warnings": [],
    }


async def test_graph_pages_nodes_and_keeps_only_edges_inside_the_page(writer: ToolCaller) -> None:
    world = await _graph_fixture(writer)
    ordered = sorted([*world["nodes"], world["draft"]], key=lambda row: row["id"])
    first = await writer.ok("memory_crystallize", {"action": "graph", "cwd": "/srv/graph", "limit": 2})
    assert [item["id"] for item in first.items] == [row["id"] for row in ordered[:2]]
    page_ids = {row["id"] for row in ordered[:2]}
    assert all(edge["source"] in page_ids and edge["target"] in page_ids for edge in first.result["edges"])
    assert first.meta["counts"] == {
        "edges": len(first.result["edges"]),
        "total": 5,
        "returned": 2,
        "filtered_out": 3,
    }
    second = await writer.ok("memory_crystallize", {"action": "graph", "cwd": "/srv/graph", "limit": 2, "offset": 4})
    assert [item["id"] for item in second.items] == [ordered[4]["id"]]
    assert second.result["edges"] == []
    assert second.meta["counts"] == {"edges": 0, "total": 5, "returned": 1, "filtered_out": 4}
    beyond = await writer.ok("memory_crystallize", {"action": "graph", "cwd": "/srv/graph", "offset": 50})
    assert beyond.items == [] and beyond.meta["counts"] == {"edges": 0, "total": 5, "returned": 0, "filtered_out": 5}


async def test_graph_status_filter_compact_fields_and_scope_notes(writer: ToolCaller) -> None:
    world = await _graph_fixture(writer)
    every = await writer.ok("memory_crystallize", {"action": "graph", "cwd": "/srv/graph", "status": "all"})
    assert every.meta["counts"] == {"edges": 4, "total": 6, "returned": 6, "filtered_out": 0}
    archived = await writer.ok("memory_crystallize", {"action": "graph", "cwd": "/srv/graph", "status": "archived"})
    assert [item["id"] for item in archived.items] == [world["gone"]["id"]]
    assert archived.result["edges"] == []

    compact = await writer.ok("memory_crystallize", {"action": "graph", "cwd": "/srv/graph", "compact": True})
    assert all(set(item) == {"id", "label", "status", "is_cluster"} for item in compact.items)
    fields = await writer.ok(
        "memory_crystallize", {"action": "graph", "cwd": "/srv/graph", "compact": True, "fields": ["id", "tags"]}
    )
    assert all(set(item) == {"id", "tags"} for item in fields.items)

    everywhere = await writer.ok("memory_crystallize", {"action": "graph"})
    assert everywhere.meta["scope"] is None and everywhere.meta["warnings"] == [NO_CWD]
    assert everywhere.meta["counts"]["total"] == 6  # 5 live nodes of Graph + 1 of Other
    assert world["foreign"]["id"] in {item["id"] for item in everywhere.items}

    unknown = await writer.ok("memory_crystallize", {"action": "graph", "cwd": "/nowhere/at/all"})
    assert unknown.meta["scope"] == {"project": None, "project_name": None, "global": True}
    assert unknown.meta["warnings"] == [
        'cwd "/nowhere/at/all" matches no known project (check it with memory_manage action=resolve) — '
        "the answer spans every project"
    ]
    assert unknown.meta["counts"]["total"] == 6


async def test_graph_label_is_collapsed_and_cut_at_80_characters(writer: ToolCaller) -> None:
    await project(writer, "Graph")
    long = "word " * 30 + "\n\n tail"
    created = await thought(writer, long, "/srv/graph", tags=["queues"])
    [node] = (await writer.ok("memory_crystallize", {"action": "graph", "cwd": "/srv/graph"})).items
    collapsed = " ".join(long.split())
    assert node["label"] == collapsed[:80] + "…"
    assert node["title"] == long
    assert node["group"] == "queues" and node["id"] == created["id"]


# ---------------------------------------------------------------- cluster


async def test_cluster_creates_a_cluster_thought_with_an_edge_to_each_member(writer: ToolCaller) -> None:
    payments = await project(writer, "Payments")
    members = [await thought(writer, text, "/srv/payments") for text in BILLING[:3]]
    before = await snapshot(writer.context)
    answer = await writer.ok(
        "memory_crystallize",
        {
            "action": "cluster",
            "thought_ids": [m["id"] for m in members],
            "title": "Card payment retries",
            "tags": ["billing", "Cluster"],
            "cwd": "/srv/payments/src",
        },
    )
    item = answer.item
    assert set(item) == {"cluster", "edges", "members"}
    cluster = item["cluster"]
    assert set(cluster) == FULL_THOUGHT_KEYS
    assert (cluster["content"], cluster["status"], cluster["is_cluster"], cluster["project"]) == (
        "Card payment retries",
        "active",
        True,
        "Payments",
    )
    assert cluster["tags"] == ["cluster", "billing"]  # `Cluster` is the same tag case-insensitively
    assert item["edges"] == [{"source_id": cluster["id"], "target_id": m["id"], "type": "cluster"} for m in members]
    assert [m["id"] for m in item["members"]] == [m["id"] for m in members]
    assert all(set(m) == FULL_THOUGHT_KEYS for m in item["members"])
    assert answer.meta == {
        "action": "cluster",
        "scope": scope_of(payments),
        "counts": {"members": 3, "edges": 3, "total": 1, "returned": 1, "filtered_out": 0},
        "degraded": False,
        "warnings": [],
    }
    after = await snapshot(writer.context)
    assert after["thought"] == before["thought"] + 1 and after["edge"] == before["edge"] + 3
    stored = await rows(
        writer,
        "SELECT target_id::text FROM edge WHERE source_id = :id AND type = 'cluster' ORDER BY target_id",
        id=cluster["id"],
    )
    assert [row[0] for row in stored] == sorted(m["id"] for m in members)
    # the titled cluster is embedded, so it is searchable like any thought
    assert await rows(writer, "SELECT embedding_model FROM thought WHERE id = :id", id=cluster["id"]) == [(OFFLINE_E5,)]


async def test_cluster_cwd_picks_the_project_else_the_members_project(writer: ToolCaller) -> None:
    await project(writer, "Home")
    elsewhere = await project(writer, "Elsewhere")
    members = [await thought(writer, text, "/srv/home") for text in DEPLOY]
    ids = [m["id"] for m in members]
    arguments = {"action": "cluster", "thought_ids": ids[:2], "cwd": "/srv/elsewhere"}
    moved = await writer.ok("memory_crystallize", arguments)
    assert moved.item["cluster"]["project"] == "Elsewhere"
    assert moved.meta["scope"] == scope_of(elsewhere)

    untitled = await writer.ok("memory_crystallize", {"action": "cluster", "thought_ids": ids})
    cluster = untitled.item["cluster"]
    assert cluster["project"] == "Home"  # no cwd: the members' shared project
    assert untitled.meta["scope"] is None and untitled.meta["warnings"] == []
    newest = max(members, key=lambda m: (m["created_at"], m["id"]))
    words = newest["content"].split()
    assert cluster["content"] == " ".join(words[:8]) + ("…" if len(words) > 8 else "")
    assert cluster["tags"] == ["cluster"]
    assert untitled.meta["counts"]["members"] == 3 and untitled.meta["counts"]["edges"] == 3


async def test_cluster_across_projects_without_cwd_lands_in_the_default_project(writer: ToolCaller) -> None:
    await project(writer, "One")
    await project(writer, "Two")
    a = await thought(writer, BILLING[0], "/srv/one")
    b = await thought(writer, BILLING[1], "/srv/two")
    answer = await writer.ok("memory_crystallize", {"action": "cluster", "thought_ids": [a["id"], b["id"], a["id"]]})
    assert answer.item["cluster"]["project"] == "default"
    assert answer.meta["counts"]["members"] == 2  # a repeated id counts once


async def test_cluster_with_a_missing_member_is_a_404_and_writes_nothing(writer: ToolCaller) -> None:
    member = await thought(writer, BILLING[0])
    missing = str(uuid.uuid4())
    before = await snapshot(writer.context)
    answer = await writer("memory_crystallize", {"action": "cluster", "thought_ids": [member["id"], missing]})
    message = f"Thought {missing} not found (thought_ids)"
    assert answer.text == message
    assert answer.error == {"message": message, "statusCode": 404, "retryable": False}
    assert await snapshot(writer.context) == before

    bad = await writer("memory_crystallize", {"action": "cluster", "thought_ids": [member["id"], "nope"]})
    assert bad.error["statusCode"] == 400
    assert bad.text == "Invalid 'thought_ids[1]': 'nope' is not a valid id (a UUID)"
    empty = await writer("memory_crystallize", {"action": "cluster", "thought_ids": []})
    assert empty.error["statusCode"] == 400 and "'thought_ids'" in empty.text
    assert await snapshot(writer.context) == before


async def test_cluster_and_auto_cluster_need_the_writer_role(writer: ToolCaller, reader: ToolCaller) -> None:
    member = await thought(writer, BILLING[0])
    before = await snapshot(writer.context)
    for arguments in (
        {"action": "cluster", "thought_ids": [member["id"]]},
        {"action": "auto_cluster"},
    ):
        answer = await reader("memory_crystallize", arguments)
        message = (
            f"Forbidden: memory_crystallize action={arguments['action']} needs the writer role; "
            "user 'reader' is a reader"
        )
        assert answer.text == message
        assert answer.error == {"message": message, "statusCode": 403, "retryable": False}
    assert await snapshot(writer.context) == before


# ---------------------------------------------------------------- auto_cluster


async def _clusterable(writer: ToolCaller) -> dict[str, Any]:
    await project(writer, "Ops")
    billing = [await thought(writer, content, "/srv/ops") for content in BILLING]
    deploy = [await thought(writer, content) for content in DEPLOY]  # the default project
    loner = await thought(writer, LONER, "/srv/ops")
    young = await thought(writer, "The billing service retries failed card payments three times a day", "/srv/ops")
    await age(writer, [t["id"] for t in [*billing, *deploy, loner]], 5)
    return {"billing": billing, "deploy": deploy, "loner": loner, "young": young}


def _group_ids(items: list[dict[str, Any]]) -> list[set[str]]:
    return [{member["id"] for member in group["members"]} for group in items]


async def test_auto_cluster_previews_with_a_token_and_writes_nothing(writer: ToolCaller) -> None:
    world = await _clusterable(writer)
    before = await snapshot(writer.context)
    answer = await writer.ok("memory_crystallize", {"action": "auto_cluster"})
    after = await snapshot(writer.context)
    assert after == {**before, "preview_token": before["preview_token"] + 1}
    groups = answer.items
    expected = sorted(
        [{t["id"] for t in world["billing"]}, {t["id"] for t in world["deploy"]}], key=lambda group: min(group)
    )
    assert _group_ids(groups) == expected
    for group in groups:
        assert set(group) == {"title", "project_id", "cluster_id", "members"}
        assert group["cluster_id"] is None
        assert all(set(member) == COMPACT_THOUGHT_KEYS for member in group["members"])
        assert [m["id"] for m in group["members"]] == sorted(m["id"] for m in group["members"])
    billing_group = next(g for g in groups if g["members"][0]["project"] == "Ops")
    ops_id = (await rows(writer, "SELECT id::text FROM project WHERE name = 'Ops'"))[0][0]
    assert billing_group["project_id"] == ops_id
    token = answer.meta["preview"]["token"]
    assert answer.meta == {
        "action": "auto_cluster",
        "scope": None,
        "counts": {"candidates": 8, "clusters": 2, "total": 2, "returned": 2, "filtered_out": 0},
        "degraded": False,
        "warnings": [],
        "preview": {
            "token": token,
            "destructive": True,
            "consequence": "Creates 2 cluster thought(s) with a cluster edge to each member.",
            "instruction": "Call memory_crystallize again with action=auto_cluster, the same min_similarity/"
            f"min_members, confirm=true, preview_token={token} to proceed.",
        },
    }
    assert world["young"]["id"] not in {m["id"] for g in groups for m in g["members"]}


async def test_auto_cluster_confirm_creates_clusters_tagged_cluster_and_auto(writer: ToolCaller) -> None:
    world = await _clusterable(writer)
    token = (await writer.ok("memory_crystallize", {"action": "auto_cluster"})).meta["preview"]["token"]
    before = await snapshot(writer.context)
    answer = await writer.ok("memory_crystallize", {"action": "auto_cluster", "confirm": True, "preview_token": token})
    assert "preview" not in answer.meta
    assert answer.meta["counts"] == {"candidates": 8, "clusters": 2, "total": 2, "returned": 2, "filtered_out": 0}
    after = await snapshot(writer.context)
    assert after["thought"] == before["thought"] + 2
    assert after["edge"] == before["edge"] + len(world["billing"]) + len(world["deploy"])
    for group in answer.items:
        cluster_id = group["cluster_id"]
        assert cluster_id is not None
        [(content, status, tags, is_cluster, project_name)] = await rows(
            writer,
            "SELECT t.content, t.status::text, t.tags, t.is_cluster, p.name FROM thought t "
            "JOIN project p ON p.id = t.project_id WHERE t.id = :id",
            id=cluster_id,
        )
        assert (status, tags, is_cluster) == ("active", ["cluster", "auto"], True)
        assert content == group["title"]
        assert project_name == group["members"][0]["project"]
        targets = await rows(
            writer, "SELECT target_id::text FROM edge WHERE source_id = :id AND type = 'cluster'", id=cluster_id
        )
        assert {row[0] for row in targets} == {m["id"] for m in group["members"]}
    # the token is spent; members now sit in a cluster, so a second run finds nothing to group
    replay = await writer("memory_crystallize", {"action": "auto_cluster", "confirm": True, "preview_token": token})
    assert replay.error["statusCode"] == 409 and "was already used" in replay.text
    again = await writer.ok("memory_crystallize", {"action": "auto_cluster"})
    assert again.items == []
    assert again.meta["counts"] == {"candidates": 1, "clusters": 0, "total": 0, "returned": 0, "filtered_out": 0}


async def test_auto_cluster_title_is_the_first_words_of_the_newest_member(writer: ToolCaller) -> None:
    world = await _clusterable(writer)
    await execute(
        writer,
        "UPDATE thought SET created_at = now() - interval '4 days' WHERE id = :id",
        id=world["billing"][2]["id"],
    )
    groups = (await writer.ok("memory_crystallize", {"action": "auto_cluster"})).items
    billing = next(g for g in groups if world["billing"][2]["id"] in {m["id"] for m in g["members"]})
    assert billing["title"] == "The billing service retries a failed card payment…"


async def test_auto_cluster_respects_min_age_min_members_and_distance(writer: ToolCaller) -> None:
    world = await _clusterable(writer)
    few = await writer.ok("memory_crystallize", {"action": "auto_cluster", "min_members": 4})
    assert _group_ids(few.items) == [{t["id"] for t in world["billing"]}]
    tight = await writer.ok("memory_crystallize", {"action": "auto_cluster", "min_similarity": 0.01})
    assert tight.items == [] and tight.meta["counts"]["candidates"] == 8
    # the young billing thought joins once it is old enough
    await age(writer, [world["young"]["id"]], 4)
    grown = await writer.ok("memory_crystallize", {"action": "auto_cluster"})
    assert grown.meta["counts"]["candidates"] == 9
    assert world["young"]["id"] in {m["id"] for g in grown.items for m in g["members"]}


async def test_auto_cluster_refusals_write_nothing(writer: ToolCaller) -> None:
    await _clusterable(writer)
    before = await snapshot(writer.context)
    dry = await writer("memory_crystallize", {"action": "auto_cluster", "dry_run": True})
    assert dry.text == "dry_run was removed; use confirm"
    assert dry.error == {"message": "dry_run was removed; use confirm", "statusCode": 400, "retryable": False}
    no_token = await writer("memory_crystallize", {"action": "auto_cluster", "confirm": True})
    assert no_token.error["statusCode"] == 400
    assert no_token.text.startswith("preview_token is required with confirm: true")
    cwd = await writer("memory_crystallize", {"action": "auto_cluster", "cwd": "/srv/ops"})
    assert cwd.error["statusCode"] == 400 and cwd.text.startswith("Unknown argument 'cwd'")
    assert await snapshot(writer.context) == before

    token = (await writer.ok("memory_crystallize", {"action": "auto_cluster", "min_members": 3})).meta["preview"][
        "token"
    ]
    before = await snapshot(writer.context)
    other = await writer(
        "memory_crystallize", {"action": "auto_cluster", "min_members": 4, "confirm": True, "preview_token": token}
    )
    assert other.error["statusCode"] == 400 and "was issued for other arguments" in other.text
    assert await snapshot(writer.context) == before


async def test_auto_cluster_without_an_embedder_is_unavailable(writer: ToolCaller) -> None:
    runtime = EmbeddingRuntime(EmbeddingSettings(model=OFFLINE_MINILM, cache_dir=MODEL_CACHE))
    context = AppContext(writer.context.db, runtime, writer.context.settings)
    principal: Principal = writer.principal
    answer = await ToolCaller(context, principal)("memory_crystallize", {"action": "auto_cluster"})
    assert answer.error == {
        "message": "auto_cluster needs the embedder, which is not ready; retry shortly",
        "statusCode": 503,
        "retryable": True,
    }


async def test_auto_cluster_probes_in_chunks_over_several_connections(
    writer: ToolCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunked, concurrent probing (how 100 k thoughts stay under the statement timeout) finds the same groups."""
    await _clusterable(writer)
    whole = _group_ids((await writer.ok("memory_crystallize", {"action": "auto_cluster"})).items)
    monkeypatch.setattr(neighbours, "PROBE_CHUNK", 3)
    chunked = _group_ids((await writer.ok("memory_crystallize", {"action": "auto_cluster"})).items)
    assert chunked == whole and len(whole) == 2


async def test_auto_cluster_confirm_links_every_member_in_one_transaction(writer: ToolCaller) -> None:
    """The bulk link of a new cluster gives what link() gives: one cluster edge and one importance bonus each."""
    world = await _clusterable(writer)
    await execute(writer, "UPDATE thought SET importance = 0.5")
    token = (await writer.ok("memory_crystallize", {"action": "auto_cluster"})).meta["preview"]["token"]
    await writer.ok("memory_crystallize", {"action": "auto_cluster", "confirm": True, "preview_token": token})
    members = [t["id"] for t in world["billing"]]
    found = await rows(
        writer,
        "SELECT t.id::text, t.importance, count(e.id) FROM thought t JOIN edge e ON e.target_id = t.id "
        "AND e.type = 'cluster' WHERE t.id = ANY(CAST(:ids AS uuid[])) GROUP BY t.id, t.importance",
        ids=members,
    )
    assert sorted(row[0] for row in found) == sorted(members)
    assert all(row[1] == pytest.approx(0.6) and row[2] == 1 for row in found)


async def test_auto_cluster_leaves_out_a_member_deleted_while_it_probed(
    writer: ToolCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """READ COMMITTED: a draft deleted after the eligibility read and the probes must not fail the call."""
    world = await _clusterable(writer)
    gone = world["billing"][0]["id"]
    await execute(writer, "UPDATE thought SET status = 'draft' WHERE id = :id", id=uuid.UUID(gone))
    pairs = neighbours.NeighbourProbe.pairs

    async def then_delete(self: neighbours.NeighbourProbe, *args: Any, **kwargs: Any) -> Any:
        found = await pairs(self, *args, **kwargs)
        await execute(writer, "DELETE FROM thought WHERE id = :id", id=uuid.UUID(gone))  # its own transaction
        return found

    monkeypatch.setattr(neighbours.NeighbourProbe, "pairs", then_delete)
    answer = await writer.ok("memory_crystallize", {"action": "auto_cluster"})
    assert _group_ids(answer.items) == sorted(
        [{t["id"] for t in world["billing"][1:]}, {t["id"] for t in world["deploy"]}], key=lambda group: min(group)
    )


async def test_two_auto_cluster_confirms_at_once_cluster_each_thought_once(
    writer: ToolCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both confirms probe at the same time (the probe is slowed down); the second must group what the first
    left, i.e. nothing, instead of clustering the same thoughts again."""
    await _clusterable(writer)
    tokens = [
        (await writer.ok("memory_crystallize", {"action": "auto_cluster"})).meta["preview"]["token"] for _ in "ab"
    ]
    pairs = neighbours.NeighbourProbe.pairs

    async def slow_probe(self: neighbours.NeighbourProbe, *args: Any, **kwargs: Any) -> Any:
        found = await pairs(self, *args, **kwargs)
        await asyncio.sleep(0.3)
        return found

    monkeypatch.setattr(neighbours.NeighbourProbe, "pairs", slow_probe)
    answers = await asyncio.gather(
        *(
            writer.ok("memory_crystallize", {"action": "auto_cluster", "confirm": True, "preview_token": token})
            for token in tokens
        )
    )
    assert sorted(answer.meta["counts"]["clusters"] for answer in answers) == [0, 2]
    twice = await rows(
        writer, "SELECT target_id FROM edge WHERE type = 'cluster' GROUP BY target_id HAVING count(*) > 1"
    )
    assert twice == []
