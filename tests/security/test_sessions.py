"""Sessions (issue 22, C1; docs/SECURITY.md "Console sessions"): a console session lives on the server, so every
way it ends holds for a copy of its cookie too. Each test signs a user in, keeps a copy of the cookie as a thief
or a shared machine would, ends the session one way, and replays the copy in a fresh browser: it must be sent
to the sign-in page like an expired session, and its forms refused.

Console requests go through the ASGI app as the console tests do (tests/integration/http/ui/test_console.py)."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pydantic import SecretStr
from sqlalchemy import event, text

from app import cli
from app.config import Settings
from app.db.models import Role
from app.db.repositories.users import UserRepository
from app.http.ui.session import SESSION_COOKIE
from app.main import create_http_app
from app.services.admin.users import UserService
from app.services.auth.passwords import hash_password
from app.services.auth.tokens import AuthService
from app.services.context import AppContext
from app.services.jobs.background import expire_housekeeping
from tests.support.console import BASE, CSRF_FIELD, sign_in_form
from tests.support.team import changed_tables, table_digests

PASSWORD = "correct horse battery staple"
FAST = {"n": 2**10, "r": 8, "p": 1}  # a stored hash carries its parameters: checks against it are quick
SIGN_IN = "/ui/sign-in?next=%2Fui%2Fsearch"


@pytest.fixture
async def transport(app_context: AppContext, tmp_path: Path) -> httpx2.ASGITransport:
    settings = Settings(_env_file=None, auth={"mode": "token"}, data_dir=tmp_path, jobs={"enabled": False})
    return httpx2.ASGITransport(app=create_http_app(settings, app_context))


@dataclass
class Browser:
    client: httpx2.AsyncClient

    @property
    def cookie(self) -> str:
        return str(self.client.cookies[SESSION_COOKIE])

    async def csrf(self) -> str:
        page = await self.client.get("/ui/search")
        found = CSRF_FIELD.search(page.text)
        assert page.status_code == 200 and found is not None, page.text
        return found[1]

    async def signed_in(self) -> bool:
        """Whether the search page opens; otherwise it must send the browser to sign in, as for no session."""
        page = await self.client.get("/ui/search")
        if page.status_code == 200:
            return True
        assert page.status_code == 303 and page.headers["location"] == SIGN_IN
        return False

    async def post(self, path: str, csrf: str, **fields: str) -> httpx2.Response:
        return await self.client.post(path, data={"csrf": csrf, **fields})


@pytest.fixture
async def browsers(transport: httpx2.ASGITransport) -> AsyncIterator[list[Browser]]:
    """Fresh browsers on the one app: `browsers[i]` each with its own cookie jar (up to four)."""
    clients = [httpx2.AsyncClient(transport=transport, base_url=BASE, follow_redirects=False) for _ in range(4)]
    try:
        yield [Browser(client) for client in clients]
    finally:
        for client in clients:
            await client.aclose()


async def with_token(context: AppContext, name: str, role: Role) -> str:
    async with context.db.unit_of_work() as session:
        token, _ = await AuthService(session).create_token(name, role, "sessions test")
    return token


async def with_password(context: AppContext, name: str, role: Role) -> None:
    async with context.db.unit_of_work() as session:
        user = await UserService(session).ensure_user(name, role)
        assert user.user_id is not None
        await UserRepository(session).set_password_hash(user.user_id, hash_password(PASSWORD, **FAST))


async def sign_in_token(browser: Browser, token: str) -> None:
    csrf = await sign_in_form(browser.client)
    answer = await browser.client.post("/ui/sign-in", data={"csrf": csrf, "token": token, "next": "/ui/search"})
    assert answer.status_code == 303, answer.text


async def sign_in_password(browser: Browser, name: str) -> None:
    csrf = await sign_in_form(browser.client)
    fields = {"csrf": csrf, "user": name, "password": PASSWORD, "next": "/ui/search"}
    answer = await browser.client.post("/ui/sign-in", data=fields)
    assert answer.status_code == 303, answer.text


async def replayed(browser: Browser, cookie: str, csrf: str) -> bool:
    """Whether `cookie`, set in this fresh browser, still opens a page or passes a form; the form is the users
    page's (an admin's session) or sign-out's, whose refusal must leave the session table as it was."""
    browser.client.cookies.clear()
    browser.client.cookies.set(SESSION_COOKIE, cookie)
    if await browser.signed_in():
        return True
    form = await browser.post("/ui/admin/users/create", csrf, name="planted", role="admin")
    assert form.status_code == 303 and form.headers["location"].startswith("/ui/sign-in")
    return False


