"""edge_review: enqueue, list, apply, apply_batch, rollback and reject over the placement queue."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from sqlalchemy import text

from app.db.visibility import UNSCOPED
from app.services.review import proposals
from app.services.review.proposals import ProposalService
from app.services.store.edges import EdgeService
from tests.support.helpers import ToolCaller, blocked_by_a_lock, execute, rows, snapshot

NO_CWD = "no cwd — the answer spans every project"
PROPOSAL_KEYS = {
    "id",
    "kind",
    "status",
    "source_id",
    "target_id",
    "edge_type",
    "confidence",
    "rationale",
    "project_id",
    "run_id",
    "created_at",
    "expires_at",
    "applied_at",
}
SUBJECT = "The billing service retries failed card payments three times"
NEIGHBOURS = [
    "The billing service retries a failed card payment three times before giving up",
    "Card payments that fail get three retries in the billing service",
]
TWIN = "Failed card payments are retried three times by the billing service"  # Jaccard ≥ 0.6 with SUBJECT


async def thought(caller: ToolCaller, content: str, cwd: str | None = "/srv/queue", **extra: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {"action": "create", "content": content, **extra}
    if cwd is not None:
        arguments["cwd"] = cwd
    return dict((await caller.ok("memory_store", arguments)).item)


async def queue_project(caller: ToolCaller) -> dict[str, Any]:
    answer = await caller.ok("memory_manage", {"action": "create", "name": "Queue", "local_path": "/srv/queue"})
    return dict(answer.item)


async def world(writer: ToolCaller) -> dict[str, Any]:
    """A subject with two close neighbours (no merge candidate) and its two pending `related` proposals."""
    project = await queue_project(writer)
    neighbours = [await thought(writer, content) for content in NEIGHBOURS]
    subject = await thought(writer, SUBJECT)
    await thought(writer, "Cats like to sleep in warm sunny windows")
    enqueued = await writer.ok("edge_review", {"action": "enqueue", "thought_id": subject["id"]})
    listed = await writer.ok("edge_review", {"action": "list", "cwd": "/srv/queue"})
    return {
        "project": project,
        "subject": subject,
        "neighbours": neighbours,
        "enqueued": enqueued,
        "proposals": listed.items,
    }


async def preview_apply(caller: ToolCaller, proposal_id: str) -> str:
    answer = await caller.ok("edge_review", {"action": "apply", "proposal_id": proposal_id})
    return str(answer.item["preview_token"])


async def apply(caller: ToolCaller, proposal_id: str) -> dict[str, Any]:
    token = await preview_apply(caller, proposal_id)
    answer = await caller.ok(
        "edge_review", {"action": "apply", "proposal_id": proposal_id, "confirm": True, "preview_token": token}
    )
    return dict(answer.item)


async def apply_batch(caller: ToolCaller, proposal_ids: list[str]) -> Any:
    token = (await caller.ok("edge_review", {"action": "apply_batch", "proposal_ids": proposal_ids})).meta["preview"][
        "token"
    ]
    return await caller.ok(
        "edge_review", {"action": "apply_batch", "proposal_ids": proposal_ids, "confirm": True, "preview_token": token}
    )


async def rollback(caller: ToolCaller, run_id: str) -> Any:
    token = (await caller.ok("edge_review", {"action": "rollback", "run_id": run_id})).meta["preview"]["token"]
    return await caller.ok(
        "edge_review", {"action": "rollback", "run_id": run_id, "confirm": True, "preview_token": token}
    )


async def status_of(caller: ToolCaller, proposal_id: str) -> str:
    return str((await rows(caller, "SELECT status::text FROM placement_proposal WHERE id = :id", id=proposal_id))[0][0])


async def pair_edges(caller: ToolCaller, a: str, b: str) -> list[tuple[Any, ...]]:
    return await rows(
        caller,
        "SELECT id::text, source_id::text, target_id::text, type::text FROM edge "
        "WHERE (source_id = :a AND target_id = :b) OR (source_id = :b AND target_id = :a)",
        a=a,
        b=b,
    )


# ---------------------------------------------------------------- enqueue


async def test_enqueue_queues_one_pending_row_per_planned_edge(writer: ToolCaller) -> None:
    state = await world(writer)
    enqueued = state["enqueued"]
    subject = state["subject"]
    assert set(enqueued.item) == {"thought_id", "proposal_ids", "degraded"}
    assert enqueued.item["thought_id"] == subject["id"] and enqueued.item["degraded"] is False
    assert len(enqueued.item["proposal_ids"]) == 2
    assert enqueued.meta == {
        "action": "enqueue",
        "scope": None,
        "counts": {"proposals": 2, "skipped": 0, "total": 1, "returned": 1, "filtered_out": 0},
        "degraded": False,
        "warnings": [],
    }
    proposals = state["proposals"]
    assert sorted(p["id"] for p in proposals) == sorted(enqueued.item["proposal_ids"])
    assert {(p["kind"], p["status"], p["source_id"], p["edge_type"]) for p in proposals} == {
        ("edge", "pending", subject["id"], "related")
    }
    assert {p["target_id"] for p in proposals} == {n["id"] for n in state["neighbours"]}
    assert all(set(p) == PROPOSAL_KEYS for p in proposals)
    assert all(p["project_id"] == state["project"]["id"] and p["run_id"] is None for p in proposals)

    # one pending row per (source, kind, target, type): a second enqueue skips them all
    before = await snapshot(writer.context)
    again = await writer.ok("edge_review", {"action": "enqueue", "thought_id": subject["id"]})
    assert again.item["proposal_ids"] == []
    assert again.meta["counts"] == {"proposals": 0, "skipped": 2, "total": 1, "returned": 1, "filtered_out": 0}
    assert await snapshot(writer.context) == before


async def test_enqueue_max_proposals_and_a_merge_candidate(writer: ToolCaller) -> None:
    await queue_project(writer)
    twin = await thought(writer, TWIN)
    subject = await thought(writer, SUBJECT)
    capped = await writer.ok("edge_review", {"action": "enqueue", "thought_id": subject["id"], "max_proposals": 1})
    assert capped.meta["counts"]["proposals"] == 1 and capped.meta["counts"]["skipped"] == 1
    rest = await writer.ok("edge_review", {"action": "enqueue", "thought_id": subject["id"]})
    assert rest.meta["counts"] == {"proposals": 1, "skipped": 1, "total": 1, "returned": 1, "filtered_out": 0}
    kinds = await rows(writer, "SELECT kind, target_id::text, payload->>'action' FROM placement_proposal ORDER BY kind")
    assert kinds == [("edge", twin["id"], None), ("lifecycle", twin["id"], "merge")]


async def test_enqueue_stops_at_the_pending_cap(writer: ToolCaller, monkeypatch: pytest.MonkeyPatch) -> None:
    assert proposals.PENDING_CAP == 500  # docs/mcp-tools.md, edge_review: counted per project; 3 runs faster
    monkeypatch.setattr(proposals, "PENDING_CAP", 3)
    await queue_project(writer)
    neighbours = [await thought(writer, content) for content in NEIGHBOURS]
    subject = await thought(writer, SUBJECT)
    first = await writer.ok("edge_review", {"action": "enqueue", "thought_id": subject["id"]})
    second = await writer.ok("edge_review", {"action": "enqueue", "thought_id": neighbours[0]["id"]})
    assert (first.meta["counts"]["proposals"], first.meta["counts"]["skipped"]) == (2, 0)
    assert (second.meta["counts"]["proposals"], second.meta["counts"]["skipped"]) == (1, 1)
    assert await rows(writer, "SELECT count(*) FROM placement_proposal WHERE status = 'pending'") == [(3,)]


async def test_concurrent_enqueues_never_pass_the_pending_cap(
    writer: ToolCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each call counts the pending rows, then inserts: two calls that both counted before either committed
    would each fill the whole room. They queue per project instead."""
    monkeypatch.setattr(proposals, "PENDING_CAP", 3)
    await queue_project(writer)
    neighbours = [await thought(writer, content) for content in NEIGHBOURS]
    subject = await thought(writer, SUBJECT)
    fingerprint = ProposalService.fingerprint

    async def slow_fingerprint(self: ProposalService, *args: Any) -> str:
        await asyncio.sleep(0.1)  # between the count and the inserts: the other call counts meanwhile
        return await fingerprint(self, *args)

    monkeypatch.setattr(ProposalService, "fingerprint", slow_fingerprint)
    answers = await asyncio.gather(
        *(
            writer.ok("edge_review", {"action": "enqueue", "thought_id": thought_id})
            for thought_id in (subject["id"], neighbours[0]["id"])
        )
    )
    assert sorted(answer.meta["counts"]["proposals"] for answer in answers) == [1, 2]
    assert await rows(writer, "SELECT count(*) FROM placement_proposal WHERE status = 'pending'") == [(3,)]


