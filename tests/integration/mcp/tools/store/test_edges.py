"""memory_store edge writers through dispatch on a real PostgreSQL: link, link_batch, unlink, unlink_batch,
retype — answer shapes and counters as the contract shows, each refusal and that it wrote nothing, the token
rules of unlink/retype, audit events, readers refused."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy import text

from app.db.models import Role
from app.services.context import AppContext
from app.services.store.edges import EdgeService
from tests.conftest import make_user
from tests.support.helpers import Answer, ToolCaller, blocked_by_a_lock, own_transaction, snapshot

SELF_LOOP = "Edge cannot link a thought to itself (source_id and target_id are the same)"
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
EDGE_KEYS = {"id", "source_id", "target_id", "type", "created_at"}
TYPES = ("related", "parent", "develops", "replaces", "cluster", "references", "depends_on", "contradicts", "supports")


def hint(action: str) -> str:
    return (
        f"call memory_store action={action} with the same arguments and no confirm to preview it and get a fresh token"
    )


def cluster_rule(source_id: str) -> str:
    return (
        f"Only a cluster thought may carry a cluster edge: source {source_id} is not a cluster thought "
        "(create one with memory_crystallize action=cluster)"
    )


def meta(action: str, returned: int = 1, total: int | None = None, **extra: Any) -> dict[str, Any]:
    counts = {**extra.pop("counts", {}), "total": returned if total is None else total, "returned": returned}
    counts["filtered_out"] = counts["total"] - returned
    return {"action": action, "scope": None, "counts": counts, "degraded": False, "warnings": [], **extra}


async def rows(context: AppContext, query: str, **params: Any) -> Sequence[Any]:
    async with context.db.unit_of_work() as session:
        return (await session.execute(text(query), params)).all()


async def thoughts(caller: ToolCaller, count: int, prefix: str = "edge test thought") -> list[str]:
    contents = [{"content": f"{prefix} {index}: {uuid.uuid4().hex[:6]}"} for index in range(count)]
    answer = await caller.ok("memory_store", {"action": "bulk_create", "thoughts": contents})
    return [row["thought"]["id"] for row in answer.items]


async def cluster_of(caller: ToolCaller, members: list[str]) -> str:
    answer = await caller.ok(
        "memory_crystallize", {"action": "cluster", "thought_ids": members, "title": "an edge test cluster"}
    )
    return str(answer.item["cluster"]["id"])


async def link(caller: ToolCaller, source: str, target: str, edge_type: str | None = None) -> Answer:
    arguments = {"action": "link", "source_id": source, "target_id": target}
    if edge_type is not None:
        arguments["edge_type"] = edge_type
    return await caller("memory_store", arguments)


async def linked(caller: ToolCaller, source: str, target: str, edge_type: str | None = None) -> dict[str, Any]:
    answer = await link(caller, source, target, edge_type)
    assert not answer.is_error, answer.text
    answer.assert_mirrors_text()
    return dict(answer.item)


async def edges(context: AppContext) -> list[tuple[str, str, str, str]]:
    """(id, source, target, type) of every edge, in creation order."""
    found = await rows(context, "SELECT id::text, source_id::text, target_id::text, type::text FROM edge ORDER BY id")
    return [(row[0], row[1], row[2], row[3]) for row in found]


async def importance(context: AppContext, *ids: str) -> list[float]:
    found = dict(await rows(context, "SELECT id::text, importance FROM thought"))
    return [round(float(found[thought_id]), 6) for thought_id in ids]


async def set_importance(context: AppContext, value: float, *ids: str) -> None:
    async with context.db.unit_of_work() as session:
        await session.execute(text("UPDATE thought SET importance = :v WHERE id = ANY(:ids)"), {"v": value, "ids": ids})


async def audit(context: AppContext) -> list[tuple[Any, ...]]:
    found = await rows(
        context, "SELECT user_id, tool, action, target_ids, details FROM audit_event ORDER BY created_at"
    )
    return [tuple(row) for row in found]


def assert_error(answer: Answer, status: int, message: str) -> None:
    assert answer.text == message
    assert answer.error == {"message": message, "statusCode": status, "retryable": False}


async def assert_refused_cleanly(caller: ToolCaller, arguments: dict[str, Any], status: int, message: str) -> None:
    """The call is refused with exactly `message` and writes nothing at all."""
    before = await snapshot(caller.context)
    answer = await caller("memory_store", arguments)
    assert_error(answer, status, message)
    assert await snapshot(caller.context) == before


@pytest.fixture
async def pair(writer: ToolCaller) -> list[str]:
    return await thoughts(writer, 2)


# ---------------------------------------------------------------- link


async def test_link_answers_the_edge_and_defaults_to_related(writer: ToolCaller, pair: list[str]) -> None:
    a, b = pair
    answer = await link(writer, a, b)
    answer.assert_mirrors_text()
    item = answer.item
    assert set(item) == EDGE_KEYS
    assert (item["source_id"], item["target_id"], item["type"]) == (a, b, "related")
    assert TIMESTAMP.match(item["created_at"])
    assert answer.meta == meta("link")
    [(edge_id, user, created_at)] = await rows(writer.context, "SELECT id::text, created_by, created_at FROM edge")
    assert edge_id == item["id"]
    assert user == writer.principal.user_id
    assert created_at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z" == item["created_at"]


@pytest.mark.parametrize("edge_type", [t for t in TYPES if t != "cluster"])
async def test_link_accepts_every_type_but_cluster_between_plain_thoughts(
    writer: ToolCaller, pair: list[str], edge_type: str
) -> None:
    item = await linked(writer, pair[0], pair[1], edge_type)
    assert item["type"] == edge_type
    assert await edges(writer.context) == [(item["id"], pair[0], pair[1], edge_type)]


async def test_a_self_loop_is_refused(writer: ToolCaller, pair: list[str]) -> None:
    arguments = {"action": "link", "source_id": pair[0], "target_id": pair[0], "edge_type": "supports"}
    await assert_refused_cleanly(writer, arguments, 400, SELF_LOOP)


@pytest.mark.parametrize("missing_end", ["source_id", "target_id"])
async def test_a_missing_endpoint_is_a_404_naming_it(writer: ToolCaller, pair: list[str], missing_end: str) -> None:
    ghost = str(uuid.uuid4())
    ends = {"source_id": pair[0], "target_id": pair[1], missing_end: ghost}
    await assert_refused_cleanly(writer, {"action": "link", **ends}, 404, f"Thought {ghost} not found ({missing_end})")


async def test_link_refuses_bad_arguments_by_name(writer: ToolCaller, pair: list[str]) -> None:
    before = await snapshot(writer.context)
    bad_type = await writer(
        "memory_store", {"action": "link", "source_id": pair[0], "target_id": pair[1], "edge_type": "x"}
    )
    assert bad_type.error["statusCode"] == 400
    assert bad_type.text.startswith("Invalid argument 'edge_type' for memory_store action=link: ")
    bad_id = await link(writer, "not-an-id", pair[1])
    assert_error(bad_id, 400, "Invalid 'source_id': 'not-an-id' is not a valid id (a UUID)")
    no_target = await writer("memory_store", {"action": "link", "source_id": pair[0]})
    assert_error(no_target, 400, "Missing required argument 'target_id' for memory_store action=link")
    assert await snapshot(writer.context) == before


async def test_the_retired_thought_id_is_refused_with_its_migration_text(writer: ToolCaller, pair: list[str]) -> None:
    arguments = {"action": "link", "thought_id": pair[0], "target_id": pair[1]}
    await assert_refused_cleanly(writer, arguments, 400, "thought_id was removed for link; use source_id")
    arguments = {"action": "link", "thought_id": pair[0], "source_id": pair[0], "target_id": pair[1]}
    await assert_refused_cleanly(writer, arguments, 400, "thought_id was removed for link; use source_id")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("is_profile", "is_profile was removed and has no replacement; remove the field from requests"),
        ("project_id", "project_id was removed; use cwd"),
    ],
)
async def test_retired_store_inputs_are_refused_on_edge_actions(
    writer: ToolCaller, pair: list[str], name: str, message: str
) -> None:
    arguments = {"action": "link", "source_id": pair[0], "target_id": pair[1], name: "x"}
    await assert_refused_cleanly(writer, arguments, 400, message)
    await assert_refused_cleanly(
        writer, {"action": "unlink_batch", "edge_ids": [str(uuid.uuid4())], name: 1}, 400, message
    )


@pytest.mark.parametrize("symmetric", ["related", "contradicts"])
async def test_a_symmetric_relink_is_an_idempotent_replay_in_either_direction(
    writer: ToolCaller, pair: list[str], symmetric: str
) -> None:
    a, b = pair
    first = await linked(writer, a, b, symmetric)
    await set_importance(writer.context, 0.5, a, b)
    before = await snapshot(writer.context)
    assert await linked(writer, a, b, symmetric) == first
    assert await linked(writer, b, a, symmetric) == first  # the stored direction is kept
    assert await snapshot(writer.context) == before
    assert await edges(writer.context) == [(first["id"], a, b, symmetric)]
    assert await importance(writer.context, a, b) == [0.5, 0.5]  # a replay is not a new link


@pytest.mark.parametrize("direction", ["same", "reverse"])
async def test_a_directed_duplicate_is_an_error(writer: ToolCaller, pair: list[str], direction: str) -> None:
    a, b = pair
    first = await linked(writer, a, b, "supports")
    source, target = (a, b) if direction == "same" else (b, a)
    message = f"Edge already exists: {a} -[supports]-> {b} (edge {first['id']}); a pair carries one edge"
    arguments = {"action": "link", "source_id": source, "target_id": target, "edge_type": "supports"}
    await assert_refused_cleanly(writer, arguments, 409, message)
    assert await edges(writer.context) == [(first["id"], a, b, "supports")]


@pytest.mark.parametrize(
    ("existing", "asked"), [("supports", "depends_on"), ("contradicts", "supports"), ("parent", "related")]
)
async def test_a_second_type_on_the_pair_is_an_error(
    writer: ToolCaller, pair: list[str], existing: str, asked: str
) -> None:
    a, b = pair
    first = await linked(writer, a, b, existing)
    message = (
        f"The pair already carries a '{existing}' edge (edge {first['id']}); a pair carries one edge — "
        f"change it with memory_store action=retype, edge_id={first['id']}, new_type={asked}"
    )
    for source, target in ((a, b), (b, a)):
        arguments = {"action": "link", "source_id": source, "target_id": target, "edge_type": asked}
        await assert_refused_cleanly(writer, arguments, 409, message)
    assert await edges(writer.context) == [(first["id"], a, b, existing)]


@pytest.mark.parametrize("direction", ["same", "reverse"])
async def test_a_related_placeholder_is_upgraded_in_place(writer: ToolCaller, pair: list[str], direction: str) -> None:
    a, b = pair
    placeholder = await linked(writer, a, b)
    source, target = (a, b) if direction == "same" else (b, a)
    upgraded = await linked(writer, source, target, "develops")
    assert upgraded == {**placeholder, "source_id": source, "target_id": target, "type": "develops"}
    assert await edges(writer.context) == [(placeholder["id"], source, target, "develops")]
    # the upgraded edge is a specific type now: it is not upgraded a second time
    second = await link(writer, source, target, "supports")
    assert second.error["statusCode"] == 409


async def test_link_adds_importance_to_both_ends_capped_at_one(writer: ToolCaller) -> None:
    a, b, c = await thoughts(writer, 3)
    await set_importance(writer.context, 0.5, a, b)
    await set_importance(writer.context, 0.95, c)
    await linked(writer, a, b, "supports")
    assert await importance(writer.context, a, b, c) == [0.6, 0.6, 0.95]
    await linked(writer, a, c, "references")
    assert await importance(writer.context, a, b, c) == [0.7, 0.6, 1.0]
    refused = await link(writer, a, b, "depends_on")
    assert refused.is_error
    assert await importance(writer.context, a, b, c) == [0.7, 0.6, 1.0]


async def test_only_a_cluster_thought_carries_a_cluster_edge(writer: ToolCaller) -> None:
    plain, member, other = await thoughts(writer, 3)
    cluster = await cluster_of(writer, [member])
    before_edges = await edges(writer.context)
    # a plain source is refused, in either role of the pair
    await assert_refused_cleanly(
        writer,
        {"action": "link", "source_id": plain, "target_id": other, "edge_type": "cluster"},
        400,
        cluster_rule(plain),
    )
    await assert_refused_cleanly(
        writer,
        {"action": "link", "source_id": plain, "target_id": cluster, "edge_type": "cluster"},
        400,
        cluster_rule(plain),
    )
    # the upgrade path is held to the same rule
    await linked(writer, plain, other)
    await assert_refused_cleanly(
        writer,
        {"action": "link", "source_id": plain, "target_id": other, "edge_type": "cluster"},
        400,
        cluster_rule(plain),
    )
    # a cluster thought may carry one
    item = await linked(writer, cluster, plain, "cluster")
    assert (item["source_id"], item["target_id"], item["type"]) == (cluster, plain, "cluster")
    assert len(await edges(writer.context)) == len(before_edges) + 2


async def test_the_database_refuses_a_cluster_edge_from_a_plain_thought(writer: ToolCaller, pair: list[str]) -> None:
    """The rule lives in the schema too (a trigger), so a raced check cannot break it."""
    from sqlalchemy.exc import IntegrityError

    with pytest.raises(IntegrityError, match=r"ck_edge_cluster_source|not a cluster thought"):
        async with writer.context.db.unit_of_work() as session:
            await session.execute(
                text(
                    "INSERT INTO edge (id, project_id, source_id, target_id, type) "
                    "SELECT gen_random_uuid(), project_id, id, :b, 'cluster' FROM thought WHERE id = :a"
                ),
                {"a": pair[0], "b": pair[1]},
            )
    assert await edges(writer.context) == []


async def test_the_database_holds_one_edge_per_unordered_pair_and_no_self_loop(
    writer: ToolCaller, pair: list[str]
) -> None:
    from sqlalchemy.exc import IntegrityError

    a, b = pair
    await linked(writer, a, b, "supports")
    insert = (
        "INSERT INTO edge (id, project_id, source_id, target_id, type) "
        "SELECT gen_random_uuid(), project_id, :s, :t, 'depends_on' FROM thought WHERE id = :s"
    )
    for source, target in ((b, a), (a, b), (a, a)):
        with pytest.raises(IntegrityError):
            async with writer.context.db.unit_of_work() as session:
                await session.execute(text(insert), {"s": source, "t": target})
    assert len(await edges(writer.context)) == 1


# ---------------------------------------------------------------- link_batch


async def test_link_batch_answers_per_item_rows_in_input_order(writer: ToolCaller) -> None:
    a, b, c, d = await thoughts(writer, 4)
    ghost = str(uuid.uuid4())
    await linked(writer, c, d, "contradicts")
    links = [
        {"source": a, "target": b, "type": "supports"},
        {"source": a, "target": a, "type": "supports"},
        {"source": a, "target": ghost},
        {"source": d, "target": c, "type": "contradicts"},  # symmetric replay: counts as linked
        {"source": b, "target": a, "type": "depends_on"},  # second type on the pair
        {"source": b, "target": c},  # type defaults to related
        {"source": "nope", "target": c},
        {"source": b, "target": a, "type": "supports"},  # directed duplicate (reverse)
        {"source": b, "target": c, "type": "references"},  # upgrades item 5 in place
    ]
    answer = await writer.ok("memory_store", {"action": "link_batch", "links": links})
    pair_ab = (await rows(writer.context, "SELECT id::text FROM edge WHERE type = 'supports'"))[0][0]
    assert answer.items == [
        {"index": 0, "status": "linked", "source": a, "target": b, "type": "supports"},
        {"index": 1, "status": "failed", "source": a, "target": a, "error": SELF_LOOP},
        {
            "index": 2,
            "status": "failed",
            "source": a,
            "target": ghost,
            "error": f"Thought {ghost} not found (target_id)",
        },
        {"index": 3, "status": "linked", "source": d, "target": c, "type": "contradicts"},
        {
            "index": 4,
            "status": "failed",
            "source": b,
            "target": a,
            "error": (
                f"The pair already carries a 'supports' edge (edge {pair_ab}); a pair carries one edge — "
                f"change it with memory_store action=retype, edge_id={pair_ab}, new_type=depends_on"
            ),
        },
        {"index": 5, "status": "linked", "source": b, "target": c, "type": "related"},
        {
            "index": 6,
            "status": "failed",
            "source": "nope",
            "target": c,
            "error": "Invalid 'links[6].source': 'nope' is not a valid id (a UUID)",
        },
        {
            "index": 7,
            "status": "failed",
            "source": b,
            "target": a,
            "error": f"Edge already exists: {a} -[supports]-> {b} (edge {pair_ab}); a pair carries one edge",
        },
        {"index": 8, "status": "linked", "source": b, "target": c, "type": "references"},
    ]
    assert answer.meta == meta("link_batch", 9, counts={"linked": 4, "failed": 5})
    assert sorted((s, t, kind) for _, s, t, kind in await edges(writer.context)) == sorted(
        [(a, b, "supports"), (c, d, "contradicts"), (b, c, "references")]
    )


async def test_link_batch_runs_in_one_transaction(writer: ToolCaller) -> None:
    ids = await thoughts(writer, 5)
    links = [{"source": ids[0], "target": other, "type": "references"} for other in ids[1:]]
    answer = await writer.ok("memory_store", {"action": "link_batch", "links": links, "edge_type": "supports"})
    assert [row["type"] for row in answer.items] == ["references"] * 4  # edge_type is ignored
    assert answer.meta["counts"] == {"linked": 4, "failed": 0, "total": 4, "returned": 4, "filtered_out": 0}
    # now() is the transaction's start time: every edge of the batch carries the same one
    [(distinct, count)] = await rows(writer.context, "SELECT count(DISTINCT created_at), count(*) FROM edge")
    assert (distinct, count) == (1, 4)
    assert await importance(writer.context, ids[0]) == [1.0]


async def test_link_batch_takes_1000_links(writer: ToolCaller) -> None:
    ids = await thoughts(writer, 46)  # 46 · 45 / 2 = 1035 pairs
    pairs = [(ids[i], ids[j]) for i in range(len(ids)) for j in range(i + 1, len(ids))][:1000]
    links = [{"source": s, "target": t, "type": "supports"} for s, t in pairs]
    answer = await writer.ok("memory_store", {"action": "link_batch", "links": links})
    assert answer.meta["counts"] == {"linked": 1000, "failed": 0, "total": 1000, "returned": 1000, "filtered_out": 0}
    assert [row["index"] for row in answer.items] == list(range(1000))
    assert len(await edges(writer.context)) == 1000


@pytest.mark.parametrize("size", [0, 1001])
async def test_link_batch_refuses_an_empty_or_over_long_array_before_anything_runs(
    writer: ToolCaller, pair: list[str], size: int
) -> None:
    links = [{"source": pair[0], "target": pair[1]}] * size
    before = await snapshot(writer.context)
    answer = await writer("memory_store", {"action": "link_batch", "links": links})
    expected = "at least 1 item" if size == 0 else "at most 1000 items"
    assert answer.error["statusCode"] == 400
    assert answer.text.startswith("Invalid argument 'links' for memory_store action=link_batch: ")
    assert expected in answer.text
    assert await snapshot(writer.context) == before


async def test_link_batch_refuses_a_malformed_item_before_anything_runs(writer: ToolCaller, pair: list[str]) -> None:
    links = [{"source": pair[0], "target": pair[1]}, {"source": pair[1], "target": pair[0], "type": "nope"}]
    before = await snapshot(writer.context)
    answer = await writer("memory_store", {"action": "link_batch", "links": links})
    assert answer.error["statusCode"] == 400
    assert answer.text.startswith("Invalid argument 'links.1.type' for memory_store action=link_batch: ")
    assert await snapshot(writer.context) == before


# ---------------------------------------------------------------- unlink


async def unlink_preview(caller: ToolCaller, edge_id: str) -> Answer:
    return await caller.ok("memory_store", {"action": "unlink", "edge_id": edge_id})


async def unlink_confirm(caller: ToolCaller, edge_id: str, token: str | None) -> Answer:
    arguments: dict[str, Any] = {"action": "unlink", "edge_id": edge_id, "confirm": True}
    if token is not None:
        arguments["preview_token"] = token
    return await caller("memory_store", arguments)


async def test_unlink_preview_matches_the_contract_and_writes_only_its_token(
    writer: ToolCaller, pair: list[str]
) -> None:
    a, b = pair
    edge = await linked(writer, a, b, "supports")
    before = await snapshot(writer.context)
    answer = await unlink_preview(writer, edge["id"])
    token = answer.item["preview_token"]
    assert answer.item == {
        "status": "preview",
        "edge_id": edge["id"],
        "edge": edge,
        "consequence": f"Removes the 'supports' edge between '{a}' and '{b}'.",
        "preview_token": token,
        "instruction": (
            f"Call memory_store again with action=unlink, edge_id={edge['id']}, confirm=true, "
            f"preview_token={token} to proceed."
        ),
    }
    assert answer.meta == meta("unlink", preview={"token": token, "destructive": True})
    assert await snapshot(writer.context) == {**before, "preview_token": before["preview_token"] + 1}
    [(user, tool, action, used)] = await rows(
        writer.context, "SELECT user_id, tool, action, used_at FROM preview_token WHERE id = :id", id=token
    )
    assert (user, tool, action, used) == (writer.principal.user_id, "memory_store", "unlink", None)


async def test_unlink_preview_of_a_missing_edge_is_not_found_without_a_gate(writer: ToolCaller) -> None:
    ghost = str(uuid.uuid4())
    before = await snapshot(writer.context)
    answer = await unlink_preview(writer, ghost)
    assert answer.result == {"item": {"status": "not_found", "edge_id": ghost}, "meta": meta("unlink")}
    assert await snapshot(writer.context) == before


async def test_unlink_confirm_deletes_only_the_edge(writer: ToolCaller) -> None:
    a, b, c = await thoughts(writer, 3)
    edge = await linked(writer, a, b, "supports")
    kept = await linked(writer, b, c, "depends_on")
    thoughts_before = await rows(
        writer.context, "SELECT id, content, status, tags, importance FROM thought ORDER BY id"
    )
    token = (await unlink_preview(writer, edge["id"])).item["preview_token"]
    answer = await unlink_confirm(writer, edge["id"], token)
    answer.assert_mirrors_text()
    assert answer.result == {"item": {"status": "deleted", "edge_id": edge["id"]}, "meta": meta("unlink")}
    assert await edges(writer.context) == [(kept["id"], b, c, "depends_on")]
    assert await rows(writer.context, "SELECT id, content, status, tags, importance FROM thought ORDER BY id") == (
        thoughts_before
    )
    assert await audit(writer.context) == [
        (
            writer.principal.user_id,
            "memory_store",
            "unlink",
            [edge["id"]],
            {"source_id": a, "target_id": b, "type": "supports"},
        )
    ]
    # the token is spent and the event written in the unlink's own transaction: now() is the same instant
    [(same,)] = await rows(
        writer.context,
        "SELECT p.used_at = a.created_at FROM preview_token p, audit_event a WHERE p.id = :id",
        id=token,
    )
    assert same is True


async def test_unlink_is_idempotent(writer: ToolCaller, pair: list[str]) -> None:
    edge = await linked(writer, pair[0], pair[1], "supports")
    first = (await unlink_preview(writer, edge["id"])).item["preview_token"]
    second = (await unlink_preview(writer, edge["id"])).item["preview_token"]
    assert (await unlink_confirm(writer, edge["id"], first)).item["status"] == "deleted"
    again = await unlink_confirm(writer, edge["id"], second)
    assert again.result == {"item": {"status": "not_found", "edge_id": edge["id"]}, "meta": meta("unlink")}
    assert len(await audit(writer.context)) == 1


@pytest.mark.parametrize("case", ["missing", "other_user", "other_arguments", "other_action", "reused", "expired"])
async def test_unlink_token_rules(writer: ToolCaller, pair: list[str], case: str) -> None:
    a, b = pair
    edge = await linked(writer, a, b, "supports")
    token = (await unlink_preview(writer, edge["id"])).item["preview_token"]
    caller = writer
    if case == "missing":
        token, message, status = None, f"preview_token is required with confirm: true — {hint('unlink')}", 400
    elif case == "other_user":
        caller = ToolCaller(writer.context, await make_user(writer.context, "second-writer", Role.writer))
        message, status = f"preview_token {token} was issued to another user — {hint('unlink')}", 400
    elif case == "other_arguments":
        c = (await thoughts(writer, 1))[0]
        other = await linked(writer, b, c, "supports")
        token = (await unlink_preview(writer, other["id"])).item["preview_token"]
        message, status = f"preview_token {token} was issued for other arguments — {hint('unlink')}", 400
    elif case == "other_action":
        retype = await writer.ok("memory_store", {"action": "retype", "edge_id": edge["id"], "new_type": "references"})
        token = retype.item["preview_token"]
        message = (
            f"preview_token {token} was issued for memory_store action=retype, not memory_store action=unlink — "
            f"{hint('unlink')}"
        )
        status = 400
    elif case == "reused":
        assert (await unlink_confirm(writer, edge["id"], token)).item["status"] == "deleted"
        await linked(writer, a, b, "supports")  # the pair carries a new edge meanwhile
        message, status = f"preview_token {token} was already used — {hint('unlink')}", 409
    else:
        async with writer.context.db.unit_of_work() as session:
            await session.execute(
                text("UPDATE preview_token SET expires_at = now() - interval '1 second' WHERE id = :id"), {"id": token}
            )
        message, status = f"preview_token {token} has expired — {hint('unlink')}", 409
    before = await snapshot(writer.context)
    edges_before = await edges(writer.context)
    answer = await unlink_confirm(caller, edge["id"], token)
    assert_error(answer, status, message)
    assert await snapshot(writer.context) == before
    assert await edges(writer.context) == edges_before


# ---------------------------------------------------------------- unlink_batch


async def test_unlink_batch_preview_issues_no_token_and_writes_nothing(writer: ToolCaller) -> None:
    a, b, c = await thoughts(writer, 3)
    first = await linked(writer, a, b, "supports")
    second = await linked(writer, b, c)
    before = await snapshot(writer.context)
    answer = await writer.ok("memory_store", {"action": "unlink_batch", "edge_ids": [first["id"], second["id"]]})
    assert answer.items == [
        {
            "edge_id": first["id"],
            "status": "preview",
            "edge": first,
            "consequence": f"Removes the 'supports' edge between '{a}' and '{b}'.",
        },
        {
            "edge_id": second["id"],
            "status": "preview",
            "edge": second,
            "consequence": f"Removes the 'related' edge between '{b}' and '{c}'.",
        },
    ]
    assert answer.meta == meta(
        "unlink_batch",
        2,
        counts={"deleted": 0, "preview": 2, "failed": 0},
        preview={
            "token": None,
            "destructive": True,
            "instruction": "Call memory_store again with action=unlink_batch, edge_ids=[...], confirm=true to proceed.",
        },
    )
    assert await snapshot(writer.context) == before


async def test_unlink_batch_preview_reports_a_missing_edge_as_failed(writer: ToolCaller, pair: list[str]) -> None:
    edge = await linked(writer, pair[0], pair[1], "supports")
    ghost = str(uuid.uuid4())
    answer = await writer.ok("memory_store", {"action": "unlink_batch", "edge_ids": [ghost, edge["id"]]})
    assert answer.items[0] == {"edge_id": ghost, "status": "failed", "error": f"Edge not found: {ghost}"}
    assert answer.items[1]["status"] == "preview"
    assert answer.meta["counts"] == {
        "deleted": 0,
        "preview": 1,
        "failed": 1,
        "total": 2,
        "returned": 2,
        "filtered_out": 0,
    }


async def test_unlink_batch_confirm_deletes_every_edge(writer: ToolCaller) -> None:
    a, b, c, d = await thoughts(writer, 4)
    first = await linked(writer, a, b, "supports")
    second = await linked(writer, b, c, "contradicts")
    kept = await linked(writer, c, d, "references")
    ids = [first["id"], second["id"]]
    answer = await writer.ok("memory_store", {"action": "unlink_batch", "edge_ids": ids, "confirm": True})
    assert answer.result == {
        "items": [{"edge_id": ids[0], "status": "deleted"}, {"edge_id": ids[1], "status": "deleted"}],
        "meta": meta("unlink_batch", 2, counts={"deleted": 2, "preview": 0, "failed": 0}),
    }
    assert await edges(writer.context) == [(kept["id"], c, d, "references")]
    assert await rows(writer.context, "SELECT count(*) FROM thought") == [(4,)]
    [(user, tool, action, targets, _)] = await audit(writer.context)
    assert (user, tool, action, sorted(targets)) == (
        writer.principal.user_id,
        "memory_store",
        "unlink_batch",
        sorted(ids),
    )


async def test_unlink_batch_confirm_validates_every_id_before_deleting(writer: ToolCaller) -> None:
    a, b, c = await thoughts(writer, 3)
    first = await linked(writer, a, b, "supports")
    second = await linked(writer, b, c, "supports")
    ghost = str(uuid.uuid4())
    arguments = {"action": "unlink_batch", "edge_ids": [first["id"], ghost, second["id"]], "confirm": True}
    message = f"Edge not found: {ghost} — nothing was deleted; drop the missing ids and retry"
    await assert_refused_cleanly(writer, arguments, 404, message)
    assert len(await edges(writer.context)) == 2


@pytest.mark.parametrize("size", [0, 1001])
async def test_unlink_batch_refuses_an_empty_or_over_long_array(writer: ToolCaller, pair: list[str], size: int) -> None:
    edge = await linked(writer, pair[0], pair[1])
    before = await snapshot(writer.context)
    answer = await writer("memory_store", {"action": "unlink_batch", "edge_ids": [edge["id"]] * size, "confirm": True})
    assert answer.error["statusCode"] == 400
    assert answer.text.startswith("Invalid argument 'edge_ids' for memory_store action=unlink_batch: ")
    assert await snapshot(writer.context) == before


# ---------------------------------------------------------------- retype


async def retype_preview(caller: ToolCaller, edge_id: str, new_type: str) -> Answer:
    return await caller.ok("memory_store", {"action": "retype", "edge_id": edge_id, "new_type": new_type})


async def retype_confirm(caller: ToolCaller, edge_id: str, new_type: str, token: str | None) -> Answer:
    arguments = {"action": "retype", "edge_id": edge_id, "new_type": new_type, "confirm": True}
    if token is not None:
        arguments["preview_token"] = token
    return await caller("memory_store", arguments)


async def test_retype_preview_shape(writer: ToolCaller, pair: list[str]) -> None:
    a, b = pair
    edge = await linked(writer, a, b, "supports")
    before = await snapshot(writer.context)
    answer = await retype_preview(writer, edge["id"], "depends_on")
    token = answer.item["preview_token"]
    consequence = (
        f"Replaces the 'supports' edge between '{a}' and '{b}' with a 'depends_on' edge (new id, created_at kept)."
    )
    assert answer.item == {
        "status": "preview",
        "edge_id": edge["id"],
        "old_edge_id": edge["id"],
        "old_type": "supports",
        "new_type": "depends_on",
        "source_id": a,
        "target_id": b,
        "consequence": consequence,
        "preview_token": token,
    }
    assert answer.meta == meta("retype", preview={"token": token, "destructive": True, "consequence": consequence})
    assert await snapshot(writer.context) == {**before, "preview_token": before["preview_token"] + 1}
    assert await edges(writer.context) == [(edge["id"], a, b, "supports")]


async def test_retype_executes_with_a_new_id_and_keeps_created_at(writer: ToolCaller, pair: list[str]) -> None:
    a, b = pair
    edge = await linked(writer, a, b, "supports")
    token = (await retype_preview(writer, edge["id"], "depends_on")).item["preview_token"]
    answer = await retype_confirm(writer, edge["id"], "depends_on", token)
    answer.assert_mirrors_text()
    new_id = answer.item["new_edge_id"]
    assert new_id != edge["id"]
    assert answer.result == {
        "item": {
            "status": "retyped",
            "edge_id": new_id,
            "old_edge_id": edge["id"],
            "new_edge_id": new_id,
            "old_type": "supports",
            "new_type": "depends_on",
        },
        "meta": meta("retype"),
    }
    assert await edges(writer.context) == [(new_id, a, b, "depends_on")]
    [(created_at,)] = await rows(writer.context, "SELECT created_at FROM edge")
    assert created_at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z" == edge["created_at"]
    [(user, tool, action, targets, details)] = await audit(writer.context)
    assert (user, tool, action, targets, details) == (
        writer.principal.user_id,
        "memory_store",
        "retype",
        [edge["id"], new_id],
        {"new_type": "depends_on"},
    )


async def test_retype_to_cluster_from_a_cluster_thought(writer: ToolCaller) -> None:
    member, plain = await thoughts(writer, 2)
    cluster = await cluster_of(writer, [member])
    edge = await linked(writer, cluster, plain, "references")
    token = (await retype_preview(writer, edge["id"], "cluster")).item["preview_token"]
    answer = await retype_confirm(writer, edge["id"], "cluster", token)
    assert answer.item["new_type"] == "cluster"


async def test_retype_refusals_write_nothing(writer: ToolCaller) -> None:
    a, b = await thoughts(writer, 2)
    edge = await linked(writer, a, b, "supports")
    ghost = str(uuid.uuid4())
    for confirm in (False, True):
        extra = {"confirm": True, "preview_token": str(uuid.uuid4())} if confirm else {}
        cases = [
            ({"edge_id": ghost, "new_type": "supports"}, 404, f"Edge not found: {ghost}"),
            ({"edge_id": edge["id"], "new_type": "supports"}, 400, f"Edge {edge['id']} is already of type 'supports'"),
            ({"edge_id": edge["id"], "new_type": "cluster"}, 400, cluster_rule(a)),
        ]
        for arguments, status, message in cases:
            await assert_refused_cleanly(writer, {"action": "retype", **arguments, **extra}, status, message)
        before = await snapshot(writer.context)
        invalid = await writer("memory_store", {"action": "retype", "edge_id": edge["id"], "new_type": "x", **extra})
        assert invalid.error["statusCode"] == 400
        assert invalid.text.startswith("Invalid argument 'new_type' for memory_store action=retype: ")
        assert await snapshot(writer.context) == before
    assert await edges(writer.context) == [(edge["id"], a, b, "supports")]


async def test_retype_token_is_bound_to_the_new_type(writer: ToolCaller, pair: list[str]) -> None:
    edge = await linked(writer, pair[0], pair[1], "supports")
    token = (await retype_preview(writer, edge["id"], "depends_on")).item["preview_token"]
    before = await snapshot(writer.context)
    answer = await retype_confirm(writer, edge["id"], "references", token)
    assert_error(answer, 400, f"preview_token {token} was issued for other arguments — {hint('retype')}")
    missing = await retype_confirm(writer, edge["id"], "depends_on", None)
    assert_error(missing, 400, f"preview_token is required with confirm: true — {hint('retype')}")
    assert await snapshot(writer.context) == before
    assert (await retype_confirm(writer, edge["id"], "depends_on", token)).item["status"] == "retyped"
    replay = await retype_confirm(writer, edge["id"], "depends_on", token)
    assert replay.error["statusCode"] == 404  # the old id is gone: the edge is re-read before the token


async def test_a_stale_retype_preview_never_writes(writer: ToolCaller, pair: list[str]) -> None:
    edge = await linked(writer, pair[0], pair[1], "supports")
    token = (await retype_preview(writer, edge["id"], "depends_on")).item["preview_token"]
    unlink_token = (await unlink_preview(writer, edge["id"])).item["preview_token"]
    assert (await unlink_confirm(writer, edge["id"], unlink_token)).item["status"] == "deleted"
    before = await snapshot(writer.context)
    assert_error(await retype_confirm(writer, edge["id"], "depends_on", token), 404, f"Edge not found: {edge['id']}")
    assert await snapshot(writer.context) == before


# ---------------------------------------------------------------- readers


async def test_readers_are_refused_on_every_edge_write_and_preview(
    writer: ToolCaller, reader: ToolCaller, pair: list[str]
) -> None:
    edge = await linked(writer, pair[0], pair[1], "supports")
    calls: list[dict[str, Any]] = [
        {"action": "link", "source_id": pair[1], "target_id": pair[0]},
        {"action": "link_batch", "links": [{"source": pair[0], "target": pair[1]}]},
        {"action": "unlink", "edge_id": edge["id"]},
        {"action": "unlink", "edge_id": edge["id"], "confirm": True, "preview_token": str(uuid.uuid4())},
        {"action": "unlink_batch", "edge_ids": [edge["id"]]},
        {"action": "unlink_batch", "edge_ids": [edge["id"]], "confirm": True},
        {"action": "retype", "edge_id": edge["id"], "new_type": "references"},
    ]
    before = await snapshot(writer.context)
    for arguments in calls:
        answer = await reader("memory_store", arguments)
        message = (
            f"Forbidden: memory_store action={arguments['action']} needs the writer role; user 'reader' is a reader"
        )
        assert_error(answer, 403, message)
    assert await snapshot(writer.context) == before


async def test_link_keeps_both_ends_from_being_deleted_until_it_commits(
    writer: ToolCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ends are locked FOR KEY SHARE when link checks them: a concurrent delete waits for the commit."""
    source, target = await thoughts(writer, 2)
    outcomes: list[str] = []
    ends = EdgeService._ends

    async def try_delete(self: EdgeService, *args: Any) -> Any:
        found = await ends(self, *args)
        blocked = await blocked_by_a_lock(writer.context, "DELETE FROM thought WHERE id = :id", id=uuid.UUID(target))
        outcomes.append("waited" if blocked else "deleted")
        return found

    monkeypatch.setattr(EdgeService, "_ends", try_delete)
    edge = await linked(writer, source, target)
    assert (edge["source_id"], edge["target_id"]) == (source, target)
    assert outcomes == ["waited"]


