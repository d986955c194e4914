"""The console's password sign-in and its users page, in-process on a real PostgreSQL: a password opens the same
session as a token, an unknown user, a user without a password and a wrong password get one answer, attempts are
throttled; admins create users, change roles and set or clear passwords (each audited), and no change may leave
no admin, or no admin who can sign in, or a project with no admin who can reach it. Also `synaptomind user role`."""

from __future__ import annotations

import argparse
import asyncio
import html
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
from pydantic import SecretStr

from app import cli
from app.config import Settings
from app.db.engine import Database
from app.db.models import Role
from app.db.repositories.users import UserRepository
from app.http.ui import ConsoleConfig, SessionCodec, build_console
from app.http.ui.session import SESSION_COOKIE
from app.main import create_http_app
from app.services.admin.membership import MemberService
from app.services.admin.users import UserService
from app.services.auth.passwords import PASSWORD_ATTEMPTS_PER_MINUTE, PasswordCheck, hash_password
from app.services.auth.tokens import AuthService
from app.services.context import AppContext
from tests.support.console import BASE, CSRF_FIELD, audit, set_cookies, sign_in, sign_in_form, token_for
from tests.support.helpers import ManualClock
from tests.support.membership import caller, close

PASSWORD = "correct horse battery staple"
REFUSED = "That user name and password were not accepted."
FAST = {"n": 2**10, "r": 8, "p": 1}  # a stored hash carries its parameters: checks against it are quick


@pytest.fixture
async def ui(app_context: AppContext, tmp_path: Path) -> AsyncIterator[httpx2.AsyncClient]:
    settings = Settings(_env_file=None, auth={"mode": "token"}, data_dir=tmp_path, jobs={"enabled": False})
    transport = httpx2.ASGITransport(app=create_http_app(settings, app_context))
    async with httpx2.AsyncClient(transport=transport, base_url=BASE, follow_redirects=False) as client:
        yield client


async def user_with_password(context: AppContext, name: str, role: Role, password: str = PASSWORD) -> None:
    async with context.db.unit_of_work() as session:
        user = await UserService(session).ensure_user(name, role)
        assert user.user_id is not None
        await UserRepository(session).set_password_hash(user.user_id, hash_password(password, **FAST))


async def password_sign_in(ui: httpx2.AsyncClient, name: str, password: str) -> httpx2.Response:
    csrf = await sign_in_form(ui)
    return await ui.post("/ui/sign-in", data={"csrf": csrf, "user": name, "password": password, "next": "/ui/search"})


async def session_csrf(ui: httpx2.AsyncClient) -> str:
    page = await ui.get("/ui/search")
    found = CSRF_FIELD.search(page.text)
    assert page.status_code == 200 and found is not None
    return found[1]


async def memberships(context: AppContext) -> set[tuple[str, str | None, str]]:
    """Every membership as (project, user or None for everyone, role), read as the operator (no caller)."""
    async with context.db.unit_of_work() as session:
        return {(row.project_name, row.user_name, row.role.value) for row in await MemberService(session).list(None)}


# The members rule's reason (app.services.admin.membership) and the fix a demotion's refusal names.
ORPHANED = (
    "with no admin who can reach it and change its members (a member with the admin role whose global role is "
    "admin, or everyone as admin). Make another admin an admin member there first: "
    "`synaptomind member add PROJECT USER --role admin`."
)


async def role_of(context: AppContext, name: str) -> Role | None:
    async with context.db.unit_of_work() as session:
        user = await UserRepository(session).find(name)
    return user.role if user else None


# ---------------------------------------------------------------- sign-in with a password


async def test_the_sign_in_page_offers_a_password_beside_a_token(ui: httpx2.AsyncClient) -> None:
    page = await ui.get("/ui/sign-in")
    assert '<label for="user">User name</label>' in page.text
    assert 'id="password" name="password" type="password" autocomplete="current-password"' in page.text
    assert '<label for="token">API token</label>' in page.text
    assert page.text.count('name="csrf"') == 2  # each form carries the double-submit token


async def test_a_password_opens_the_same_session_as_a_token(ui: httpx2.AsyncClient, app_context: AppContext) -> None:
    await user_with_password(app_context, "ada", Role.writer)
    response = await password_sign_in(ui, " ada ", PASSWORD)
    assert response.status_code == 303 and response.headers["location"] == "/ui/search"
    header = set_cookies(response)[SESSION_COOKIE]
    assert "HttpOnly" in header and "SameSite=lax" in header and "Path=/ui" in header
    assert PASSWORD not in header
    page = await ui.get("/ui/search")
    assert page.status_code == 200 and "Signed in as <strong>ada</strong> (writer)" in page.text