async def test_enqueue_refusals_write_nothing(writer: ToolCaller, reader: ToolCaller) -> None:
    await queue_project(writer)
    draft = await thought(writer, SUBJECT, status="draft")
    missing = str(uuid.uuid4())
    before = await snapshot(writer.context)
    answer = await writer("edge_review", {"action": "enqueue", "thought_id": draft["id"]})
    message = f"edge_review action=enqueue needs an active thought; {draft['id']} is draft"
    assert answer.error == {"message": message, "statusCode": 400, "retryable": False}
    gone = await writer("edge_review", {"action": "enqueue", "thought_id": missing})
    assert gone.error == {"message": f"Thought {missing} not found", "statusCode": 404, "retryable": False}
    retired = await writer("edge_review", {"action": "enqueue", "thought_id": draft["id"], "max_items": 3})
    assert retired.text == "max_items was removed; use max_proposals"
    forbidden = await reader("edge_review", {"action": "enqueue", "thought_id": draft["id"]})
    assert forbidden.error["statusCode"] == 403
    assert forbidden.text == "Forbidden: edge_review action=enqueue needs the writer role; user 'reader' is a reader"
    assert await snapshot(writer.context) == before


# ---------------------------------------------------------------- list


async def test_list_uses_canonical_keys_and_hides_retired_kinds(writer: ToolCaller, reader: ToolCaller) -> None:
    state = await world(writer)
    subject = state["subject"]
    await execute(
        writer,
        "INSERT INTO placement_proposal (id, project_id, source_id, kind, fingerprint, expires_at, created_at) "
        "SELECT gen_random_uuid(), project_id, id, 'triage_archive', 'legacy', now() + interval '30 days', "
        "now() - interval '1 day' FROM thought WHERE id = :id",
        id=subject["id"],
    )
    listed = await reader.ok("edge_review", {"action": "list", "cwd": "/srv/queue"})
    assert set(listed.result) == {"items", "meta"}
    assert len(listed.items) == 2 and all(p["kind"] == "edge" for p in listed.items)
    assert listed.meta == {
        "action": "list",
        "scope": {"project": state["project"]["id"], "project_name": "Queue", "global": False},
        "counts": {"retired_count": 1, "all_total": 3, "total": 3, "returned": 2, "filtered_out": 1},
        "degraded": False,
        "warnings": [],
    }
    every = await reader.ok("edge_review", {"action": "list", "cwd": "/srv/queue", "include_retired": True})
    assert [p["kind"] for p in every.items] == ["edge", "edge", "triage_archive"]  # newest first
    assert every.meta["counts"] == {"retired_count": 0, "all_total": 3, "total": 3, "returned": 3, "filtered_out": 0}
    retired_only = await reader.ok("edge_review", {"action": "list", "kind": "triage_archive", "include_retired": True})
    assert [p["kind"] for p in retired_only.items] == ["triage_archive"]
    assert retired_only.meta["warnings"] == [NO_CWD] and retired_only.meta["scope"] is None

    page = await reader.ok("edge_review", {"action": "list", "limit": 1, "offset": 1})
    assert page.meta["counts"] == {"retired_count": 1, "all_total": 3, "total": 3, "returned": 1, "filtered_out": 2}
    assert page.items[0]["id"] == listed.items[1]["id"]
    accepted = await reader.ok("edge_review", {"action": "list", "status": "accepted"})
    assert accepted.items == [] and accepted.meta["counts"] == {
        "retired_count": 0,
        "all_total": 3,
        "total": 0,
        "returned": 0,
        "filtered_out": 0,
    }
    bad = await reader("edge_review", {"action": "list", "status": "done"})
    assert bad.error["statusCode"] == 400 and "'status'" in bad.text