async def session_rows(context: AppContext) -> list[dict[str, Any]]:
    async with context.db.unit_of_work() as session:
        found = await session.execute(
            text(
                "SELECT u.name, s.kind, s.ended_at IS NOT NULL AS ended, s.ended_reason FROM console_session s "
                "JOIN app_user u ON u.id = s.user_id ORDER BY s.created_at, s.id"
            )
        )
        return [dict(row._mapping) for row in found]


async def session_audit(context: AppContext) -> list[tuple[str | None, str, dict[str, Any]]]:
    """The `session` audit events: (actor, action, details), oldest first."""
    async with context.db.unit_of_work() as session:
        found = await session.execute(
            text(
                "SELECT u.name AS actor, e.action, e.details FROM audit_event e LEFT JOIN app_user u ON u.id = "
                "e.user_id WHERE e.tool = 'session' ORDER BY e.created_at, e.id"
            )
        )
        return [(row.actor, row.action, row.details) for row in found]


def cli_settings(database_url: str) -> Settings:
    return Settings(_env_file=None, database_url=SecretStr(database_url))  # type: ignore[call-arg]


async def token_id_of(context: AppContext, name: str) -> str:
    async with context.db.unit_of_work() as session:
        [row] = [
            row for row in await AuthService(session).list_tokens() if row.user_name == name and not row.revoked_at
        ]
    return str(row.id)


# ---------------------------------------------------------------- signing out


async def test_a_cookie_replayed_after_sign_out_is_refused(app_context: AppContext, browsers: list[Browser]) -> None:
    """The red team's C1: copy the cookie, sign out, replay it in a fresh browser — it was still signed in."""
    first, thief = browsers[0], browsers[1]
    await sign_in_token(first, await with_token(app_context, "ada", Role.admin))
    copied, csrf = first.cookie, await first.csrf()
    signed_out = await first.post("/ui/sign-out", csrf)
    assert signed_out.status_code == 303 and signed_out.headers["location"] == "/ui/sign-in"
    before = await table_digests(app_context)
    assert not await replayed(thief, copied, csrf)
    assert changed_tables(before, await table_digests(app_context)) == []  # refused: nothing written, no user planted
    assert await session_rows(app_context) == [
        {"name": "ada", "kind": "token", "ended": True, "ended_reason": "sign_out"}
    ]
    assert await session_audit(app_context) == [("ada", "sign_out", {"kind": "token"})]


async def test_a_password_session_replayed_after_sign_out_is_refused(
    app_context: AppContext, browsers: list[Browser]
) -> None:
    await with_password(app_context, "ada", Role.writer)
    await sign_in_password(browsers[0], "ada")
    copied, csrf = browsers[0].cookie, await browsers[0].csrf()
    await browsers[0].post("/ui/sign-out", csrf)
    assert not await replayed(browsers[1], copied, csrf)


async def test_signing_out_ends_that_session_only(app_context: AppContext, browsers: list[Browser]) -> None:
    token = await with_token(app_context, "ada", Role.writer)
    home, laptop = browsers[0], browsers[1]
    await sign_in_token(home, token)
    await sign_in_token(laptop, token)
    await home.post("/ui/sign-out", await home.csrf())
    assert not await home.signed_in() and await laptop.signed_in()


async def test_a_sign_out_without_the_session_csrf_token_ends_nothing(
    app_context: AppContext, browsers: list[Browser]
) -> None:
    """A cross-site page cannot sign a user out (and so cannot end a session it does not hold)."""
    await sign_in_token(browsers[0], await with_token(app_context, "ada", Role.writer))
    assert (await browsers[0].post("/ui/sign-out", "forged")).status_code == 403
    assert await browsers[0].signed_in()
    assert await session_rows(app_context) == [{"name": "ada", "kind": "token", "ended": False, "ended_reason": None}]


# ---------------------------------------------------------------- an admin ends a user's sessions


