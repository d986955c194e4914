"""Admin-set passwords on a real PostgreSQL: `synaptomind user password`, and signing in with one on the OAuth
sign-in page (in-process, the SDK's handlers and the pages): the code flow completes; an unknown user, a user
without a password and a wrong password get one and the same refusal, and nothing is issued."""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import io
import re
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from pydantic import SecretStr
from sqlalchemy import text
from starlette.applications import Starlette

from app import cli
from app.config import OAuthSettings, Settings
from app.db.engine import Database, build_engine
from app.db.models import Role
from app.http.oauth import PASSWORD_REFUSED, api_token_role, oauth_routes
from app.services.admin.users import UserService
from app.services.auth import passwords as passwords_module
from app.services.auth.oauth import OAuthConfig, OAuthProvider
from app.services.auth.passwords import (
    PASSWORD_ATTEMPTS_PER_MINUTE,
    PasswordCheck,
    TooManyAttempts,
    verify_password,
)
from tests.support.helpers import ManualClock

ISSUER = "http://127.0.0.1:8765"
REDIRECT = "http://127.0.0.1:9/callback"
PASSWORD = "correct horse battery staple"


# ---------------------------------------------------------------- the CLI


def _settings(database_url: str) -> Settings:
    return Settings(_env_file=None, database_url=SecretStr(database_url))  # type: ignore[call-arg]


def _stored_hash(database_url: str, name: str) -> str | None:
    """The CLI runs its own event loops: the check gets its own engine too."""

    async def run() -> str | None:
        database = Database(build_engine(database_url, pool_size=1))
        try:
            async with database.unit_of_work() as session:
                query = text("SELECT password_hash FROM app_user WHERE name = :name")
                return (await session.execute(query, {"name": name})).scalar_one()  # type: ignore[no-any-return]
        finally:
            await database.dispose()

    return asyncio.run(run())


def test_cli_sets_and_clears_a_password(
    database_url: str, clean_database: Database, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = _settings(database_url)
    cli.cmd_token_create(argparse.Namespace(user="ada", role="writer", label=None, expires=None), settings)
    capsys.readouterr()

    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
    cli.cmd_user_password(argparse.Namespace(user="ada", clear=False), settings)
    assert capsys.readouterr().err == "password of user 'ada' set\n"
    stored = _stored_hash(database_url, "ada")
    assert stored is not None and stored.startswith(f"scrypt${2**17}$8$1$") and PASSWORD not in stored
    assert verify_password(PASSWORD, stored) and not verify_password(PASSWORD + "!", stored)

    cli.cmd_user_password(argparse.Namespace(user="ada", clear=True), settings)
    assert capsys.readouterr().err == "password of user 'ada' cleared: password sign-in is off\n"
    assert _stored_hash(database_url, "ada") is None


def test_cli_refuses_a_short_password_and_an_unknown_user(
    database_url: str, clean_database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _settings(database_url)
    monkeypatch.setattr("sys.stdin", io.StringIO("too short\n"))
    with pytest.raises(SystemExit) as refused:
        cli.cmd_user_password(argparse.Namespace(user="ada", clear=False), settings)
    assert refused.value.code == "password: at least 12 characters (this one has 9)"
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD))
    with pytest.raises(SystemExit) as refused:
        cli.cmd_user_password(argparse.Namespace(user="nobody", clear=False), settings)
    assert str(refused.value.code).startswith("No user named 'nobody': create one with `synaptomind token create")