async def test_unknown_user_no_password_and_wrong_password_are_refused_alike(
    ui: httpx2.AsyncClient, app_context: AppContext
) -> None:
    await user_with_password(app_context, "ada", Role.writer)
    await token_for(app_context, "bob", Role.reader)  # bob has a token but no password
    answers = {
        "wrong": await password_sign_in(ui, "ada", PASSWORD + "!"),
        "unknown": await password_sign_in(ui, "nobody", PASSWORD),
        "no password": await password_sign_in(ui, "bob", PASSWORD),
        "too long": await password_sign_in(ui, "ada", "x" * 2000),
        "nul": await password_sign_in(ui, "ada\x00", PASSWORD),
    }
    for case, answer in answers.items():
        assert answer.status_code == 401, case
        assert f'<p id="password-error" class="error" role="alert">{REFUSED}</p>' in answer.text, case
        assert SESSION_COOKIE not in set_cookies(answer), case

    # The pages differ only by the user name echoed back and the form's fresh CSRF token.
    def same(page: str, name: str) -> str:
        return CSRF_FIELD.sub("csrf", page.replace(f'value="{name}"', 'value=""'))

    assert same(answers["wrong"].text, "ada") == same(answers["unknown"].text, "nobody")
    assert same(answers["unknown"].text, "nobody") == same(answers["no password"].text, "bob")
    empty = await password_sign_in(ui, "ada", "")
    assert empty.status_code == 400 and "Enter your user name and password" in empty.text
    assert SESSION_COOKIE not in ui.cookies


async def test_password_sign_in_needs_its_csrf_token(ui: httpx2.AsyncClient, app_context: AppContext) -> None:
    await user_with_password(app_context, "ada", Role.writer)
    await sign_in_form(ui)
    refused = await ui.post("/ui/sign-in", data={"csrf": "forged", "user": "ada", "password": PASSWORD})
    assert refused.status_code == 403 and SESSION_COOKIE not in set_cookies(refused)


async def test_password_attempts_are_throttled_as_on_the_oauth_page(app_context: AppContext) -> None:
    await user_with_password(app_context, "ada", Role.writer)
    # A clock that stands still: 11 slow hashes on a busy machine must not outlast the bucket's 6 s refill.
    passwords = PasswordCheck(failure_delay=0.0, clock=ManualClock())
    config = ConsoleConfig(SessionCodec(b"k" * 32, 3600), passwords=passwords)
    transport = httpx2.ASGITransport(app=build_console(app_context, config))
    async with httpx2.AsyncClient(transport=transport, base_url=BASE) as client:
        for _ in range(PASSWORD_ATTEMPTS_PER_MINUTE):
            assert (await password_sign_in(client, "ada", "not the password")).status_code == 401
        throttled = await password_sign_in(client, "ada", PASSWORD)  # even the right one, until the bucket refills
        assert throttled.status_code == 429 and int(throttled.headers["retry-after"]) >= 1
        assert "Too many sign-in attempts for this user name: retry in " in throttled.text
        assert SESSION_COOKIE not in set_cookies(throttled)
        # The API token form is not throttled by it (a token cannot be guessed).
        assert (await sign_in(client, await token_for(app_context, "ada", Role.writer))).status_code == 303


async def test_a_changed_or_cleared_password_or_a_lowered_role_ends_its_sessions(
    ui: httpx2.AsyncClient, app_context: AppContext
) -> None:
    """A raised role applies at the next page; a lowered one ends the session (tests/security/test_sessions.py)."""
    await user_with_password(app_context, "ada", Role.reader)
    await password_sign_in(ui, "ada", PASSWORD)
    async with app_context.db.unit_of_work() as session:
        await UserService(session).set_role("ada", Role.writer)
    assert "Signed in as <strong>ada</strong> (writer)" in (await ui.get("/ui/search")).text
    async with app_context.db.unit_of_work() as session:
        await UserService(session).set_role("ada", Role.reader)
    assert (await ui.get("/ui/search")).status_code == 303  # signed out
    await password_sign_in(ui, "ada", PASSWORD)
    assert "Signed in as <strong>ada</strong> (reader)" in (await ui.get("/ui/search")).text
    await user_with_password(app_context, "ada", Role.reader, "another long password")
    assert (await ui.get("/ui/search")).status_code == 303  # signed out
    await password_sign_in(ui, "ada", "another long password")
    assert (await ui.get("/ui/search")).status_code == 200
    async with app_context.db.unit_of_work() as session:
        await UserService(session).set_password("ada", None)
    assert (await ui.get("/ui/search")).status_code == 303


