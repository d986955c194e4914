"""app/db/repositories/thoughts.py: every write of a thought's content writes its facts (migration 0024: `lexemes`,
`content_md5`) with it, whichever tool or command wrote it, so the health report finds no row to correct."""

from __future__ import annotations

from typing import Any

from app.db.models import CONTENT_FACTS_STALE
from app.services.admin.portability import Portability
from app.services.context import AppContext
from tests.support.helpers import ToolCaller, execute, rows
from tests.support.search import bulk, create, register

# Every row with its stored facts beside what its content says (the index's predicate, spelled out).
FACTS = (
    "SELECT content, lexemes, length(tsv) AS counted, content_md5, md5(content)::uuid AS hashed FROM thought "
    "ORDER BY content"
)


async def _stale(caller: ToolCaller) -> list[tuple[Any, ...]]:
    return await rows(caller, f"SELECT content, lexemes, content_md5 FROM thought WHERE {CONTENT_FACTS_STALE}")


async def _confirmed(caller: ToolCaller, tool: str, arguments: dict[str, Any]) -> Any:
    preview = await caller.ok(tool, arguments)
    token = preview.meta["preview"]["token"]  # None: the action confirms without one (compact)
    return await caller.ok(tool, {**arguments, "confirm": True, **({"preview_token": token} if token else {})})


async def test_every_write_of_a_content_writes_its_facts(writer: ToolCaller, app_context: AppContext) -> None:
    await register(writer, "facts", "/srv/facts")
    cwd = {"cwd": "/srv/facts"}
    first = await create(writer, "Cats chase cats across the yard", **cwd)
    ids = await bulk(writer, ["Deploys run on Fridays", "Deploys run on Mondays", "ab", "日本語のメモ"], "/srv/facts")
    await writer.ok("memory_store", {"action": "update", "thought_id": first["id"], "content": "Dogs bark at night"})
    await writer.ok("memory_store", {"action": "update", "thought_id": ids[3], "tags": ["i18n"]})  # content kept
    merge = {"action": "merge", "source_id": ids[0], "target_id": ids[1], "merged_content": "Deploys run on weekdays"}
    await _confirmed(writer, "memory_supersede", merge)
    await writer.ok(
        "memory_crystallize", {"action": "cluster", "thought_ids": ids[1:3], "title": "Deploy notes", **cwd}
    )
    summary = {"content": "What the deploy notes said"}
    await _confirmed(writer, "retention_review", {"action": "compact", "source_ids": [ids[2]], "summary": summary})
    await writer.ok("memory_reflect", {"action": "reflect", "decisions": ["Ship on Tuesdays"], **cwd})
    facts = await rows(writer, FACTS)
    assert {"Dogs bark at night", "Deploys run on weekdays", "What the deploy notes said", "Ship on Tuesdays"} <= {
        row[0] for row in facts
    }
    assert len(facts) == 8  # the five created, the cluster, the summary, the decision
    assert all(lexemes == counted and md5 == hashed for _, lexemes, counted, md5, hashed in facts), facts
    assert await _stale(writer) == []

    # An import writes them too: the same rows again, after their deletion.
    async with app_context.db.unit_of_work() as session:
        lines = [line async for line in Portability(session).export(None)]
    await execute(writer, "DELETE FROM thought")
    async with app_context.db.unit_of_work() as session:
        imported = await Portability(session).import_lines(lines)
    assert imported["thought"] == len(facts)
    assert await rows(writer, FACTS) == facts
    assert await _stale(writer) == []


async def test_a_content_written_around_the_repository_is_found_stale(writer: ToolCaller) -> None:
    """SQL by hand (or a replica of the previous release) leaves the facts missing or stale: the partial index
    ix_thought_content_facts_stale holds such a row until the content is written through the repository again."""
    await register(writer, "facts", "/srv/facts")
    thought = await create(writer, "Cats chase cats", cwd="/srv/facts")
    await execute(
        writer,
        "UPDATE thought SET content = 'Cats chase mice and birds' WHERE id = CAST(:id AS uuid)",
        id=thought["id"],
    )
    stale = await _stale(writer)
    assert [row[0] for row in stale] == ["Cats chase mice and birds"] and stale[0][1] == 2  # the old content's
    await writer.ok("memory_store", {"action": "update", "thought_id": thought["id"], "content": "Cats chase mice"})
    assert await _stale(writer) == []