# ---------------------------------------------------------------- apply


async def test_apply_previews_with_a_token_then_accepts_with_a_run_id(writer: ToolCaller) -> None:
    state = await world(writer)
    proposal = state["proposals"][0]
    before = await snapshot(writer.context)
    preview = await writer.ok("edge_review", {"action": "apply", "proposal_id": proposal["id"]})
    assert await snapshot(writer.context) == {**before, "preview_token": before["preview_token"] + 1}
    token = preview.item["preview_token"]
    assert preview.item == {
        "status": "dry_run",
        "proposal_id": proposal["id"],
        "proposal": proposal,
        "would": f"link {proposal['source_id']} -[related]-> {proposal['target_id']}",
        "current": True,
        "preview_token": token,
    }
    assert preview.meta["preview"] == {"token": token, "destructive": True}

    refused = await writer("edge_review", {"action": "apply", "proposal_id": proposal["id"], "confirm": True})
    assert refused.error["statusCode"] == 400 and refused.text.startswith("preview_token is required")
    assert await pair_edges(writer, proposal["source_id"], proposal["target_id"]) == []

    done = await writer.ok(
        "edge_review", {"action": "apply", "proposal_id": proposal["id"], "confirm": True, "preview_token": token}
    )
    run_id = done.item["run_id"]
    assert done.item == {
        "proposal_id": proposal["id"],
        "status": "accepted",
        "run_id": run_id,
        "applied": f"link {proposal['source_id']} -[related]-> {proposal['target_id']}",
    }
    assert "preview" not in done.meta
    [(_, source, target, kind)] = await pair_edges(writer, proposal["source_id"], proposal["target_id"])
    assert (source, target, kind) == (proposal["source_id"], proposal["target_id"], "related")
    assert await rows(
        writer,
        "SELECT status::text, run_id::text, applied_at IS NOT NULL FROM placement_proposal WHERE id = :id",
        id=proposal["id"],
    ) == [("accepted", run_id, True)]
    assert await rows(writer, "SELECT count(*) FROM audit_event WHERE tool = 'edge_review' AND action = 'apply'") == [
        (1,)
    ]

    # a proposal that is no longer pending is refused, and nothing is written
    again = await preview_apply(writer, proposal["id"])
    before = await snapshot(writer.context)
    refused_again = await writer.ok(
        "edge_review", {"action": "apply", "proposal_id": proposal["id"], "confirm": True, "preview_token": again}
    )
    assert refused_again.item == {"proposal_id": proposal["id"], "status": "refused", "reason": "proposal is accepted"}
    after = await snapshot(writer.context)
    assert after == before  # the spent token is an update, not a new row
    listed = await writer.ok("edge_review", {"action": "list", "status": "accepted"})
    assert [p["id"] for p in listed.items] == [proposal["id"]] and listed.items[0]["run_id"] == run_id


