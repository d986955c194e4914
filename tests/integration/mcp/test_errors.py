"""The wire envelope and the refusals every tool shares: retired inputs, unknown arguments, actions,
classified / unclassified errors, a database outage, placeholder actions and the raw-text guide."""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.db.engine import Database, build_engine
from app.db.models import Role
from app.db.records import Principal
from app.embedding.runtime import EmbeddingRuntime
from app.mcp import wire
from app.mcp.dispatch import dispatch
from app.mcp.schema import build_input_schema, mcp_tool
from app.mcp.tools import guide
from app.mcp.tools.catalog import ALL_SPECS
from app.services.context import AppContext
from app.services.recall.thoughts import RecallService
from tests.conftest import settings_with
from tests.support.contract import CONTRACT_ACTIONS
from tests.support.helpers import SPECS, Answer, ToolCaller, snapshot

# The contract's tool map, word for word (mcp-tools.md, "Tool map"): the tools that take `action`.
TOOL_MAP = {tool: actions for tool, actions in CONTRACT_ACTIONS.items() if actions}
ID = "01a172b4-d486-700c-a16e-5ae3d2d77a90"
OTHER_ID = "01a172b4-d486-700d-b4f9-02962e9d2f1c"
PROJECT_ID_RETIRED = "project_id was removed; use cwd"  # mcp-tools.md, v0.19 migration note 1

# (tool, a call that otherwise passes, retired argument, its migration text as the tool module words it)
RETIRED = [
    ("memory_recall", {"action": "list"}, "top_k", 5, "top_k was removed; use limit"),
    ("memory_recall", {"action": "search", "query": "q"}, "top_k", 5, "top_k was removed; use limit"),
    ("memory_recall", {"action": "list"}, "cluster", True, "cluster was removed; use is_cluster"),
    (
        "memory_recall",
        {"action": "search", "query": "q"},
        "mode",
        "hybrid",
        "mode was removed; use hybrid (true = vector + full-text fusion, false = vector only)",
    ),
    ("memory_recall", {"action": "list"}, "project_id", ID, PROJECT_ID_RETIRED),
    (
        "memory_store",
        {"action": "create", "content": "would be written"},
        "is_profile",
        True,
        "is_profile was removed and has no replacement; remove the field from requests",
    ),
    (
        "memory_store",
        {"action": "create", "content": "would be written"},
        "project_id",
        ID,
        PROJECT_ID_RETIRED,
    ),
    (
        "memory_store",
        {"action": "link", "target_id": OTHER_ID},
        "thought_id",
        ID,
        "thought_id was removed for link; use source_id",
    ),
    (
        "memory_store",
        {"action": "link", "source_id": ID, "target_id": OTHER_ID},
        "thought_id",
        ID,
        "thought_id was removed for link; use source_id",
    ),
    ("memory_status", {"action": "frontier"}, "k", 5, "k was removed; use limit"),
    (
        "memory_status",
        {"action": "propose", "content": "x"},
        "dry_run",
        True,
        "dry_run was removed; use confirm",
    ),
    ("memory_status", {"action": "slots"}, "project_id", ID, PROJECT_ID_RETIRED),
    ("memory_crystallize", {"action": "auto_cluster"}, "dry_run", False, "dry_run was removed; use confirm"),
    (
        "memory_reflect",
        {"action": "reflect", "summary": "s"},
        "goals_delta",
        ["g"],
        "goals_delta was removed; use goals_add / goals_remove",
    ),
    ("memory_reflect", {"action": "timeline"}, "project_id", ID, PROJECT_ID_RETIRED),
    (
        "edge_review",
        {"action": "enqueue", "thought_id": ID},
        "max_items",
        3,
        "max_items was removed; use max_proposals",
    ),
    ("edge_review", {"action": "list"}, "project_id", ID, PROJECT_ID_RETIRED),
    ("memory_supersede", {"action": "archive", "thought_id": ID}, "project_id", ID, PROJECT_ID_RETIRED),
]


