"""memory_primers through dispatch on a real PostgreSQL: list (most-hit first, capped) and delete (preview →
confirm, the thought untouched, idempotent), token rules, audit, readers."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import text

from app.db.models import Role
from app.db.repositories.thoughts import ThoughtRepository
from app.services.context import AppContext
from app.services.recall.hits import HitService
from tests.conftest import make_user, settings_with
from tests.support.helpers import Answer, ToolCaller, snapshot

TOOL = "memory_primers"
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
HINT = f"call {TOOL} action=delete with the same arguments and no confirm to preview it and get a fresh token"


def meta(action: str, returned: int = 1, total: int | None = None, **extra: Any) -> dict[str, Any]:
    total = returned if total is None else total
    counts = {"total": total, "returned": returned, "filtered_out": total - returned}
    return {"action": action, "scope": None, "counts": counts, "degraded": False, "warnings": [], **extra}


async def rows(context: AppContext, query: str, **params: Any) -> Sequence[Any]:
    async with context.db.unit_of_work() as session:
        return (await session.execute(text(query), params)).all()


async def thoughts(caller: ToolCaller, count: int) -> list[str]:
    contents = [{"content": f"primer test thought {index}: {uuid.uuid4().hex[:6]}"} for index in range(count)]
    answer = await caller.ok("memory_store", {"action": "bulk_create", "thoughts": contents})
    return [row["thought"]["id"] for row in answer.items]


async def recall(caller: ToolCaller, thought_id: str, times: int) -> None:
    for _ in range(times):
        await caller.ok("memory_recall", {"action": "get", "thought_id": thought_id})


async def primers(caller: ToolCaller) -> Answer:
    return await caller.ok(TOOL, {"action": "list"})


async def delete(caller: ToolCaller, primer_id: str, token: str | None = None, confirm: bool = False) -> Answer:
    arguments: dict[str, Any] = {"action": "delete", "primer_id": primer_id}
    if confirm:
        arguments["confirm"] = True
    if token is not None:
        arguments["preview_token"] = token
    return await caller(TOOL, arguments)


async def thought_row(context: AppContext, thought_id: str) -> tuple[Any, ...]:
    [row] = await rows(
        context,
        "SELECT t.content, t.status::text, t.tags, t.importance, t.updated_at, h.hit_count "
        "FROM thought t LEFT JOIN thought_hit h ON h.thought_id = t.id WHERE t.id = :id",
        id=thought_id,
    )
    return tuple(row)


# ---------------------------------------------------------------- list


async def test_an_empty_list(reader: ToolCaller) -> None:
    answer = await primers(reader)
    assert answer.result == {"items": [], "meta": meta("list", 0)}


async def test_five_recalls_promote_and_the_list_is_most_hit_first(writer: ToolCaller, reader: ToolCaller) -> None:
    once, hot, warm, cold = await thoughts(writer, 4)
    await recall(writer, once, 4)
    assert (await primers(reader)).items == []  # four recalls are not enough
    await recall(writer, warm, 5)
    await recall(writer, hot, 7)
    await recall(writer, cold, 1)
    answer = await primers(reader)  # readers may list
    answer.assert_mirrors_text()
    assert [(row["thought_id"], row["hit_count"]) for row in answer.items] == [(hot, 7), (warm, 5)]
    for row in answer.items:
        assert set(row) == {"id", "thought_id", "hit_count", "promoted_at", "created_at"}
        assert TIMESTAMP.match(row["promoted_at"]) and TIMESTAMP.match(row["created_at"])
    assert answer.meta == meta("list", 2)
    stored = await rows(writer.context, "SELECT id::text, thought_id::text FROM primer ORDER BY thought_id")
    assert sorted((row["id"], row["thought_id"]) for row in answer.items) == sorted(tuple(r) for r in stored)
    await recall(writer, warm, 3)  # 8 hits now: overtakes hot
    assert [row["thought_id"] for row in (await primers(reader)).items] == [warm, hot]


async def test_promotion_adds_importance_once(writer: ToolCaller) -> None:
    [thought_id] = await thoughts(writer, 1)
    async with writer.context.db.unit_of_work() as session:
        await session.execute(text("UPDATE thought SET importance = 0.5 WHERE id = :id"), {"id": thought_id})
    await recall(writer, thought_id, 4)
    assert (await thought_row(writer.context, thought_id))[3] == 0.5
    await recall(writer, thought_id, 1)
    assert round((await thought_row(writer.context, thought_id))[3], 6) == 0.65
    await recall(writer, thought_id, 3)
    assert round((await thought_row(writer.context, thought_id))[3], 6) == 0.65
    assert await rows(writer.context, "SELECT count(*) FROM primer") == [(1,)]


async def test_the_list_is_capped(writer: ToolCaller) -> None:
    ids = await thoughts(writer, 3)
    for thought_id, times in zip(ids, (5, 6, 7), strict=True):
        await recall(writer, thought_id, times)
    capped = writer.with_settings(settings_with(primer={"list_cap": 2}))
    answer = await primers(capped)
    assert [row["thought_id"] for row in answer.items] == [ids[2], ids[1]]
    assert answer.meta == meta("list", 2, total=3)  # the cap drops the least-hit one and says so


# ---------------------------------------------------------------- delete


async def promoted(caller: ToolCaller) -> tuple[str, str]:
    [thought_id] = await thoughts(caller, 1)
    await recall(caller, thought_id, 5)
    [primer] = (await primers(caller)).items
    return str(primer["id"]), thought_id


async def test_delete_preview_shape(writer: ToolCaller) -> None:
    primer_id, thought_id = await promoted(writer)
    [primer] = (await primers(writer)).items
    before = await snapshot(writer.context)
    answer = await delete(writer, primer_id)
    answer.assert_mirrors_text()
    token = answer.item["preview_token"]
    consequence = f"Removes primer {primer_id} from the always-at-hand set; thought {thought_id} stays."
    instruction = (
        f"Call memory_primers again with action=delete, primer_id={primer_id}, confirm=true, "
        f"preview_token={token} to proceed."
    )
    assert answer.item == {
        "status": "preview",
        "primer_id": primer_id,
        "primer": primer,
        "consequence": consequence,
        "preview_token": token,
        "instruction": instruction,
    }
    assert answer.meta == meta(
        "delete",
        preview={"token": token, "destructive": True, "consequence": consequence, "instruction": instruction},
    )
    assert await snapshot(writer.context) == {**before, "preview_token": before["preview_token"] + 1}


async def test_delete_preview_of_a_missing_primer_is_not_found_without_a_gate(writer: ToolCaller) -> None:
    ghost = str(uuid.uuid4())
    before = await snapshot(writer.context)
    answer = await delete(writer, ghost)
    assert answer.result == {"item": {"status": "not_found", "primer_id": ghost}, "meta": meta("delete")}
    assert await snapshot(writer.context) == before


async def test_delete_removes_only_the_primer(writer: ToolCaller) -> None:
    primer_id, thought_id = await promoted(writer)
    thought = await thought_row(writer.context, thought_id)
    token = (await delete(writer, primer_id)).item["preview_token"]
    answer = await delete(writer, primer_id, token, confirm=True)
    answer.assert_mirrors_text()
    assert answer.result == {"item": {"status": "deleted", "primer_id": primer_id}, "meta": meta("delete")}
    assert await rows(writer.context, "SELECT count(*) FROM primer") == [(0,)]
    assert await thought_row(writer.context, thought_id) == thought  # content, status, importance, hits untouched
    [(user, tool, action, targets, details)] = await rows(
        writer.context, "SELECT user_id, tool, action, target_ids, details FROM audit_event"
    )
    assert (user, tool, action, targets, details["thought_id"]) == (
        writer.principal.user_id,
        TOOL,
        "delete",
        [primer_id],
        thought_id,
    )
    # more recalls do not promote it again: promotion happens when the count reaches the threshold
    await recall(writer, thought_id, 2)
    assert (await primers(writer)).items == []


async def test_delete_is_idempotent(writer: ToolCaller) -> None:
    primer_id, _ = await promoted(writer)
    first = (await delete(writer, primer_id)).item["preview_token"]
    second = (await delete(writer, primer_id)).item["preview_token"]
    assert (await delete(writer, primer_id, first, confirm=True)).item["status"] == "deleted"
    again = await delete(writer, primer_id, second, confirm=True)
    assert again.result == {"item": {"status": "not_found", "primer_id": primer_id}, "meta": meta("delete")}
    assert await rows(writer.context, "SELECT count(*) FROM audit_event") == [(1,)]


async def test_delete_token_rules(writer: ToolCaller) -> None:
    primer_id, _ = await promoted(writer)
    token = (await delete(writer, primer_id)).item["preview_token"]
    other = ToolCaller(writer.context, await make_user(writer.context, "second-writer", Role.writer))
    ghost = str(uuid.uuid4())
    cases = [
        (writer, primer_id, None, 400, f"preview_token is required with confirm: true — {HINT}"),
        (other, primer_id, token, 400, f"preview_token {token} was issued to another user — {HINT}"),
        (writer, ghost, token, 400, f"preview_token {token} was issued for other arguments — {HINT}"),
    ]
    for caller, target, used_token, status, message in cases:
        before = await snapshot(writer.context)
        answer = await delete(caller, target, used_token, confirm=True)
        assert answer.error == {"message": message, "statusCode": status, "retryable": False}
        assert await snapshot(writer.context) == before
    assert (await delete(writer, primer_id, token, confirm=True)).item["status"] == "deleted"
    replay = await delete(writer, primer_id, token, confirm=True)
    assert replay.error["message"] == f"preview_token {token} was already used — {HINT}"


async def test_readers_are_refused_on_the_delete_preview(writer: ToolCaller, reader: ToolCaller) -> None:
    primer_id, _ = await promoted(writer)
    before = await snapshot(writer.context)
    for confirm in (False, True):
        answer = await delete(reader, primer_id, str(uuid.uuid4()) if confirm else None, confirm=confirm)
        message = "Forbidden: memory_primers action=delete needs the writer role; user 'reader' is a reader"
        assert answer.error == {"message": message, "statusCode": 403, "retryable": False}
    assert await snapshot(writer.context) == before


async def test_counting_hits_relaxes_only_its_own_commit(writer: ToolCaller) -> None:
    """A read call's hit counters commit without waiting for the WAL flush; the next transaction is durable again."""
    [thought_id] = await thoughts(writer, 1)
    async with writer.context.db.unit_of_work() as session:
        assert (await session.execute(text("SHOW synchronous_commit"))).scalar_one() == "on"
        record = await ThoughtRepository(session).get(uuid.UUID(thought_id))
        assert record is not None
        await HitService(session, writer.context.settings.primer.promote_threshold).record([record])
        assert (await session.execute(text("SHOW synchronous_commit"))).scalar_one() == "off"
    [(setting,)] = await rows(writer.context, "SHOW synchronous_commit")
    [(count,)] = await rows(writer.context, "SELECT hit_count FROM thought_hit")
    assert (setting, count) == ("on", 1)