async def test_apply_answers_stale_when_an_endpoint_changed(writer: ToolCaller) -> None:
    state = await world(writer)
    proposal = state["proposals"][0]
    token = await preview_apply(writer, proposal["id"])
    await writer.ok("memory_store", {"action": "update", "thought_id": proposal["target_id"], "tags": ["edited"]})
    answer = await writer.ok(
        "edge_review", {"action": "apply", "proposal_id": proposal["id"], "confirm": True, "preview_token": token}
    )
    assert answer.item == {
        "proposal_id": proposal["id"],
        "status": "stale",
        "reason": "an endpoint or their edge changed",
    }
    assert await status_of(writer, proposal["id"]) == "stale"
    assert await pair_edges(writer, proposal["source_id"], proposal["target_id"]) == []
    preview = await writer.ok("edge_review", {"action": "apply", "proposal_id": proposal["id"]})
    assert preview.item["current"] is False

    # an edge written between the two ends by someone else also makes it stale
    other = state["proposals"][1]
    token = await preview_apply(writer, other["id"])
    await writer.ok(
        "memory_store",
        {"action": "link", "source_id": other["target_id"], "target_id": other["source_id"], "edge_type": "supports"},
    )
    answer = await writer.ok(
        "edge_review", {"action": "apply", "proposal_id": other["id"], "confirm": True, "preview_token": token}
    )
    assert answer.item["status"] == "stale"


async def test_one_writer_per_proposal(writer: ToolCaller) -> None:
    state = await world(writer)
    proposal = state["proposals"][0]
    tokens = [await preview_apply(writer, proposal["id"]) for _ in range(2)]
    answers = await asyncio.gather(
        *(
            writer.ok(
                "edge_review",
                {"action": "apply", "proposal_id": proposal["id"], "confirm": True, "preview_token": token},
            )
            for token in tokens
        )
    )
    assert sorted(answer.item["status"] for answer in answers) == ["accepted", "refused"]
    assert len(await pair_edges(writer, proposal["source_id"], proposal["target_id"])) == 1
    assert await rows(writer, "SELECT count(*) FROM audit_event WHERE tool = 'edge_review' AND action = 'apply'") == [
        (1,)
    ]


