"""Property-based fuzzing of every tool through `dispatch` on the real PostgreSQL and embedder.

For every generated call (tests/support/strategies.py) the answer must be:
- classified when refused (isError always carries structuredContent.result.error; 400/403/404/409,
  never 503 while the database is up, never an unclassified 500);
- free of driver, ORM and stack-trace text;
- a refusal that wrote nothing (row count and newest row version of every table, one SQL);
- on success, structuredContent.result mirrored in content[].text (raw text for memory_guide and
  memory_status action=config);
- stamped with a request id in `_meta`.

Profiles (tests/fuzz/conftest.py): `ci` runs a fast fixed subset in `make test`; `make fuzz` runs `deep`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from mcp_types import CallToolResult
from sqlalchemy import text

from app.db.engine import Database
from app.db.models import Base, Role
from app.db.records import Principal
from app.embedding.runtime import EmbeddingRuntime
from app.mcp.dispatch import dispatch
from app.services.context import AppContext
from tests.conftest import TABLES as ALL_TABLES
from tests.conftest import make_user, settings_with
from tests.fuzz.conftest import PROFILE
from tests.support.helpers import ToolCaller
from tests.support.strategies import DRIVER_MARKERS, SPECS, TOOL_NAMES, Ref, noise, resolve, tool_call

FUZZ = settings(settings.get_profile(PROFILE))
TABLES = [table.name for table in Base.metadata.sorted_tables]
# One statement: per writable table, its row count and its newest row version (xmin), so a refused call
# that inserted, deleted or updated anything shows up.
STATE_SQL = text(
    "SELECT "
    + ", ".join(
        f"(SELECT count(*) || '/' || coalesce(max(xmin::text::bigint), 0) FROM {table}) AS {table}" for table in TABLES
    )
)
REFUSAL_CODES = {400, 403, 404, 409}
RAW_TEXT_CALLS = {("memory_guide", None), ("memory_status", "config")}


@dataclass(repr=False)
class World:
    context: AppContext
    writer: Principal
    admin: Principal
    ids: dict[str, list[str]]

    def __repr__(self) -> str:  # hypothesis prints the fixtures of a failing example: keep it short
        return f"World({', '.join(f'{kind}={len(ids)}' for kind, ids in self.ids.items())})"

    def principal_for(self, tool: str, arguments: dict[str, Any]) -> Principal:
        """A writer for everything; an admin for the admin-only memory_manage update/delete."""
        admin_only = tool == "memory_manage" and arguments.get("action") in ("update", "delete")
        return self.admin if admin_only else self.writer


async def state(context: AppContext) -> dict[str, str]:
    async with context.db.unit_of_work() as session:
        return dict((await session.execute(STATE_SQL)).mappings().one())


async def seed(admin: ToolCaller, writer: ToolCaller) -> dict[str, list[str]]:
    """Projects, thoughts, edges, a primer, proposals and live preview tokens for the fuzzer to aim at."""
    ids: dict[str, list[str]] = {kind: [] for kind in ("project", "thought", "edge", "primer", "proposal", "run")}
    ids["token"] = []
    for name, path in (("Fuzz", "/srv/fuzz"), ("Other", "/srv/other")):
        project = await admin.ok("memory_manage", {"action": "create", "name": name, "local_path": path})
        ids["project"].append(project.item["id"])
    contents = [
        "The billing service retries a failed card payment three times before giving up",
        "Card payments that fail get three retries in the billing service",
        "The billing service retries failed card payments three times",
        "Preview tokens expire after five minutes and are single use",
        "A draft waiting for review",
        "An idea about PostgreSQL full-text search ranking",
        "Rate limiting is per token and per replica",
    ]
    for index, content in enumerate(contents):
        arguments: dict[str, Any] = {"action": "create", "content": content, "cwd": "/srv/fuzz", "tags": ["fuzz"]}
        if index == 4:
            arguments["status"] = "draft"
        made = await writer.ok("memory_store", arguments)
        ids["thought"].append(made.item["id"])
    thoughts = ids["thought"]
    for source, target, kind in ((3, 5, "supports"), (5, 6, "related"), (6, 3, "develops")):
        arguments = {"action": "link", "source_id": thoughts[source], "target_id": thoughts[target], "edge_type": kind}
        link = await writer.ok("memory_store", arguments)
        ids["edge"].append(str(link.item["id"]))
    for _ in range(6):  # enough recalls to promote a primer
        await writer.ok("memory_recall", {"action": "get", "thought_id": thoughts[3]})
    primers = await writer.ok("memory_primers", {"action": "list"})
    ids["primer"] = [str(row.get("id") or row.get("primer_id")) for row in primers.items]
    await writer.ok("edge_review", {"action": "enqueue", "thought_id": thoughts[2]})
    proposals = (await writer.ok("edge_review", {"action": "list"})).items
    ids["proposal"] = [str(row["id"]) for row in proposals]
    if proposals:  # apply one, so rollback has a real run id to aim at
        first = ids["proposal"][0]
        preview = await writer.ok("edge_review", {"action": "apply", "proposal_id": first})
        token = preview.meta["preview"]["token"]
        confirm = {"action": "apply", "proposal_id": first, "confirm": True, "preview_token": token}
        applied = await writer.ok("edge_review", confirm)
        run_id = applied.item.get("run_id")
        ids["run"] = [str(run_id)] if run_id else []
    # Live preview tokens (of the writer) for several actions: confirms with other arguments must be refused.
    previews = [
        ("memory_store", {"action": "unlink", "edge_id": ids["edge"][0]}),
        ("memory_supersede", {"action": "archive", "thought_id": thoughts[6]}),
        ("retention_review", {"action": "delete", "thought_id": thoughts[4]}),
        ("memory_primers", {"action": "delete", "primer_id": ids["primer"][0] if ids["primer"] else thoughts[0]}),
        ("memory_crystallize", {"action": "auto_cluster"}),
    ]
    for tool, arguments in previews:
        answer = await writer.ok(tool, arguments)
        token = answer.meta.get("preview", {}).get("token")
        if token:
            ids["token"].append(str(token))
    return ids


@pytest.fixture(scope="module")
async def world(database: Database, embedding_runtime: EmbeddingRuntime) -> World:
    """One seeded database for the whole module: every tool's examples run against what the others left."""
    async with database.unit_of_work() as session:
        await session.execute(text(f"TRUNCATE {ALL_TABLES} RESTART IDENTITY CASCADE"))
    context = AppContext(database, embedding_runtime, settings_with())
    admin = ToolCaller(context, await make_user(context, "fuzz-admin", Role.admin))
    writer = ToolCaller(context, await make_user(context, "fuzz-writer", Role.writer))
    ids = await seed(admin, writer)
    return World(context, writer.principal, admin.principal, ids)


