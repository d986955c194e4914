"""memory_supersede through dispatch on a real PostgreSQL: archive, archive_batch and merge — preview shapes
and outcomes, tokens (also for not_found/already_archived), execution shapes and counters, idempotence, the
merge drop rules and edges_transferred, stale previews, cwd, audit events, readers refused."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy import text

from app.db.models import Role
from app.services.context import AppContext
from tests.conftest import make_user
from tests.support.contract import FULL_THOUGHT_KEYS as FULL_KEYS
from tests.support.helpers import Answer, ToolCaller, snapshot

TOOL = "memory_supersede"


def hint(action: str) -> str:
    return f"call {TOOL} action={action} with the same arguments and no confirm to preview it and get a fresh token"


def meta(action: str, returned: int = 1, **extra: Any) -> dict[str, Any]:
    counts = {**extra.pop("counts", {}), "total": returned, "returned": returned, "filtered_out": 0}
    return {"action": action, "scope": None, "counts": counts, "degraded": False, "warnings": [], **extra}


async def rows(context: AppContext, query: str, **params: Any) -> Sequence[Any]:
    async with context.db.unit_of_work() as session:
        return (await session.execute(text(query), params)).all()


async def thoughts(caller: ToolCaller, count: int, **arguments: Any) -> list[str]:
    contents = [{"content": f"supersede test thought {index}: {uuid.uuid4().hex[:6]}"} for index in range(count)]
    answer = await caller.ok("memory_store", {"action": "bulk_create", "thoughts": contents, **arguments})
    return [row["thought"]["id"] for row in answer.items]


async def link(caller: ToolCaller, source: str, target: str, edge_type: str) -> str:
    answer = await caller.ok(
        "memory_store", {"action": "link", "source_id": source, "target_id": target, "edge_type": edge_type}
    )
    return str(answer.item["id"])


async def edge_set(context: AppContext) -> set[tuple[str, str, str]]:
    found = await rows(context, "SELECT source_id::text, target_id::text, type::text FROM edge")
    return {(s, t, kind) for s, t, kind in found}


async def status_of(context: AppContext, thought_id: str) -> tuple[Any, ...]:
    [row] = await rows(
        context, "SELECT status::text, archived_at, updated_at FROM thought WHERE id = :id", id=thought_id
    )
    return tuple(row)


async def audit(context: AppContext) -> list[tuple[Any, ...]]:
    found = await rows(
        context,
        "SELECT user_id, tool, action, target_ids, project_id::text, details FROM audit_event ORDER BY created_at",
    )
    return [tuple(row) for row in found]


def assert_error(answer: Answer, status: int, message: str) -> None:
    assert answer.text == message
    assert answer.error == {"message": message, "statusCode": status, "retryable": False}


async def preview(caller: ToolCaller, arguments: dict[str, Any]) -> Answer:
    answer = await caller.ok(TOOL, arguments)
    token = answer.meta["preview"]["token"]
    assert answer.meta["preview"] == {"token": token, "destructive": True}
    if "item" in answer.result:
        assert answer.item["preview_token"] == token
    return answer


async def confirm(caller: ToolCaller, arguments: dict[str, Any], token: str | None) -> Answer:
    extra: dict[str, Any] = {"confirm": True}
    if token is not None:
        extra["preview_token"] = token
    return await caller(TOOL, {**arguments, **extra})


async def run(caller: ToolCaller, arguments: dict[str, Any]) -> Answer:
    """Preview, then confirm with its token."""
    token = (await preview(caller, arguments)).meta["preview"]["token"]
    answer = await confirm(caller, arguments, token)
    assert not answer.is_error, answer.text
    answer.assert_mirrors_text()
    assert "preview" not in answer.meta
    return answer


async def refused_cleanly(
    caller: ToolCaller, arguments: dict[str, Any], token: str | None, status: int, message: str
) -> None:
    before = await snapshot(caller.context)
    assert_error(await confirm(caller, arguments, token), status, message)
    assert await snapshot(caller.context) == before


# ---------------------------------------------------------------- archive


async def test_archive_preview_outcomes_each_issue_a_token(writer: ToolCaller) -> None:
    live, archived = await thoughts(writer, 2)
    await run(writer, {"action": "archive", "thought_id": archived})
    ghost = str(uuid.uuid4())
    before = await snapshot(writer.context)
    for thought_id, current, outcome in (
        (live, "active", "would_archive"),
        (archived, "archived", "already_archived"),
        (ghost, None, "not_found"),
    ):
        answer = await preview(writer, {"action": "archive", "thought_id": thought_id})
        token = answer.item["preview_token"]
        assert answer.item == {
            "status": "preview",
            "action": "archive",
            "thought_id": thought_id,
            "current_status": current,
            "outcome": outcome,
            "preview_token": token,
            "instruction": (
                f"Call memory_supersede again with action=archive, thought_id={thought_id}, confirm=true, "
                f"preview_token={token} to proceed."
            ),
        }
        assert answer.meta == meta("archive", preview={"token": token, "destructive": True})
    assert await snapshot(writer.context) == {**before, "preview_token": before["preview_token"] + 3}
    assert (await status_of(writer.context, live))[0] == "active"


async def test_archive_executes_and_answers_the_shaped_thought(writer: ToolCaller) -> None:
    [thought_id] = await thoughts(writer, 1)
    answer = await run(writer, {"action": "archive", "thought_id": thought_id})
    item = answer.item
    assert set(item) == {"status", "action", "result"}
    assert (item["status"], item["action"]) == ("executed", "archive")
    assert set(item["result"]) == FULL_KEYS
    assert (item["result"]["id"], item["result"]["status"]) == (thought_id, "archived")
    assert item["result"]["archived_at"] is not None
    assert answer.meta == meta("archive")
    status, archived_at, _ = await status_of(writer.context, thought_id)
    assert status == "archived" and archived_at is not None
    [(project_id,)] = await rows(writer.context, "SELECT project_id::text FROM thought WHERE id = :id", id=thought_id)
    assert await audit(writer.context) == [(writer.principal.user_id, TOOL, "archive", [thought_id], project_id, {})]
    # written in the archive's own transaction: now() is the same instant
    [(same,)] = await rows(
        writer.context,
        "SELECT a.created_at = t.archived_at FROM audit_event a, thought t WHERE t.id = :id",
        id=thought_id,
    )
    assert same is True


async def test_re_archiving_is_idempotent_and_never_re_stamps(writer: ToolCaller) -> None:
    [thought_id] = await thoughts(writer, 1)
    first = await run(writer, {"action": "archive", "thought_id": thought_id})
    stamped = await status_of(writer.context, thought_id)
    again = await run(writer, {"action": "archive", "thought_id": thought_id})
    assert again.item == first.item
    assert await status_of(writer.context, thought_id) == stamped


async def test_archive_execute_on_a_missing_thought_is_a_404(writer: ToolCaller) -> None:
    ghost = str(uuid.uuid4())
    arguments = {"action": "archive", "thought_id": ghost}
    token = (await preview(writer, arguments)).item["preview_token"]
    await refused_cleanly(writer, arguments, token, 404, f"Thought {ghost} not found")


@pytest.mark.parametrize("case", ["missing", "other_user", "other_arguments", "other_action", "reused", "expired"])
async def test_archive_token_rules(writer: ToolCaller, case: str) -> None:
    thought_id, other = await thoughts(writer, 2)
    arguments = {"action": "archive", "thought_id": thought_id}
    token: str | None = (await preview(writer, arguments)).item["preview_token"]
    caller = writer
    if case == "missing":
        token, status, message = None, 400, f"preview_token is required with confirm: true — {hint('archive')}"
    elif case == "other_user":
        caller = ToolCaller(writer.context, await make_user(writer.context, "second-writer", Role.writer))
        status, message = 400, f"preview_token {token} was issued to another user — {hint('archive')}"
    elif case == "other_arguments":
        arguments = {"action": "archive", "thought_id": other}
        status, message = 400, f"preview_token {token} was issued for other arguments — {hint('archive')}"
    elif case == "other_action":
        token = (await preview(writer, {"action": "archive_batch", "thought_ids": [thought_id]})).meta["preview"][
            "token"
        ]
        status = 400
        message = (
            f"preview_token {token} was issued for memory_supersede action=archive_batch, "
            f"not memory_supersede action=archive — {hint('archive')}"
        )
    elif case == "reused":
        await confirm(writer, arguments, token)
        status, message = 409, f"preview_token {token} was already used — {hint('archive')}"
    else:
        async with writer.context.db.unit_of_work() as session:
            await session.execute(
                text("UPDATE preview_token SET expires_at = now() - interval '1 second' WHERE id = :id"), {"id": token}
            )
        status, message = 409, f"preview_token {token} has expired — {hint('archive')}"
    state = (await status_of(writer.context, thought_id), await status_of(writer.context, other))
    await refused_cleanly(caller, arguments, token, status, message)
    assert (await status_of(writer.context, thought_id), await status_of(writer.context, other)) == state


# ---------------------------------------------------------------- archive_batch


async def test_archive_batch_preview_reports_every_occurrence(writer: ToolCaller) -> None:
    live, other, archived = await thoughts(writer, 3)
    await run(writer, {"action": "archive", "thought_id": archived})
    ghost = str(uuid.uuid4())
    ids = [live, archived, ghost, live, other, ghost]
    before = await snapshot(writer.context)
    answer = await preview(writer, {"action": "archive_batch", "thought_ids": ids})
    assert answer.items == [
        {"thought_id": live, "outcome": "would_archive"},
        {"thought_id": archived, "outcome": "already_archived"},
        {"thought_id": ghost, "outcome": "not_found"},
        {"thought_id": live, "outcome": "already_archived"},  # a repeat previews as archived by its first
        {"thought_id": other, "outcome": "would_archive"},
        {"thought_id": ghost, "outcome": "not_found"},
    ]
    token = answer.meta["preview"]["token"]
    assert answer.meta == meta(
        "archive_batch",
        6,
        counts={"would_archive": 2, "already_archived": 2, "not_found": 2},
        preview={"token": token, "destructive": True},
    )
    assert await snapshot(writer.context) == {**before, "preview_token": before["preview_token"] + 1}


async def test_archive_batch_preview_of_only_missing_ids_still_issues_a_token(writer: ToolCaller) -> None:
    ghost = str(uuid.uuid4())
    answer = await preview(writer, {"action": "archive_batch", "thought_ids": [ghost]})
    assert answer.items == [{"thought_id": ghost, "outcome": "not_found"}]
    assert answer.meta["counts"] == {"not_found": 1, "total": 1, "returned": 1, "filtered_out": 0}
    assert answer.meta["preview"]["token"]


async def test_archive_batch_executes_per_occurrence(writer: ToolCaller) -> None:
    live, other, archived = await thoughts(writer, 3)
    await run(writer, {"action": "archive", "thought_id": archived})
    stamped = await status_of(writer.context, archived)
    ghost = str(uuid.uuid4())
    ids = [live, archived, ghost, live, other]
    answer = await run(writer, {"action": "archive_batch", "thought_ids": ids})
    assert answer.result == {
        "items": [
            {"thought_id": live, "status": "archived"},
            {"thought_id": archived, "status": "archived"},
            {"thought_id": ghost, "status": "failed", "error": f"Thought {ghost} not found"},
            {"thought_id": live, "status": "archived"},
            {"thought_id": other, "status": "archived"},
        ],
        "meta": meta("archive_batch", 5, counts={"archived": 4, "failed": 1}),
    }
    for thought_id in (live, other):
        status, archived_at, _ = await status_of(writer.context, thought_id)
        assert status == "archived" and archived_at is not None
    assert await status_of(writer.context, archived) == stamped  # already archived: not re-stamped
    [_, (user, tool, action, targets, _, _)] = await audit(writer.context)
    assert (user, tool, action, sorted(targets)) == (
        writer.principal.user_id,
        TOOL,
        "archive_batch",
        sorted([live, other]),
    )


@pytest.mark.parametrize("size", [0, 1001])
async def test_archive_batch_refuses_an_empty_or_over_long_array(writer: ToolCaller, size: int) -> None:
    [thought_id] = await thoughts(writer, 1)
    before = await snapshot(writer.context)
    for extra in ({}, {"confirm": True, "preview_token": str(uuid.uuid4())}):
        answer = await writer(TOOL, {"action": "archive_batch", "thought_ids": [thought_id] * size, **extra})
        assert answer.error["statusCode"] == 400
        assert answer.text.startswith("Invalid argument 'thought_ids' for memory_supersede action=archive_batch: ")
    assert await snapshot(writer.context) == before


async def test_archive_batch_takes_1000_ids(writer: ToolCaller) -> None:
    [first] = await thoughts(writer, 1)
    async with writer.context.db.unit_of_work() as session:  # 999 more, without paying for their embeddings
        await session.execute(
            text(
                "INSERT INTO thought (id, project_id, content) SELECT gen_random_uuid(), project_id, 'bulk ' || n "
                "FROM thought, generate_series(1, 999) AS n WHERE id = :id"
            ),
            {"id": first},
        )
    ids = [str(row[0]) for row in await rows(writer.context, "SELECT id FROM thought ORDER BY id")]
    answer = await run(writer, {"action": "archive_batch", "thought_ids": ids})
    assert answer.meta["counts"] == {"archived": 1000, "failed": 0, "total": 1000, "returned": 1000, "filtered_out": 0}
    assert await rows(writer.context, "SELECT count(*) FROM thought WHERE status = 'archived'") == [(1000,)]


async def test_archive_batch_token_is_bound_to_the_id_list(writer: ToolCaller) -> None:
    a, b = await thoughts(writer, 2)
    token = (await preview(writer, {"action": "archive_batch", "thought_ids": [a]})).meta["preview"]["token"]
    arguments = {"action": "archive_batch", "thought_ids": [a, b]}
    await refused_cleanly(
        writer, arguments, token, 400, f"preview_token {token} was issued for other arguments — {hint('archive_batch')}"
    )
    await refused_cleanly(
        writer, arguments, None, 400, f"preview_token is required with confirm: true — {hint('archive_batch')}"
    )


# ---------------------------------------------------------------- merge: preview


def merge_args(source: str, target: str, **extra: Any) -> dict[str, Any]:
    return {"action": "merge", "source_id": source, "target_id": target, **extra}


async def shaped_edges_of(context: AppContext, thought_id: str) -> list[dict[str, Any]]:
    found = await rows(
        context,
        "SELECT id::text, source_id::text, target_id::text, type::text, created_at FROM edge "
        "WHERE source_id = :id OR target_id = :id ORDER BY created_at, id",
        id=thought_id,
    )
    return [
        {
            "id": edge_id,
            "source_id": s,
            "target_id": t,
            "type": kind,
            "created_at": created.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        }
        for edge_id, s, t, kind, created in found
    ]


async def test_merge_preview_shape(writer: ToolCaller) -> None:
    source, target, x = await thoughts(writer, 3)
    await link(writer, source, x, "supports")
    before = await snapshot(writer.context)
    answer = await preview(writer, merge_args(source, target))
    token = answer.item["preview_token"]
    assert answer.item == {
        "status": "preview",
        "action": "merge",
        "outcome": "would_merge",
        "source": {
            "id": source,
            "status": "active",
            "edges": await shaped_edges_of(writer.context, source),
            "source_edge_count": 1,
            "truncated": False,
        },
        "target": {"id": target, "status": "active"},
        "proposed": {},
        "effects": {"source_archived": True, "target_updated": False, "replaces_edge_created": True},
        "preview_token": token,
    }
    assert answer.meta == meta("merge", preview={"token": token, "destructive": True})
    assert await snapshot(writer.context) == {**before, "preview_token": before["preview_token"] + 1}


async def test_merge_preview_reports_the_proposed_values(admin: ToolCaller) -> None:
    project = (
        await admin.ok("memory_manage", {"action": "create", "name": "Merged Home", "local_path": "/srv/merged-home"})
    ).item
    source, target = await thoughts(admin, 2)
    arguments = merge_args(
        source, target, merged_content="the merged content", merged_tags=[" Ops ", "ops", "db"], cwd="/srv/merged-home"
    )
    item = (await preview(admin, arguments)).item
    assert item["proposed"] == {"content": "the merged content", "tags": ["Ops", "db"], "project_id": project["id"]}
    assert item["effects"] == {"source_archived": True, "target_updated": True, "replaces_edge_created": True}


async def test_merge_preview_truncates_the_edge_list_at_50(writer: ToolCaller) -> None:
    source, target, *others = await thoughts(writer, 57)
    links = [{"source": source, "target": other, "type": "references"} for other in others]
    await writer.ok("memory_store", {"action": "link_batch", "links": links})
    item = (await preview(writer, merge_args(source, target))).item
    everything = await shaped_edges_of(writer.context, source)
    assert len(everything) == 55
    assert item["source"] == {
        "id": source,
        "status": "active",
        "edges": everything[:50],
        "source_edge_count": 55,
        "truncated": True,
    }
    answer = await run(writer, merge_args(source, target))
    assert answer.item["result"]["edges_transferred"] == 55


async def test_merge_preview_outcomes_not_found_and_ineligible(writer: ToolCaller) -> None:
    source, target, archived = await thoughts(writer, 3)
    await run(writer, {"action": "archive", "thought_id": archived})
    ghost = str(uuid.uuid4())
    missing = (await preview(writer, merge_args(ghost, target))).item
    assert (missing["outcome"], missing["source"], missing["target"]) == (
        "not_found",
        {"id": ghost, "status": None, "edges": [], "source_edge_count": 0, "truncated": False},
        {"id": target, "status": "active"},
    )
    assert "reason" not in missing
    missing_target = (await preview(writer, merge_args(source, ghost))).item
    assert (missing_target["outcome"], missing_target["target"]) == ("not_found", {"id": ghost, "status": None})
    for source_id, target_id, reason in (
        (archived, target, "the source is archived"),
        (source, archived, "the target is archived"),
        (source, source, "source and target are the same thought"),
    ):
        item = (await preview(writer, merge_args(source_id, target_id))).item
        assert (item["outcome"], item["reason"]) == ("ineligible", reason)
        assert list(item)[:4] == ["status", "action", "outcome", "reason"]


# ---------------------------------------------------------------- merge: execution


async def test_merge_transfers_edges_under_the_drop_rules(writer: ToolCaller) -> None:
    s, t, x1, x2, x3, x4, x5, x7, x8 = await thoughts(writer, 9)
    cluster = (
        await writer.ok("memory_crystallize", {"action": "cluster", "thought_ids": [x5, s], "title": "merge cluster"})
    ).item["cluster"]["id"]
    await link(writer, s, t, "supports")  # collapses into a self-loop: dropped
    await link(writer, s, x1, "supports")
    await link(writer, t, x1, "supports")  # duplicate of a directed edge the target has: dropped
    await link(writer, s, x2, "supports")
    await link(writer, t, x2, "depends_on")  # the target's pair already carries another type: dropped
    await link(writer, s, x3, "related")
    await link(writer, x3, t, "related")  # existing symmetric pair: counts
    await link(writer, x4, s, "contradicts")
    await link(writer, t, x4, "contradicts")  # existing symmetric pair: counts
    moved = await link(writer, s, x7, "supports")  # moves: counts
    [(moved_created,)] = await rows(writer.context, "SELECT created_at FROM edge WHERE id = :id", id=moved)
    await link(writer, x8, s, "depends_on")  # moves, direction kept: counts
    # cluster → s moves to cluster → t: counts (the cluster is the source, so the rule holds)
    answer = await run(writer, merge_args(s, t))
    assert set(answer.item) == {"status", "action", "result"}
    assert (answer.item["status"], answer.item["action"]) == ("executed", "merge")
    assert set(answer.item["result"]) == {"target", "edges_transferred"}
    assert answer.item["result"]["edges_transferred"] == 5
    assert set(answer.item["result"]["target"]) == FULL_KEYS
    assert answer.item["result"]["target"]["id"] == t
    assert answer.meta == meta("merge")
    assert await edge_set(writer.context) == {
        (cluster, x5, "cluster"),
        (t, x1, "supports"),
        (t, x2, "depends_on"),
        (x3, t, "related"),
        (t, x4, "contradicts"),
        (t, x7, "supports"),
        (x8, t, "depends_on"),
        (cluster, t, "cluster"),
        (t, s, "replaces"),
    }
    [(moved_type, moved_source, created)] = await rows(
        writer.context, "SELECT type::text, source_id::text, created_at FROM edge WHERE id = :id", id=moved
    )
    assert (moved_type, moved_source, created) == ("supports", t, moved_created)  # keeps its id and created_at
    assert (await status_of(writer.context, s))[0] == "archived"
    assert (await status_of(writer.context, t))[0] == "active"
    [(project_id,)] = await rows(writer.context, "SELECT project_id::text FROM thought WHERE id = :id", id=t)
    assert (await audit(writer.context))[-1] == (
        writer.principal.user_id,
        TOOL,
        "merge",
        [s, t],
        project_id,
        {"edges_transferred": 5},
    )


async def test_a_thought_moved_to_another_project_takes_the_rows_that_live_in_its_project(
    writer: ToolCaller,
) -> None:
    """memory_store update (cwd) moves a thought with the rows that share its project: the edges it is the source
    of, its hits, url links and primer. Left behind, they named the old project: the console's graph of that
    project counted the edges, and migration 0025's cluster rule (the source looked up in the edge's project)
    refused a later change of such a cluster edge. Then a merge onto it still moves its edges."""
    await writer.ok("memory_manage", {"action": "create", "name": "elsewhere", "local_path": "/srv/elsewhere"})
    s, t, x = await thoughts(writer, 3)
    cluster = (
        await writer.ok("memory_crystallize", {"action": "cluster", "thought_ids": [x, s], "title": "moving cluster"})
    ).item["cluster"]["id"]
    await writer.ok("memory_recall", {"action": "get", "thought_id": cluster})  # a hit row
    await writer.ok("memory_store", {"action": "update", "thought_id": cluster, "cwd": "/srv/elsewhere"})
    left_behind = """
        SELECT 'edge' FROM edge JOIN thought ON thought.id = edge.source_id WHERE edge.project_id <> thought.project_id
        UNION ALL SELECT 'hit' FROM thought_hit JOIN thought ON thought.id = thought_hit.thought_id
            WHERE thought_hit.project_id <> thought.project_id"""
    assert await rows(writer.context, left_behind) == []
    [(hits,)] = await rows(writer.context, "SELECT count(*) FROM thought_hit WHERE thought_id = :id", id=cluster)
    assert hits == 1
    await run(writer, merge_args(s, t))
    assert {(cluster, x, "cluster"), (cluster, t, "cluster")} <= await edge_set(writer.context)
    assert await rows(writer.context, left_behind) == []


async def test_merge_drops_cluster_edges_a_plain_target_may_not_carry(writer: ToolCaller) -> None:
    y1, y2, plain, y3 = await thoughts(writer, 4)
    source = (await writer.ok("memory_crystallize", {"action": "cluster", "thought_ids": [y1, y2]})).item["cluster"][
        "id"
    ]
    other_cluster = (await writer.ok("memory_crystallize", {"action": "cluster", "thought_ids": [y3]})).item["cluster"][
        "id"
    ]
    answer = await run(writer, merge_args(source, plain))
    assert answer.item["result"]["edges_transferred"] == 0
    assert await edge_set(writer.context) == {(other_cluster, y3, "cluster"), (plain, source, "replaces")}
    # a cluster target keeps them
    second = (await writer.ok("memory_crystallize", {"action": "cluster", "thought_ids": [y1, y2]})).item["cluster"][
        "id"
    ]
    answer = await run(writer, merge_args(second, other_cluster))
    assert answer.item["result"]["edges_transferred"] == 2
    assert {(other_cluster, y1, "cluster"), (other_cluster, y2, "cluster")} <= await edge_set(writer.context)


async def test_merge_replaces_content_and_tags_and_re_embeds(writer: ToolCaller) -> None:
    source, target = await thoughts(writer, 2)
    [(before_vector,)] = await rows(writer.context, "SELECT embedding::text FROM thought WHERE id = :id", id=target)
    arguments = merge_args(source, target, merged_content="one merged thought about caching", merged_tags=["cache"])
    result = (await run(writer, arguments)).item["result"]["target"]
    assert (result["content"], result["tags"]) == ("one merged thought about caching", ["cache"])
    [(vector, model)] = await rows(
        writer.context, "SELECT embedding::text, embedding_model FROM thought WHERE id = :id", id=target
    )
    assert vector != before_vector and model is not None


async def test_merge_cwd_picks_the_resulting_project(admin: ToolCaller) -> None:
    home = (
        await admin.ok("memory_manage", {"action": "create", "name": "Merge Home", "local_path": "/srv/merge-home"})
    ).item
    source, target = await thoughts(admin, 2)
    result = (await run(admin, merge_args(source, target, cwd="/srv/merge-home/sub"))).item["result"]["target"]
    assert (result["project"], result["project_id"]) == ("Merge Home", home["id"])
    # without cwd (or with an unknown one) the target keeps its project
    second_source, second_target = await thoughts(admin, 2)
    kept = (await run(admin, merge_args(second_source, second_target))).item["result"]["target"]
    assert kept["project"] == "default"
    third_source, third_target = await thoughts(admin, 2)
    unknown = (await run(admin, merge_args(third_source, third_target, cwd="/nowhere"))).item["result"]["target"]
    assert unknown["project"] == "default"


async def test_merging_an_archived_source_is_refused(writer: ToolCaller) -> None:
    source, target = await thoughts(writer, 2)
    await run(writer, {"action": "archive", "thought_id": source})
    arguments = merge_args(source, target)
    token = (await preview(writer, arguments)).item["preview_token"]
    await refused_cleanly(writer, arguments, token, 409, "Merge refused: the source is archived")


async def test_merge_execute_on_a_missing_thought_is_a_404(writer: ToolCaller) -> None:
    [target] = await thoughts(writer, 1)
    ghost = str(uuid.uuid4())
    arguments = merge_args(ghost, target)
    token = (await preview(writer, arguments)).item["preview_token"]
    await refused_cleanly(writer, arguments, token, 404, f"Thought {ghost} not found")


async def test_a_stale_merge_preview_never_writes_blindly(writer: ToolCaller) -> None:
    source, target, x = await thoughts(writer, 3)
    await link(writer, source, x, "supports")
    arguments = merge_args(source, target)
    token = (await preview(writer, arguments)).item["preview_token"]
    await run(writer, {"action": "archive", "thought_id": source})
    await refused_cleanly(writer, arguments, token, 409, "Merge refused: the source is archived")
    assert await edge_set(writer.context) == {(source, x, "supports")}


async def test_merge_execution_re_reads_the_edges(writer: ToolCaller) -> None:
    source, target, x, y = await thoughts(writer, 4)
    await link(writer, source, x, "supports")
    arguments = merge_args(source, target)
    token = (await preview(writer, arguments)).item["preview_token"]
    await link(writer, y, source, "depends_on")  # added after the preview
    answer = await confirm(writer, arguments, token)
    assert answer.item["result"]["edges_transferred"] == 2
    assert await edge_set(writer.context) == {
        (target, x, "supports"),
        (y, target, "depends_on"),
        (target, source, "replaces"),
    }


async def test_merge_token_is_bound_to_the_merged_values(writer: ToolCaller) -> None:
    source, target = await thoughts(writer, 2)
    token = (await preview(writer, merge_args(source, target, merged_content="a"))).item["preview_token"]
    message = f"preview_token {token} was issued for other arguments — {hint('merge')}"
    await refused_cleanly(writer, merge_args(source, target, merged_content="b"), token, 400, message)
    await refused_cleanly(writer, merge_args(target, source, merged_content="a"), token, 400, message)


# ---------------------------------------------------------------- readers and retired inputs


async def test_readers_are_refused_on_previews_too(writer: ToolCaller, reader: ToolCaller) -> None:
    source, target = await thoughts(writer, 2)
    before = await snapshot(writer.context)
    for arguments in (
        {"action": "archive", "thought_id": source},
        {"action": "archive_batch", "thought_ids": [source]},
        merge_args(source, target),
        {"action": "archive", "thought_id": source, "confirm": True, "preview_token": str(uuid.uuid4())},
    ):
        message = (
            f"Forbidden: memory_supersede action={arguments['action']} needs the writer role; user 'reader' is a reader"
        )
        assert_error(await reader(TOOL, arguments), 403, message)
    assert await snapshot(writer.context) == before


async def test_the_retired_project_id_is_refused(writer: ToolCaller) -> None:
    [thought_id] = await thoughts(writer, 1)
    before = await snapshot(writer.context)
    for arguments in ({"action": "archive", "thought_id": thought_id}, merge_args(thought_id, thought_id)):
        assert_error(await writer(TOOL, {**arguments, "project_id": "x"}), 400, "project_id was removed; use cwd")
    assert_error(
        await writer(TOOL, {"action": "archive", "thought_id": thought_id, "cwd": "/x"}),
        400,
        "Unknown argument 'cwd' for memory_supersede action=archive; it accepts: confirm, preview_token, thought_id",
    )
    assert await snapshot(writer.context) == before
