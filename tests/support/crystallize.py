"""Two topics of thoughts (billing, deploy) and the calls that make a graph of them: a project, a thought, an age."""

from __future__ import annotations

from typing import Any

from tests.support.helpers import ToolCaller, execute

BILLING = [
    "The billing service retries failed card payments three times",
    "Failed card payments are retried three times by the billing service",
    "The billing service retries a failed card payment three times before giving up",
    "Card payments that fail get three retries in the billing service",
]


DEPLOY = [
    "The deploy pipeline runs database migrations before starting the app",
    "Database migrations run in the deploy pipeline before the app starts",
    "The deploy pipeline applies the database migrations before the application starts",
]


async def project(caller: ToolCaller, name: str) -> dict[str, Any]:
    answer = await caller.ok("memory_manage", {"action": "create", "name": name, "local_path": f"/srv/{name.lower()}"})
    return dict(answer.item)


async def thought(caller: ToolCaller, content: str, cwd: str | None = None, **extra: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {"action": "create", "content": content, **extra}
    if cwd is not None:
        arguments["cwd"] = cwd
    return dict((await caller.ok("memory_store", arguments)).item)


async def age(caller: ToolCaller, ids: list[str], days: int) -> None:
    await execute(
        caller,
        "UPDATE thought SET created_at = now() - make_interval(days => :days) WHERE id::text = ANY(:ids)",
        days=days,
        ids=ids,
    )
