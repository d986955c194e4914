"""Inputs (docs/SECURITY.md "Inputs"): every argument type has its range, declared once, and a call outside it is
refused naming the argument, writing nothing. The red team's cases of issue 22 (B5, B6 and the minor ones), as the
users of `tests/support/team.py` tried them over the tool boundary.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
import pytest
from sqlalchemy import text

from app.config import Settings
from app.db.models import Role
from app.formats import iso
from app.main import create_http_app
from app.mcp import shaping
from app.services.admin.portability import Portability
from app.services.auth.tokens import AuthService
from app.services.context import AppContext
from tests.support.helpers import ToolCaller, own_transaction, rows
from tests.support.team import OPEN_PATH, Team, changed_tables, table_digests, team

SURFACE_RANGE = "is outside 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z"
TOO_MANY = "List should have at most 50 items after validation"


async def refused(cast: Team, caller: ToolCaller, tool: str, arguments: dict[str, Any], argument: str) -> str:
    """`caller`'s call is a 400 naming `argument`, and no table changed (rows digested, not counted)."""
    before = await table_digests(cast.alice.context)
    answer = await caller(tool, arguments)
    assert answer.is_error, answer.text
    error = answer.error
    assert error["statusCode"] == 400, error
    assert f"Invalid argument '{argument}' for {tool} action={arguments['action']}: " in error["message"], error
    assert changed_tables(before, await table_digests(cast.alice.context)) == []
    return str(error["message"])


@pytest.fixture
async def cast(app_context: AppContext) -> Team:
    return await team(app_context)


# ---------------------------------------------------------------- B5: times


@pytest.mark.parametrize(
    "moment",
    [
        "0001-01-01T00:00:00Z",  # the red team's: stored as -infinity, then every read of it failed
        "0001-01-01",
        "1969-12-31T23:59:59Z",
        "9999-12-31T23:59:59-12:00",  # the year 10000 in UTC: PostgreSQL takes it, Python cannot read it back
        "10000-01-01T00:00:00Z",
        "-infinity",
        "infinity",
        "now",
        "2030-13-45T99:99:99",
        "",
    ],
)
async def test_a_time_outside_the_range_is_refused_naming_it(cast: Team, moment: str) -> None:
    own = cast.open_thought_ids[0]
    arguments = {"action": "update", "thought_id": own, "surface_after": moment}
    message = await refused(cast, cast.bob, "memory_store", arguments, "surface_after")
    assert "1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z" in message
    assert "Internal error" not in message and "rolled back" not in message


@pytest.mark.parametrize("moment", [0, 1_900_000_000, 1.5, True, ["2030-01-01"], {"at": "2030-01-01"}])
async def test_a_time_is_a_string(cast: Team, moment: Any) -> None:
    """No unix seconds, no other JSON type: one spelling, ISO 8601."""
    arguments = {"action": "update", "thought_id": cast.open_thought_ids[0], "surface_after": moment}
    await refused(cast, cast.bob, "memory_store", arguments, "surface_after")


@pytest.mark.parametrize(
    ("moment", "stored"),
    [
        ("2030-01-01", "2030-01-01T00:00:00.000Z"),  # a date: its start, UTC
        ("2030-01-01T09:30:00", "2030-01-01T09:30:00.000Z"),  # no offset: UTC assumed
        ("2030-01-01T09:30:00+02:00", "2030-01-01T07:30:00.000Z"),
        ("1970-01-01T00:00:00Z", "1970-01-01T00:00:00.000Z"),
        ("9999-12-31T23:59:59.999Z", "9999-12-31T23:59:59.999Z"),
    ],
)
async def test_a_time_inside_the_range_is_stored_and_read_back(cast: Team, moment: str, stored: str) -> None:
    own = cast.open_thought_ids[0]
    updated = await cast.bob.ok("memory_store", {"action": "update", "thought_id": own, "surface_after": moment})
    assert updated.item["surface_after"] == stored
    read = await cast.alice.ok("memory_recall", {"action": "get", "thought_id": own, "compact": False})
    assert read.item["surface_after"] == stored