# ---------------------------------------------------------------- the users page


async def test_the_users_page_is_for_admins_only(ui: httpx2.AsyncClient, app_context: AppContext) -> None:
    await sign_in(ui, await token_for(app_context, "wes", Role.writer))
    csrf = await session_csrf(ui)
    assert "/ui/admin/users" not in (await ui.get("/ui/search")).text
    page = await ui.get("/ui/admin/users")
    assert page.status_code == 403 and "need the admin role" in page.text
    for path, data in (
        ("/ui/admin/users/create", {"name": "mallory", "role": "admin"}),
        ("/ui/admin/users/role", {"name": "wes", "role": "admin"}),
        ("/ui/admin/users/password", {"name": "wes", "password": PASSWORD}),
    ):
        assert (await ui.post(path, data={"csrf": csrf, **data})).status_code == 403
    assert await role_of(app_context, "wes") is Role.writer and await role_of(app_context, "mallory") is None
    assert await audit(app_context) == []


async def test_every_users_form_needs_its_csrf_token(ui: httpx2.AsyncClient, app_context: AppContext) -> None:
    await sign_in(ui, await token_for(app_context, "ada", Role.admin))
    await token_for(app_context, "bob", Role.reader)
    for path, data in (
        ("/ui/admin/users/create", {"name": "carol", "role": "writer"}),
        ("/ui/admin/users/role", {"name": "bob", "role": "admin"}),
        ("/ui/admin/users/password", {"name": "bob", "password": PASSWORD}),
        ("/ui/admin/users/password/clear", {"name": "bob"}),
    ):
        response = await ui.post(path, data=data)
        assert response.status_code == 403 and "CSRF" in response.text, path
    assert await role_of(app_context, "carol") is None and await role_of(app_context, "bob") is Role.reader
    assert await audit(app_context) == []


async def test_an_admin_creates_users_changes_roles_and_sets_passwords(
    ui: httpx2.AsyncClient, app_context: AppContext
) -> None:
    await sign_in(ui, await token_for(app_context, "ada", Role.admin))
    csrf = await session_csrf(ui)
    listing = await ui.get("/ui/admin/users")
    assert listing.status_code == 200 and '<th scope="row">ada</th><td>admin</td><td>none</td>' in listing.text

    created = await ui.post("/ui/admin/users/create", data={"csrf": csrf, "name": "pat", "role": "reader"})
    assert created.status_code == 200 and "User pat created (reader)." in created.text
    assert '<th scope="row">pat</th><td>reader</td><td>none</td>\n    <td>0</td><td>never</td>' in created.text
    taken = await ui.post("/ui/admin/users/create", data={"csrf": csrf, "name": "pat", "role": "admin"})
    assert taken.status_code == 409 and "A user named &#39;pat&#39; already exists" in taken.text
    short = await ui.post(
        "/ui/admin/users/create", data={"csrf": csrf, "name": "sam", "role": "reader", "password": "short"}
    )
    assert short.status_code == 400 and "at least 12 characters" in short.text
    create_form = short.text[short.text.index('action="/ui/admin/users/create"') :]
    create_form = create_form[: create_form.index("</form>")]
    assert 'spellcheck="false" value="sam"' in create_form  # the typed name kept, the role too
    assert '<option value="reader" selected>' in create_form and "short" not in create_form  # never the password
    bad_role = await ui.post("/ui/admin/users/create", data={"csrf": csrf, "name": "sam", "role": "owner"})
    assert bad_role.status_code == 400 and "role: one of admin, writer, reader" in html.unescape(bad_role.text)
    assert await role_of(app_context, "sam") is None

    changed = await ui.post("/ui/admin/users/role", data={"csrf": csrf, "name": "pat", "role": "writer"})
    assert changed.status_code == 200 and "pat now has the writer role (was reader)." in changed.text
    same = await ui.post("/ui/admin/users/role", data={"csrf": csrf, "name": "pat", "role": "writer"})
    assert same.status_code == 200 and "pat already has the writer role." in same.text
    missing = await ui.post("/ui/admin/users/role", data={"csrf": csrf, "name": "nobody", "role": "writer"})
    assert missing.status_code == 404 and "No user named &#39;nobody&#39;" in missing.text

    set_ = await ui.post("/ui/admin/users/password", data={"csrf": csrf, "name": "pat", "password": PASSWORD})
    assert set_.status_code == 200 and "The password of pat is set" in set_.text
    assert '<th scope="row">pat</th><td>writer</td><td>set</td>' in set_.text
    assert PASSWORD not in set_.text
    async with httpx2.AsyncClient(transport=ui._transport, base_url=BASE) as pat:
        assert (await password_sign_in(pat, "pat", PASSWORD)).status_code == 303
        assert "Signed in as <strong>pat</strong> (writer)" in (await pat.get("/ui/search")).text
        cleared = await ui.post(
            "/ui/admin/users/password/clear", data={"csrf": csrf, "confirmed": "yes", "name": "pat"}
        )
        assert cleared.status_code == 200 and "The password of pat is cleared" in cleared.text
        assert (await pat.get("/ui/search")).status_code == 303  # the password's session ended

    assert await audit(app_context) == [
        ("user_create", {"user": "pat", "role": "reader", "password": False}),
        ("user_role", {"user": "pat", "from": "reader", "to": "writer"}),
        ("user_password_set", {"user": "pat"}),
        ("user_password_clear", {"user": "pat"}),
    ]


