"""OAuth grants on a real PostgreSQL: the expiry job's purge of rows nothing can redeem, and listing and revoking
a user's grants (app.services.auth.oauth_grants, `synaptomind oauth grants|revoke`)."""

from __future__ import annotations

import argparse
import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar
from urllib.parse import parse_qs, urlsplit

import pytest
from mcp.server.auth.provider import AuthorizationParams
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyUrl, SecretStr
from sqlalchemy import text

from app import cli
from app.config import OAuthSettings, Settings
from app.db.engine import Database, build_engine
from app.db.models import Role
from app.services.admin.users import UserService
from app.services.auth.oauth import OAuthConfig, OAuthProvider
from app.services.auth.oauth_grants import OAuthGrantService
from app.services.auth.tokens import hash_token
from app.services.jobs import background as jobs
from app.services.jobs.background import Housekeeping, expire_housekeeping
from tests.conftest import settings_with

ISSUER = "http://127.0.0.1:8765"
REDIRECT = "http://127.0.0.1:9/callback"
T = TypeVar("T")


async def _client(provider: OAuthProvider, client_id: str) -> OAuthClientInformationFull:
    client = OAuthClientInformationFull(
        client_id=client_id, client_name=f"{client_id} app", redirect_uris=[AnyUrl(REDIRECT)]
    )
    client.token_endpoint_auth_method = "none"
    await provider.register_client(client)
    return client


async def _grant(provider: OAuthProvider, client: OAuthClientInformationFull, user: str) -> OAuthToken:
    """One grant of `user` to `client`, as the sign-in and consent pages and /token would make it."""
    params = AuthorizationParams(
        state=None,
        scopes=None,
        code_challenge="c" * 43,
        redirect_uri=AnyUrl(REDIRECT),
        redirect_uri_provided_explicitly=True,
        resource=f"{ISSUER}/mcp",
    )
    handle = parse_qs(urlsplit(await provider.authorize(client, params)).query)["request"][0]
    async with provider.db.unit_of_work() as session:
        principal = await UserService(session).find(user)
    signed_in = await provider.sign_in_upstream(handle, principal)
    assert signed_in is not None
    target = await provider.consent(handle, signed_in.consent_secret, approve=True)
    assert target is not None
    code = await provider.load_authorization_code(client, parse_qs(urlsplit(target).query)["code"][0])
    assert code is not None
    return await provider.exchange_authorization_code(client, code)


async def _refresh(provider: OAuthProvider, client: OAuthClientInformationFull, token: OAuthToken) -> OAuthToken:
    loaded = await provider.load_refresh_token(client, token.refresh_token or "")
    assert loaded is not None
    return await provider.exchange_refresh_token(client, loaded, [])


async def _rows(db: Database, query: str) -> list[tuple[object, ...]]:
    async with db.unit_of_work() as session:
        return [tuple(row) for row in await session.execute(text(query))]


async def _count(db: Database, query: str) -> int:
    return int((await _rows(db, query))[0][0])


async def _users(db: Database) -> None:
    async with db.unit_of_work() as session:
        users = UserService(session)
        await users.ensure_user("ada", Role.writer)
        await users.ensure_user("bob", Role.reader)


def _provider(db: Database) -> OAuthProvider:
    return OAuthProvider(db, OAuthConfig(OAuthSettings(enabled=True, public_url=ISSUER)))


