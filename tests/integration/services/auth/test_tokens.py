"""API tokens on a real PostgreSQL: expiry refused like revocation, last uses written in batches, and the
`synaptomind token create | list | rotate` commands."""

from __future__ import annotations

import argparse
import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import event, text

from app import cli
from app.config import Settings
from app.db.engine import Database, build_engine
from app.db.models import Role
from app.db.records import Principal
from app.services.auth.tokens import AuthService, TokenUsage

# ---------------------------------------------------------------- helpers


@contextmanager
def statements(database: Database) -> Iterator[list[str]]:
    """Every SQL statement the database's engine sends while the block runs."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement)

    event.listen(database.engine.sync_engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(database.engine.sync_engine, "before_cursor_execute", record)


def token_updates(seen: list[str]) -> list[str]:
    return [statement for statement in seen if statement.lstrip().upper().startswith("UPDATE API_TOKEN")]


async def verify(database: Database, token: str, usage: TokenUsage | None = None) -> Principal | None:
    """As the bearer middleware does: a lone read, outside a transaction."""
    async with database.autocommit() as session:
        return await AuthService(session).verify(token, usage)


async def last_used(database: Database) -> dict[str, datetime | None]:
    async with database.unit_of_work() as session:
        return {row.label or "": row.last_used_at for row in await AuthService(session).list_tokens()}


async def create(database: Database, label: str, expires_at: datetime | None = None) -> str:
    async with database.unit_of_work() as session:
        token, _ = await AuthService(session).create_token("ci", Role.writer, label, expires_at)
    return token


# ---------------------------------------------------------------- expiry


async def test_an_expired_token_is_refused_and_logged_once(
    clean_database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    fresh = await create(clean_database, "fresh", datetime.now(UTC) + timedelta(minutes=5))
    expired = await create(clean_database, "expired", datetime.now(UTC) + timedelta(minutes=5))
    forever = await create(clean_database, "forever")
    async with clean_database.unit_of_work() as session:  # time passes for one of them
        await session.execute(
            text("UPDATE api_token SET expires_at = now() - interval '1 second' WHERE label = 'expired'")
        )
    usage = TokenUsage()
    with caplog.at_level(logging.WARNING, logger="app.services.auth.tokens"):
        assert await verify(clean_database, fresh, usage) is not None
        assert await verify(clean_database, forever, usage) is not None
        assert await verify(clean_database, expired, usage) is None
        assert await verify(clean_database, expired, usage) is None  # a retrying client: one warning an hour
    [warning] = [record.getMessage() for record in caplog.records]
    assert "expired at" in warning and "synaptomind token rotate" in warning
    assert expired not in warning  # the id, never the secret
    assert len(usage.pending()) == 2  # only the accepted tokens' uses are recorded

    async with clean_database.unit_of_work() as session:
        rows = {row.label: row for row in await AuthService(session).list_tokens()}
    assert (rows["fresh"].expired, rows["forever"].expired, rows["expired"].expired) == (False, False, True)
    assert rows["forever"].expires_at is None


# ---------------------------------------------------------------- last use, batched


async def test_many_calls_write_last_use_once_in_one_update(clean_database: Database) -> None:
    tokens = [await create(clean_database, f"t{index}") for index in range(3)]
    usage = TokenUsage()
    with statements(clean_database) as seen:
        for _ in range(20):
            for token in tokens:
                assert await verify(clean_database, token, usage) is not None
    assert token_updates(seen) == []  # no write on any request
    assert set((await last_used(clean_database)).values()) == {None}

    before_flush = datetime.now(UTC)
    with statements(clean_database) as seen:
        assert await usage.flush(clean_database) == 3
    assert len(token_updates(seen)) == 1  # one UPDATE for every token
    used = await last_used(clean_database)
    assert all(at is not None and before_flush - timedelta(seconds=30) < at <= before_flush for at in used.values())

    with statements(clean_database) as seen:
        assert await usage.flush(clean_database) == 0  # nothing new: not even a round trip
    assert seen == []


async def test_an_older_use_never_overwrites_a_newer_one(clean_database: Database) -> None:
    """Another replica may flush a later use first."""
    token = await create(clean_database, "shared")
    older, newer = TokenUsage(), TokenUsage()
    assert await verify(clean_database, token, older) is not None
    assert await verify(clean_database, token, newer) is not None
    assert await newer.flush(clean_database) == 1
    written = (await last_used(clean_database))["shared"]
    assert await older.flush(clean_database) == 0
    assert (await last_used(clean_database))["shared"] == written


class BrokenDatabase:
    """The database is away: every unit of work fails as it opens."""

    @asynccontextmanager
    async def unit_of_work(self) -> AsyncIterator[Any]:
        raise ConnectionRefusedError("database away")
        yield  # pragma: no cover


async def test_a_failed_flush_keeps_the_uses_for_the_next(
    clean_database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    token = await create(clean_database, "kept")
    usage = TokenUsage()
    assert await verify(clean_database, token, usage) is not None
    recorded = usage.pending()
    with caplog.at_level(logging.WARNING, logger="app.services.auth.tokens"):
        assert await usage.flush(BrokenDatabase()) == 0  # type: ignore[arg-type]
    assert "token last-use not written" in caplog.text
    assert usage.pending() == recorded
    assert await verify(clean_database, token, usage) is not None  # a newer use replaces the kept one
    newest = usage.pending()
    assert list(newest.values()) != list(recorded.values())
    assert await usage.flush(clean_database) == 1
    assert (await last_used(clean_database))["kept"] == next(iter(newest.values()))


async def test_flushing_writes_on_its_interval_and_at_its_end(clean_database: Database) -> None:
    token = await create(clean_database, "served")
    usage = TokenUsage(interval=0.05)
    async with usage.flushing(clean_database):
        assert await verify(clean_database, token, usage) is not None
        for _ in range(100):
            if (await last_used(clean_database))["served"] is not None:
                break
            await asyncio.sleep(0.02)
        first = (await last_used(clean_database))["served"]
        assert first is not None
        usage.interval = 3600  # the loop sleeps past the block: only the final flush can write the next use
        await asyncio.sleep(0.1)
        assert await verify(clean_database, token, usage) is not None
    last = (await last_used(clean_database))["served"]
    assert last is not None and last > first


# ---------------------------------------------------------------- rotation (service)


async def test_rotation_revokes_the_old_token_and_keeps_user_role_and_label(clean_database: Database) -> None:
    old = await create(clean_database, "deploy", datetime.now(UTC) + timedelta(days=1))
    async with clean_database.unit_of_work() as session:
        [row] = await AuthService(session).list_tokens()
        rotated = await AuthService(session).rotate(str(row.id), None)
    assert (rotated.user.name, rotated.user.role, rotated.expires_at) == ("ci", Role.writer, None)
    assert await verify(clean_database, old) is None
    principal = await verify(clean_database, rotated.token)
    assert principal is not None and (principal.name, principal.role, principal.token_id) == (
        "ci",
        Role.writer,
        rotated.token_id,
    )
    async with clean_database.unit_of_work() as session:
        rows = {row.id: row for row in await AuthService(session).list_tokens()}
        with pytest.raises(Exception, match="No active token"):
            await AuthService(session).rotate(str(row.id), None)  # revoked: not rotated twice
    assert rows[row.id].revoked_at is not None
    assert rows[rotated.token_id].label == "deploy" and rows[rotated.token_id].revoked_at is None


# ---------------------------------------------------------------- the CLI


def _settings(database_url: str, **auth: Any) -> Settings:
    return Settings(_env_file=None, database_url=SecretStr(database_url), auth=auth)


def _listing(settings: Settings, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """`token list`, by label (the last column)."""
    cli.cmd_token_list(argparse.Namespace(), settings)
    lines = capsys.readouterr().out.splitlines()
    return {line.split()[-1]: line for line in lines}


def _verify_outside(database_url: str, token: str) -> Principal | None:
    """The CLI runs its own event loops: the check gets its own engine too."""

    async def run() -> Principal | None:
        database = Database(build_engine(database_url, pool_size=1))
        try:
            return await verify(database, token)
        finally:
            await database.dispose()

    return asyncio.run(run())


def test_cli_create_list_and_rotate(
    database_url: str, clean_database: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = _settings(database_url, token_lifetime_days=7)
    today = datetime.now(UTC)

    def create_cli(label: str, expires: str | None) -> str:
        namespace = argparse.Namespace(user="ci", role="writer", label=label, expires=expires)
        cli.cmd_token_create(namespace, settings)
        return capsys.readouterr().out.strip()

    default = create_cli("default", None)
    month = create_cli("month", "30d")
    forever = create_cli("forever", "never")
    assert all(token.startswith("smt_") for token in (default, month, forever))
    listed = _listing(settings, capsys)
    assert f"expires {today + timedelta(days=7):%Y-%m-%d}" in listed["default"]  # the setting's lifetime
    assert f"expires {today + timedelta(days=30):%Y-%m-%d}" in listed["month"]
    assert "no expiry" in listed["forever"]
    assert all(" active " in line and "never used" in line for line in listed.values())

    month_id = listed["month"].split()[0]
    cli.cmd_token_rotate(argparse.Namespace(token_id=month_id, expires="12h"), settings)
    captured = capsys.readouterr()
    successor = captured.out.strip()
    assert successor.startswith("smt_") and successor != month
    assert f"token {month_id} revoked; its successor" in captured.err and "user 'ci' (role writer)" in captured.err
    assert _verify_outside(database_url, month) is None
    principal = _verify_outside(database_url, successor)
    assert principal is not None and (principal.name, principal.role) == ("ci", Role.writer)

    cli.cmd_token_list(argparse.Namespace(), settings)
    everything = capsys.readouterr().out.splitlines()
    assert len(everything) == 4
    [revoked] = [line for line in everything if line.startswith(month_id)]
    assert " revoked " in revoked
    [renewed] = [line for line in everything if line.endswith("month") and not line.startswith(month_id)]
    assert " active " in renewed and f"expires {today + timedelta(hours=12):%Y-%m-%d}" in renewed


def test_cli_refusals_name_the_argument(
    database_url: str, clean_database: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = _settings(database_url)
    with pytest.raises(SystemExit) as refused:
        cli.cmd_token_create(argparse.Namespace(user="ci", role=None, label=None, expires="10x"), settings)
    assert str(refused.value.code).startswith('--expires "10x": use a number of hours/days/weeks/years')
    with pytest.raises(SystemExit) as refused:
        cli.cmd_token_rotate(argparse.Namespace(token_id=str(uuid.uuid4()), expires=None), settings)
    assert str(refused.value.code).startswith("No active token with id ")
    with pytest.raises(SystemExit) as refused:
        cli.cmd_token_rotate(argparse.Namespace(token_id="42", expires=None), settings)
    assert refused.value.code == "'42' is not a token id (see `synaptomind token list`)"
    assert _listing(settings, capsys) == {}  # nothing was created


def test_the_parser_takes_expires_on_create_and_rotate() -> None:
    parser = cli._parser()
    create = parser.parse_args(["token", "create", "--user", "u", "--role", "reader", "--expires", "90d"])
    assert (create.handler, create.expires) == (cli.cmd_token_create, "90d")
    assert parser.parse_args(["token", "create", "--user", "u"]).expires is None  # the setting's lifetime
    rotate = parser.parse_args(["token", "rotate", "0b5e", "--expires", "never"])
    assert (rotate.handler, rotate.token_id, rotate.expires) == (cli.cmd_token_rotate, "0b5e", "never")