async def test_no_change_may_leave_no_admin_or_none_who_can_sign_in(
    ui: httpx2.AsyncClient, app_context: AppContext
) -> None:
    await sign_in(ui, await token_for(app_context, "ada", Role.admin))
    csrf = await session_csrf(ui)
    demote = await ui.post("/ui/admin/users/role", data={"csrf": csrf, "name": "ada", "role": "writer"})
    assert demote.status_code == 409
    assert (
        "Refused: changing the role of &#39;ada&#39; to writer would leave no admin (&#39;ada&#39; is the last "
        "one). Make another user an admin first." in demote.text
    )
    assert await role_of(app_context, "ada") is Role.admin

    # Another admin who cannot sign in (no password, no token) does not count.
    created = await ui.post("/ui/admin/users/create", data={"csrf": csrf, "name": "root", "role": "admin"})
    assert created.status_code == 200
    demote = await ui.post("/ui/admin/users/role", data={"csrf": csrf, "name": "ada", "role": "reader"})
    assert demote.status_code == 409
    assert (
        "would leave no admin who can sign in (&#39;ada&#39; is the last admin with a password or an active API "
        in (demote.text)
    )
    async with app_context.db.unit_of_work() as session:
        [token] = [row for row in await AuthService(session).list_tokens() if row.user_name == "ada"]
    revoke = await ui.post(
        "/ui/admin/tokens/revoke", data={"csrf": csrf, "confirmed": "yes", "token_id": str(token.id)}
    )
    assert (
        revoke.status_code == 409 and f"Refused: revoking token {token.id} would leave no admin who can" in revoke.text
    )

    # With a password, ada's token may go; then clearing the password is what would lock the admins out.
    await ui.post("/ui/admin/users/password", data={"csrf": csrf, "name": "ada", "password": PASSWORD})
    ui.cookies.clear()  # and sign in with it: the token's session would end with the token
    await password_sign_in(ui, "ada", PASSWORD)
    csrf = await session_csrf(ui)
    revoked = await ui.post(
        "/ui/admin/tokens/revoke", data={"csrf": csrf, "confirmed": "yes", "token_id": str(token.id)}
    )
    assert revoked.status_code == 200
    clear = await ui.post("/ui/admin/users/password/clear", data={"csrf": csrf, "confirmed": "yes", "name": "ada"})
    assert clear.status_code == 409 and "Refused: clearing the password of &#39;ada&#39; would leave" in clear.text

    # Once root can sign in, ada may step down.
    await ui.post("/ui/admin/users/password", data={"csrf": csrf, "name": "root", "password": PASSWORD + "2"})
    stepped = await ui.post("/ui/admin/users/role", data={"csrf": csrf, "name": "ada", "role": "writer"})
    assert stepped.status_code == 200 and "ada now has the writer role (was admin)." in stepped.text
    assert (await ui.get("/ui/admin/users")).status_code == 303  # a lowered role ends the session
    actions = [action for action, _ in await audit(app_context)]
    assert actions == ["user_create", "user_password_set", "token_revoke", "user_password_set", "user_role"]


