"""One operation behind every door: the CLI's token, user and member commands write the audit event the console's
forms write for the same change (app.services.<area>/operations.py), the door in its `tool` (`cli`, `console`) and
its actor in `user_id` (none for the operator)."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pydantic import SecretStr
from sqlalchemy import text

from app import cli
from app.config import Settings
from app.db.models import Role
from app.main import create_http_app
from app.services.admin.membership import MemberService
from app.services.auth.tokens import AuthService
from app.services.context import AppContext
from tests.support.console import BASE, CSRF_FIELD, sign_in, token_for
from tests.support.helpers import ToolCaller

PASSWORD = "correct horse battery staple"
Event = tuple[str, dict[str, Any], uuid.UUID | None]


@pytest.fixture
async def ui(app_context: AppContext, tmp_path: Path) -> AsyncIterator[httpx2.AsyncClient]:
    settings = Settings(_env_file=None, auth={"mode": "token"}, data_dir=tmp_path, jobs={"enabled": False})
    transport = httpx2.ASGITransport(app=create_http_app(settings, app_context))
    async with httpx2.AsyncClient(transport=transport, base_url=BASE, follow_redirects=False) as client:
        yield client


async def events(context: AppContext, tool: str) -> list[Event]:
    async with context.db.unit_of_work() as session:
        found = await session.execute(
            text("SELECT action, details, user_id FROM audit_event WHERE tool = :tool ORDER BY created_at, id"),
            {"tool": tool},
        )
        return [(row.action, row.details, row.user_id) for row in found]


async def token_ids(context: AppContext, user: str) -> list[str]:
    """The user's unrevoked tokens, oldest first."""
    async with context.db.unit_of_work() as session:
        rows = await AuthService(session).list_tokens()
    return [str(row.id) for row in rows if row.user_name == user and row.revoked_at is None]


async def project(context: AppContext, creator: ToolCaller, name: str, admin: str) -> str:
    """A project whose admin member is `admin` (so it may be opened to writers and closed), unaudited."""
    created = await creator.ok("memory_manage", {"action": "create", "name": name, "local_path": f"/srv/{name}"})
    async with context.db.unit_of_work() as session:
        await MemberService(session).add(name, admin, Role.admin)
    return str(created.item["id"])


def shape(found: list[Event], names: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    """The events with the door's own subjects (user, project, token ids) replaced by placeholders."""
    shaped = []
    for action, details, _ in found:
        written = json.dumps(details, sort_keys=True)
        for value, placeholder in names.items():
            written = written.replace(value, placeholder)
        shaped.append((action, json.loads(written)))
    return shaped


async def test_the_cli_audits_token_user_and_member_changes_as_the_console_does(
    ui: httpx2.AsyncClient,
    app_context: AppContext,
    database_url: str,
    admin: ToolCaller,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ada_token = await token_for(app_context, "ada", Role.admin)
    await token_for(app_context, "pat", Role.reader)
    await token_for(app_context, "sam", Role.reader)
    lab = await project(app_context, admin, "Lab", "ada")
    den = await project(app_context, admin, "Den", "ada")
    await sign_in(ui, ada_token)
    page = await ui.get("/ui/admin/tokens")
    found = CSRF_FIELD.search(page.text)
    assert page.status_code == 200 and found is not None
    csrf = found[1]

    async def post(path: str, **fields: str) -> None:
        # `confirmed=yes`: the destructive buttons' confirm step (app/http/ui/confirm.py) is answered at once.
        answer = await ui.post(f"/ui/admin/{path}", data={"csrf": csrf, "confirmed": "yes", **fields})
        assert answer.status_code == 200, answer.text

    # The console's changes, to pat and Lab.
    await post("tokens/create", user="pat", role="", label="ci", expires="")
    console_first = (await token_ids(app_context, "pat"))[-1]
    await post("tokens/rotate", token_id=console_first, expires="")
    console_second = (await token_ids(app_context, "pat"))[-1]
    await post("tokens/revoke", token_id=console_second)
    await post("users/role", name="pat", role="writer")
    await post("users/password", name="pat", password=PASSWORD)
    await post("users/password/clear", name="pat")
    await post("members/add", project=lab, user="pat", role="reader")
    await post("members/add", project=lab, user="pat", role="writer")
    await post("members/remove", project=lab, user="pat")
    await post("members/open", project=lab, role="writer")
    await post("members/close", project=lab)

    # The same changes from the CLI, to sam and Den.
    settings = Settings(_env_file=None, database_url=SecretStr(database_url))  # type: ignore[call-arg]

    def run(command: Any, **arguments: Any) -> None:
        command(argparse.Namespace(**arguments), settings)

    await asyncio.to_thread(run, cli.cmd_token_create, user="sam", role=None, label="ci", expires=None)
    cli_first = (await token_ids(app_context, "sam"))[-1]
    await asyncio.to_thread(run, cli.cmd_token_rotate, token_id=cli_first, expires=None)
    cli_second = (await token_ids(app_context, "sam"))[-1]
    await asyncio.to_thread(run, cli.cmd_token_revoke, token_id=cli_second)
    await asyncio.to_thread(run, cli.cmd_user_role, name="sam", role="writer")
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))  # not a terminal: the first line is read
    await asyncio.to_thread(run, cli.cmd_user_password, user="sam", clear=False)
    await asyncio.to_thread(run, cli.cmd_user_password, user="sam", clear=True)
    member = {"project": "Den", "user": "sam", "everyone": False}
    await asyncio.to_thread(run, cli.cmd_member_add, **member, role="reader")
    await asyncio.to_thread(run, cli.cmd_member_add, **member, role="writer")
    await asyncio.to_thread(run, cli.cmd_member_remove, **member)
    everyone = {"project": "Den", "user": None, "everyone": True}
    await asyncio.to_thread(run, cli.cmd_member_add, **everyone, role="writer")
    await asyncio.to_thread(run, cli.cmd_member_remove, **everyone)

    by_console, by_cli = await events(app_context, "console"), await events(app_context, "cli")
    ada_id = next(user for _, _, user in by_console)
    assert ada_id is not None and all(user == ada_id for _, _, user in by_console)
    assert all(user is None for _, _, user in by_cli)  # the operator on the server host is no user
    console_shape = shape(by_console, {"pat": "U", "Lab": "P", lab: "P", console_first: "T1", console_second: "T2"})
    cli_shape = shape(by_cli, {"sam": "U", "Den": "P", den: "P", cli_first: "T1", cli_second: "T2"})
    assert cli_shape == console_shape
    assert [action for action, _ in console_shape] == [
        "token_create",
        "token_rotate",
        "token_revoke",
        "user_role",
        "user_password_set",
        "user_password_clear",
        "member_add",
        "member_role",
        "member_remove",
        "member_open",
        "member_close",
    ]
    assert console_shape[1] == ("token_rotate", {"token_id": "T1", "successor": "T2"})
    assert console_shape[9] == (
        "member_open",
        {"project_id": "P", "project": "P", "user": None, "from": "admin", "to": "writer"},
    )
