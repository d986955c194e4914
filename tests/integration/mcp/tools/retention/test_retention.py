"""retention_review: the contract's candidate rule, protect, delete (token-gated) and compact (tokenless)."""

from __future__ import annotations

import uuid

from app.ids import new_id
from tests.conftest import settings_with
from tests.support.contract import FULL_THOUGHT_KEYS
from tests.support.helpers import ToolCaller, execute, rows, snapshot


async def project(caller: ToolCaller, name: str) -> str:
    answer = await caller.ok("memory_manage", {"action": "create", "name": name, "local_path": f"/srv/{name.lower()}"})
    return str(answer.item["id"])


async def make(
    caller: ToolCaller,
    project_id: str,
    content: str,
    *,
    status: str = "draft",
    days: int = 40,
    archived_days: int | None = None,
    importance: float = 0.1,
    protected: bool = False,
    is_global: bool = False,
    surface_days: int | None = None,
) -> str:
    """A thought written by SQL so every retention signal can be set exactly."""
    thought_id = str(new_id())
    await execute(
        caller,
        "INSERT INTO thought (id, project_id, content, status, importance, is_protected, is_global, created_at, "
        "archived_at, surface_after) VALUES (:id, :project, :content, CAST(:status AS thought_status), :importance, "
        ":protected, :is_global, now() - make_interval(days => :days), "
        "now() - make_interval(days => CAST(:archived AS integer)), "
        "now() + make_interval(days => CAST(:surface AS integer)))",
        id=thought_id,
        project=project_id,
        content=content,
        status=status,
        importance=importance,
        protected=protected,
        is_global=is_global,
        days=days,
        archived=archived_days,
        surface=surface_days,
    )
    return thought_id


async def edge(caller: ToolCaller, source: str, target: str, kind: str = "related") -> str:
    edge_id = str(new_id())
    await execute(
        caller,
        "INSERT INTO edge (id, project_id, source_id, target_id, type) "
        "SELECT :id, project_id, :source, :target, CAST(:kind AS edge_type) FROM thought WHERE id = :source",
        id=edge_id,
        source=source,
        target=target,
        kind=kind,
    )
    return edge_id


async def candidate_world(caller: ToolCaller) -> dict[str, str]:
    """One candidate per kind of anchor, and for every signal a thought that fails that signal alone."""
    keep = await project(caller, "Keep")
    other = await project(caller, "Other")
    ids = {
        "draft": await make(caller, keep, "old unimportant draft", days=60),
        "archived": await make(caller, other, "archived long ago", status="archived", days=90, archived_days=45),
        "zero_hits": await make(caller, keep, "a draft with a zero hit row", days=50),
        "from_draft": await make(caller, keep, "only a draft points at it", days=40),
        "outgoing": await make(caller, keep, "points at an active thought itself", days=35),
        "due": await make(caller, keep, "its surface time has passed", days=33, surface_days=-1),
        # each of these fails exactly one signal
        "active": await make(caller, keep, "an active thought", status="active", days=70),
        "young": await make(caller, keep, "a young draft", days=10),
        "recently_archived": await make(caller, keep, "archived lately", status="archived", days=90, archived_days=5),
        "important": await make(caller, keep, "an important draft", days=70, importance=0.5),
        "at_floor": await make(caller, keep, "importance exactly at the floor", days=70, importance=0.3),
        "hit": await make(caller, keep, "a recalled draft", days=70),
        "from_active": await make(caller, keep, "an active thought points at it", days=70),
        "protected": await make(caller, keep, "a protected draft", days=70, protected=True),
        "sleeping": await make(caller, keep, "surfaces next week", days=70, surface_days=7),
        "global": await make(caller, keep, "a global draft", days=70, is_global=True),
    }
    live = await make(caller, keep, "a live active thought", status="active", days=1, importance=1.0)
    pointer = await make(caller, keep, "a draft pointer", days=1, importance=1.0)
    ids["live"], ids["pointer"] = live, pointer
    await edge(caller, live, ids["from_active"])
    await edge(caller, pointer, ids["from_draft"])
    await edge(caller, ids["outgoing"], live)
    for thought_id, hits in ((ids["hit"], 1), (ids["zero_hits"], 0)):
        await execute(
            caller,
            "INSERT INTO thought_hit (thought_id, project_id, hit_count) SELECT id, project_id, :hits "
            "FROM thought WHERE id = :id",
            id=thought_id,
            hits=hits,
        )
    return ids


