"""The HTTP surface: /mcp (streamable HTTP, stateless, JSON), /health and /api/health-check, behind bearer auth."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import text
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from app.db.engine import is_unavailable
from app.db.models import Role
from app.db.records import Principal
from app.db.repositories.audit import AuditRepository
from app.mcp.server import PRINCIPAL_SCOPE_KEY, SynaptoServer
from app.observability import render_metrics
from app.services.auth import AuthService, TokenUsage
from app.services.context import AppContext
from app.services.health import SEVERITY_RANK, HealthService

logger = logging.getLogger(__name__)

PUBLIC_PATHS = frozenset({"/health"})
Lifespan = Callable[[Starlette], AbstractAsyncContextManager[None]]


@dataclass
class LocalPrincipal:
    """Auth mode `none`: every caller is the local user (known once the lifespan created it)."""

    value: Principal | None = None


class BearerAuthMiddleware:
    """401 before any tool runs; the authenticated principal rides in the ASGI scope."""

    def __init__(
        self, app: ASGIApp, context: AppContext, local: LocalPrincipal | None, usage: TokenUsage | None = None
    ) -> None:
        self.app = app
        self.context = context
        self.local = local
        self.usage = usage if usage is not None else TokenUsage()  # written by whoever runs `usage.flushing`

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        try:
            principal = self.local.value if self.local is not None else await self._authenticate(scope)
        except DatabaseUnavailable:
            await _unavailable(scope, receive, send)
            return
        if principal is None:
            await _unauthorized(scope, receive, send)
            return
        scope[PRINCIPAL_SCOPE_KEY] = principal
        await self.app(scope, receive, send)

    async def _authenticate(self, scope: Scope) -> Principal | None:
        header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        try:
            async with self.context.db.autocommit() as session:  # one SELECT: no transaction around it
                return await AuthService(session).verify(token.strip(), self.usage)
        except Exception as error:
            if is_unavailable(error):  # an outage is not a bad token: answer a retryable 503, not 401
                logger.warning("token verification: database unavailable (%s)", type(error).__name__)
                raise DatabaseUnavailable from error
            logger.exception("token verification failed")
            return None


class HostOriginMiddleware:
    """DNS-rebinding protection on every route, not only /mcp: unknown Host → 421, unknown Origin → 403.

    /health stays open to any Host (load balancers and container probes address it by IP; it reveals nothing).
    """

    def __init__(self, app: ASGIApp, security: TransportSecuritySettings) -> None:
        self.app = app
        self.checker = TransportSecurityMiddleware(security)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in PUBLIC_PATHS:
            refusal = await self.checker.validate_request(Request(scope))
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


class DatabaseUnavailable(Exception):
    """The token could not be checked because the database is unreachable."""


UNAVAILABLE = "Database unavailable; retry shortly"


async def _unavailable(scope: Scope, receive: Receive, send: Send) -> None:
    """503 + Retry-After; on /mcp a JSON-RPC error (the MCP client surfaces its message), else {error}."""
    body: dict[str, object] = {"error": UNAVAILABLE, "retryable": True}
    if scope["path"].startswith("/mcp"):
        detail = {"statusCode": 503, "retryable": True}
        body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": UNAVAILABLE, "data": detail}}
    response = JSONResponse(body, status_code=503, headers={"Retry-After": "1"})
    await response(scope, receive, send)


async def _unauthorized(scope: Scope, receive: Receive, send: Send) -> None:
    response = JSONResponse(
        {"error": "Unauthorized: send 'Authorization: Bearer <token>' (create one with `synaptomind token create`)"},
        status_code=401,
        headers={"WWW-Authenticate": 'Bearer realm="synaptomind"'},
    )
    await response(scope, receive, send)


def health_endpoint(context: AppContext) -> Callable[[Request], Awaitable[JSONResponse]]:
    async def health(request: Request) -> JSONResponse:
        database = await _database_status(context)
        embedder = context.embedding.status()
        status = "ok" if database == "ok" else "unavailable"
        body = {"status": status, "checks": {"database": database, "embedder": embedder}}
        return JSONResponse(body, status_code=200 if database == "ok" else 503)

    return health


def health_check_endpoint(context: AppContext) -> Callable[[Request], Awaitable[JSONResponse]]:
    """GET: the health report (bearer auth). POST …/fix: the safe autofixes (admin), then the new report."""

    async def health_check(request: Request) -> JSONResponse:
        severity = request.query_params.get("severity") or None
        if severity is not None and severity not in SEVERITY_RANK:
            return JSONResponse({"error": "severity must be one of: info, warning, critical"}, status_code=400)
        details = request.query_params.get("include_details", "").lower() in ("1", "true", "yes")
        try:
            async with context.db.unit_of_work() as session:
                report = await HealthService(session).report(details, severity)
        except Exception as error:
            logger.warning("health report failed: %s", type(error).__name__)
            return JSONResponse({"error": "Database unavailable; retry shortly"}, status_code=503)
        return JSONResponse(report)

    return health_check


def health_fix_endpoint(context: AppContext) -> Callable[[Request], Awaitable[JSONResponse]]:
    async def health_fix(request: Request) -> JSONResponse:
        principal: Principal = request.scope[PRINCIPAL_SCOPE_KEY]
        if principal.role is not Role.admin:
            return JSONResponse({"error": "Forbidden: the safe autofixes need the admin role"}, status_code=403)
        async with context.db.unit_of_work() as session:
            fixed = await HealthService(session).autofix()
            await AuditRepository(session).record(principal.user_id, "api", "health_fix", [], None, dict(fixed))
        async with context.db.unit_of_work() as session:
            report = await HealthService(session).report(False)
        return JSONResponse({"fixed": fixed, **report})

    return health_fix


async def _database_status(context: AppContext) -> str:
    try:
        async with context.db.engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
        return "ok"
    except Exception as error:
        logger.warning("database check failed: %s", type(error).__name__)
        return "unavailable"


def metrics_endpoint(context: AppContext) -> Callable[[Request], Awaitable[Response]]:
    """Prometheus text format; any authenticated role; no thought data in it."""

    def pool_stats() -> tuple[int, int]:
        pool = context.db.engine.pool
        checked_out = getattr(pool, "checkedout", lambda: 0)()
        size = getattr(pool, "size", lambda: 0)()
        return int(checked_out), int(size)

    async def metrics(request: Request) -> Response:
        return Response(render_metrics(pool_stats), media_type=CONTENT_TYPE_LATEST)

    return metrics


def transport_security(host: str, port: int, hosts: list[str], origins: list[str]) -> TransportSecuritySettings:
    """DNS-rebinding protection stays on; loopback names are always allowed."""
    allowed_hosts = [*hosts, "127.0.0.1:*", "localhost:*", "[::1]:*"]
    allowed_origins = [*origins, "http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    if host not in ("0.0.0.0", "::", "127.0.0.1", "localhost", "::1"):
        allowed_hosts.append(f"{host}:{port}")
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins
    )


def build_http_app(
    context: AppContext,
    server: SynaptoServer,
    security: TransportSecuritySettings,
    max_body_bytes: int,
    local: LocalPrincipal | None,
    lifespan: Lifespan | None = None,
) -> ASGIApp:
    mcp_app = server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        json_response=True,
        transport_security=security,
        max_request_body_size=max_body_bytes,
    )

    usage = TokenUsage()

    @asynccontextmanager
    async def run(app: Starlette) -> AsyncIterator[None]:
        async with server.session_manager.run(), AsyncExitStack() as stack:
            if lifespan is not None:
                await stack.enter_async_context(lifespan(app))
            # Entered last, left first: the final flush of the tokens' last uses runs before the outer lifespan
            # disposes of the engine.
            await stack.enter_async_context(usage.flushing(context.db))
            yield

    routes = [
        Route("/health", health_endpoint(context), methods=["GET"]),
        Route("/api/health-check", health_check_endpoint(context), methods=["GET"]),
        Route("/api/health-check/fix", health_fix_endpoint(context), methods=["POST"]),
        Route("/metrics", metrics_endpoint(context), methods=["GET"]),
        Mount("/", app=mcp_app),
    ]
    starlette = Starlette(routes=routes, lifespan=run)
    # Inside the token check: an unauthenticated request still gets its 401 first, whatever its Host.
    return BearerAuthMiddleware(HostOriginMiddleware(starlette, security), context, local, usage)