@asynccontextmanager
async def stored_before_the_fix(context: AppContext, thought_id: str, value: str) -> AsyncIterator[None]:
    """A `surface_after` as an earlier release stored it (the CHECK of migration 0019 keeps it out now)."""
    async with own_transaction(context) as session:
        await session.execute(text("ALTER TABLE thought DROP CONSTRAINT ck_thought_surface_after_range"))
        await session.execute(
            text("UPDATE thought SET surface_after = CAST(:value AS text)::timestamptz WHERE id = CAST(:id AS uuid)"),
            {"value": value, "id": thought_id},
        )
    try:
        yield
    finally:
        async with own_transaction(context) as session:
            await session.execute(text("UPDATE thought SET surface_after = NULL WHERE surface_after < '1970-01-01Z'"))
            await session.execute(text("UPDATE thought SET surface_after = NULL WHERE surface_after > '9999-12-31Z'"))
            await session.execute(
                text(
                    "ALTER TABLE thought ADD CONSTRAINT ck_thought_surface_after_range CHECK (surface_after >= "
                    "'1970-01-01 00:00:00+00' AND surface_after <= '9999-12-31 23:59:59.999+00')"
                )
            )


def surface_times(value: Any) -> set[str]:
    """Every non-null `surface_after` in an answer."""
    if isinstance(value, dict):
        found = {str(value["surface_after"])} if value.get("surface_after") is not None else set()
        for item in value.values():
            found |= surface_times(item)
        return found
    if isinstance(value, list):
        return set().union(*(surface_times(item) for item in value)) if value else set()
    return set()


def read_calls(cast: Team, thought_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("memory_recall", {"action": "get", "thought_id": thought_id, "compact": False}),
        ("memory_recall", {"action": "list", "cwd": OPEN_PATH, "compact": False}),
        ("memory_recall", {"action": "search", "query": "open note", "cwd": OPEN_PATH, "compact": False}),
        ("memory_recall", {"action": "context", "thought_id": thought_id, "compact": False}),
        ("memory_reflect", {"action": "timeline", "cwd": OPEN_PATH, "compact": False}),
    ]


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        ("-infinity", "1970-01-01T00:00:00.000Z"),
        ("0001-01-01T00:00:00Z", "1970-01-01T00:00:00.000Z"),
        ("infinity", "9999-12-31T23:59:59.999Z"),
    ],
)
async def test_a_time_stored_out_of_range_before_the_fix_breaks_no_read(cast: Team, stored: str, shown: str) -> None:
    """Every read that returns the thought answers, for every user who sees it, the time clamped to the range (so
    it can be sent back); a search counts its hits once, and only because it answered."""
    target = cast.open_thought_ids[0]
    async with stored_before_the_fix(cast.alice.context, target, stored):
        for caller in (cast.alice, cast.bob, cast.rita):
            for tool, arguments in read_calls(cast, target):
                answer = await caller.ok(tool, arguments)
                assert surface_times(answer.result) == {shown}, (tool, arguments, answer.text[:300])
        hits = await rows(
            cast.alice, "SELECT hit_count FROM thought_hit WHERE thought_id = CAST(:id AS uuid)", id=target
        )
        # per user: get, search and context count one each (list and timeline count none)
        assert hits == [(9,)]


@pytest.mark.parametrize(
    ("stored", "repaired"),
    [
        ("-infinity", datetime(1970, 1, 1, tzinfo=UTC)),
        ("0001-01-01T00:00:00Z", datetime(1970, 1, 1, tzinfo=UTC)),
        # beyond the year 9999 the driver cannot even read the row (no formatting can help): the repair is the fix
        ("12000-06-01T00:00:00Z", datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)),
        ("infinity", datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)),
    ],
)
async def test_the_migration_repairs_what_an_earlier_release_stored(
    cast: Team, stored: str, repaired: datetime
) -> None:
    """Migration 0019's repair, run again on a row as B5 left it: clamped into the range; then every read answers."""
    target = cast.open_thought_ids[0]
    async with stored_before_the_fix(cast.alice.context, target, stored):
        migration = _migration_0019()
        async with own_transaction(cast.alice.context) as session:
            for statement in migration.REPAIRS:
                await session.execute(text(statement))
        found = await rows(cast.alice, "SELECT surface_after FROM thought WHERE id = CAST(:id AS uuid)", id=target)
        assert found == [(repaired,)]
        for tool, arguments in read_calls(cast, target):
            assert surface_times((await cast.bob.ok(tool, arguments)).result) == {iso(repaired)}