async def test_an_admin_ends_every_session_of_a_user_on_the_users_page(
    app_context: AppContext, browsers: list[Browser]
) -> None:
    admin, pat_token, pat_password, other = browsers
    await sign_in_token(admin, await with_token(app_context, "root", Role.admin))
    await with_password(app_context, "pat", Role.writer)
    await sign_in_token(pat_token, await with_token(app_context, "pat", Role.writer))
    await sign_in_password(pat_password, "pat")
    copies = [pat_token.cookie, pat_password.cookie]
    csrf = await admin.csrf()
    page = await admin.client.get("/ui/admin/users")
    assert 'aria-label="End the console sessions of pat"' in page.text  # pat has two
    assert 'aria-label="End the console sessions of root"' in page.text

    ended = await admin.post("/ui/admin/users/sign-out", csrf, confirmed="yes", name="pat")
    assert ended.status_code == 200
    assert "2 console session(s) of pat ended; their tokens and password still sign in." in ended.text
    assert 'aria-label="End the console sessions of pat"' not in ended.text  # none left to end
    for copy in copies:
        assert not await replayed(other, copy, csrf)
    assert await admin.signed_in()  # the admin's own session is another user's
    assert await session_audit(app_context) == [("root", "end", {"user": "pat", "sessions": 2, "reason": "admin"})]
    missing = await admin.post("/ui/admin/users/sign-out", csrf, confirmed="yes", name="nobody")
    assert missing.status_code == 404 and "No user named &#39;nobody&#39;" in missing.text


async def test_only_an_admin_may_end_sessions(app_context: AppContext, browsers: list[Browser]) -> None:
    await sign_in_token(browsers[0], await with_token(app_context, "ada", Role.writer))
    await sign_in_token(browsers[1], await with_token(app_context, "wes", Role.writer))
    refused = await browsers[1].post("/ui/admin/users/sign-out", await browsers[1].csrf(), confirmed="yes", name="ada")
    assert refused.status_code == 403 and "need the admin role" in refused.text
    assert await browsers[0].signed_in()
    assert await session_audit(app_context) == []