def assert_classified(answer: Answer, status: int, message: str | None = None) -> dict[str, Any]:
    """isError, the message in content[0].text and its class mirrored in structuredContent.result.error."""
    assert answer.raw.is_error is True
    assert len(answer.raw.content) == 1 and answer.raw.content[0].type == "text"
    assert answer.raw.structured_content is not None
    assert set(answer.raw.structured_content) == {"result"}
    error = answer.raw.structured_content["result"]["error"]
    assert set(answer.raw.structured_content["result"]) == {"error"}
    assert error == {"message": answer.text, "statusCode": status, "retryable": status == 503}
    if message is not None:
        assert answer.text == message
    return dict(error)


# ---------------------------------------------------------------- retired inputs


@pytest.mark.parametrize(("tool", "call", "name", "value", "migration"), RETIRED)
async def test_retired_inputs_are_refused_with_their_migration_text(
    admin: ToolCaller, tool: str, call: dict[str, Any], name: str, value: Any, migration: str
) -> None:
    before = await snapshot(admin.context)
    answer = await admin(tool, {**call, name: value})
    assert_classified(answer, 400, migration)
    assert await snapshot(admin.context) == before


async def test_retired_inputs_are_refused_even_as_null(admin: ToolCaller) -> None:
    answer = await admin("memory_recall", {"action": "list", "top_k": None})
    assert_classified(answer, 400, "top_k was removed; use limit")


async def test_link_thought_id_is_retired_for_link_only(writer: ToolCaller) -> None:
    made = await writer.ok("memory_store", {"action": "create", "content": "update keeps thought_id"})
    update = await writer.ok("memory_store", {"action": "update", "thought_id": made.item["id"], "is_global": True})
    assert update.item["is_global"] is True


@pytest.mark.parametrize(("tool", "call", "name", "value", "migration"), RETIRED)
def test_retired_inputs_are_not_advertised_but_the_description_names_the_replacement(
    tool: str, call: dict[str, Any], name: str, value: Any, migration: str
) -> None:
    schema = build_input_schema(SPECS[tool])
    description = mcp_tool(SPECS[tool]).description or ""
    if name == "thought_id" and tool == "memory_store":  # live for update: retired for link only
        assert schema["properties"][name]["type"] == "string"
        assert "link thought_id→source_id" in description
    else:
        # no tombstone property; the description names the replacement, the refusal gives the full migration text
        assert name not in schema["properties"]
        replacement = migration.partition("; use ")[2].split(" (", 1)[0]
        assert (f"{name}→{replacement}" if replacement else f"{name} (no replacement)") in description


# ---------------------------------------------------------------- arguments and actions


async def test_an_unknown_argument_is_refused_naming_it(writer: ToolCaller) -> None:
    before = await snapshot(writer.context)
    answer = await writer("memory_store", {"action": "create", "content": "c", "colour": "red"})
    assert_classified(answer, 400)
    prefix = "Unknown argument 'colour' for memory_store action=create; it accepts: "
    assert answer.text.startswith(prefix)
    accepted = answer.text.removeprefix(prefix).split(", ")
    assert {"content", "tags", "status", "cwd", "is_protected", "is_global", "parent_id", "url_links"} <= set(accepted)
    assert "colour" not in accepted and "action" not in accepted
    assert await snapshot(writer.context) == before


async def test_an_argument_of_another_action_is_unknown_here(reader: ToolCaller) -> None:
    answer = await reader("memory_recall", {"action": "get", "thought_id": ID, "limit": 3})
    assert_classified(answer, 400)
    assert answer.text.startswith("Unknown argument 'limit' for memory_recall action=get; it accepts: ")


async def test_an_invalid_argument_value_is_refused_naming_it(reader: ToolCaller) -> None:
    answer = await reader("memory_recall", {"action": "list", "is_cluster": "sometimes"})
    assert_classified(answer, 400)
    assert answer.text.startswith("Invalid argument 'is_cluster' for memory_recall action=list: ")


