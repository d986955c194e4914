"""The preview → confirm token mechanism, driven through memory_manage action=delete.

A token is bound to its user, tool, action and arguments, expires, and is spent by its execution;
every refusal says which rule failed and writes nothing.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from sqlalchemy import text

from app.db.models import Role
from app.services.previews import PreviewService
from tests.conftest import make_user, settings_with
from tests.support.helpers import Answer, ToolCaller, snapshot

HINT = "call memory_manage action=delete with the same arguments and no confirm to preview it and get a fresh token"


async def rows(caller: ToolCaller, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    async with caller.context.db.unit_of_work() as session:
        return [tuple(row) for row in (await session.execute(text(sql), params)).all()]


async def new_project(caller: ToolCaller, name: str) -> str:
    path = f"/srv/{name.lower()}"
    project = (await caller.ok("memory_manage", {"action": "create", "name": name, "local_path": path})).item
    await caller.ok("memory_store", {"action": "create", "content": f"a thought of {name}", "cwd": path})
    return str(project["id"])


@pytest.fixture
async def doomed(admin: ToolCaller) -> str:
    """A project with one thought; the default project exists too."""
    await admin.ok("memory_manage", {"action": "list"})
    return await new_project(admin, "Doomed")


async def preview(caller: ToolCaller, project_id: str) -> str:
    answer = await caller.ok("memory_manage", {"action": "delete", "project_id": project_id})
    token = answer.item["preview_token"]
    assert answer.meta["preview"]["token"] == token
    return str(token)


async def confirm(caller: ToolCaller, project_id: str, token: str | None) -> Answer:
    arguments: dict[str, Any] = {"action": "delete", "project_id": project_id, "confirm": True}
    if token is not None:
        arguments["preview_token"] = token
    return await caller("memory_manage", arguments)


async def assert_refused(caller: ToolCaller, project_id: str, token: str | None, message: str, status: int) -> None:
    """The confirm is refused with exactly `message`, nothing is written and the project is still there."""
    before = await snapshot(caller.context)
    answer = await confirm(caller, project_id, token)
    assert answer.text == message
    assert answer.error == {"message": message, "statusCode": status, "retryable": False}
    assert await snapshot(caller.context) == before
    assert await rows(caller, "SELECT count(*) FROM project WHERE id = :id", id=project_id) == [(1,)]
    assert await rows(caller, "SELECT count(*) FROM thought WHERE project_id = :id", id=project_id) == [(1,)]


# ---------------------------------------------------------------- refusals


async def test_confirm_without_a_token(admin: ToolCaller, doomed: str) -> None:
    await assert_refused(admin, doomed, None, f"preview_token is required with confirm: true — {HINT}", 400)


async def test_confirm_with_an_empty_token(admin: ToolCaller, doomed: str) -> None:
    await assert_refused(admin, doomed, "", f"preview_token is required with confirm: true — {HINT}", 400)


async def test_confirm_with_a_malformed_token(admin: ToolCaller, doomed: str) -> None:
    await preview(admin, doomed)
    message = f"preview_token 'not-a-token' is not a preview token — {HINT}"
    await assert_refused(admin, doomed, "not-a-token", message, 400)


async def test_confirm_with_an_unknown_token(admin: ToolCaller, doomed: str) -> None:
    await preview(admin, doomed)
    unknown = str(uuid.uuid4())
    await assert_refused(admin, doomed, unknown, f"preview_token {unknown} is unknown — {HINT}", 400)


async def test_confirm_with_another_users_token(admin: ToolCaller, doomed: str) -> None:
    other = ToolCaller(admin.context, await make_user(admin.context, "second-admin", Role.admin))
    token = await preview(other, doomed)
    await assert_refused(admin, doomed, token, f"preview_token {token} was issued to another user — {HINT}", 400)
    # still good for the user it was issued to
    assert (await confirm(other, doomed, token)).item["action"] == "deleted"


async def test_confirm_with_a_token_for_other_arguments(admin: ToolCaller, doomed: str) -> None:
    other_project = await new_project(admin, "Other")
    token = await preview(admin, other_project)
    message = f"preview_token {token} was issued for other arguments — {HINT}"
    await assert_refused(admin, doomed, token, message, 400)
    assert await rows(admin, "SELECT count(*) FROM project WHERE id = :id", id=other_project) == [(1,)]


async def test_confirm_with_a_token_for_another_action(admin: ToolCaller, doomed: str) -> None:
    async with admin.context.db.unit_of_work() as session:
        token = await PreviewService(session, 300).issue(
            admin.principal, "memory_store", "unlink", {"action": "unlink", "edge_id": doomed}
        )
    message = (
        f"preview_token {token} was issued for memory_store action=unlink, not memory_manage action=delete — {HINT}"
    )
    await assert_refused(admin, doomed, token, message, 400)


async def test_confirm_with_an_expired_token(admin: ToolCaller, doomed: str) -> None:
    token = await preview(admin, doomed)
    async with admin.context.db.unit_of_work() as session:
        await session.execute(
            text("UPDATE preview_token SET expires_at = now() - interval '1 second' WHERE id = :id"),
            {"id": token},
        )
    await assert_refused(admin, doomed, token, f"preview_token {token} has expired — {HINT}", 409)


async def test_a_token_expires_after_the_configured_ttl(admin: ToolCaller, doomed: str) -> None:
    short = admin.with_settings(settings_with(previews={"ttl_seconds": 0}))
    token = await preview(short, doomed)
    await assert_refused(short, doomed, token, f"preview_token {token} has expired — {HINT}", 409)


async def test_the_default_ttl_is_five_minutes(admin: ToolCaller, doomed: str) -> None:
    token = await preview(admin, doomed)
    [(seconds, user_id, tool, action, used_at)] = await rows(
        admin,
        "SELECT extract(epoch FROM expires_at - created_at), user_id, tool, action, used_at "
        "FROM preview_token WHERE id = :id",
        id=token,
    )
    assert (float(seconds), user_id, tool, action, used_at) == (
        300.0,
        admin.principal.user_id,
        "memory_manage",
        "delete",
        None,
    )


async def test_a_token_marked_used_is_refused(admin: ToolCaller, doomed: str) -> None:
    token = await preview(admin, doomed)
    async with admin.context.db.unit_of_work() as session:
        await session.execute(text("UPDATE preview_token SET used_at = now() WHERE id = :id"), {"id": token})
    await assert_refused(admin, doomed, token, f"preview_token {token} was already used — {HINT}", 409)


# ---------------------------------------------------------------- single use


async def test_a_token_is_single_use(admin: ToolCaller, doomed: str) -> None:
    token = await preview(admin, doomed)
    assert (await confirm(admin, doomed, token)).item["action"] == "deleted"
    [(used_at,)] = await rows(admin, "SELECT used_at FROM preview_token WHERE id = :id", id=token)
    assert used_at is not None
    before = await snapshot(admin.context)
    replay = await confirm(admin, doomed, token)
    message = f"preview_token {token} was already used — {HINT}"
    assert replay.error == {"message": message, "statusCode": 409, "retryable": False}
    assert await snapshot(admin.context) == before


async def test_two_concurrent_confirms_execute_once(admin: ToolCaller, doomed: str) -> None:
    token = await preview(admin, doomed)
    first, second = await asyncio.gather(confirm(admin, doomed, token), confirm(admin, doomed, token))
    outcomes = sorted([first, second], key=lambda answer: answer.is_error)
    assert outcomes[0].item["action"] == "deleted"
    assert outcomes[1].error == {
        "message": f"preview_token {token} was already used — {HINT}",
        "statusCode": 409,
        "retryable": False,
    }
    assert await rows(admin, "SELECT count(*) FROM audit_event") == [(1,)]


async def test_a_refused_confirm_does_not_spend_the_token(admin: ToolCaller, doomed: str) -> None:
    other_project = await new_project(admin, "Other")
    token = await preview(admin, doomed)
    assert (await confirm(admin, other_project, token)).error["statusCode"] == 400
    assert (await confirm(admin, doomed, token)).item["action"] == "deleted"


async def test_each_preview_issues_a_fresh_token(admin: ToolCaller, doomed: str) -> None:
    first = await preview(admin, doomed)
    second = await preview(admin, doomed)
    assert first != second
    assert (await confirm(admin, doomed, first)).item["action"] == "deleted"


async def test_readers_and_writers_get_no_token(reader: ToolCaller, writer: ToolCaller, doomed: str) -> None:
    before = await snapshot(reader.context)
    for caller in (reader, writer):
        answer = await caller("memory_manage", {"action": "delete", "project_id": doomed})
        assert answer.error["statusCode"] == 403
    assert await snapshot(reader.context) == before


# ---------------------------------------------------------------- audit


async def test_an_executed_delete_writes_an_audit_event(admin: ToolCaller, doomed: str) -> None:
    token = await preview(admin, doomed)
    assert await rows(admin, "SELECT count(*) FROM audit_event") == [(0,)]
    answer = await confirm(admin, doomed, token)
    default_id = answer.item["moved_to"]
    [event] = await rows(
        admin,
        "SELECT user_id, tool, action, target_ids, project_id::text, details, "
        "created_at > now() - interval '1 minute' FROM audit_event",
    )
    assert event == (
        admin.principal.user_id,
        "memory_manage",
        "delete",
        [doomed],
        doomed,
        {"thoughts_moved": 1, "moved_to": default_id},
        True,
    )