async def test_an_upgrade_whose_related_edge_was_unlinked_meanwhile_creates_the_edge(
    writer: ToolCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """link finds the pair's `related` edge to upgrade, then an unlink deletes it before the upgrade writes."""
    source, target = await thoughts(writer, 2)
    related = await linked(writer, source, target, "related")
    pair_edge = EdgeService.pair_edge

    async def then_unlinked(self: EdgeService, *args: Any) -> Any:
        found = await pair_edge(self, *args)
        async with own_transaction(writer.context) as session:
            await session.execute(text("DELETE FROM edge WHERE id = :id"), {"id": uuid.UUID(related["id"])})
        return found

    monkeypatch.setattr(EdgeService, "pair_edge", then_unlinked)
    edge = await linked(writer, source, target, "depends_on")
    assert (edge["source_id"], edge["target_id"], edge["type"]) == (source, target, "depends_on")
    assert edge["id"] != related["id"]


async def test_unlink_batch_refuses_the_whole_batch_when_an_edge_went_meanwhile(
    writer: ToolCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edge checked by the batch is deleted by a concurrent unlink before the batch deletes it: nothing is
    pruned and the answer names it, as for an id that was missing from the start."""
    a, b, c = await thoughts(writer, 3)
    first, second = await linked(writer, a, b), await linked(writer, b, c)
    delete = EdgeService.delete

    async def raced(self: EdgeService, edge_id: uuid.UUID) -> bool:
        if str(edge_id) == second["id"]:
            async with own_transaction(writer.context) as session:
                await session.execute(text("DELETE FROM edge WHERE id = :id"), {"id": edge_id})
        return await delete(self, edge_id)

    monkeypatch.setattr(EdgeService, "delete", raced)
    arguments = {"action": "unlink_batch", "edge_ids": [first["id"], second["id"]], "confirm": True}
    answer = await writer("memory_store", arguments)
    assert answer.error["statusCode"] == 404
    assert answer.text == f"Edge not found: {second['id']} — nothing was deleted; drop the missing ids and retry"
    assert [row[0] for row in await rows(writer.context, "SELECT id::text FROM edge")] == [first["id"]]
