"""The HTTP surface: /mcp (streamable HTTP, stateless, JSON), /health and /api/health-check, behind bearer auth."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from app.config import OAuthSettings
from app.db.engine import is_unavailable
from app.errors import AppError
from app.http.oauth import PAGE_PATHS, PROTOCOL_PATHS, api_token_role, oauth_routes, resource_metadata_url
from app.http.oidc import UpstreamSignIn
from app.mcp.server import PRINCIPAL_SCOPE_KEY, SynaptoServer
from app.observability import render_metrics
from app.services.auth.oauth import ACCESS_PREFIX, OAuthConfig, OAuthProvider, OAuthTokenVerifier, StoredAccessToken
from app.services.auth.passwords import PasswordCheck
from app.services.auth.tokens import AuthService, TokenUsage
from app.services.context import AppContext
from app.services.status.health import SEVERITY_RANK
from app.services.status.operations import FIX_CALL, caller_health_report, fix_health, probe_database
from app.services.values import Principal

logger = logging.getLogger(__name__)

PUBLIC_PATHS = frozenset({"/health"})
Lifespan = Callable[[Starlette], AbstractAsyncContextManager[None]]


@dataclass(frozen=True)
class OAuthGate:
    """MCP authorization on /mcp (oauth.enabled): OAuth access tokens beside the static ones, and the 401's
    pointer to the protected resource metadata (RFC 9728 §5.1)."""

    backend: BearerAuthBackend  # the SDK's check: unexpired, and issued for this resource (RFC 8707)
    config: OAuthConfig

    def resource_metadata(self, scope: Scope) -> str:
        """The metadata URL in the name the client used for this server (a loopback alias, else the public URL)."""
        host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
        return resource_metadata_url(self.config, host)

    @property
    def open_paths(self) -> frozenset[str]:
        return PROTOCOL_PATHS | PAGE_PATHS


@dataclass
class LocalPrincipal:
    """Auth mode `none`: every caller is the local user (known once the lifespan created it)."""

    value: Principal | None = None


class BearerAuthMiddleware:
    """401 before any tool runs; the authenticated principal rides in the ASGI scope."""

    def __init__(
        self,
        app: ASGIApp,
        context: AppContext,
        local: LocalPrincipal | None,
        usage: TokenUsage | None = None,
        oauth: OAuthGate | None = None,
    ) -> None:
        self.app = app
        self.context = context
        self.local = local
        self.usage = usage if usage is not None else TokenUsage()  # written by whoever runs `usage.flushing`
        self.oauth = oauth
        self.open_paths = PUBLIC_PATHS | (oauth.open_paths if oauth is not None else frozenset())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.open_paths:
            await self.app(scope, receive, send)
            return
        if scope["path"].startswith(WELL_KNOWN):
            # Discovery probes (RFC 8615): what is not served is absent, not a question of credentials.
            await JSONResponse({"error": "Not found"}, status_code=404)(scope, receive, send)
            return
        try:
            principal = self.local.value if self.local is not None else await self._authenticate(scope)
        except DatabaseUnavailable:
            await _unavailable(scope, receive, send)
            return
        if principal is None:
            metadata = self.oauth.resource_metadata(scope) if self.oauth else None
            await _unauthorized(scope, receive, send, metadata, presented=_bearer(scope) is not None)
            return
        scope[PRINCIPAL_SCOPE_KEY] = principal
        await self.app(scope, receive, send)

    async def _authenticate(self, scope: Scope) -> Principal | None:
        token = _bearer(scope)
        if token is None:
            return None
        if self.oauth is not None and token.startswith(ACCESS_PREFIX):
            return await self._authenticate_oauth(scope)
        try:
            async with self.context.db.autocommit() as session:  # one SELECT: no transaction around it
                return await AuthService(session).verify(token, self.usage)
        except Exception as error:
            if is_unavailable(error):  # an outage is not a bad token: answer a retryable 503, not 401
                logger.warning("token verification: database unavailable (%s)", type(error).__name__)
                raise DatabaseUnavailable from error
            logger.exception("token verification failed")
            return None

    async def _authenticate_oauth(self, scope: Scope) -> Principal | None:
        assert self.oauth is not None
        try:
            found = await self.oauth.backend.authenticate(HTTPConnection(scope))
        except Exception as error:
            if is_unavailable(error):
                logger.warning("OAuth token verification: database unavailable (%s)", type(error).__name__)
                raise DatabaseUnavailable from error
            logger.exception("OAuth token verification failed")
            return None
        if found is None:
            return None
        token = found[1].access_token
        return token.principal() if isinstance(token, StoredAccessToken) else None


WELL_KNOWN = "/.well-known/"


def _bearer(scope: Scope) -> str | None:
    """The bearer token the request presents (None: no `Authorization: Bearer <token>` header)."""
    header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


class HostOriginMiddleware:
    """DNS-rebinding protection on every route, not only /mcp: unknown Host → 421, unknown Origin → 403.

    /health stays open to any Host (load balancers and container probes address it by IP; it reveals nothing).
    """

    def __init__(self, app: ASGIApp, security: TransportSecuritySettings, exempt: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.checker = TransportSecurityMiddleware(security)
        # The OAuth protocol endpoints: browser-based clients call them cross-origin (the SDK answers CORS).
        self.exempt = PUBLIC_PATHS | exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in self.exempt:
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


NO_TOKEN = "Unauthorized: send 'Authorization: Bearer <token>' (create one with `synaptomind token create`)"
# One text for a token that is unknown, revoked or expired: the answer tells none apart (docs/SECURITY.md).
INVALID_TOKEN = "the bearer token is not valid (unknown, revoked or expired)"


async def _unauthorized(
    scope: Scope, receive: Receive, send: Send, resource_metadata: str | None = None, presented: bool = False
) -> None:
    """401. Without credentials the challenge carries no error code; with a token that is not valid it says
    `error="invalid_token"` (RFC 6750 §3.1), so a client knows to refresh or sign in again."""
    challenge = 'Bearer realm="synaptomind"'
    if presented:
        challenge += f', error="invalid_token", error_description="{INVALID_TOKEN}"'
    if resource_metadata is not None:  # MCP authorization: where an OAuth client discovers how to get a token
        challenge += f', resource_metadata="{resource_metadata}"'
    # One body for every 401 (clients and docs/API.md match on it); the challenge tells the two cases apart.
    response = JSONResponse({"error": NO_TOKEN}, status_code=401, headers={"WWW-Authenticate": challenge})
    await response(scope, receive, send)


def health_endpoint(context: AppContext) -> Callable[[Request], Awaitable[JSONResponse]]:
    async def health(request: Request) -> JSONResponse:
        database = await _database_status(context)
        embedder = context.embedding.status()
        status = "ok" if database == "ok" else "unavailable"
        checks: dict[str, Any] = {"database": database, "embedder": embedder}
        if context.db.replicas is not None and database == "ok":
            # Reported, not counted: reads fall back to the primary (docs/DEPLOY.md, "Read replicas").
            checks["replicas"] = await context.db.replicas.status(context.db.engine)
        body = {"status": status, "checks": checks}
        return JSONResponse(body, status_code=200 if database == "ok" else 503)

    return health


def health_check_endpoint(context: AppContext) -> Callable[[Request], Awaitable[JSONResponse]]:
    """GET: the health report (bearer auth). POST …/fix: the safe autofixes (admin), then the new report."""

    async def health_check(request: Request) -> JSONResponse:
        severity = request.query_params.get("severity") or None
        if severity is not None and severity not in SEVERITY_RANK:
            return JSONResponse({"error": "severity must be one of: info, warning, critical"}, status_code=400)
        details = request.query_params.get("include_details", "").lower() in ("1", "true", "yes")
        principal: Principal = request.scope[PRINCIPAL_SCOPE_KEY]
        try:
            # Counts and details over the caller's projects, as memory_status action=health answers them.
            report = await caller_health_report(context, principal, "GET /api/health-check", details, severity)
        except Exception as error:
            logger.warning("health report failed: %s", type(error).__name__)
            return JSONResponse({"error": "Database unavailable; retry shortly"}, status_code=503)
        return JSONResponse(report)

    return health_check


def health_fix_endpoint(context: AppContext) -> Callable[[Request], Awaitable[JSONResponse]]:
    async def health_fix(request: Request) -> JSONResponse:
        principal: Principal = request.scope[PRINCIPAL_SCOPE_KEY]
        try:
            fixed = await fix_health(context, principal)
        except AppError as error:  # not an admin, or an admin who cannot see every project
            return JSONResponse({"error": error.message}, status_code=error.status_code)
        report = await caller_health_report(context, principal, FIX_CALL, False, None)
        return JSONResponse({"fixed": fixed, **report})

    return health_fix


async def _database_status(context: AppContext) -> str:
    try:
        await probe_database(context)
        return "ok"
    except Exception as error:  # the probe answers `unavailable` whatever went wrong
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
    oauth_settings: OAuthSettings | None = None,
    passwords: PasswordCheck | None = None,
    upstream: UpstreamSignIn | None = None,
) -> ASGIApp:
    oauth = OAuthConfig.from_settings(oauth_settings) if oauth_settings is not None and local is None else None
    if oauth is not None:
        security = with_public_url(security, oauth.issuer)
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

    routes: list[BaseRoute] = [
        Route("/health", health_endpoint(context), methods=["GET"]),
        Route("/api/health-check", health_check_endpoint(context), methods=["GET"]),
        Route("/api/health-check/fix", health_fix_endpoint(context), methods=["POST"]),
        Route("/metrics", metrics_endpoint(context), methods=["GET"]),
    ]
    gate: OAuthGate | None = None
    if oauth is not None:
        provider = OAuthProvider(context.db, oauth, passwords=passwords)
        routes += oauth_routes(provider, oauth, api_token_role(context.db), upstream)
        backend = BearerAuthBackend(OAuthTokenVerifier(provider), resource_server_url=AnyHttpUrl(oauth.resource))
        gate = OAuthGate(backend, oauth)
        registration = "open" if oauth.registration_open else "closed (an admin's API token registers a client)"
        aliases = f"; also answers as {', '.join(oauth.origins[1:])}" if len(oauth.origins) > 1 else ""
        logger.info(
            "OAuth on: issuer %s, resource %s, registration %s%s", oauth.issuer, oauth.resource, registration, aliases
        )
    routes.append(Mount("/", app=mcp_app))
    starlette = Starlette(routes=routes, lifespan=run)
    exempt = PROTOCOL_PATHS if oauth is not None else frozenset()
    # Inside the token check: an unauthenticated request still gets its 401 first, whatever its Host.
    return BearerAuthMiddleware(HostOriginMiddleware(starlette, security, exempt), context, local, usage, gate)


def with_public_url(security: TransportSecuritySettings, public_url: str) -> TransportSecuritySettings:
    """The public URL's host and origin are allowed: the proxy in front forwards its Host, and the sign-in
    page's forms post from that origin."""
    host = urlsplit(public_url).netloc
    return security.model_copy(
        update={
            "allowed_hosts": [*security.allowed_hosts, host],
            "allowed_origins": [*security.allowed_origins, public_url],
        }
    )