async def test_apply_refusals_write_nothing(writer: ToolCaller, reader: ToolCaller) -> None:
    state = await world(writer)
    proposal = state["proposals"][0]
    missing = str(uuid.uuid4())
    before = await snapshot(writer.context)
    gone = await writer("edge_review", {"action": "apply", "proposal_id": missing})
    message = f"Proposal {missing} not found (list them with edge_review action=list)"
    assert gone.error == {"message": message, "statusCode": 404, "retryable": False}
    for action, arguments in (
        ("apply", {"proposal_id": proposal["id"]}),
        ("apply_batch", {"proposal_ids": [proposal["id"]]}),
        ("rollback", {"run_id": str(uuid.uuid4())}),
        ("reject", {"proposal_id": proposal["id"]}),
    ):
        answer = await reader("edge_review", {"action": action, **arguments})
        assert answer.error["statusCode"] == 403, action
    token = await preview_apply(writer, proposal["id"])
    before = await snapshot(writer.context)
    other = await writer(
        "edge_review",
        {"action": "apply", "proposal_id": state["proposals"][1]["id"], "confirm": True, "preview_token": token},
    )
    assert other.error["statusCode"] == 400 and "was issued for other arguments" in other.text
    assert await snapshot(writer.context) == before
    assert {await status_of(writer, p["id"]) for p in state["proposals"]} == {"pending"}


async def test_apply_a_cluster_placement_links_the_cluster_to_the_thought(writer: ToolCaller) -> None:
    await queue_project(writer)
    members = [await thought(writer, content) for content in [*NEIGHBOURS, TWIN]]
    made = await writer.ok(
        "memory_crystallize",
        {"action": "cluster", "thought_ids": [m["id"] for m in members], "title": "Card payment retries"},
    )
    cluster_id = made.item["cluster"]["id"]
    subject = await thought(writer, SUBJECT)
    queued = await writer.ok("edge_review", {"action": "enqueue", "thought_id": subject["id"]})
    assert queued.meta["counts"]["proposals"] == 5  # three edges, the placement and a merge
    [(placement_id, target, edge_type)] = await rows(
        writer,
        "SELECT id::text, target_id::text, edge_type::text FROM placement_proposal WHERE kind = 'placement'",
    )
    assert (target, edge_type) == (cluster_id, "cluster")
    applied = await apply(writer, placement_id)
    assert applied["applied"] == f"link {cluster_id} -[cluster]-> {subject['id']}"
    [(_, source, target_id, kind)] = await pair_edges(writer, cluster_id, subject["id"])
    assert (source, target_id, kind) == (cluster_id, subject["id"], "cluster")
    done = await rollback(writer, applied["run_id"])
    assert [row["status"] for row in done.items] == ["reverted"]
    assert await pair_edges(writer, cluster_id, subject["id"]) == []


# ---------------------------------------------------------------- apply_batch


async def test_apply_batch_shares_one_run_id_and_counts_per_status(writer: ToolCaller) -> None:
    state = await world(writer)
    ids = [p["id"] for p in state["proposals"]]
    missing = str(uuid.uuid4())
    before = await snapshot(writer.context)
    preview = await writer.ok("edge_review", {"action": "apply_batch", "proposal_ids": [*ids, missing]})
    assert await snapshot(writer.context) == {**before, "preview_token": before["preview_token"] + 1}
    assert [row["status"] for row in preview.items] == ["dry_run", "dry_run", "failed"]
    assert preview.items[2] == {
        "proposal_id": missing,
        "status": "failed",
        "reason": f"Proposal {missing} not found (list them with edge_review action=list)",
    }
    assert all(set(row) == {"proposal_id", "status", "would"} for row in preview.items[:2])
    token = preview.meta["preview"]["token"]
    assert preview.meta["preview"] == {"token": token, "destructive": True}
    assert preview.meta["counts"] == {"dry_run": 2, "failed": 1, "total": 3, "returned": 3, "filtered_out": 0}

    done = await writer.ok(
        "edge_review",
        {"action": "apply_batch", "proposal_ids": [*ids, missing], "confirm": True, "preview_token": token},
    )
    assert [row["status"] for row in done.items] == ["accepted", "accepted", "failed"]
    run_ids = {row["run_id"] for row in done.items[:2]}
    assert len(run_ids) == 1
    assert done.meta == {
        "action": "apply_batch",
        "scope": None,
        "counts": {"accepted": 2, "failed": 1, "total": 3, "returned": 3, "filtered_out": 0},
        "degraded": False,
        "warnings": [],
    }
    stored = await rows(writer, "SELECT DISTINCT run_id::text FROM placement_proposal WHERE status = 'accepted'")
    assert stored == [(run_ids.pop(),)]


