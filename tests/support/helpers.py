"""Calling tools the way the server does (through `dispatch`) and reading the wire envelope."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from mcp_types import CallToolResult
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.records import Principal
from app.db.visibility import acting_as
from app.mcp.dispatch import dispatch
from app.mcp.tools.catalog import ALL_SPECS
from app.services.context import AppContext

SPECS = {spec.name: spec for spec in ALL_SPECS}


@dataclass(frozen=True)
class Answer:
    raw: CallToolResult

    @property
    def is_error(self) -> bool:
        return bool(self.raw.is_error)

    @property
    def text(self) -> str:
        return "".join(getattr(block, "text", "") for block in self.raw.content)

    @property
    def result(self) -> Any:
        assert self.raw.structured_content is not None, f"no structuredContent: {self.text}"
        return self.raw.structured_content["result"]

    @property
    def item(self) -> Any:
        assert not self.is_error, self.text
        return self.result["item"]

    @property
    def items(self) -> list[Any]:
        assert not self.is_error, self.text
        return list(self.result["items"])

    @property
    def meta(self) -> dict[str, Any]:
        assert not self.is_error, self.text
        return dict(self.result["meta"])

    @property
    def error(self) -> dict[str, Any]:
        assert self.is_error, f"expected an error, got {self.text[:300]}"
        return dict(self.result["error"])

    def assert_mirrors_text(self) -> None:
        """structuredContent.result mirrors the JSON in content[].text."""
        assert json.loads(self.text) == self.result


class ToolCaller:
    """One user's view of the tools."""

    def __init__(self, context: AppContext, principal: Principal) -> None:
        self.context = context
        self.principal = principal

    def with_settings(self, settings: Settings) -> ToolCaller:
        """The same user and database, under other settings (build them with conftest's `settings_with`)."""
        return ToolCaller(dataclasses.replace(self.context, settings=settings), self.principal)

    async def __call__(self, tool: str, arguments: dict[str, Any]) -> Answer:
        return Answer(await dispatch(SPECS[tool], arguments, self.context, self.principal))

    async def ok(self, tool: str, arguments: dict[str, Any]) -> Answer:
        answer = await self(tool, arguments)
        assert not answer.is_error, answer.text
        answer.assert_mirrors_text()
        return answer


@asynccontextmanager
async def own_transaction(context: AppContext) -> AsyncIterator[AsyncSession]:
    """A test's own transaction, outside any tool call even when it runs in the middle of one (a monkeypatched
    step): it sees and may write every project."""
    with acting_as(None):
        async with context.db.unit_of_work() as session:
            yield session


async def count_rows(context: AppContext, table: str) -> int:
    async with own_transaction(context) as session:
        return int((await session.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one())


async def snapshot(context: AppContext) -> dict[str, int]:
    """Row counts of every table that a tool can write: compare before and after a refused call."""
    tables = (
        "project",
        "thought",
        "edge",
        "thought_url_link",
        "thought_hit",
        "primer",
        "slot",
        "preview_token",
        "placement_proposal",
        "audit_event",
        "app_user",
        "api_token",
    )
    return {table: await count_rows(context, table) for table in tables}


async def rows(caller: ToolCaller, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    """Raw SQL read for assertions on what a call stored."""
    async with own_transaction(caller.context) as session:
        return [tuple(row) for row in (await session.execute(text(sql), params)).all()]


async def execute(caller: ToolCaller, sql: str, **params: Any) -> None:
    """Raw SQL write to set up a state no tool can (ages, retired kinds, …)."""
    async with own_transaction(caller.context) as session:
        await session.execute(text(sql), params)


async def blocked_by_a_lock(context: AppContext, sql: str, **params: Any) -> bool:
    """Run `sql` in a transaction of its own that waits at most 200 ms for a lock: True when it gave up (a
    concurrent call holds the rows), False when it ran and committed."""
    try:
        async with own_transaction(context) as session:
            await session.execute(text("SET LOCAL lock_timeout = '200ms'"))
            await session.execute(text(sql), params)
    except DBAPIError as error:
        if "lock timeout" not in str(error):
            raise
        return True
    return False


class ManualClock:
    """A clock (RateLimiter.clock, PasswordCheck's) that moves only when the test moves it: a throttle's refill then
    never depends on how fast the machine runs the attempts."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


SAMPLE = uuid.UUID("01a172b4-d486-700c-a16e-5ae3d2d77a90")
