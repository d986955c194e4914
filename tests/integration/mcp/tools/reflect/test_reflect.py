"""memory_reflect: reflect (slots and thoughts, the cwd-less split) and timeline."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.services.status.slots import SlotService
from tests.conftest import settings_with
from tests.support.contract import COMPACT_THOUGHT_KEYS
from tests.support.helpers import ToolCaller, execute, rows, snapshot

NO_CWD = "no cwd — the answer spans every project"
LINE = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2})\] (.*)$")
NOTHING = (
    "memory_reflect action=reflect has nothing to record: pass summary, goals_add, goals_remove, decisions or pending"
)
ZERO = {"summary_appended": False, "goals_added": 0, "goals_removed": 0, "decisions_created": 0, "pending_created": 0}


async def project(caller: ToolCaller, name: str) -> dict[str, Any]:
    answer = await caller.ok("memory_manage", {"action": "create", "name": name, "local_path": f"/srv/{name.lower()}"})
    return dict(answer.item)


async def reflect(caller: ToolCaller, **arguments: Any) -> Any:
    return await caller.ok("memory_reflect", {"action": "reflect", **arguments})


async def slot(caller: ToolCaller, name: str, project_id: str | None) -> str | None:
    found = await rows(
        caller,
        "SELECT content FROM slot WHERE name = :name AND project_id IS NOT DISTINCT FROM CAST(:project AS uuid)",
        name=name,
        project=project_id,
    )
    return str(found[0][0]) if found else None


async def tagged(caller: ToolCaller, tag: str) -> list[tuple[Any, ...]]:
    return await rows(
        caller,
        "SELECT t.content, t.status::text, t.tags, p.name, t.surface_after FROM thought t "
        "JOIN project p ON p.id = t.project_id WHERE :tag = ANY(t.tags) ORDER BY t.id",
        tag=tag,
    )


# ---------------------------------------------------------------- summary and goals


async def test_summary_appends_a_timestamped_line_to_project_context(writer: ToolCaller) -> None:
    notes = await project(writer, "Notes")
    started = datetime.now(UTC).replace(second=0, microsecond=0)
    answer = await reflect(writer, summary="  Shipped the importer  ", cwd="/srv/notes/src")
    assert answer.item == {**ZERO, "summary_appended": True}
    assert answer.meta == {
        "action": "reflect",
        "scope": {"project": notes["id"], "project_name": "Notes", "global": False},
        "counts": {"total": 1, "returned": 1, "filtered_out": 0},
        "degraded": False,
        "warnings": [],
    }
    await reflect(writer, summary="Fixed the exporter", cwd="/srv/notes")
    content = await slot(writer, "project_context", notes["id"])
    assert content is not None
    lines = content.split("\n")
    assert [LINE.match(line).group(2) for line in lines] == ["Shipped the importer", "Fixed the exporter"]  # type: ignore[union-attr]
    for line in lines:
        stamp = datetime.strptime(LINE.match(line).group(1), "%Y-%m-%d %H:%M").replace(tzinfo=UTC)  # type: ignore[union-attr]
        assert started <= stamp <= datetime.now(UTC)
    assert await slot(writer, "project_context", None) is None  # the global row is untouched
    slots = await writer.ok("memory_status", {"action": "slots", "cwd": "/srv/notes"})
    assert slots.items[2]["content"] == content and slots.items[2]["scope"] == "project"


async def test_summary_keeps_the_newest_text_when_cut(writer: ToolCaller) -> None:
    small = writer.with_settings(settings_with(slots={"default_max_chars": 120}))
    await project(writer, "Notes")
    for n in range(6):
        await reflect(small, summary=f"session number {n} went fine", cwd="/srv/notes")
    [(content,)] = await rows(writer, "SELECT content FROM slot WHERE name = 'project_context'")
    assert len(content) == 120
    assert content.endswith("] session number 5 went fine")
    assert "session number 0" not in content


async def test_goals_add_unless_identical_and_remove_by_substring(writer: ToolCaller) -> None:
    notes = await project(writer, "Notes")
    first = await reflect(writer, goals_add=["Ship v2", "Write the docs", "ship V2"], cwd="/srv/notes")
    assert first.item == {**ZERO, "goals_added": 2}
    second = await reflect(writer, goals_add=["SHIP V2", "Fix CI "], cwd="/srv/notes")
    assert second.item == {**ZERO, "goals_added": 1}
    assert await slot(writer, "active_goals", notes["id"]) == "Ship v2\nWrite the docs\nFix CI"
    removed = await reflect(writer, goals_remove=["DOCS", "nothing matches"], goals_add=["Docs v3"], cwd="/srv/notes")
    assert removed.item == {**ZERO, "goals_added": 1, "goals_removed": 1}
    assert await slot(writer, "active_goals", notes["id"]) == "Ship v2\nFix CI\nDocs v3"
    both = await reflect(writer, goals_remove=["v"], cwd="/srv/notes")
    assert both.item == {**ZERO, "goals_removed": 2}
    assert await slot(writer, "active_goals", notes["id"]) == "Fix CI"


# ---------------------------------------------------------------- decisions and pending


async def test_decisions_are_active_tagged_and_deduplicated(writer: ToolCaller) -> None:
    await project(writer, "Notes")
    await project(writer, "Other")
    cwd = "/srv/notes"
    first = await reflect(
        writer,
        decisions=[
            "We store every vector in PostgreSQL with pgvector",
            "We store every vector in PostgreSQL with pgvector too",  # Jaccard 8/9 with the one before
            "API tokens are hashed with SHA-256",
        ],
        cwd=cwd,
    )
    assert first.item == {**ZERO, "decisions_created": 2}
    assert [(c, s, t, p) for c, s, t, p, _ in await tagged(writer, "decision")] == [
        ("We store every vector in PostgreSQL with pgvector", "active", ["decision", "reflect"], "Notes"),
        ("API tokens are hashed with SHA-256", "active", ["decision", "reflect"], "Notes"),
    ]
    # a hand-made decision counts too; an archived one and one in another project do not
    await writer.ok(
        "memory_store",
        {"action": "create", "content": "Releases are cut every second Tuesday", "tags": ["decision"], "cwd": cwd},
    )
    archived = await writer.ok(
        "memory_store",
        {"action": "create", "content": "Logs are kept for ninety days", "tags": ["decision"], "cwd": cwd},
    )
    await execute(
        writer,
        "UPDATE thought SET status = 'archived', archived_at = now() WHERE id = :id",
        id=archived.item["id"],
    )
    await writer.ok(
        "memory_store",
        {"action": "create", "content": "Metrics are scraped every minute", "tags": ["decision"], "cwd": "/srv/other"},
    )
    await writer.ok("memory_store", {"action": "create", "content": "Backups run at midnight", "cwd": cwd})
    second = await reflect(
        writer,
        decisions=[
            "we store every vector in postgresql, with pgvector!",  # normalised: the same words
            "Releases are cut every second Tuesday afternoon",  # Jaccard 6/7 with the hand-made one
            "Logs are kept for ninety days",  # only an archived decision says so
            "Metrics are scraped every minute",  # a decision of another project
            "Backups run at midnight",  # an exact live duplicate (any tag)
        ],
        cwd=cwd,
    )
    assert second.item == {**ZERO, "decisions_created": 2}
    created = [c for c, _, t, p, _ in await tagged(writer, "reflect") if p == "Notes" and "decision" in t]
    assert created[-2:] == ["Logs are kept for ninety days", "Metrics are scraped every minute"]
    assert await rows(writer, "SELECT count(*) FROM thought WHERE content = 'Backups run at midnight'") == [(1,)]


async def test_pending_drafts_surface_after_wake_days(writer: ToolCaller) -> None:
    notes = await project(writer, "Notes")
    cwd = "/srv/notes"
    before = datetime.now(UTC)
    answer = await reflect(writer, pending=["Ask ops about the quota", "  "], wake_days=3, cwd=cwd)
    assert answer.item == {**ZERO, "pending_created": 1}
    [(content, status, tags, name, surface_after)] = await tagged(writer, "pending")
    assert (content, status, tags, name) == ("Ask ops about the quota", "draft", ["pending", "reflect"], "Notes")
    assert before + timedelta(days=3) <= surface_after <= datetime.now(UTC) + timedelta(days=3)

    frontier = await writer.ok("memory_status", {"action": "frontier", "cwd": cwd})
    assert frontier.items == []
    slots = await writer.ok("memory_status", {"action": "slots", "cwd": cwd})
    assert slots.items[0]["content"] == ""

    again = await reflect(writer, pending=["Ask ops about the quota"], wake_days=30, cwd=cwd)
    assert again.item == {**ZERO, "pending_created": 0}
    assert [row[4] for row in await tagged(writer, "pending")] == [surface_after]  # left unchanged

    await execute(writer, "UPDATE thought SET surface_after = now() - interval '1 minute' WHERE 'pending' = ANY(tags)")
    frontier = await writer.ok("memory_status", {"action": "frontier", "cwd": cwd})
    [entry] = frontier.items
    assert (entry["thought"]["content"], entry["reason"]) == ("Ask ops about the quota", "pending")
    slots = await writer.ok("memory_status", {"action": "slots", "cwd": cwd})
    assert slots.items[0]["content"].startswith("- Ask ops about the quota (")
    assert notes["id"]


async def test_reflect_without_cwd_splits_global_slots_and_default_project_thoughts(writer: ToolCaller) -> None:
    await project(writer, "Notes")
    decisions = {None: "Caches are warmed at startup", "/srv/unregistered": "Feature flags live in the database"}
    for cwd in (None, "/srv/unregistered"):
        arguments: dict[str, Any] = {
            "summary": f"A session without a project ({cwd})",
            "goals_add": [f"A global goal ({cwd})"],
            "decisions": [decisions[cwd]],
            "pending": [f"Something to revisit later ({cwd})"],
        }
        if cwd is not None:
            arguments["cwd"] = cwd
        answer = await reflect(writer, **arguments)
        assert answer.item == {
            "summary_appended": True,
            "goals_added": 1,
            "goals_removed": 0,
            "decisions_created": 1,
            "pending_created": 1,
        }
        assert answer.meta["scope"] is None and answer.meta["warnings"] == []
    context = await slot(writer, "project_context", None)
    goals = await slot(writer, "active_goals", None)
    assert context is not None and len(context.split("\n")) == 2
    assert goals == "A global goal (None)\nA global goal (/srv/unregistered)"
    assert await rows(writer, "SELECT count(*) FROM slot WHERE project_id IS NOT NULL") == [(0,)]
    assert {row[3] for row in await tagged(writer, "reflect")} == {"default"}
    assert len(await tagged(writer, "reflect")) == 4


async def test_a_rewritten_slot_is_stamped_anew(writer: ToolCaller) -> None:
    """A slot written again takes the writing transaction's time (the upsert's `excluded.updated_at`, the column's
    default now()), not the first write's."""
    stamp = (
        "SELECT updated_at > now() - interval '1 hour' FROM slot WHERE name = 'project_context' AND project_id IS NULL"
    )
    await reflect(writer, summary="First session")
    # An old stamp first: the check then needs no clock fine enough to tell two transactions apart.
    await execute(writer, "UPDATE slot SET updated_at = '2020-01-01T00:00:00Z'")
    await reflect(writer, summary="Second session")
    assert await rows(writer, stamp) == [(True,)]