def test_the_prompt_asks_twice_without_echo(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    answers = iter([PASSWORD, PASSWORD + "x"])
    monkeypatch.setattr("sys.stdin", Terminal())
    monkeypatch.setattr("getpass.getpass", lambda prompt="": next(answers))
    with pytest.raises(SystemExit) as refused:
        cli._read_password()
    assert refused.value.code == "password: the two entries differ"
    answers = iter([PASSWORD, PASSWORD])
    assert cli._read_password() == PASSWORD


def test_the_parser_takes_user_password() -> None:
    parser = cli._parser()
    parsed = parser.parse_args(["user", "password", "--user", "ada"])
    assert (parsed.handler, parsed.user, parsed.clear) == (cli.cmd_user_password, "ada", False)
    assert parser.parse_args(["user", "password", "--user", "ada", "--clear"]).clear is True


# ---------------------------------------------------------------- the sign-in page


def _field(page: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', page)
    assert found is not None, (name, page)
    return found[1]


def _error(page: str) -> str:
    found = re.search(r'<p class="error">([^<]*)</p>', page)
    assert found is not None, page
    return found[1]


@dataclass
class Pages:
    provider: OAuthProvider
    http: httpx2.AsyncClient
    db: Database
    client_id: str
    client_secret: str
    clock: ManualClock  # the throttle's: it stands still unless a test moves it

    async def count(self, query: str) -> int:
        async with self.db.unit_of_work() as session:
            return int((await session.execute(text(query))).scalar_one())

    async def signin_page(self, verifier: str) -> dict[str, str]:
        """/authorize, then the sign-in page: the hidden fields the forms post."""
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
        query = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": REDIRECT,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "s",
        }
        authorize = await self.http.get("/authorize", params=query)
        assert authorize.status_code == 302, authorize.text
        page = await self.http.get(authorize.headers["location"])
        assert page.status_code == 200
        assert 'name="user"' in page.text and 'name="password"' in page.text and 'name="api_token"' in page.text
        return {"request": _field(page.text, "request"), "csrf": _field(page.text, "csrf")}

    async def sign_in(self, fields: dict[str, str], user: str, password: str) -> httpx2.Response:
        return await self.http.post("/oauth/signin", data={**fields, "user": user, "password": password})


@pytest.fixture
async def pages(clean_database: Database) -> AsyncIterator[Pages]:
    clock = ManualClock()
    passwords = PasswordCheck(failure_delay=0.0, clock=clock)
    provider = OAuthProvider(
        clean_database, OAuthConfig(OAuthSettings(enabled=True, public_url=ISSUER)), passwords=passwords
    )
    app = Starlette(routes=oauth_routes(provider, provider.config, api_token_role(clean_database)))
    async with clean_database.unit_of_work() as session:
        service = UserService(session)
        await service.ensure_user("ada", Role.writer)
        await service.set_password("ada", PASSWORD)
        await service.ensure_user("bob", Role.reader)  # no password: password sign-in is off for bob
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=ISSUER) as http:
        registered = await http.post("/register", json={"client_name": "Test client", "redirect_uris": [REDIRECT]})
        assert registered.status_code == 201, registered.text
        body = registered.json()
        yield Pages(provider, http, clean_database, body["client_id"], body["client_secret"], clock)


async def test_a_password_signs_in_through_consent_to_a_token(pages: Pages) -> None:
    verifier = secrets.token_urlsafe(48)
    fields = await pages.signin_page(verifier)
    consent = await pages.sign_in(fields, " ada ", PASSWORD)
    assert consent.status_code == 200, consent.text
    assert "Signed in as <strong>ada</strong>" in consent.text and "<strong>writer</strong>" in consent.text
    decision = {**fields, "consent": _field(consent.text, "consent"), "decision": "approve"}
    back = await pages.http.post("/oauth/consent", data=decision)
    assert back.status_code == 302 and back.headers["location"].startswith(REDIRECT)
    code = parse_qs(urlsplit(back.headers["location"]).query)["code"][0]
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "code_verifier": verifier,
        "redirect_uri": REDIRECT,
        "client_id": pages.client_id,
        "client_secret": pages.client_secret,
    }
    answer = await pages.http.post("/token", data=form)
    assert answer.status_code == 200, answer.text
    token = await pages.provider.load_access_token(answer.json()["access_token"])
    assert token is not None and (token.principal().name, token.principal().role) == ("ada", Role.writer)


async def test_unknown_user_no_password_and_wrong_password_are_refused_alike(pages: Pages) -> None:
    fields = await pages.signin_page(secrets.token_urlsafe(48))
    answers = [
        await pages.sign_in(fields, "ada", PASSWORD + "!"),
        await pages.sign_in(fields, "ada", ""),
        await pages.sign_in(fields, "nobody", PASSWORD),
        await pages.sign_in(fields, "bob", PASSWORD),  # bob has no password
        await pages.sign_in(fields, "ada", "x" * 5000),
        await pages.sign_in(fields, "ada\x00", PASSWORD),  # PostgreSQL text never holds NUL: no driver error
    ]
    for answer in answers:
        assert answer.status_code == 401
        assert _error(answer.text) == PASSWORD_REFUSED == "user name or password not valid"
        assert "Signed in" not in answer.text and 'name="consent"' not in answer.text
    # The pages differ only by the user name echoed back into the form.
    wrong = answers[0].text.replace('value="ada"', 'value=""')
    unknown = answers[2].text.replace('value="nobody"', 'value=""')
    assert wrong == unknown
    assert await pages.count("SELECT count(*) FROM oauth_authorization WHERE user_id IS NOT NULL") == 0
    assert await pages.count("SELECT count(*) FROM oauth_token") == 0
    # The request is still open: the right password then signs in.
    assert (await pages.sign_in(fields, "ada", PASSWORD)).status_code == 200