TOUCHING = (
    "SELECT {columns} FROM edge WHERE source_id = ANY(CAST(:ids AS uuid[])) OR target_id = ANY(CAST(:ids AS uuid[]))"
)
CANDIDATES = ["draft", "zero_hits", "archived", "from_draft", "outgoing", "due"]  # oldest anchor first


async def test_list_applies_every_signal_of_the_candidate_rule(reader: ToolCaller, writer: ToolCaller) -> None:
    ids = await candidate_world(writer)
    before = await snapshot(writer.context)
    answer = await reader.ok("retention_review", {"action": "list"})
    assert [item["id"] for item in answer.items] == [ids[name] for name in CANDIDATES]
    assert all(set(item) == FULL_THOUGHT_KEYS | {"project_name"} for item in answer.items)
    archived = answer.items[2]
    assert (archived["project"], archived["project_name"], archived["status"]) == ("Other", "Other", "archived")
    assert answer.meta == {
        "action": "list",
        "scope": None,
        "counts": {"limit": 20, "offset": 0, "total": 6, "returned": 6, "filtered_out": 0},
        "degraded": False,
        "warnings": [],
    }
    assert await snapshot(writer.context) == before  # list never writes (not even hits)


async def test_list_filters_page_and_cut_content(reader: ToolCaller, writer: ToolCaller) -> None:
    ids = await candidate_world(writer)
    wider = await reader.ok("retention_review", {"action": "list", "importance_floor": 0.6})
    assert {ids["important"], ids["at_floor"]} <= {item["id"] for item in wider.items}
    assert wider.meta["counts"]["total"] == 8
    older = await reader.ok("retention_review", {"action": "list", "min_age_days": 44.5})
    assert [item["id"] for item in older.items] == [ids["draft"], ids["zero_hits"], ids["archived"]]
    younger = await reader.ok("retention_review", {"action": "list", "min_age_days": 7})
    assert ids["young"] in {item["id"] for item in younger.items}
    assert ids["recently_archived"] not in {item["id"] for item in younger.items}
    page = await reader.ok("retention_review", {"action": "list", "limit": 2, "offset": 2})
    assert [item["id"] for item in page.items] == [ids["archived"], ids["from_draft"]]
    assert page.meta["counts"] == {"limit": 2, "offset": 2, "total": 6, "returned": 2, "filtered_out": 4}

    compact = await reader.ok("retention_review", {"action": "list", "compact": True, "limit": 1})
    assert set(compact.items[0]) == {"id", "content", "status", "tags", "project", "project_id", "project_name"}
    fields = await reader.ok("retention_review", {"action": "list", "fields": ["id", "content"], "limit": 1})
    assert set(fields.items[0]) == {"id", "content"}

    keep = (await rows(writer, "SELECT id::text FROM project WHERE name = 'Keep'"))[0][0]
    long = await make(writer, keep, "L" * 150 + " " + "M" * 300, days=100)
    first = (await reader.ok("retention_review", {"action": "list", "limit": 1})).items[0]
    assert first["id"] == long and first["content"] == ("L" * 150 + " " + "M" * 300)[:200]

    for arguments, name in (
        ({"min_age_days": 0}, "min_age_days"),
        ({"importance_floor": 1.5}, "importance_floor"),
        ({"limit": 101}, "limit"),
        ({"offset": -1}, "offset"),
    ):
        refused = await reader("retention_review", {"action": "list", **arguments})
        assert refused.error["statusCode"] == 400
        assert refused.text.startswith(f"Invalid argument '{name}' for retention_review action=list")