async def test_reflect_refusals_write_nothing(writer: ToolCaller, reader: ToolCaller) -> None:
    await project(writer, "Notes")
    before = await snapshot(writer.context)
    for arguments in (
        {},
        {"summary": "   ", "goals_add": [" "], "goals_remove": [""], "decisions": ["  "], "pending": []},
    ):
        answer = await writer("memory_reflect", {"action": "reflect", "cwd": "/srv/notes", **arguments})
        assert answer.error == {"message": NOTHING, "statusCode": 400, "retryable": False}
    delta = await writer("memory_reflect", {"action": "reflect", "goals_delta": ["x"]})
    assert delta.error == {
        "message": "goals_delta was removed; use goals_add / goals_remove",
        "statusCode": 400,
        "retryable": False,
    }
    too_long = await writer("memory_reflect", {"action": "reflect", "decisions": ["ok"], "pending": ["", "x" * 721]})
    assert too_long.error["statusCode"] == 400
    assert too_long.text.startswith("Invalid 'pending[1]': 721 characters is over the 720-character limit")
    for wake_days in (0, 366):
        refused = await writer("memory_reflect", {"action": "reflect", "pending": ["later"], "wake_days": wake_days})
        assert refused.text.startswith("Invalid argument 'wake_days' for memory_reflect action=reflect")
    forbidden = await reader("memory_reflect", {"action": "reflect", "summary": "no"})
    assert forbidden.text == "Forbidden: memory_reflect action=reflect needs the writer role; user 'reader' is a reader"
    assert await snapshot(writer.context) == before