async def test_a_demotion_may_not_leave_a_project_with_no_admin_who_can_reach_it(
    ui: httpx2.AsyncClient, app_context: AppContext
) -> None:
    await sign_in(ui, await token_for(app_context, "ada", Role.admin))
    csrf = await session_csrf(ui)
    bob = await caller(app_context, "bob")  # a global admin: the creator, so the admin member, of both projects
    await bob.ok("memory_manage", {"action": "create", "name": "Lab", "local_path": "/srv/lab"})
    await bob.ok("memory_manage", {"action": "create", "name": "Vault", "local_path": "/srv/vault"})
    async with app_context.db.unit_of_work() as session:
        await MemberService(session).add("Lab", None, Role.writer)  # open (ada sees it), but bob is its only admin
    await close(app_context, "Vault", {})  # closed: bob is its only member, ada does not see it
    before = await memberships(app_context)

    demote = await ui.post("/ui/admin/users/role", data={"csrf": csrf, "name": "bob", "role": "writer"})
    assert demote.status_code == 409
    assert (
        "Refused: changing the role of 'bob' to writer would leave project 'Lab' and a project you cannot see "
        f"{ORPHANED}" in html.unescape(demote.text)
    )
    assert "Vault" not in demote.text  # a closed project ada is no member of is not named to her
    assert await role_of(app_context, "bob") is Role.admin
    assert await memberships(app_context) == before and await audit(app_context) == []

    # Once the operator makes ada an admin of the vault, only the lab is left to fix; then bob may step down.
    async with app_context.db.unit_of_work() as session:
        await MemberService(session).add("Vault", "ada", Role.admin)
    demote = await ui.post("/ui/admin/users/role", data={"csrf": csrf, "name": "bob", "role": "reader"})
    assert demote.status_code == 409
    assert f"Refused: changing the role of 'bob' to reader would leave project 'Lab' {ORPHANED}" in html.unescape(
        demote.text
    )
    async with app_context.db.unit_of_work() as session:
        await MemberService(session).add("Lab", None, Role.admin)  # everyone as admin: every global admin is one
    stepped = await ui.post("/ui/admin/users/role", data={"csrf": csrf, "name": "bob", "role": "writer"})
    assert stepped.status_code == 200 and "bob now has the writer role (was admin)." in stepped.text
    assert await audit(app_context) == [("user_role", {"user": "bob", "from": "admin", "to": "writer"})]


# ---------------------------------------------------------------- the CLI


def test_cli_user_role_changes_a_role_and_refuses_the_last_admin(
    database_url: str, clean_database: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(_env_file=None, database_url=SecretStr(database_url))  # type: ignore[call-arg]
    cli.cmd_token_create(argparse.Namespace(user="ada", role="admin", label=None, expires=None), settings)
    cli.cmd_token_create(argparse.Namespace(user="bob", role="reader", label=None, expires=None), settings)
    capsys.readouterr()
    cli.cmd_user_role(argparse.Namespace(name="bob", role="writer"), settings)
    assert capsys.readouterr().err == "user 'bob' now has the writer role\n"
    with pytest.raises(SystemExit) as refused:
        cli.cmd_user_role(argparse.Namespace(name="ada", role="reader"), settings)
    assert refused.value.code == (
        "Refused: changing the role of 'ada' to reader would leave no admin ('ada' is the last one). "
        "Make another user an admin first."
    )
    parsed = cli._parser().parse_args(["user", "role", "bob", "admin"])
    assert (parsed.handler, parsed.name, parsed.role) == (cli.cmd_user_role, "bob", "admin")


async def test_cli_user_role_refuses_to_leave_a_project_with_no_admin(
    database_url: str, app_context: AppContext
) -> None:
    """`user role` is held to the members rule too (unlike `member add|remove`): the refusal names the project and
    the `member add` that fixes it, and nothing is written."""
    settings = Settings(_env_file=None, database_url=SecretStr(database_url))  # type: ignore[call-arg]
    await caller(app_context, "ada")
    bob = await caller(app_context, "bob")
    await bob.ok("memory_manage", {"action": "create", "name": "Lab", "local_path": "/srv/lab"})
    await close(app_context, "Lab", {})
    before = await memberships(app_context)
    with pytest.raises(SystemExit) as refused:
        await asyncio.to_thread(cli.cmd_user_role, argparse.Namespace(name="bob", role="reader"), settings)
    assert refused.value.code == f"Refused: changing the role of 'bob' to reader would leave project 'Lab' {ORPHANED}"
    assert await role_of(app_context, "bob") is Role.admin and await memberships(app_context) == before

    add = argparse.Namespace(project="Lab", user="ada", everyone=False, role="admin")
    await asyncio.to_thread(cli.cmd_member_add, add, settings)
    await asyncio.to_thread(cli.cmd_user_role, argparse.Namespace(name="bob", role="reader"), settings)
    assert await role_of(app_context, "bob") is Role.reader