async def test_cli_user_sign_out_ends_every_session_of_a_user(
    app_context: AppContext, browsers: list[Browser], database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    token = await with_token(app_context, "ada", Role.writer)
    await sign_in_token(browsers[0], token)
    await sign_in_token(browsers[1], token)
    copied, csrf = browsers[0].cookie, await browsers[0].csrf()
    parsed = cli._parser().parse_args(["user", "sign-out", "--user", "ada"])
    assert (parsed.handler, parsed.user) == (cli.cmd_user_sign_out, "ada")
    await asyncio.to_thread(cli.cmd_user_sign_out, parsed, cli_settings(database_url))
    assert capsys.readouterr().err.endswith("2 console session(s) of user 'ada' ended\n")
    assert not await browsers[1].signed_in()
    assert not await replayed(browsers[2], copied, csrf)
    assert await session_audit(app_context) == [(None, "end", {"user": "ada", "sessions": 2, "reason": "admin"})]
    with pytest.raises(SystemExit) as refused:
        await asyncio.to_thread(cli.cmd_user_sign_out, argparse.Namespace(user="nobody"), cli_settings(database_url))
    assert str(refused.value.code).startswith("No user named 'nobody'")


# ---------------------------------------------------------------- the token a session signed in with


async def test_revoking_a_token_on_the_tokens_page_ends_the_sessions_signed_in_with_it(
    app_context: AppContext, browsers: list[Browser]
) -> None:
    """A token session ends with its token; the user's password session was not opened with it and stays."""
    admin, with_it, by_password, other = browsers
    await sign_in_token(admin, await with_token(app_context, "root", Role.admin))
    await with_password(app_context, "pat", Role.writer)
    await sign_in_token(with_it, await with_token(app_context, "pat", Role.writer))
    await sign_in_password(by_password, "pat")
    copied, csrf = with_it.cookie, await admin.csrf()
    token_id = await token_id_of(app_context, "pat")
    revoked = await admin.post("/ui/admin/tokens/revoke", csrf, confirmed="yes", token_id=token_id)
    assert revoked.status_code == 200 and f"Token {token_id} revoked." in revoked.text
    assert not await replayed(other, copied, csrf)
    assert await by_password.signed_in()
    reason = {"user": "pat", "sessions": 1, "reason": "token_revoke", "token_id": token_id}
    assert await session_audit(app_context) == [("root", "end", reason)]


async def test_cli_token_revoke_and_rotate_end_the_sessions_of_the_token(
    app_context: AppContext, browsers: list[Browser], database_url: str
) -> None:
    await sign_in_token(browsers[0], await with_token(app_context, "ada", Role.writer))
    copied, csrf = browsers[0].cookie, await browsers[0].csrf()
    revoke = argparse.Namespace(token_id=await token_id_of(app_context, "ada"))
    await asyncio.to_thread(cli.cmd_token_revoke, revoke, cli_settings(database_url))
    assert not await replayed(browsers[1], copied, csrf)

    await sign_in_token(browsers[2], await with_token(app_context, "ada", Role.writer))
    copied = browsers[2].cookie
    rotate = argparse.Namespace(token_id=await token_id_of(app_context, "ada"), expires=None)
    await asyncio.to_thread(cli.cmd_token_rotate, rotate, cli_settings(database_url))
    assert not await replayed(browsers[3], copied, csrf)
    assert [row["ended_reason"] for row in await session_rows(app_context)] == ["token_revoke", "token_rotate"]


async def test_a_token_session_ends_when_its_token_expires_or_is_revoked_by_any_path(
    app_context: AppContext, browsers: list[Browser]
) -> None:
    """The lookup itself checks the token, whatever path changed it (here plain SQL, no service)."""
    await sign_in_token(browsers[0], await with_token(app_context, "ada", Role.writer))
    await sign_in_token(browsers[1], await with_token(app_context, "bob", Role.writer))
    async with app_context.db.unit_of_work() as session:
        await session.execute(
            text(
                "UPDATE api_token t SET expires_at = now() - interval '1 s' FROM app_user u "
                "WHERE u.id = t.user_id AND u.name = 'ada'"
            )
        )
        await session.execute(
            text("UPDATE api_token t SET revoked_at = now() FROM app_user u WHERE u.id = t.user_id AND u.name = 'bob'")
        )
    assert not await browsers[0].signed_in() and not await browsers[1].signed_in()


# ---------------------------------------------------------------- role and password changes


async def test_a_lowered_role_ends_every_session_and_a_raised_one_applies_at_once(
    app_context: AppContext, browsers: list[Browser]
) -> None:
    admin, pat, other = browsers[0], browsers[1], browsers[2]
    await sign_in_token(admin, await with_token(app_context, "root", Role.admin))
    await sign_in_token(pat, await with_token(app_context, "pat", Role.reader))
    csrf = await admin.csrf()
    raised = await admin.post("/ui/admin/users/role", csrf, name="pat", role="writer")
    assert raised.status_code == 200 and "pat now has the writer role (was reader)." in raised.text
    page = await pat.client.get("/ui/search")
    assert "Signed in as <strong>pat</strong> (writer)" in page.text  # raised: the same session, the new role
    copied = pat.cookie
    lowered = await admin.post("/ui/admin/users/role", csrf, name="pat", role="reader")
    assert lowered.status_code == 200
    assert "pat now has the reader role (was writer). Their console sessions have ended." in lowered.text
    assert not await replayed(other, copied, csrf)
    assert await session_audit(app_context) == [("root", "end", {"user": "pat", "sessions": 1, "reason": "role"})]


async def test_cli_user_role_lowering_a_role_ends_the_sessions(
    app_context: AppContext, browsers: list[Browser], database_url: str
) -> None:
    await with_token(app_context, "root", Role.admin)
    await sign_in_token(browsers[0], await with_token(app_context, "ada", Role.admin))
    copied, csrf = browsers[0].cookie, await browsers[0].csrf()
    await asyncio.to_thread(
        cli.cmd_user_role, argparse.Namespace(name="ada", role="writer"), cli_settings(database_url)
    )
    assert not await replayed(browsers[1], copied, csrf)


async def test_a_new_or_cleared_password_ends_every_session_of_the_user(
    app_context: AppContext, browsers: list[Browser]
) -> None:
    """Any kind: a password reset is what an admin does for a compromised account."""
    admin, by_token, by_password, other = browsers
    await sign_in_token(admin, await with_token(app_context, "root", Role.admin))
    await with_password(app_context, "pat", Role.writer)
    pat_token = await with_token(app_context, "pat", Role.writer)
    await sign_in_token(by_token, pat_token)
    await sign_in_password(by_password, "pat")
    copies, csrf = [by_token.cookie, by_password.cookie], await admin.csrf()
    changed = await admin.post("/ui/admin/users/password", csrf, name="pat", password=PASSWORD + " anew")
    assert changed.status_code == 200 and "The password of pat is set; their console sessions have ended." in (
        changed.text
    )
    for copy in copies:
        assert not await replayed(other, copy, csrf)

    await sign_in_token(by_token, pat_token)
    copied = by_token.cookie
    cleared = await admin.post("/ui/admin/users/password/clear", csrf, confirmed="yes", name="pat")
    assert cleared.status_code == 200 and "their console sessions have ended" in cleared.text
    assert not await replayed(other, copied, csrf)
    assert [(event[1], event[2]["reason"], event[2]["sessions"]) for event in await session_audit(app_context)] == [
        ("end", "password_set", 2),
        ("end", "password_clear", 1),
    ]


async def test_cli_user_password_ends_the_sessions(
    app_context: AppContext, browsers: list[Browser], database_url: str
) -> None:
    await sign_in_token(browsers[0], await with_token(app_context, "ada", Role.writer))
    copied, csrf = browsers[0].cookie, await browsers[0].csrf()
    clear = argparse.Namespace(user="ada", clear=True)
    await asyncio.to_thread(cli.cmd_user_password, clear, cli_settings(database_url))
    assert not await replayed(browsers[1], copied, csrf)


async def test_a_password_session_ends_when_the_stored_hash_changes_by_any_path(
    app_context: AppContext, browsers: list[Browser]
) -> None:
    await with_password(app_context, "ada", Role.writer)
    await sign_in_password(browsers[0], "ada")
    await with_password(app_context, "ada", Role.writer)  # the repository's write only: a new salt, a new hash
    assert not await browsers[0].signed_in()


async def test_deleting_a_user_deletes_their_sessions(app_context: AppContext, browsers: list[Browser]) -> None:
    """No command deletes a user yet; the foreign key is what a future one relies on."""
    await sign_in_token(browsers[0], await with_token(app_context, "ada", Role.writer))
    copied = browsers[0].cookie
    async with app_context.db.unit_of_work() as session:
        await session.execute(text("DELETE FROM app_user WHERE name = 'ada'"))
    assert await session_rows(app_context) == []
    assert not await replayed(browsers[1], copied, "any")


# ---------------------------------------------------------------- the mechanism


async def test_a_page_costs_one_session_lookup(app_context: AppContext, browsers: list[Browser]) -> None:
    """One indexed SELECT per page; `last_seen_at` is written at most once a minute, not per page."""
    await sign_in_token(browsers[0], await with_token(app_context, "ada", Role.writer))
    async with app_context.db.unit_of_work() as session:  # seen "in the future": no write due, however slow the run
        await session.execute(text("UPDATE console_session SET last_seen_at = now() + interval '1 hour'"))
    statements: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        if "console_session" in statement:
            statements.append(statement.split()[0].upper())

    engine = app_context.db.engine.sync_engine
    event.listen(engine, "before_cursor_execute", seen)
    try:
        assert await browsers[0].signed_in()
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert statements == ["SELECT"]
    async with app_context.db.unit_of_work() as session:
        await session.execute(text("UPDATE console_session SET last_seen_at = '2000-01-01T00:00:00Z'"))
    assert await browsers[0].signed_in()  # over a minute old: this page writes it
    async with app_context.db.unit_of_work() as session:
        seen = await session.execute(text("SELECT last_seen_at > '2000-01-01T00:00:00Z' FROM console_session"))
        assert seen.scalar_one()


async def test_the_cookie_holds_no_credential_and_the_table_no_usable_secret(
    app_context: AppContext, browsers: list[Browser]
) -> None:
    token = await with_token(app_context, "ada", Role.writer)
    await sign_in_token(browsers[0], token)
    async with app_context.db.unit_of_work() as session:
        stored = (await session.execute(text("SELECT encode(secret_hash, 'base64') FROM console_session"))).scalar_one()
    assert token not in browsers[0].cookie and stored not in browsers[0].cookie


async def test_the_expiry_job_purges_expired_and_long_ended_sessions(
    app_context: AppContext, browsers: list[Browser]
) -> None:
    token = await with_token(app_context, "ada", Role.writer)
    for browser in browsers[:3]:
        await sign_in_token(browser, token)
    await browsers[0].post("/ui/sign-out", await browsers[0].csrf())  # ended just now: kept a day
    async with app_context.db.unit_of_work() as session:  # the second browser's session expires
        await session.execute(
            text(
                "UPDATE console_session SET expires_at = now() - interval '1 s' WHERE id = "
                "(SELECT id FROM console_session ORDER BY created_at, id OFFSET 1 LIMIT 1)"
            )
        )
    assert not await browsers[1].signed_in() and await browsers[2].signed_in()
    done = await expire_housekeeping(app_context.db)
    assert done is not None and done.console_sessions_purged == 1
    async with app_context.db.unit_of_work() as session:
        await session.execute(text("UPDATE console_session SET ended_at = ended_at - interval '2 days'"))
    done = await expire_housekeeping(app_context.db)
    assert done is not None and done.console_sessions_purged == 1
    assert len(await session_rows(app_context)) == 1  # the live one