# ---------------------------------------------------------------- timeline


async def test_timeline_pages_thoughts_newest_first(writer: ToolCaller, reader: ToolCaller) -> None:
    notes = await project(writer, "Notes")
    await project(writer, "Other")
    created = [
        (
            await writer.ok("memory_store", {"action": "create", "content": f"Timeline entry {n}", "cwd": "/srv/notes"})
        ).item
        for n in range(5)
    ]
    await writer.ok("memory_store", {"action": "create", "content": "Somewhere else", "cwd": "/srv/other"})
    await execute(
        writer, "UPDATE thought SET status = 'archived', archived_at = now() WHERE id = :id", id=created[0]["id"]
    )
    newest_first = [row["id"] for row in reversed(created)]

    before = await snapshot(writer.context)
    answer = await reader.ok("memory_reflect", {"action": "timeline", "cwd": "/srv/notes"})
    assert await snapshot(writer.context) == before  # a plain list: no hits are counted
    assert [item["id"] for item in answer.items] == newest_first
    assert answer.meta == {
        "action": "timeline",
        "scope": {"project": notes["id"], "project_name": "Notes", "global": False},
        "counts": {"limit": 50, "offset": 0, "total": 5, "returned": 5, "filtered_out": 0},
        "degraded": False,
        "warnings": [],
    }
    page = await reader.ok("memory_reflect", {"action": "timeline", "cwd": "/srv/notes", "limit": 2, "offset": 1})
    assert [item["id"] for item in page.items] == newest_first[1:3]
    assert page.meta["counts"] == {"limit": 2, "offset": 1, "total": 5, "returned": 2, "filtered_out": 3}
    active = await reader.ok("memory_reflect", {"action": "timeline", "cwd": "/srv/notes", "status": "active"})
    assert active.meta["counts"]["total"] == 4
    beyond = await reader.ok("memory_reflect", {"action": "timeline", "cwd": "/srv/notes", "offset": 9})
    assert beyond.items == [] and beyond.meta["counts"] == {
        "limit": 50,
        "offset": 9,
        "total": 5,
        "returned": 0,
        "filtered_out": 5,
    }
    everywhere = await reader.ok("memory_reflect", {"action": "timeline", "compact": True})
    assert everywhere.meta["scope"] is None and everywhere.meta["warnings"] == [NO_CWD]
    assert everywhere.meta["counts"]["total"] == 6
    assert all(set(item) == COMPACT_THOUGHT_KEYS for item in everywhere.items)
    for limit in (0, 501):
        refused = await reader("memory_reflect", {"action": "timeline", "limit": limit})
        assert refused.text.startswith("Invalid argument 'limit' for memory_reflect action=timeline")


async def test_two_first_summaries_at_once_both_land(writer: ToolCaller, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two reflect calls write a project's first summary together (the slot row does not exist yet, so there
    is no row to lock): each read is held open so both overlap, and neither line may be lost."""
    notes = await project(writer, "Notes")
    own_row = SlotService.own_row

    async def slow_read(self: SlotService, *args: Any) -> str:
        content = await own_row(self, *args)
        await asyncio.sleep(0.3)
        return content

    monkeypatch.setattr(SlotService, "own_row", slow_read)
    await asyncio.gather(*(reflect(writer, summary=text, cwd="/srv/notes") for text in ("First", "Second")))
    content = await slot(writer, "project_context", notes["id"])
    assert content is not None
    assert sorted(LINE.match(line).group(2) for line in content.split("\n")) == ["First", "Second"]  # type: ignore[union-attr]