@pytest.fixture
async def console(app_context: AppContext, tmp_path: Path) -> AsyncIterator[httpx2.AsyncClient]:
    """The console in-process, signed in with a token of a new writer (who sees the open project)."""
    settings = Settings(_env_file=None, auth={"mode": "token"}, data_dir=tmp_path, jobs={"enabled": False})
    transport = httpx2.ASGITransport(app=create_http_app(settings, app_context))
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as client:
        async with app_context.db.unit_of_work() as session:
            token, _ = await AuthService(session).create_token("reviewer", Role.writer, "inputs test")
        form = await client.get("/ui/sign-in")
        csrf = re.search(r'name="csrf" value="([^"]*)"', form.text)
        assert csrf is not None
        signed_in = await client.post("/ui/sign-in", data={"csrf": csrf[1], "token": token, "next": "/ui/search"})
        assert signed_in.status_code == 303
        yield client


async def test_console_pages_of_a_time_stored_out_of_range_answer(cast: Team, console: httpx2.AsyncClient) -> None:
    """The search, thought and timeline pages answered 500 for everyone once such a thought existed."""
    target = cast.open_thought_ids[0]
    async with stored_before_the_fix(cast.alice.context, target, "-infinity"):
        pages = [
            "/ui/search?query=open+note",
            f"/ui/thoughts/{target}",
            f"/ui/projects/{cast.open_project_id}/timeline",
        ]
        for page in pages:
            answer = await console.get(page)
            assert answer.status_code == 200, (page, answer.text[:300])
            assert "open note 0" in answer.text, page


async def test_an_import_holds_times_to_the_range(cast: Team) -> None:
    """An export written by an earlier release may hold a year 1 (`-infinity` exports so): the import clamps it
    instead of failing on the CHECK."""
    async with own_transaction(cast.alice.context) as session:
        lines = [line async for line in Portability(session).export(None)]
    thought = next(json.loads(line) for line in lines if '"kind":"thought"' in line and "open note 0" in line)
    copied = {**thought, "id": str(uuid.uuid4()), "content": "an imported note", "surface_after": "0001-01-01T00:00:00"}
    copied.pop("embedding", None)
    copied.pop("embedding_model", None)
    async with own_transaction(cast.alice.context) as session:
        inserted = await Portability(session).import_lines([json.dumps(copied)])
    assert inserted["thought"] == 1
    got = await cast.bob.ok("memory_recall", {"action": "get", "thought_id": copied["id"], "compact": False})
    assert got.item["surface_after"] == "1970-01-01T00:00:00.000Z"