async def test_the_expiry_job_purges_what_nothing_can_redeem(clean_database: Database) -> None:
    db, provider = clean_database, _provider(clean_database)
    await _users(db)
    client = await _client(provider, "purge-client")
    live = await _grant(provider, client, "ada")
    first = await _grant(provider, client, "ada")
    refreshed = await _refresh(provider, client, first)  # `first`'s refresh token is now spent, its grant live
    ended = await _grant(provider, client, "bob")
    ended_token = await provider.load_access_token(ended.access_token)
    assert ended_token is not None
    await provider.revoke_token(ended_token)
    # The live grant's access token expired (its refresh token still lives); a sign-in left half-way expired.
    async with db.unit_of_work() as session:
        live_access = await provider.load_access_token(live.access_token)
        assert live_access is not None
        await session.execute(
            text("UPDATE oauth_token SET expires_at = now() - interval '1 second' WHERE id = :id"),
            {"id": live_access.token_id},
        )
    params = AuthorizationParams(
        state=None,
        scopes=None,
        code_challenge="c" * 43,
        redirect_uri=AnyUrl(REDIRECT),
        redirect_uri_provided_explicitly=True,
        resource=f"{ISSUER}/mcp",
    )
    waiting = parse_qs(urlsplit(await provider.authorize(client, params)).query)["request"][0]
    abandoned = parse_qs(urlsplit(await provider.authorize(client, params)).query)["request"][0]
    async with db.unit_of_work() as session:
        await session.execute(
            text("UPDATE oauth_authorization SET expires_at = now() - interval '1 second' WHERE request_hash = :hash"),
            {"hash": hash_token(abandoned)},
        )
        # The three codes were exchanged a minute ago: used, and expired since.
        await session.execute(
            text("UPDATE oauth_authorization SET expires_at = now() - interval '1 second' WHERE user_id IS NOT NULL")
        )
    assert await _count(db, "SELECT count(*) FROM oauth_authorization") == 5
    assert await _count(db, "SELECT count(*) FROM oauth_token") == 8  # 3 exchanges + 1 refresh, 2 each

    done = await expire_housekeeping(db)
    # Purged: 4 authorizations (3 used codes, 1 abandoned request); 3 tokens (the expired access token, the ended
    # grant's pair).
    assert done == Housekeeping(proposals_expired=0, oauth_rows_purged=7)
    assert await _count(db, "SELECT count(*) FROM oauth_authorization") == 1
    assert await provider.pending(waiting) is not None  # the request still waiting for its sign-in
    remaining = await _rows(db, "SELECT kind, revoked_at IS NOT NULL FROM oauth_token ORDER BY id")
    # live: its refresh token; first: its access token, its spent refresh token, the pair the refresh issued
    assert sorted(remaining) == [
        ("access", False),
        ("access", False),
        ("refresh", False),
        ("refresh", False),
        ("refresh", True),
    ]
    assert await provider.load_access_token(refreshed.access_token) is not None
    assert await expire_housekeeping(db) == Housekeeping(0, 0)  # nothing more to purge

    # The spent refresh token was kept: presented again, it still ends its grant (reuse detection).
    assert await provider.load_refresh_token(client, first.refresh_token or "") is None
    assert await provider.load_access_token(refreshed.access_token) is None
    # The job's line (recorded in job_run) says what it purged.
    [expiry] = [job for job in jobs.JOBS if job.key == "expiry"]
    line = await expiry.run(db, settings_with())
    # `first`'s grant, ended by the replay: its four tokens.
    assert line == "0 pending proposal(s) expired; preview tokens dead for a day purged; 4 expired OAuth row(s) purged"


async def test_grants_are_listed_and_revoked_one_at_a_time_or_all_of_a_user(clean_database: Database) -> None:
    db, provider = clean_database, _provider(clean_database)
    await _users(db)
    client = await _client(provider, "desk")
    first, second = await _grant(provider, client, "ada"), await _grant(provider, client, "ada")
    bobs = await _grant(provider, client, "bob")
    await _refresh(provider, client, first)
    async with db.unit_of_work() as session:
        listed = await OAuthGrantService(session).list_grants()
        adas = await OAuthGrantService(session).list_grants("ada")
    assert [row.user_name for row in listed] == ["ada", "ada", "bob"]
    assert len(adas) == 2 and adas[0].client_name == "desk app" and adas[0].client_id == "desk"
    assert adas[0].refreshed_at > adas[0].started_at and adas[1].refreshed_at == adas[1].started_at

    second_token = await provider.load_access_token(second.access_token)
    assert second_token is not None
    async with db.unit_of_work() as session:
        assert await OAuthGrantService(session).revoke_grant(str(second_token.family_id)) == 2
    assert await provider.load_access_token(second.access_token) is None
    async with db.unit_of_work() as session:
        assert [row.user_name for row in await OAuthGrantService(session).list_grants()] == ["ada", "bob"]
        with pytest.raises(Exception, match="No live OAuth grant with id"):
            await OAuthGrantService(session).revoke_grant(str(second_token.family_id))  # already ended
    async with db.unit_of_work() as session:
        assert await OAuthGrantService(session).revoke_user_grants("ada") == 1
    async with db.unit_of_work() as session:
        assert await OAuthGrantService(session).list_grants("ada") == []
        assert await OAuthGrantService(session).revoke_user_grants("ada") == 0
    assert await provider.load_access_token(bobs.access_token) is not None  # another user's grant stays


