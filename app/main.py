"""Composition root: settings → database → embedder → MCP server → HTTP app."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import os
import re
import sys
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.config import Settings
from app.db import replicas
from app.db.engine import Database, build_engine
from app.db.models import Role
from app.db.records import Principal
from app.embedding.backfill import run_backfill_loop
from app.embedding.runtime import EmbeddingRuntime
from app.mcp.server import SynaptoServer
from app.mcp.tools.catalog import ALL_SPECS
from app.services.admin.users import UserService
from app.services.auth.ratelimit import SharedRateLimiter
from app.services.auth.tokens import AuthService
from app.services.context import AppContext
from app.services.jobs.background import run_jobs_loop

if TYPE_CHECKING:
    # The HTTP side (Starlette, the console, OAuth, single sign-on) is imported by `create_http_app` only:
    # `stdio` answers its handshake without loading it (docs/BENCHMARKS.md, stdio start).
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.types import ASGIApp

    from app.db.opening import DatabaseHandle
    from app.http.app import LocalPrincipal
    from app.http.oidc import UpstreamSignIn
    from app.http.ui import SessionCodec
    from app.services.auth.passwords import PasswordCheck

logger = logging.getLogger("app")


def build_context(settings: Settings, url: str) -> AppContext:
    timeout = replicas.CONNECT_TIMEOUT_SECONDS
    read_engines = [build_engine(read_url, settings.pool_size, timeout) for read_url in settings.read_urls()]
    replica_set = replicas.ReplicaSet.of(read_engines) if read_engines else None
    database = Database(build_engine(url, settings.pool_size), replica_set)
    view = settings_view(settings, url)
    per_minute = settings.rate_limit.per_minute
    limiter = SharedRateLimiter(database, per_minute) if per_minute else None  # one bucket across workers
    return AppContext(database, EmbeddingRuntime(settings.embedding), settings, view, limiter)


def open_checked_database(settings: Settings) -> DatabaseHandle:
    """`open_database`, with the server and extension versions checked before migrating.

    An old server would otherwise fail midway through a migration, or (pgvector 0.7) migrate and then
    serve short pages for project-filtered searches; the message says what is needed and what was found.
    """
    from app.db import migrations
    from app.db.opening import open_database
    from app.db.requirements import DatabaseRequirementError, check_database

    handle = open_database(settings, migrate=False)
    try:
        check_database(handle.url)
        migrations.upgrade(handle.url)
    except DatabaseRequirementError as error:
        handle.close()
        raise SystemExit(str(error)) from None
    except BaseException:
        handle.close()  # the embedded server stops with its owner
        raise
    return handle


def mask_url(url: str) -> str:
    """Hide the password of a database URL."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:****@", url)


def settings_view(settings: Settings, url: str) -> dict[str, Any]:
    """Every effective setting, flattened with dots; secrets masked."""
    flat: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else key, inner)
        else:
            flat[prefix] = str(value) if isinstance(value, Path) else value

    walk("", settings.model_dump(exclude={"database_url", "read_database_urls"}))
    flat["database_url"] = mask_url(url) if settings.database_url else f"embedded ({settings.data_dir / 'pgdata'})"
    flat["read_database_urls"] = ",".join(mask_url(read_url) for read_url in settings.read_urls())
    return dict(sorted(flat.items()))


@asynccontextmanager
async def background(context: AppContext, jobs: bool = False, embedder_after: float = 0.0) -> AsyncIterator[None]:
    """Embedder loading, the backfill and (with `jobs`) the periodic jobs run beside the requests, never in front
    of them. `embedder_after`: seconds before the embedder starts loading (its imports and ONNX sessions take
    the CPU a client's handshake needs first; until it is ready, tools answer as for a loading embedder)."""
    tasks = [
        asyncio.create_task(_after(embedder_after, _load_then_freeze(context)), name="embedder-load"),
        asyncio.create_task(run_backfill_loop(context.db, context.embedding), name="embedding-backfill"),
    ]
    if jobs:
        tasks.append(asyncio.create_task(run_jobs_loop(context.db, context.settings), name="periodic-jobs"))
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await context.db.dispose()


def freeze_long_lived() -> None:
    """Take what the process holds once it has started (modules, the model's tokenizer, SQLAlchemy's and pydantic's
    caches: ~240 k objects the collector tracks) out of the garbage collector's full collections, which walked them
    all: at 100 k thoughts a search page of 100 hits set one off every ~8 requests, ~150 ms of CPU each at load 9,
    its p95 (docs/BENCHMARKS.md, "Console pages at 100 k"). Frozen objects are never collected, so only after
    start, once: what is garbage by then is collected first."""
    gc.collect()
    gc.freeze()


async def _load_then_freeze(context: AppContext) -> None:
    await context.embedding.load()
    freeze_long_lived()


async def _after(seconds: float, work: Coroutine[Any, Any, None]) -> None:
    if seconds > 0:
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            work.close()  # never awaited: closed, so no "never awaited" warning
            raise
    await work