async def test_a_forged_password_post_is_refused_before_checking(pages: Pages) -> None:
    fields = await pages.signin_page(secrets.token_urlsafe(48))
    async with httpx2.AsyncClient(transport=pages.http._transport, base_url=ISSUER) as attacker:
        forged = await attacker.post("/oauth/signin", data={**fields, "user": "ada", "password": PASSWORD})
    assert forged.status_code == 403
    assert await pages.count("SELECT count(*) FROM oauth_authorization WHERE user_id IS NOT NULL") == 0


async def test_password_attempts_are_throttled_per_user_name(pages: Pages) -> None:
    fields = await pages.signin_page(secrets.token_urlsafe(48))
    for _ in range(PASSWORD_ATTEMPTS_PER_MINUTE):
        assert (await pages.sign_in(fields, "ada", "not the password")).status_code == 401
    throttled = await pages.sign_in(fields, "ada", PASSWORD)  # even the right one, until the bucket refills
    assert throttled.status_code == 429 and throttled.headers["retry-after"] == "6"  # one attempt per 6 s
    assert _error(throttled.text) == "Too many sign-in attempts for this user name: retry in 6 s."
    # An unknown name is throttled the same way (the answer does not tell it apart), another user is not.
    for _ in range(PASSWORD_ATTEMPTS_PER_MINUTE):
        assert (await pages.sign_in(fields, "nobody", "not the password")).status_code == 401
    assert (await pages.sign_in(fields, "nobody", "not the password")).status_code == 429
    assert (await pages.sign_in(fields, "bob", "not the password")).status_code == 401
    assert await pages.count("SELECT count(*) FROM oauth_authorization WHERE user_id IS NOT NULL") == 0
    # The bucket refills one attempt every 6 s of the throttle's clock, however long the hashes took.
    pages.clock.advance(5.9)
    assert (await pages.sign_in(fields, "ada", PASSWORD)).status_code == 429
    pages.clock.advance(0.2)
    assert (await pages.sign_in(fields, "ada", PASSWORD)).status_code == 200  # the consent page
    assert (await pages.sign_in(fields, "ada", PASSWORD)).status_code == 429  # one attempt, not two


# ---------------------------------------------------------------- the throttle across processes