def _migration_0019() -> Any:
    import importlib.util
    from pathlib import Path

    versions = Path(__file__).resolve().parents[2] / "alembic" / "versions"
    path = next(versions.glob("2026_12_01_0019-*.py"))
    spec = importlib.util.spec_from_file_location("migration_0019", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_iso_is_total_over_datetime() -> None:
    """What the driver hands back for ±infinity (naive datetime.min/max) and a year 1 in UTC format, clamped."""
    assert iso(datetime.min) == "1970-01-01T00:00:00.000Z"
    assert iso(datetime.max) == "9999-12-31T23:59:59.999Z"
    assert iso(datetime(1, 1, 1, tzinfo=UTC)) == "1970-01-01T00:00:00.000Z"
    assert iso(datetime(2026, 12, 1, 9, 30, 0, 123456, tzinfo=UTC)) == "2026-12-01T09:30:00.123Z"


# ---------------------------------------------------------------- B5: a failure after the commit says so


@contextmanager
def shaping_fails(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The answer's shaping fails (as formatting -infinity did): after the call's transaction committed."""

    def broken(moment: datetime | None) -> str | None:
        raise ValueError("year 0 is out of range")

    with monkeypatch.context() as patched:
        patched.setattr(shaping, "iso", broken)
        yield


async def test_a_failure_after_the_commit_does_not_claim_a_rollback(
    cast: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = cast.open_thought_ids[0]
    with shaping_fails(monkeypatch):
        answer = await cast.bob("memory_store", {"action": "update", "thought_id": own, "content": "open note, edited"})
    assert answer.is_error and answer.raw.structured_content is None
    assert "rolled back" not in answer.text
    assert answer.text.startswith("Internal error in memory_store (ref ")
    assert "after the call's transaction was committed: what it changed is saved. Read it back before retrying" in (
        answer.text
    )
    assert await rows(cast.bob, "SELECT content FROM thought WHERE id = CAST(:id AS uuid)", id=own) == [
        ("open note, edited",)
    ]


@pytest.mark.parametrize(
    "arguments",
    [
        {"action": "search", "query": "open note", "cwd": OPEN_PATH, "compact": False},
        {"action": "clusters", "query": "open note", "cwd": OPEN_PATH, "compact": False},
        {"action": "context", "query": "open note", "cwd": OPEN_PATH, "compact": False},
        {"action": "get", "thought_id": "<open>", "compact": False},
    ],
)
async def test_a_read_whose_answer_fails_counts_no_hit(
    cast: Team, monkeypatch: pytest.MonkeyPatch, arguments: dict[str, Any]
) -> None:
    """The answer is built in the transaction that counts the hits: a crashed search wrote thought_hit rows."""
    arguments = {key: cast.open_thought_ids[0] if value == "<open>" else value for key, value in arguments.items()}
    if arguments["action"] == "clusters":  # a cluster to find
        await cast.bob.ok("memory_crystallize", {"action": "cluster", "thought_ids": cast.open_thought_ids})
    before = await table_digests(cast.alice.context)
    with shaping_fails(monkeypatch):
        answer = await cast.bob("memory_recall", arguments)
    assert answer.is_error and answer.text.endswith("; the call was rolled back"), answer.text
    assert changed_tables(before, await table_digests(cast.alice.context)) == []
    answered = await cast.bob.ok("memory_recall", arguments)  # and without the fault, it counts them
    assert answered.result
    assert "thought_hit" in changed_tables(before, await table_digests(cast.alice.context))


async def test_a_failure_before_the_commit_keeps_the_contract_text(cast: Team, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside the transaction: rolled back indeed, and the contract's text says so."""
    from app.services.store import thoughts as store

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    own = cast.open_thought_ids[0]
    before = await table_digests(cast.alice.context)
    monkeypatch.setattr(store, "_apply_tags", broken)
    answer = await cast.bob("memory_store", {"action": "update", "thought_id": own, "tags": ["x"]})
    assert answer.is_error
    ref = answer.raw.meta["requestId"] if answer.raw.meta else ""
    assert answer.text == f"Internal error in memory_store (ref {ref}); the call was rolled back"
    assert changed_tables(before, await table_digests(cast.alice.context)) == []


# ---------------------------------------------------------------- B6: tag lists


def tags(count: int) -> list[str]:
    return [f"tag{n}" for n in range(count)]


async def test_merge_takes_at_most_50_tags(cast: Team) -> None:
    source, target = cast.open_thought_ids
    for count in (51, 10_000):
        arguments = {"action": "merge", "source_id": source, "target_id": target, "merged_tags": tags(count)}
        assert TOO_MANY in await refused(cast, cast.bob, "memory_supersede", arguments, "merged_tags")
        confirmed = {**arguments, "confirm": True}
        assert TOO_MANY in await refused(cast, cast.bob, "memory_supersede", confirmed, "merged_tags")


async def test_cluster_takes_at_most_50_tags(cast: Team) -> None:
    for count in (51, 5_000):
        arguments = {"action": "cluster", "thought_ids": cast.open_thought_ids, "tags": tags(count)}
        assert TOO_MANY in await refused(cast, cast.bob, "memory_crystallize", arguments, "tags")


async def test_compact_takes_at_most_50_summary_tags(cast: Team) -> None:
    for count in (51, 5_000):
        summary = {"content": "summary of the open notes", "tags": tags(count)}
        arguments = {"action": "compact", "source_ids": cast.open_thought_ids, "summary": summary, "confirm": True}
        assert TOO_MANY in await refused(cast, cast.bob, "retention_review", arguments, "summary.tags")


@pytest.mark.parametrize(
    ("tool", "arguments", "argument"),
    [
        ("memory_store", {"action": "create", "content": "x"}, "tags.0"),
        ("memory_supersede", {"action": "merge", "source_id": "s", "target_id": "t"}, "merged_tags.0"),
        ("memory_crystallize", {"action": "cluster", "thought_ids": ["a", "b"]}, "tags.0"),
    ],
)
async def test_each_tag_is_at_most_100_characters_in_every_action(
    cast: Team, tool: str, arguments: dict[str, Any], argument: str
) -> None:
    name = "merged_tags" if tool == "memory_supersede" else "tags"
    await refused(cast, cast.bob, tool, {**arguments, name: ["t" * 101]}, argument)


async def test_repeated_adds_do_not_grow_a_thought_past_50_tags(cast: Team) -> None:
    """update caps its argument at 50; `tags_mode: add` twice would otherwise keep 100, then 150, …"""
    own = cast.open_thought_ids[0]
    first = {"action": "update", "thought_id": own, "tags": tags(50), "tags_mode": "add"}
    assert len((await cast.bob.ok("memory_store", first)).item["tags"]) == 50
    more = {"action": "update", "thought_id": own, "tags": ["one more"], "tags_mode": "add"}
    before = await table_digests(cast.alice.context)
    answer = await cast.bob("memory_store", more)
    assert answer.error["statusCode"] == 400
    assert answer.error["message"] == (
        "Invalid 'tags': a thought carries at most 50 tags; adding these makes 51 — remove some first "
        "(tags_mode=remove) or replace the set"
    )
    assert changed_tables(before, await table_digests(cast.alice.context)) == []
    again = {"action": "update", "thought_id": own, "tags": ["tag0", "TAG1"], "tags_mode": "add"}  # repeats: 50
    assert len((await cast.bob.ok("memory_store", again)).item["tags"]) == 50


async def test_creates_of_the_same_content_do_not_grow_its_thought_past_50_tags(cast: Team) -> None:
    """A create whose content lives already merges its tags into that thought: 50 + 50 would be 100."""
    first = {"action": "create", "content": "one content", "cwd": OPEN_PATH, "tags": tags(50)}
    made = await cast.bob.ok("memory_store", first)
    again = {**first, "tags": [f"other{n}" for n in range(50)]}
    before = await table_digests(cast.alice.context)
    answer = await cast.bob("memory_store", again)
    assert answer.error["message"] == (
        f"Invalid 'tags': a thought carries at most 50 tags; merging these into thought {made.item['id']} makes "
        "100 — remove some first (tags_mode=remove) or replace the set"
    )
    batch = {"action": "bulk_create", "cwd": OPEN_PATH, "thoughts": [{"content": "one content", "tags": ["x"]}]}
    rows_answer = await cast.bob.ok("memory_store", batch)
    assert rows_answer.items[0]["status"] == "failed" and "makes 51" in rows_answer.items[0]["error"]
    assert changed_tables(before, await table_digests(cast.alice.context)) == []
    repeat = await cast.bob.ok("memory_store", {**first, "tags": ["TAG0"]})  # a repeat adds nothing: answered
    assert repeat.item["id"] == made.item["id"] and len(repeat.item["tags"]) == 50


async def test_fifty_tags_are_still_taken(cast: Team) -> None:
    """The bound, not a lower one: create and cluster take 50."""
    made = await cast.bob.ok("memory_store", {"action": "create", "content": "fifty tags", "tags": tags(50)})
    assert len(made.item["tags"]) == 50
    clustered = await cast.bob.ok(
        "memory_crystallize", {"action": "cluster", "thought_ids": cast.open_thought_ids, "tags": tags(50)}
    )
    assert clustered.item is not None


# ---------------------------------------------------------------- minor: strict numbers and booleans, blank queries


@pytest.mark.parametrize(
    ("tool", "arguments", "argument"),
    [
        ("memory_recall", {"action": "list", "limit": "10"}, "limit"),
        ("memory_recall", {"action": "list", "limit": True}, "limit"),
        ("memory_recall", {"action": "list", "limit": 10.0}, "limit"),
        ("memory_recall", {"action": "search", "query": "open", "min_relevance": "0.5"}, "min_relevance"),
        ("memory_recall", {"action": "search", "query": "open", "hybrid": "false"}, "hybrid"),
        ("memory_recall", {"action": "search", "query": "open", "min_importance": True}, "min_importance"),
        ("memory_store", {"action": "create", "content": "flags", "is_global": 1}, "is_global"),
        ("memory_store", {"action": "create", "content": "flags", "is_protected": "yes"}, "is_protected"),
        ("memory_reflect", {"action": "reflect", "wake_days": "7"}, "wake_days"),
    ],
)
async def test_numbers_and_booleans_are_not_coerced(
    cast: Team, tool: str, arguments: dict[str, Any], argument: str
) -> None:
    await refused(cast, cast.bob, tool, arguments, argument)


async def test_confirm_is_a_boolean(cast: Team) -> None:
    """A string "true" neither executes nor previews: nothing runs, no token is issued."""
    arguments = {"action": "archive", "thought_id": cast.open_thought_ids[0], "confirm": "true"}
    message = await refused(cast, cast.bob, "memory_supersede", arguments, "confirm")
    assert message.endswith("Input should be a valid boolean")


async def test_an_edge_type_is_still_taken_by_its_name(cast: Team) -> None:
    """Strict types, but an enum argument is its values' strings, as the schema lists them."""
    source, target = cast.open_thought_ids
    arguments = {"action": "link", "source_id": source, "target_id": target, "edge_type": "supports"}
    linked = await cast.bob.ok("memory_store", arguments)
    assert linked.item["type"] == "supports"
    batch = {"action": "link_batch", "links": [{"source": source, "target": target, "type": 3}]}
    await refused(cast, cast.bob, "memory_store", batch, "links.0.type")


@pytest.mark.parametrize("query", [" ", "   \t\n", "\u2003"])
@pytest.mark.parametrize("action", ["search", "clusters", "context"])
async def test_a_blank_query_is_refused_like_an_empty_one(cast: Team, action: str, query: str) -> None:
    message = await refused(cast, cast.bob, "memory_recall", {"action": action, "query": query}, "query")
    assert message.endswith("must not be blank (only whitespace): send words to search for, or an id")


# ---------------------------------------------------------------- other lists and texts: each has its bound


@pytest.mark.parametrize(
    ("tool", "arguments", "argument"),
    [
        ("memory_crystallize", {"action": "cluster", "thought_ids": ["a", "b"], "title": "t" * 100_001}, "title"),
        ("memory_crystallize", {"action": "cluster", "thought_ids": ["a"] * 1001}, "thought_ids"),
        (
            "memory_supersede",
            {"action": "merge", "source_id": "s", "target_id": "t", "merged_content": "c" * 100_001},
            "merged_content",
        ),
        ("memory_supersede", {"action": "archive_batch", "thought_ids": ["a"] * 1001}, "thought_ids"),
        (
            "retention_review",
            {"action": "compact", "source_ids": ["a"], "summary": {"content": "c" * 100_001}},
            "summary.content",
        ),
        (
            "retention_review",
            {"action": "compact", "source_ids": ["a"] * 1001, "summary": {"content": "c"}},
            "source_ids",
        ),
        ("memory_reflect", {"action": "reflect", "decisions": ["d" * 100_001]}, "decisions.0"),
        ("memory_reflect", {"action": "reflect", "pending": ["p" * 100_001]}, "pending.0"),
        ("memory_store", {"action": "unlink_batch", "edge_ids": ["e"] * 1001}, "edge_ids"),
        ("memory_store", {"action": "link_batch", "links": [{"source": "a", "target": "b"}] * 1001}, "links"),
        ("edge_review", {"action": "apply_batch", "proposal_ids": ["p"] * 501}, "proposal_ids"),
        ("memory_recall", {"action": "search", "query": "q" * 2001}, "query"),
    ],
)
async def test_every_list_and_text_has_a_bound(cast: Team, tool: str, arguments: dict[str, Any], argument: str) -> None:
    await refused(cast, cast.bob, tool, arguments, argument)