async def bootstrap_admin(context: AppContext, data_dir: Path) -> None:
    async with context.db.unit_of_work() as session:
        token = await AuthService(session).bootstrap_admin()
    if token is not None:
        token_file = await asyncio.to_thread(write_admin_token, data_dir, token)
        # Apart from the log lines around it, alone on its line: a person copies it from the terminal.
        notice = f"First run: created user 'admin'. Its API token (also in {token_file}):"
        print(f"\n{notice}\n\n{token}\n", file=sys.stderr, flush=True)


def write_admin_token(data_dir: Path, token: str) -> Path:
    """The first admin token, readable by its owner only (mode 0600)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    token_file = data_dir / "admin.token"
    descriptor = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(token + "\n")
    return token_file


async def local_principal(context: AppContext, name: str) -> Principal:
    """The local user that stdio (and auth mode `none`) act as: an admin of this machine, who sees every project
    whatever the membership (docs/SECURITY.md)."""
    async with context.db.unit_of_work() as session:
        user = await UserService(session).ensure_user(name, Role.admin)
    return dataclasses.replace(user, sees_everything=True)


def build_server(context: AppContext, principal: Principal | None) -> SynaptoServer:
    return SynaptoServer(context, ALL_SPECS, principal)


def create_http_app(settings: Settings, context: AppContext, first_run: bool = True) -> ASGIApp:
    """The ASGI app `serve` runs: auth, ops routes, /mcp, and the background jobs in its lifespan. `first_run`:
    this process creates the first admin (or the local user); False in the workers of `serve --workers N`, whose
    parent did it once before starting them (`prepare_workers`)."""
    from starlette.applications import Starlette

    from app.http.app import LocalPrincipal, build_http_app, transport_security
    from app.http.oidc import UpstreamSignIn
    from app.http.ui import SessionCodec, load_secret
    from app.services.auth.oidc import CALLBACK_PATH, OidcSignIn
    from app.services.auth.passwords import PasswordCheck

    local = LocalPrincipal() if settings.auth.mode == "none" else None

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with background(context, jobs=settings.jobs.enabled):
            if local is None:
                if first_run:
                    await bootstrap_admin(context, settings.data_dir)
            else:
                local.value = await local_principal(context, settings.local_user)
            yield

    server = build_server(context, None)
    security = transport_security(
        settings.host, settings.port, settings.http.allowed_hosts, settings.http.allowed_origins
    )
    passwords = PasswordCheck()  # one per process: the OAuth and console sign-in pages throttle together
    single_sign_on = settings.oauth.oidc.enabled and local is None
    # The console's session key also signs pending single sign-ons (every replica must share it for either).
    keyed = settings.console.enabled or single_sign_on
    key = load_secret(settings.console.secret_key, settings.data_dir) if keyed else b""
    codec = SessionCodec(key, settings.console.session_hours * 3600) if settings.console.enabled else None
    upstream = None
    if single_sign_on and settings.oauth.public_url:  # the settings refuse an issuer without them
        oidc = OidcSignIn(settings.oauth.oidc, settings.oauth.public_url + CALLBACK_PATH)
        upstream = UpstreamSignIn(oidc, key, codec)
    app = build_http_app(
        context, server, security, settings.http.max_body_bytes, local, lifespan, settings.oauth, passwords, upstream
    )
    return with_console(app, settings, context, local, security, codec, passwords, upstream)


async def prepare_workers(settings: Settings, url: str) -> None:
    """What one process does once before the workers of `serve --workers N` start: the first admin (its token
    printed once, not once per worker) or the local user (two workers would race to insert it)."""
    context = build_context(settings, url)
    try:
        if settings.auth.mode == "none":
            await local_principal(context, settings.local_user)
        else:
            await bootstrap_admin(context, settings.data_dir)
    finally:
        await context.db.dispose()


def with_console(
    app: ASGIApp,
    settings: Settings,
    context: AppContext,
    local: LocalPrincipal | None,
    security: TransportSecuritySettings,
    codec: SessionCodec | None,
    passwords: PasswordCheck | None = None,
    upstream: UpstreamSignIn | None = None,
) -> ASGIApp:
    """/ui beside the service (docs/CONSOLE.md): its pages authenticate their session cookie themselves, and the
    same Host/Origin checks as every other route guard them (DNS rebinding, cross-site posts)."""
    from app.http.app import HostOriginMiddleware, with_public_url
    from app.http.ui import ConsoleConfig, ConsoleRouter, build_console
    from app.services.auth.passwords import PasswordCheck

    if codec is None:
        return app
    config = ConsoleConfig(
        codec,
        (lambda: local.value) if local is not None else None,
        passwords or PasswordCheck(),
        upstream.oidc.name if upstream is not None else None,
    )
    if local is None and settings.oauth.enabled and settings.oauth.public_url:
        # As build_http_app allows it for the other routes: the public URL's Host reaches /ui through the proxy.
        security = with_public_url(security, settings.oauth.public_url)
    return ConsoleRouter(app, HostOriginMiddleware(build_console(context, config), security))