async def test_apply_batch_folds_stale_rows_and_warns_when_nothing_applied(writer: ToolCaller) -> None:
    state = await world(writer)
    first, second = state["proposals"]
    await writer.ok("memory_store", {"action": "update", "thought_id": first["target_id"], "tags": ["edited"]})
    mixed = await apply_batch(writer, [first["id"], second["id"]])
    assert {row["proposal_id"]: row["status"] for row in mixed.items} == {
        first["id"]: "stale",
        second["id"]: "accepted",
    }
    assert mixed.meta["counts"] == {
        "stale": 1,
        "accepted": 1,
        "failed": 0,
        "total": 2,
        "returned": 2,
        "filtered_out": 0,
    }
    assert mixed.meta["warnings"] == []
    nothing = await apply_batch(writer, [first["id"], second["id"]])
    assert [row["status"] for row in nothing.items] == ["refused", "refused"]
    assert nothing.meta["counts"] == {"refused": 2, "failed": 0, "total": 2, "returned": 2, "filtered_out": 0}
    assert nothing.meta["warnings"] == ["no proposal of this batch was applied"]


# ---------------------------------------------------------------- rollback


async def test_rollback_reverts_a_run_newest_first(writer: ToolCaller) -> None:
    state = await world(writer)
    ids = [p["id"] for p in state["proposals"]]
    run_id = (await apply_batch(writer, ids)).items[0]["run_id"]
    thoughts_before = await rows(writer, "SELECT count(*) FROM thought")
    before = await snapshot(writer.context)
    preview = await writer.ok("edge_review", {"action": "rollback", "run_id": run_id})
    assert await snapshot(writer.context) == {**before, "preview_token": before["preview_token"] + 1}
    applied = await rows(
        writer,
        "SELECT id::text FROM placement_proposal WHERE run_id = :run ORDER BY applied_at DESC, id DESC",
        run=run_id,
    )
    assert [row["proposal_id"] for row in preview.items] == [row[0] for row in applied]
    assert all(
        row == {"proposal_id": row["proposal_id"], "kind": "edge", "status": "would_revert"} for row in preview.items
    )
    token = preview.meta["preview"]["token"]
    assert preview.meta["counts"] == {
        "reverted": 2,
        "skipped": 0,
        "refused": 0,
        "total": 2,
        "returned": 2,
        "filtered_out": 0,
    }

    done = await writer.ok(
        "edge_review", {"action": "rollback", "run_id": run_id, "confirm": True, "preview_token": token}
    )
    assert [row["status"] for row in done.items] == ["reverted", "reverted"]
    assert "preview" not in done.meta
    assert done.meta["counts"] == {
        "reverted": 2,
        "skipped": 0,
        "refused": 0,
        "total": 2,
        "returned": 2,
        "filtered_out": 0,
    }
    for proposal in state["proposals"]:
        assert await pair_edges(writer, proposal["source_id"], proposal["target_id"]) == []
        assert await status_of(writer, proposal["id"]) == "rolled_back"
    assert await rows(writer, "SELECT count(*) FROM thought") == thoughts_before
    again = await writer("edge_review", {"action": "rollback", "run_id": run_id})
    assert again.error == {
        "message": f"No accepted proposal carries run_id {run_id}",
        "statusCode": 404,
        "retryable": False,
    }