# ---------------------------------------------------------------- the CLI


def _settings(database_url: str) -> Settings:
    return Settings(_env_file=None, database_url=SecretStr(database_url))


def _outside(database_url: str, work: Callable[[OAuthProvider], Awaitable[T]]) -> T:
    """The CLI runs its own event loops: the setup gets its own engine too."""

    async def run() -> T:
        database = Database(build_engine(database_url, pool_size=1))
        try:
            return await work(_provider(database))
        finally:
            await database.dispose()

    return asyncio.run(run())


def test_cli_lists_and_revokes_grants(
    database_url: str, clean_database: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = _settings(database_url)

    async def setup(provider: OAuthProvider) -> list[OAuthToken]:
        await _users(provider.db)
        client = await _client(provider, "cli-client")
        return [await _grant(provider, client, user) for user in ("ada", "ada", "bob")]

    tokens = _outside(database_url, setup)

    def grants(user: str | None = None) -> list[str]:
        cli.cmd_oauth_grants(argparse.Namespace(user=user), settings)
        return capsys.readouterr().out.splitlines()

    listed = grants()
    assert len(listed) == 3
    assert all("cli-client app (cli-client)" in line and " since " in line and " until " in line for line in listed)
    assert [line.split()[1:3] for line in listed] == [["ada", "writer"], ["ada", "writer"], ["bob", "reader"]]
    ada_grant = listed[0].split()[0]
    cli.cmd_oauth_revoke(argparse.Namespace(grant_id=ada_grant, user=None), settings)
    assert f"OAuth grant {ada_grant} revoked (2 token(s))" in capsys.readouterr().err
    assert [line.split()[1] for line in grants()] == ["ada", "bob"]
    cli.cmd_oauth_revoke(argparse.Namespace(grant_id=None, user="ada"), settings)
    assert "1 OAuth grant(s) of user 'ada' revoked" in capsys.readouterr().err
    assert [line.split()[1] for line in grants()] == ["bob"]
    cli.cmd_oauth_grants(argparse.Namespace(user="ada"), settings)
    assert capsys.readouterr() == ("", "no live OAuth grants\n")

    async def still_valid(provider: OAuthProvider) -> list[bool]:
        return [await provider.load_access_token(token.access_token) is not None for token in tokens]

    assert _outside(database_url, still_valid) == [False, False, True]

    for namespace, refusal in (
        (argparse.Namespace(grant_id=str(uuid.uuid4()), user=None), "No live OAuth grant with id "),
        (argparse.Namespace(grant_id="42", user=None), "Invalid 'GRANT_ID': '42' is not a valid id (a UUID)"),
        (argparse.Namespace(grant_id=None, user="nobody"), "No user named 'nobody'"),
    ):
        with pytest.raises(SystemExit) as refused:
            cli.cmd_oauth_revoke(namespace, settings)
        assert str(refused.value.code).startswith(refusal)
    with pytest.raises(SystemExit, match="No user named 'nobody'"):
        cli.cmd_oauth_grants(argparse.Namespace(user="nobody"), settings)


def test_the_parser_takes_the_oauth_commands() -> None:
    parser = cli._parser()
    listing = parser.parse_args(["oauth", "grants", "--user", "ada"])
    assert (listing.handler, listing.user) == (cli.cmd_oauth_grants, "ada")
    assert parser.parse_args(["oauth", "grants"]).user is None
    one = parser.parse_args(["oauth", "revoke", "0190aaaa-0000-7000-8000-000000000001"])
    assert (one.handler, one.grant_id, one.user) == (cli.cmd_oauth_revoke, "0190aaaa-0000-7000-8000-000000000001", None)
    every = parser.parse_args(["oauth", "revoke", "--user", "ada"])
    assert (every.grant_id, every.user) == (None, "ada")
    for wrong in (["oauth", "revoke"], ["oauth", "revoke", "x", "--user", "ada"]):
        with pytest.raises(SystemExit):
            parser.parse_args(wrong)
