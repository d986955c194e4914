"""The tool boundary's typed entries (app/mcp/dispatch.py `call_typed`, `run_typed`), the console's way to a tool: the
checks, validation and confirm flows of `dispatch`, the result typed and the refusal raised, never an envelope."""

from __future__ import annotations

from typing import Any

import pytest

from app.errors import AppError
from app.mcp.calls import CallContext
from app.mcp.dispatch import ToolFailure, call_typed, run_typed
from app.mcp.tools.recall.args import SearchArgs
from app.services.recall import operations as recall_operations
from app.services.recall.operations import PageResult
from app.services.recall.requests import PageRequest
from tests.support.helpers import SPECS, ToolCaller, rows


async def test_run_typed_runs_the_operation_on_the_validated_arguments(writer: ToolCaller) -> None:
    await writer.ok("memory_store", {"action": "create", "content": "Typed results come back typed"})
    seen: list[Any] = []

    async def run(args: Any, ctx: CallContext) -> PageResult:
        seen.append(args)
        return await recall_operations.page(ctx.app, PageRequest.of(args))

    found = await run_typed(
        SPECS["memory_recall"], {"action": "list", "limit": 5}, writer.context, writer.principal, run
    )
    assert isinstance(found, PageResult) and [row.content for row in found.rows] == ["Typed results come back typed"]
    assert found.total == 1 and seen[0].limit == 5  # the action's model, validated


async def test_run_typed_raises_the_contracts_refusal_before_anything_runs(
    writer: ToolCaller, reader: ToolCaller
) -> None:
    ran: list[Any] = []

    async def run(args: Any, ctx: CallContext) -> None:
        ran.append(args)

    with pytest.raises(AppError) as invalid:
        await run_typed(
            SPECS["memory_recall"], {"action": "search", "query": "x" * 2001}, writer.context, writer.principal, run
        )
    # the same text the tool answers over MCP for the same arguments
    over_mcp = await writer("memory_recall", {"action": "search", "query": "x" * 2001})
    assert invalid.value.status_code == 400 and invalid.value.message == over_mcp.error["message"]
    assert invalid.value.message.startswith("Invalid argument 'query' for memory_recall action=search")

    with pytest.raises(AppError) as refused:
        await run_typed(
            SPECS["memory_store"], {"action": "create", "content": "no"}, reader.context, reader.principal, run
        )
    assert refused.value.status_code == 403 and "needs the writer role" in refused.value.message
    assert ran == [] and await rows(writer, "SELECT 1 FROM thought") == []


async def test_an_unexpected_failure_is_the_generic_internal_error(writer: ToolCaller) -> None:
    async def run(args: SearchArgs, ctx: CallContext) -> None:
        raise RuntimeError("driver text that must not reach a page")

    with pytest.raises(ToolFailure) as failed:
        await run_typed(
            SPECS["memory_recall"], {"action": "search", "query": "q"}, writer.context, writer.principal, run
        )
    assert failed.value.status_code == 500
    assert failed.value.message.startswith("Internal error in memory_recall (ref ")
    assert "driver text" not in failed.value.message and failed.value.message.endswith("the call was rolled back")


async def test_call_typed_answers_what_the_handler_built_and_runs_the_confirm_flow(writer: ToolCaller) -> None:
    created = (await writer.ok("memory_store", {"action": "create", "content": "Archive me through the flow"})).item
    archive = {"action": "archive", "thought_id": created["id"]}

    preview = await call_typed(SPECS["memory_supersede"], archive, writer.context, writer.principal)
    over_mcp = await writer("memory_supersede", archive)
    token = preview.payload["meta"]["preview"]["token"]
    assert token and preview.payload["meta"].keys() == over_mcp.result["meta"].keys()
    assert preview.payload["item"]["status"] == over_mcp.result["item"]["status"] == "preview"
    assert await rows(writer, "SELECT status FROM thought") == [("active",)]  # a preview writes nothing

    confirm = {**archive, "confirm": True, "preview_token": token}
    done = await call_typed(SPECS["memory_supersede"], confirm, writer.context, writer.principal)
    assert done.payload["item"]["status"] == "executed" and done.payload["item"]["result"]["status"] == "archived"
    assert await rows(writer, "SELECT status FROM thought") == [("archived",)]
    with pytest.raises(AppError) as replayed:  # the token is spent: the flow's own refusal
        await call_typed(SPECS["memory_supersede"], confirm, writer.context, writer.principal)
    assert replayed.value.status_code == 409 and f"preview_token {token} was already used" in replayed.value.message