async def test_rollback_skips_a_row_whose_edge_changed(writer: ToolCaller) -> None:
    state = await world(writer)
    first, second = state["proposals"]
    run_id = (await apply_batch(writer, [first["id"], second["id"]])).items[0]["run_id"]
    [(edge_id, *_)] = await pair_edges(writer, first["source_id"], first["target_id"])
    token = (await writer.ok("memory_store", {"action": "retype", "edge_id": edge_id, "new_type": "supports"})).item[
        "preview_token"
    ]
    await writer.ok(
        "memory_store",
        {"action": "retype", "edge_id": edge_id, "new_type": "supports", "confirm": True, "preview_token": token},
    )
    done = await rollback(writer, run_id)
    by_id = {row["proposal_id"]: row for row in done.items}
    assert by_id[first["id"]] == {
        "proposal_id": first["id"],
        "kind": "edge",
        "status": "skipped",
        "reason": "the edge changed since it was applied",
    }
    assert by_id[second["id"]]["status"] == "reverted"
    assert done.meta["counts"] == {
        "reverted": 1,
        "skipped": 1,
        "refused": 0,
        "total": 2,
        "returned": 2,
        "filtered_out": 0,
    }
    [(_, _, _, kind)] = await pair_edges(writer, first["source_id"], first["target_id"])
    assert kind == "supports"  # the changed edge is left alone
    assert await pair_edges(writer, second["source_id"], second["target_id"]) == []
    assert await status_of(writer, first["id"]) == "accepted"


async def test_rollback_refuses_merges_and_never_deletes_a_thought(writer: ToolCaller) -> None:
    await queue_project(writer)
    twin = await thought(writer, TWIN)
    subject = await thought(writer, SUBJECT)
    await writer.ok("edge_review", {"action": "enqueue", "thought_id": subject["id"]})
    [(lifecycle_id,)] = await rows(writer, "SELECT id::text FROM placement_proposal WHERE kind = 'lifecycle'")
    applied = await apply(writer, lifecycle_id)
    assert applied["status"] == "accepted"
    assert applied["applied"] == f"merge: {subject['id']} → {twin['id']}"
    assert await rows(writer, "SELECT status::text FROM thought WHERE id = :id", id=subject["id"]) == [("archived",)]
    done = await rollback(writer, applied["run_id"])
    assert done.items == [
        {"proposal_id": lifecycle_id, "kind": "lifecycle", "status": "refused", "reason": "merges are not rolled back"}
    ]
    assert done.meta["counts"] == {
        "reverted": 0,
        "skipped": 0,
        "refused": 1,
        "total": 1,
        "returned": 1,
        "filtered_out": 0,
    }
    assert await rows(writer, "SELECT count(*) FROM thought") == [(2,)]
    assert await status_of(writer, lifecycle_id) == "accepted"


async def test_rollback_of_a_replaces_archive_restores_the_status(writer: ToolCaller) -> None:
    await queue_project(writer)
    old = await thought(writer, "The API gateway uses Redis for rate limiting")
    new = await thought(writer, "The API gateway now uses Redis for rate limiting")
    await writer.ok("edge_review", {"action": "enqueue", "thought_id": new["id"]})
    queued = await rows(
        writer, "SELECT kind, edge_type::text, payload->>'action', id::text FROM placement_proposal ORDER BY kind"
    )
    assert [row[:3] for row in queued] == [("edge", "replaces", None), ("lifecycle", None, "replaces+archive")]
    applied = await apply(writer, queued[1][3])
    assert applied["applied"] == f"replaces+archive: {new['id']} → {old['id']}"
    assert await rows(writer, "SELECT status::text FROM thought WHERE id = :id", id=old["id"]) == [("archived",)]
    done = await rollback(writer, applied["run_id"])
    assert [row["status"] for row in done.items] == ["reverted"]
    assert await rows(writer, "SELECT status::text, archived_at FROM thought WHERE id = :id", id=old["id"]) == [
        ("active", None)
    ]


async def test_rollback_refuses_rows_applied_outside_the_window(writer: ToolCaller) -> None:
    state = await world(writer)
    first, second = state["proposals"]
    run_id = (await apply_batch(writer, [first["id"], second["id"]])).items[0]["run_id"]
    await execute(
        writer, "UPDATE placement_proposal SET applied_at = now() - interval '8 days' WHERE id = :id", id=first["id"]
    )
    done = await rollback(writer, run_id)
    by_id = {row["proposal_id"]: row for row in done.items}
    assert by_id[first["id"]] == {
        "proposal_id": first["id"],
        "kind": "edge",
        "status": "refused",
        "reason": "applied more than 7 days ago",
    }
    assert by_id[second["id"]]["status"] == "reverted"
    assert [row["proposal_id"] for row in done.items] == [second["id"], first["id"]]  # newest first
    assert len(await pair_edges(writer, first["source_id"], first["target_id"])) == 1
    assert await status_of(writer, first["id"]) == "accepted"