@pytest.mark.parametrize(
    ("tool", "arguments", "name"),
    [
        ("memory_store", {"action": "create", "content": "nul\x00byte"}, "content"),
        ("memory_store", {"action": "create", "content": "ok", "tags": ["fine", "a\x00b"]}, "tags.1"),
        (
            "memory_store",
            {"action": "bulk_create", "thoughts": [{"content": "fine"}, {"content": "a\x00"}]},
            "thoughts.1.content",
        ),
        ("memory_recall", {"action": "list", "cwd": "/work/\x00"}, "cwd"),
        ("memory_recall", {"action": "list", "tag": "\x00"}, "tag"),
        ("memory_manage", {"action": "create", "name": "nul\x00name"}, "name"),
    ],
)
async def test_a_nul_character_is_refused_naming_the_argument(
    admin: ToolCaller, tool: str, arguments: dict[str, Any], name: str
) -> None:
    """PostgreSQL text cannot hold U+0000: a bad input, not an internal error, and nothing is written."""
    before = await snapshot(admin.context)
    answer = await admin(tool, arguments)
    call = f"{tool} action={arguments['action']}"
    assert_classified(answer, 400, f"Invalid argument '{name}' for {call}: text must not contain NUL (U+0000)")
    assert await snapshot(admin.context) == before


@pytest.mark.parametrize("tool", list(TOOL_MAP))
async def test_missing_action_is_refused_listing_the_actions(reader: ToolCaller, tool: str) -> None:
    names = ", ".join(TOOL_MAP[tool])
    expected = f"Missing required argument 'action' for {tool}; one of: {names}"
    assert_classified(await reader(tool, {}), 400, expected)
    assert_classified(await reader(tool, {"action": ""}), 400, expected)


@pytest.mark.parametrize("tool", list(TOOL_MAP))
async def test_an_unknown_action_is_refused_listing_the_actions(reader: ToolCaller, tool: str) -> None:
    names = ", ".join(TOOL_MAP[tool])
    answer = await reader(tool, {"action": "explode"})
    assert_classified(answer, 400, f"Invalid argument 'action' for {tool}: 'explode' is not one of: {names}")


def test_the_schema_advertises_the_contract_actions() -> None:
    assert [spec.name for spec in ALL_SPECS] == [*TOOL_MAP, "memory_guide"]
    for spec in ALL_SPECS[:-1]:
        schema = build_input_schema(spec)
        assert schema["required"] == ["action"]
        assert schema["properties"]["action"] == {"enum": TOOL_MAP[spec.name]}
    assert build_input_schema(SPECS["memory_guide"]) == {"type": "object", "properties": {}}


# ---------------------------------------------------------------- classified errors


async def test_classified_errors_carry_status_and_retryability(
    admin: ToolCaller, writer: ToolCaller, reader: ToolCaller
) -> None:
    bad = await writer("memory_store", {"action": "create", "content": ""})
    assert_classified(bad, 400)
    forbidden = await reader("memory_store", {"action": "create", "content": "c"})
    assert_classified(
        forbidden,
        403,
        "Forbidden: memory_store action=create needs the writer role; user 'reader' is a reader",
    )
    missing = str(uuid.uuid4())
    assert_classified(
        await reader("memory_recall", {"action": "get", "thought_id": missing}),
        404,
        f"Thought {missing} not found",
    )
    await admin.ok("memory_manage", {"action": "create", "name": "Twice"})
    assert_classified(await admin("memory_manage", {"action": "create", "name": "Twice"}), 409)


def test_a_bare_string_payload_is_wrapped_as_text() -> None:
    result = wire.success("hello")
    assert result.structured_content == {"result": {"text": "hello"}}
    assert result.content[0].text == '{"text":"hello"}'  # type: ignore[union-attr]
    assert not result.is_error


async def test_a_success_mirrors_its_payload_in_content_text(writer: ToolCaller) -> None:
    answer = await writer("memory_store", {"action": "create", "content": "mirrored — ünïcode"})
    assert not answer.raw.is_error
    assert answer.raw.structured_content is not None
    assert set(answer.raw.structured_content) == {"result"}
    assert json.loads(answer.text) == answer.raw.structured_content["result"]
    assert set(answer.result) == {"item", "meta"}
    assert "mirrored — ünïcode" in answer.text