def _text(result: CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def check_call(world: World, tool: str, drawn: dict[str, Any], record: bool = False) -> CallToolResult:
    arguments = resolve(drawn, world.ids)
    before = await state(world.context)
    result = await dispatch(SPECS[tool], arguments, world.context, world.principal_for(tool, arguments))
    body = _text(result)
    structured = result.structured_content
    assert result.meta is not None and re.fullmatch(r"[0-9a-f]{12}", str(result.meta.get("requestId"))), result.meta
    action = arguments.get("action") if spec_has_actions(tool) and isinstance(arguments.get("action"), str) else None
    raw_text = (tool, action) in RAW_TEXT_CALLS and not result.is_error
    answer_text = body if raw_text else body + json.dumps(structured, ensure_ascii=False)
    for marker in DRIVER_MARKERS:
        assert marker not in answer_text or marker in json.dumps(arguments, ensure_ascii=False), (marker, body[:500])
    outcome = (
        "ok" if not result.is_error else str((structured or {}).get("result", {}).get("error", {}).get("statusCode"))
    )
    if record:  # hypothesis statistics (--hypothesis-show-statistics): which outcomes the examples reached
        event(f"{tool} {action or '-'} -> {outcome}")
    if result.is_error:
        assert structured is not None, f"unclassified error: {body[:500]}"
        error = structured["result"]["error"]
        assert set(structured) == {"result"} and set(structured["result"]) == {"error"}
        assert error["message"] == body
        assert error["statusCode"] in REFUSAL_CODES, error
        assert error["retryable"] is False
        assert await state(world.context) == before, f"a refused call wrote: {body[:300]}"
    else:
        assert structured is not None and set(structured) == {"result"}
        payload = structured["result"]
        if tool == "memory_guide":
            assert payload == {"text": body}
        elif raw_text:
            assert payload["item"] == {"text": body} and set(payload) == {"item", "meta"}
        else:
            assert json.loads(body) == payload
    return result


def spec_has_actions(tool: str) -> bool:
    return SPECS[tool].has_actions


@pytest.mark.parametrize("tool", TOOL_NAMES)
@FUZZ
@given(data=st.data())
async def test_fuzz_tool(world: World, tool: str, data: st.DataObject) -> None:
    """Hostile arguments for every action of one tool."""
    drawn = data.draw(tool_call(SPECS[tool]), label="arguments")
    await check_call(world, tool, drawn, record=True)


@FUZZ
@given(data=st.data())
async def test_fuzz_arguments_of_one_tool_sent_to_another(world: World, data: st.DataObject) -> None:
    """Valid-looking arguments of one tool's action sent to a different tool."""
    source = data.draw(st.sampled_from(TOOL_NAMES), label="built for")
    target = data.draw(st.sampled_from(TOOL_NAMES), label="sent to")
    drawn = data.draw(tool_call(SPECS[source]), label="arguments")
    await check_call(world, target, drawn, record=True)


async def test_the_seeded_world_has_something_of_each_kind(world: World) -> None:
    """The fuzzer aims at real ids: make sure the seed produced them (else the strategies only hit 404s)."""
    for kind in ("project", "thought", "edge", "primer", "proposal", "run", "token"):
        assert world.ids[kind], kind
    assert len(world.ids["token"]) >= 3


# ---------------------------------------------------------------- what the fuzzer found (regressions)

FOUND = [
    # retention_review list: an unbounded min_age_days overflowed Python's timedelta / PostgreSQL's timestamp
    ("retention_review", {"action": "list", "min_age_days": 1e10}, "min_age_days"),
    ("retention_review", {"action": "list", "min_age_days": 1e8}, "min_age_days"),
    ("retention_review", {"action": "list", "min_age_days": "1e309"}, "min_age_days"),
    ("retention_review", {"action": "list", "importance_floor": float("nan")}, "importance_floor"),
    # an offset beyond PostgreSQL's bigint reached the driver ("value out of int64 range")
    ("memory_crystallize", {"action": "graph", "offset": 2**63}, "offset"),
    ("memory_recall", {"action": "list", "offset": "99999999999999999999"}, "offset"),
    ("memory_reflect", {"action": "timeline", "offset": 2**64}, "offset"),
    # a long incompressible local_path broke the unique btree index on project.local_path
    ("memory_manage", {"action": "create", "name": "btree row", "local_path": "/" + noise(7, 1500)}, "local_path"),
    ("memory_manage", {"action": "create", "name": "index row", "local_path": "/" + noise(8, 4000)}, "local_path"),
    # a time PostgreSQL stores and Python cannot read back (issue 22, B5): stored as -infinity, every read then failed
    (
        "memory_store",
        {"action": "update", "thought_id": Ref("thought", 0), "surface_after": "0001-01-01"},
        "surface_after",
    ),
    (
        "memory_store",
        {"action": "update", "thought_id": Ref("thought", 0), "surface_after": "9999-12-31T23:59:59-12:00"},
        "surface_after",
    ),
    # tag lists without a bound (issue 22, B6), and numbers or booleans coerced from other JSON types
    (
        "memory_supersede",
        {"action": "merge", "source_id": Ref("thought", 0), "target_id": Ref("thought", 1), "merged_tags": ["t"] * 51},
        "merged_tags",
    ),
    ("memory_recall", {"action": "list", "limit": "10"}, "limit"),
    ("memory_recall", {"action": "list", "limit": True}, "limit"),
    ("memory_supersede", {"action": "archive", "thought_id": Ref("thought", 6), "confirm": "true"}, "confirm"),
    ("memory_recall", {"action": "search", "query": "   "}, "query"),
    # an unbounded cluster title became a thought over the content CHECK constraint
    (
        "memory_crystallize",
        {"action": "cluster", "thought_ids": [Ref("thought", 0), Ref("thought", 1)], "title": "t" * 2000},
        "title",
    ),
]


@pytest.mark.parametrize(("tool", "arguments", "named"), FOUND)
async def test_what_the_fuzzer_found_is_a_classified_refusal(
    world: World, tool: str, arguments: dict[str, Any], named: str | None
) -> None:
    """Each was an unclassified 500 (driver text in the log); now a 400 that writes nothing."""
    result = await check_call(world, tool, arguments)
    assert result.is_error and result.structured_content is not None
    error = result.structured_content["result"]["error"]
    assert error["statusCode"] == 400, error
    if named is not None:  # refused by the argument check, naming the argument
        assert f"'{named}'" in error["message"], error
    else:
        assert "a value is out of the range that can be stored" in error["message"], error