# ---------------------------------------------------------------- reject


async def test_reject_is_a_one_way_step_for_pending_rows(writer: ToolCaller) -> None:
    state = await world(writer)
    proposal = state["proposals"][0]
    rejected = await writer.ok("edge_review", {"action": "reject", "proposal_id": proposal["id"]})
    assert rejected.item == {"proposal_id": proposal["id"], "status": "rejected", "changed": True}
    assert rejected.meta["counts"] == {"total": 1, "returned": 1, "filtered_out": 0}
    again = await writer.ok("edge_review", {"action": "reject", "proposal_id": proposal["id"]})
    assert again.item == {"proposal_id": proposal["id"], "status": "rejected", "changed": False}
    applied = await apply(writer, proposal["id"])
    assert applied == {"proposal_id": proposal["id"], "status": "refused", "reason": "proposal is rejected"}
    missing = str(uuid.uuid4())
    gone = await writer("edge_review", {"action": "reject", "proposal_id": missing})
    assert gone.error["statusCode"] == 404
    # a rejected row no longer blocks a fresh proposal for the same edge
    fresh = await writer.ok("edge_review", {"action": "enqueue", "thought_id": state["subject"]["id"]})
    assert fresh.meta["counts"] == {"proposals": 1, "skipped": 1, "total": 1, "returned": 1, "filtered_out": 0}


async def test_a_database_error_fails_the_whole_apply_batch_instead_of_reporting_rows_it_rolled_back(
    writer: ToolCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database error (a deadlock, say) aborts the transaction: the call must fail, not answer the rows
    applied before it as accepted while its commit silently rolls them back."""
    state = await world(writer)
    first, second = state["proposals"]
    apply_one = ProposalService.apply

    async def broken_second(self: ProposalService, proposal_id: uuid.UUID, run_id: uuid.UUID) -> Any:
        if str(proposal_id) == second["id"]:
            await self.session.execute(
                text("SELECT 1 / 0").execution_options(**UNSCOPED)
            )  # any database error aborts the transaction
        return await apply_one(self, proposal_id, run_id)

    monkeypatch.setattr(ProposalService, "apply", broken_second)
    ids = [first["id"], second["id"]]
    token = (await writer.ok("edge_review", {"action": "apply_batch", "proposal_ids": ids})).meta["preview"]["token"]
    before = await snapshot(writer.context)
    answer = await writer(
        "edge_review", {"action": "apply_batch", "proposal_ids": ids, "confirm": True, "preview_token": token}
    )
    assert answer.is_error and answer.error["statusCode"] == 400, answer.text
    assert await status_of(writer, first["id"]) == "pending"
    assert await snapshot(writer.context) == before


async def test_rollback_holds_the_edge_it_reverts_against_a_concurrent_unlink(
    writer: ToolCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rollback locks the edge when it reads it: an unlink in between waits for the commit instead of
    deleting the edge the rollback then reports as reverted."""
    state = await world(writer)
    first = state["proposals"][0]
    run_id = (await apply_batch(writer, [first["id"]])).items[0]["run_id"]
    [(edge_id, *_)] = await pair_edges(writer, first["source_id"], first["target_id"])
    token = (await writer.ok("edge_review", {"action": "rollback", "run_id": run_id})).meta["preview"]["token"]
    outcomes: list[str] = []
    get_edge = EdgeService.get

    async def then_unlink(self: EdgeService, *args: Any, **kwargs: Any) -> Any:
        edge = await get_edge(self, *args, **kwargs)
        blocked = await blocked_by_a_lock(writer.context, "DELETE FROM edge WHERE id = :id", id=uuid.UUID(edge_id))
        outcomes.append("waited" if blocked else "deleted")
        return edge

    monkeypatch.setattr(EdgeService, "get", then_unlink)
    done = await writer.ok(
        "edge_review", {"action": "rollback", "run_id": run_id, "confirm": True, "preview_token": token}
    )
    assert outcomes == ["waited"]
    assert [row["status"] for row in done.items] == ["reverted"]
    assert await pair_edges(writer, first["source_id"], first["target_id"]) == []