# ---------------------------------------------------------------- unclassified errors


async def test_an_unexpected_exception_is_unclassified_and_hides_its_text(
    writer: ToolCaller, reader: ToolCaller, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    made = await writer.ok("memory_store", {"action": "create", "content": "the handler will fail"})

    async def explode(self: RecallService, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret driver text")

    monkeypatch.setattr(RecallService, "get", explode)
    before = await snapshot(reader.context)
    with caplog.at_level(logging.ERROR, logger="app.mcp.dispatch"):
        answer = await reader("memory_recall", {"action": "get", "thought_id": made.item["id"]})
    assert answer.raw.is_error is True
    assert answer.raw.structured_content is None
    match = re.fullmatch(
        r"Internal error in memory_recall \(ref ([0-9a-f]{12})\); the call was rolled back", answer.text
    )
    assert match, answer.text
    assert "secret" not in answer.text and "RuntimeError" not in answer.text
    [record] = [r for r in caplog.records if match.group(1) in r.getMessage()]
    assert record.exc_info is not None and "secret driver text" in str(record.exc_info[1])
    assert await snapshot(reader.context) == before


async def test_an_unexpected_exception_mid_write_rolls_the_call_back(
    writer: ToolCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.db.repositories.edges import EdgeRepository

    parent = await writer.ok("memory_store", {"action": "create", "content": "the parent"})

    async def explode(self: EdgeRepository, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret driver text")

    monkeypatch.setattr(EdgeRepository, "insert_many", explode)
    before = await snapshot(writer.context)
    answer = await writer("memory_store", {"action": "create", "content": "the child", "parent_id": parent.item["id"]})
    assert answer.raw.is_error is True and answer.raw.structured_content is None
    assert "secret" not in answer.text
    assert await snapshot(writer.context) == before


# ---------------------------------------------------------------- database outage


@pytest.fixture
async def unreachable(embedding_runtime: EmbeddingRuntime) -> AsyncIterator[AppContext]:
    database = Database(build_engine("postgresql+asyncpg://x@127.0.0.1:1/x", pool_size=1))
    yield AppContext(database, embedding_runtime, settings_with())
    await database.dispose()


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("memory_recall", {"action": "list"}),
        ("memory_recall", {"action": "get", "thought_id": ID}),
        ("memory_store", {"action": "create", "content": "nowhere to go"}),
        ("memory_store", {"action": "bulk_create", "thoughts": [{"content": "nowhere"}]}),
        ("memory_manage", {"action": "list"}),
    ],
)
async def test_a_database_outage_is_a_retryable_503(
    unreachable: AppContext, tool: str, arguments: dict[str, Any]
) -> None:
    principal = Principal(user_id=None, name="admin", role=Role.admin)
    answer = Answer(await dispatch(SPECS[tool], arguments, unreachable, principal))
    error = assert_classified(answer, 503)
    assert error["retryable"] is True
    assert answer.text == "Database unavailable; retry shortly"
    assert "127.0.0.1" not in answer.text


# ---------------------------------------------------------------- memory_guide

GUIDE_FILE_TEXT = (Path(guide.__file__).resolve().parents[2] / "guide.md").read_text(encoding="utf-8")


async def test_memory_guide_answers_raw_text(reader: ToolCaller) -> None:
    answer = await reader("memory_guide", {})
    assert not answer.is_error
    text = GUIDE_FILE_TEXT
    assert text.strip()
    assert len(answer.raw.content) == 1
    assert answer.raw.content[0].type == "text"
    assert answer.raw.content[0].text == text  # type: ignore[union-attr]
    assert answer.raw.structured_content == {"result": {"text": text}}
    with pytest.raises(json.JSONDecodeError):
        json.loads(answer.text)


async def test_memory_guide_takes_no_arguments(reader: ToolCaller) -> None:
    answer = await reader("memory_guide", {"topic": "all"})
    assert_classified(answer, 400, "Unknown argument 'topic' for memory_guide; it accepts: no arguments")