async def test_list_defaults_come_from_the_settings(writer: ToolCaller) -> None:
    ids = await candidate_world(writer)
    review = {"min_age_days": 8, "importance_floor": 0.55, "page_size": 3}
    tuned = writer.with_settings(settings_with(retention_review=review))
    answer = await tuned.ok("retention_review", {"action": "list"})
    assert answer.meta["counts"] == {"limit": 3, "offset": 0, "total": 9, "returned": 3, "filtered_out": 6}
    every = await tuned.ok("retention_review", {"action": "list", "limit": 100})
    found = {item["id"] for item in every.items}
    assert {ids["young"], ids["important"], ids["at_floor"]} <= found
    assert ids["recently_archived"] not in found


# ---------------------------------------------------------------- protect


async def test_protect_and_unprotect(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await candidate_world(writer)
    answer = await writer.ok("retention_review", {"action": "protect", "thought_id": ids["draft"]})
    assert answer.item == {"thought_id": ids["draft"], "is_protected": True, "status": "draft"}
    assert answer.meta["counts"] == {"total": 1, "returned": 1, "filtered_out": 0}
    listed = await reader.ok("retention_review", {"action": "list"})
    assert ids["draft"] not in {item["id"] for item in listed.items}
    again = await writer.ok("retention_review", {"action": "protect", "thought_id": ids["draft"]})
    assert again.item["is_protected"] is True
    back = await writer.ok("retention_review", {"action": "protect", "thought_id": ids["draft"], "protected": False})
    assert back.item == {"thought_id": ids["draft"], "is_protected": False, "status": "draft"}
    listed = await reader.ok("retention_review", {"action": "list"})
    assert ids["draft"] in {item["id"] for item in listed.items}

    missing = str(uuid.uuid4())
    before = await snapshot(writer.context)
    gone = await writer("retention_review", {"action": "protect", "thought_id": missing})
    assert gone.error == {"message": f"Thought {missing} not found", "statusCode": 404, "retryable": False}
    forbidden = await reader("retention_review", {"action": "protect", "thought_id": ids["draft"]})
    assert (
        forbidden.text == "Forbidden: retention_review action=protect needs the writer role; user 'reader' is a reader"
    )
    assert await snapshot(writer.context) == before


# ---------------------------------------------------------------- delete


async def test_delete_previews_dependents_then_hard_deletes_with_the_token(writer: ToolCaller) -> None:
    ids = await candidate_world(writer)
    target = ids["outgoing"]
    before = await snapshot(writer.context)
    preview = await writer.ok("retention_review", {"action": "delete", "thought_id": target})
    assert await snapshot(writer.context) == {**before, "preview_token": before["preview_token"] + 1}
    token = preview.item["preview_token"]
    [outgoing] = await rows(writer, "SELECT id::text FROM edge WHERE source_id = :id", id=target)
    instruction = (
        f"Call retention_review again with action=delete, thought_id={target}, confirm=true, "
        f"preview_token={token} to hard-delete it and its 1 edge(s)."
    )
    assert preview.item == {
        "status": "preview",
        "action": "preview",
        "deleted": False,
        "preview": True,
        "confirm": False,
        "thought_id": target,
        "dependents": [{"edge_id": outgoing[0], "thought_id": ids["live"], "type": "related", "direction": "outgoing"}],
        "instruction": instruction,
        "preview_token": token,
    }
    assert preview.meta["preview"] == {"token": token, "destructive": True, "consequence": instruction}

    refused = await writer("retention_review", {"action": "delete", "thought_id": target, "confirm": True})
    assert refused.error["statusCode"] == 400 and refused.text.startswith("preview_token is required")
    done = await writer.ok(
        "retention_review", {"action": "delete", "thought_id": target, "confirm": True, "preview_token": token}
    )
    assert done.item == {
        "status": "deleted",
        "action": "deleted",
        "deleted": True,
        "preview": False,
        "confirm": True,
        "thought_id": target,
        "edges_removed": 1,
    }
    assert "preview" not in done.meta
    assert await rows(writer, "SELECT count(*) FROM thought WHERE id = :id", id=target) == [(0,)]
    assert await rows(writer, "SELECT count(*) FROM edge WHERE id = :id", id=outgoing[0]) == [(0,)]
    assert await rows(writer, "SELECT count(*) FROM thought WHERE id = :id", id=ids["live"]) == [(1,)]
    assert await rows(
        writer, "SELECT target_ids FROM audit_event WHERE tool = 'retention_review' AND action = 'delete'"
    ) == [([target],)]


async def test_delete_lists_incoming_dependents_and_answers_not_found(writer: ToolCaller) -> None:
    ids = await candidate_world(writer)
    preview = await writer.ok("retention_review", {"action": "delete", "thought_id": ids["from_draft"]})
    assert [(d["thought_id"], d["direction"]) for d in preview.item["dependents"]] == [(ids["pointer"], "incoming")]
    missing = str(uuid.uuid4())
    before = await snapshot(writer.context)
    gone = await writer.ok("retention_review", {"action": "delete", "thought_id": missing})
    assert gone.item == {"status": "not_found", "thought_id": missing}
    assert "preview" not in gone.meta
    assert await snapshot(writer.context) == before


async def test_delete_refuses_protected_and_active_thoughts(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await candidate_world(writer)
    cases = [
        (
            ids["protected"],
            f"Thought {ids['protected']} is protected; unprotect it with retention_review action=protect, "
            "protected=false",
        ),
        (ids["active"], f"Thought {ids['active']} is active; only draft or archived thoughts can be deleted"),
    ]
    for thought_id, message in cases:
        token = (await writer.ok("retention_review", {"action": "delete", "thought_id": thought_id})).item[
            "preview_token"
        ]
        before = await snapshot(writer.context)
        answer = await writer(
            "retention_review", {"action": "delete", "thought_id": thought_id, "confirm": True, "preview_token": token}
        )
        assert answer.error == {"message": message, "statusCode": 409, "retryable": False}
        assert await snapshot(writer.context) == before
        assert await rows(writer, "SELECT count(*) FROM thought WHERE id = :id", id=thought_id) == [(1,)]
    before = await snapshot(writer.context)
    forbidden = await reader("retention_review", {"action": "delete", "thought_id": ids["draft"]})
    assert forbidden.error["statusCode"] == 403
    assert await snapshot(writer.context) == before


# ---------------------------------------------------------------- compact


async def test_compact_previews_without_a_token_and_writes_nothing(writer: ToolCaller) -> None:
    ids = await candidate_world(writer)
    sources = [ids["draft"], ids["archived"]]
    before = await snapshot(writer.context)
    arguments = {"action": "compact", "source_ids": sources, "summary": {"content": "What the old notes said"}}
    preview = await writer.ok("retention_review", arguments)
    instruction = (
        "Call retention_review again with action=compact, the same source_ids and summary, confirm=true to proceed."
    )
    assert preview.item == {
        "status": "preview",
        "preview": True,
        "confirm": False,
        "source_ids": sources,
        "instruction": instruction,
    }
    assert preview.meta == {
        "action": "compact",
        "scope": None,
        "counts": {"sources": 2, "total": 1, "returned": 1, "filtered_out": 0},
        "degraded": False,
        "warnings": [],
        "preview": {"token": None, "destructive": True, "instruction": instruction},
    }
    assert await snapshot(writer.context) == before


async def test_compact_merges_sources_into_a_protected_active_summary(writer: ToolCaller) -> None:
    ids = await candidate_world(writer)
    keep = (await rows(writer, "SELECT id::text FROM project WHERE name = 'Keep'"))[0][0]
    sources = [ids["outgoing"], ids["from_draft"], ids["archived"]]
    external = await rows(
        writer,
        TOUCHING.format(columns="id::text"),
        ids=sources,
    )
    assert len(external) == 2  # outgoing → live, pointer → from_draft
    answer = await writer.ok(
        "retention_review",
        {
            "action": "compact",
            "source_ids": [*sources, ids["outgoing"]],
            "summary": {"content": "Summary of three old notes", "tags": ["summary", "Summary"], "project_id": keep},
            "confirm": True,
        },
    )
    summary = answer.item["summary"]
    assert answer.item == {
        "status": "compacted",
        "preview": False,
        "confirm": True,
        "source_ids": [*sources, ids["outgoing"]],
        "summary": summary,
    }
    assert set(summary) == FULL_THOUGHT_KEYS
    assert (summary["content"], summary["status"], summary["is_protected"], summary["tags"], summary["project"]) == (
        "Summary of three old notes",
        "active",
        True,
        ["summary"],
        "Keep",
    )
    assert "preview" not in answer.meta
    assert answer.meta["counts"] == {"sources": 3, "total": 1, "returned": 1, "filtered_out": 0}
    # sources are archived (never hard-deleted) and each is replaced by the summary
    states = await rows(
        writer,
        "SELECT id::text, status::text, archived_at IS NOT NULL FROM thought WHERE id = ANY(CAST(:ids AS uuid[]))",
        ids=sources,
    )
    assert sorted(states) == sorted((source, "archived", True) for source in sources)
    replaces = await rows(
        writer, "SELECT target_id::text FROM edge WHERE source_id = :id AND type = 'replaces'", id=summary["id"]
    )
    assert sorted(row[0] for row in replaces) == sorted(sources)
    # their other edges now end on the summary
    moved = await rows(
        writer,
        "SELECT source_id::text, target_id::text, type::text FROM edge WHERE type <> 'replaces' "
        "AND (source_id = :s OR target_id = :s)",
        s=summary["id"],
    )
    assert sorted(moved) == sorted(
        [(summary["id"], ids["live"], "related"), (ids["pointer"], summary["id"], "related")]
    )
    assert await rows(
        writer,
        TOUCHING.format(columns="count(*)"),
        ids=sources,
    ) == [(3,)]  # only the three `replaces` edges still touch the sources


async def test_compact_refusals_write_nothing(writer: ToolCaller, reader: ToolCaller) -> None:
    ids = await candidate_world(writer)
    missing = str(uuid.uuid4())
    before = await snapshot(writer.context)
    gone = await writer(
        "retention_review",
        {"action": "compact", "source_ids": [ids["draft"], missing], "summary": {"content": "s"}, "confirm": True},
    )
    assert gone.error == {"message": f"Thought {missing} not found (source_ids)", "statusCode": 404, "retryable": False}
    nowhere = await writer(
        "retention_review",
        {
            "action": "compact",
            "source_ids": [ids["draft"]],
            "summary": {"content": "s", "project_id": missing},
            "confirm": True,
        },
    )
    assert nowhere.error == {
        "message": f"Project {missing} not found (summary.project_id)",
        "statusCode": 404,
        "retryable": False,
    }
    empty = await writer("retention_review", {"action": "compact", "source_ids": [], "summary": {"content": "s"}})
    assert empty.error["statusCode"] == 400 and "'source_ids'" in empty.text
    blank = await writer(
        "retention_review", {"action": "compact", "source_ids": [ids["draft"]], "summary": {"content": "  "}}
    )
    assert blank.text == "Invalid 'summary.content': content must not be empty"
    forbidden = await reader(
        "retention_review", {"action": "compact", "source_ids": [ids["draft"]], "summary": {"content": "s"}}
    )
    assert forbidden.error["statusCode"] == 403
    assert await snapshot(writer.context) == before