ROOT = Path(__file__).resolve().parents[4]  # the checkout whose `app` the other process imports
# One process's part of a shared throttle: its own engine and PasswordCheck on the database, this many wrong
# passwords for the name, the throttle's clock standing at ManualClock's start (so the buckets' stamps agree).
OTHER_PROCESS = """
import asyncio, sys
from app.db.engine import Database, build_engine
from app.services.auth.passwords import PasswordCheck

async def main(url: str, name: str, attempts: int) -> None:
    database = Database(build_engine(url, pool_size=1))
    passwords = PasswordCheck(failure_delay=0.0, clock=lambda: 1000.0)
    try:
        for _ in range(attempts):
            assert await passwords.check(database, name, "not the password") is None
    finally:
        await database.dispose()

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


async def _with_password(database: Database, name: str) -> None:
    async with database.unit_of_work() as session:
        service = UserService(session)
        await service.ensure_user(name, Role.writer)
        await service.set_password(name, PASSWORD)


async def test_two_contexts_on_one_database_share_the_attempts_of_a_user_name(
    clean_database: Database, database_url: str
) -> None:
    """Two PasswordChecks with their own engines (two workers' or replicas' sign-in pages) count one user name's
    attempts together: 5 + 5 wrong passwords, then the right one is refused on either (with one bucket per
    process each had 10). An unknown name likewise, whatever its case; another user is not touched."""
    await _with_password(clean_database, "ada")
    await _with_password(clean_database, "bob")
    other = Database(build_engine(database_url, pool_size=1))
    clock = ManualClock()
    first, second = PasswordCheck(failure_delay=0.0, clock=clock), PasswordCheck(failure_delay=0.0, clock=clock)
    try:
        half = PASSWORD_ATTEMPTS_PER_MINUTE // 2
        for check, database in ((first, clean_database), (second, other)):
            for _ in range(half):
                assert await check.check(database, "ada", "not the password") is None
                assert await check.check(database, "nobody" if check is first else "NoBody", "guess") is None
        for check, database in ((first, clean_database), (second, other)):
            with pytest.raises(TooManyAttempts) as refused:
                await check.check(database, "ada", PASSWORD)  # even the right one, until the bucket refills
            assert refused.value.retry_after == pytest.approx(60 / PASSWORD_ATTEMPTS_PER_MINUTE)
            with pytest.raises(TooManyAttempts):
                await check.check(database, "Nobody", "guess")
        matched = await second.check(other, "bob", PASSWORD)
        assert matched is not None and matched.principal.name == "bob"
        clock.advance(60 / PASSWORD_ATTEMPTS_PER_MINUTE + 0.1)  # one attempt back, for whichever process asks
        assert await second.check(other, "ada", PASSWORD) is not None
        with pytest.raises(TooManyAttempts):
            await first.check(clean_database, "ada", PASSWORD)
        async with clean_database.unit_of_work() as session:
            keys = (await session.execute(text("SELECT key FROM rate_bucket ORDER BY key"))).scalars().all()
            ids = {name: id for name, id in (await session.execute(text("SELECT name, id::text FROM app_user"))).all()}
    finally:
        await other.dispose()
    digest = hashlib.sha256(b"nobody").hexdigest()  # an unknown name's key is its case-folded digest, not the name
    users = [f"password-user:{ids[name]}" for name in ("ada", "bob")]
    assert sorted(keys) == sorted([f"password-name:{digest}", *users])


async def test_a_separate_process_takes_from_the_same_bucket(clean_database: Database, database_url: str) -> None:
    """A real second process (its own interpreter, engine and PasswordCheck) spends half of the user name's
    attempts; this process then has only the other half."""
    await _with_password(clean_database, "ada")
    half = PASSWORD_ATTEMPTS_PER_MINUTE // 2
    command = [sys.executable, "-c", OTHER_PROCESS, database_url, "ada", str(half)]
    finished = await asyncio.to_thread(subprocess.run, command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr[-2000:]
    clock = ManualClock()  # the other process's clock too: 1000 s
    passwords = PasswordCheck(failure_delay=0.0, clock=clock)
    for _ in range(PASSWORD_ATTEMPTS_PER_MINUTE - half):
        assert await passwords.check(clean_database, "ada", "not the password") is None
    with pytest.raises(TooManyAttempts):
        await passwords.check(clean_database, "ada", PASSWORD)
    clock.advance(60 / PASSWORD_ATTEMPTS_PER_MINUTE + 0.1)
    assert await passwords.check(clean_database, "ada", PASSWORD) is not None


async def test_full_buckets_are_forgotten_every_so_many_attempts(
    clean_database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Names typed for unknown users leave no row behind for good: every PASSWORD_BUCKETS_PURGE_EVERY attempts the
    buckets untouched for a minute (full again, so forgetting them changes no answer) are deleted; one in use
    stays, and so does what it counted."""
    monkeypatch.setattr(passwords_module, "PASSWORD_BUCKETS_PURGE_EVERY", 3)
    clock = ManualClock()
    passwords = PasswordCheck(failure_delay=0.0, clock=clock)

    async def buckets() -> int:
        async with clean_database.unit_of_work() as session:
            return int((await session.execute(text("SELECT count(*) FROM rate_bucket"))).scalar_one())

    await passwords.check(clean_database, "made up 1", "guess")  # attempt 1
    clock.advance(30)
    for _ in range(PASSWORD_ATTEMPTS_PER_MINUTE - 1):  # attempts 2-10 (3, 6 and 9 purge): nothing is full yet
        await passwords.check(clean_database, "made up 2", "guess")
    assert await buckets() == 2
    clock.advance(31)  # "made up 1" untouched for 61 s: full again; "made up 2" has ~5 of its 10 back
    for _ in range(2):  # attempts 11 and 12 (12 purges)
        await passwords.check(clean_database, "made up 2", "guess")
    assert await buckets() == 1
    for _ in range(4):
        await passwords.check(clean_database, "made up 2", "guess")
    with pytest.raises(TooManyAttempts):  # what it counted survived the purge (a new bucket would hold 10)
        await passwords.check(clean_database, "made up 2", "guess")
