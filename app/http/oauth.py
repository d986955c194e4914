"""The OAuth routes of MCP authorization: the SDK's handlers (mcp.server.auth) over app.services.auth.oauth, plus the
server-rendered sign-in and consent pages (plain HTML forms: no script, no build step).

Endpoints (docs/API.md): /.well-known/oauth-protected-resource[/mcp] (RFC 9728),
/.well-known/oauth-authorization-server (RFC 8414), /register (RFC 7591), /authorize, /token, /revoke
(RFC 7009), /oauth/signin and /oauth/consent (the pages), and with upstream single sign-on (oauth.oidc)
/oauth/oidc/start and /oauth/oidc/callback (app.http.oidc, app.services.auth.oidc).
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote, urlencode, urlsplit

from mcp.server.auth.handlers.authorize import AuthorizationHandler
from mcp.server.auth.handlers.metadata import MetadataHandler, ProtectedResourceMetadataHandler
from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.revoke import RevocationHandler
from mcp.server.auth.handlers.token import TokenErrorResponse, TokenHandler
from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.server.auth.routes import build_metadata, cors_middleware
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from mcp.server.transport_security import RequestBodyLimitMiddleware
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route, request_response
from starlette.types import ASGIApp

from app.errors import AppError
from app.http.oidc import PENDING_COOKIE, PENDING_COOKIE_PATH, UpstreamSignIn
from app.http.ui.session import COOKIE_PATH as CONSOLE_PATH
from app.http.ui.session import SESSION_COOKIE as CONSOLE_SESSION_COOKIE
from app.http.ui.session import open_session
from app.services.auth.oauth import (
    CODE_REFUSED,
    CONSENT_PATH,
    REFRESH_REFUSED,
    SIGNIN_PATH,
    OAuthConfig,
    OAuthProvider,
    SignedIn,
)
from app.services.auth.oidc import CALLBACK_PATH, START_PATH
from app.services.auth.passwords import TooManyAttempts
from app.services.auth.sessions import UPSTREAM
from app.services.auth.tokens import AuthService
from app.services.values import Role

# Served without the bearer check (they are how a client gets a token) and without the Host/Origin check
# (browser-based clients call the JSON endpoints cross-origin, as the SDK's CORS headers allow).
PROTOCOL_PATHS = frozenset(
    {
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/authorize",
        "/token",
        "/register",
        "/revoke",
    }
)
# Without the bearer check, but behind the Host/Origin check: the forms post to their own origin only (the
# provider's redirect back to the callback is a top-level GET, which carries no Origin).
PAGE_PATHS = frozenset({SIGNIN_PATH, CONSENT_PATH, START_PATH, CALLBACK_PATH})
FORM_BODY_LIMIT = 64 * 1024
CSRF_COOKIE = "synapto_oauth_csrf"


class ClientSecretAuthenticator(ClientAuthenticator):
    """The SDK's client authentication for /token and /revoke, checking the secret against its stored hash.

    The SDK's authenticator compares the presented secret with `client.client_secret` in clear; this service
    keeps only the secret's SHA-256 (a dump of the database must not authenticate as a client).
    """

    def __init__(self, provider: OAuthProvider) -> None:
        super().__init__(provider)  # type: ignore[arg-type]
        self.oauth = provider

    async def authenticate_request(self, request: Request) -> OAuthClientInformationFull:
        form = await request.form()
        client_id = form.get("client_id")
        if not isinstance(client_id, str) or not client_id:
            raise AuthenticationError("client_id: missing")
        client = await self.oauth.get_client(client_id)
        if client is None:
            raise AuthenticationError("client_id: unknown client")
        method = client.token_endpoint_auth_method or "client_secret_post"
        presented: str | None = None
        if method == "client_secret_basic":
            presented = _basic_secret(request.headers.get("Authorization", ""), client_id)
        elif method == "client_secret_post":
            value = form.get("client_secret")
            presented = value if isinstance(value, str) else None
        elif method != "none":
            raise AuthenticationError(f"token_endpoint_auth_method: {method!r} is not supported")
        if method != "none":
            if not presented:
                raise AuthenticationError("client_secret: required for this client")
            if not await self.oauth.verify_client_secret(client_id, presented):
                raise AuthenticationError("client_secret: does not match")
        return client


def _basic_secret(header: str, client_id: str) -> str:
    if not header.startswith("Basic "):
        raise AuthenticationError("Authorization: send the client credentials as HTTP Basic")
    try:
        decoded = base64.b64decode(header[6:], validate=True).decode()
    except (ValueError, UnicodeDecodeError, binascii.Error):
        raise AuthenticationError("Authorization: malformed HTTP Basic credentials") from None
    name, separator, secret = decoded.partition(":")
    if not separator or unquote(name) != client_id:
        raise AuthenticationError("Authorization: the Basic user is not client_id")
    return unquote(secret)


def _limited(app: ASGIApp) -> ASGIApp:
    return RequestBodyLimitMiddleware(app, FORM_BODY_LIMIT)


def _cors(app: ASGIApp, methods: list[str]) -> ASGIApp:
    return CORSMiddleware(app=app, allow_origins="*", allow_methods=methods, allow_headers=["mcp-protocol-version"])


def authorization_server_metadata(config: OAuthConfig, issuer: str | None = None) -> OAuthMetadata:
    """RFC 8414 metadata: the SDK's, with the issuer exactly as configured (no trailing slash, as the protected
    resource metadata names it: clients compare the two as strings), public clients (`none`) and RFC 9207.
    `issuer`: one of `config.origins` (a loopback alias of the public URL), the public URL if None."""
    issuer = issuer or config.issuer
    options = ClientRegistrationOptions(enabled=True)
    metadata = build_metadata(AnyHttpUrl(issuer), None, options, RevocationOptions(enabled=True))
    methods = ["none", "client_secret_post", "client_secret_basic"]
    return OAuthMetadata.model_validate(
        {
            **metadata.model_dump(mode="json", exclude_none=True),
            "issuer": issuer,
            "token_endpoint_auth_methods_supported": methods,
            "revocation_endpoint_auth_methods_supported": methods,
            "authorization_response_iss_parameter_supported": True,
        }
    )


def resource_metadata_url(config: OAuthConfig, host: str | None = None) -> str:
    """Where the 401 of /mcp points (RFC 9728 §5.1): the path-suffixed well-known URL of the resource, in the
    name the client used (`host`: the request's Host header) when the public URL is loopback."""
    return f"{config.origin_for(host)}/.well-known/oauth-protected-resource/mcp"


def _by_origin(config: OAuthConfig, handlers: dict[str, Callable[[Request], Awaitable[Response]]]) -> Any:
    """One metadata document per issuer name (`config.origins`), chosen by the request's Host."""

    async def handle(request: Request) -> Response:
        return await handlers[config.origin_for(request.headers.get("host"))](request)

    return cors_middleware(handle, ["GET", "OPTIONS"])


def oauth_routes(
    provider: OAuthProvider, config: OAuthConfig, api_token_check: TokenCheck, upstream: UpstreamSignIn | None = None
) -> list[BaseRoute]:
    metadata_handler = _by_origin(
        config,
        {origin: MetadataHandler(authorization_server_metadata(config, origin)).handle for origin in config.origins},
    )
    resource_handler = _by_origin(
        config,
        {
            origin: ProtectedResourceMetadataHandler(
                ProtectedResourceMetadata.model_validate(
                    {"resource": f"{origin}/mcp", "authorization_servers": [origin], "resource_name": "SynaptoMind"}
                )
            ).handle
            for origin in config.origins
        },
    )
    authenticator = ClientSecretAuthenticator(provider)
    registration = RegistrationHandler(provider, ClientRegistrationOptions(enabled=True))  # type: ignore[arg-type]
    register = _limited(request_response(registration.handle))
    if not config.registration_open:
        register = AdminOnly(register, api_token_check)
    pages = SignInPages(provider, config, upstream)
    token = GrantWordingTokenHandler(provider, authenticator)  # type: ignore[arg-type]
    revoke = ClientAuthRevocationHandler(provider, authenticator)  # type: ignore[arg-type]
    single_sign_on: list[BaseRoute] = []
    if upstream is not None:
        single_sign_on = [
            Route(START_PATH, pages.upstream_start, methods=["GET"]),
            Route(CALLBACK_PATH, pages.upstream_callback, methods=["GET"]),
        ]
    return [
        Route("/.well-known/oauth-protected-resource", resource_handler, methods=["GET", "OPTIONS"]),
        Route("/.well-known/oauth-protected-resource/mcp", resource_handler, methods=["GET", "OPTIONS"]),
        Route("/.well-known/oauth-authorization-server", metadata_handler, methods=["GET", "OPTIONS"]),
        Route(
            "/authorize",
            _limited(request_response(browser_errors(AuthorizationHandler(provider).handle))),  # type: ignore[arg-type]
            methods=["GET", "POST"],
        ),
        Route(
            "/token", _cors(_limited(request_response(token.handle)), ["POST", "OPTIONS"]), methods=["POST", "OPTIONS"]
        ),
        Route("/register", _cors(register, ["POST", "OPTIONS"]), methods=["POST", "OPTIONS"]),
        Route(
            "/revoke",
            _cors(_limited(request_response(revoke.handle)), ["POST", "OPTIONS"]),
            methods=["POST", "OPTIONS"],
        ),
        Route(SIGNIN_PATH, pages.signin_page, methods=["GET"]),
        Route(SIGNIN_PATH, _limited(request_response(pages.signin)), methods=["POST"]),
        Route(CONSENT_PATH, _limited(request_response(pages.consent)), methods=["POST"]),
        *single_sign_on,
    ]


TokenCheck = Callable[[str], Awaitable[Role | None]]

# The SDK's invalid_grant texts, as the provider words its own (app.services.auth.oauth): "does not exist" of a spent
# token was not true, and "has expired" told an expired grant from an unknown one.
GRANT_REFUSED = {
    "refresh token does not exist": REFRESH_REFUSED,
    "refresh token has expired": REFRESH_REFUSED,
    "authorization code does not exist": CODE_REFUSED,
    "authorization code has expired": CODE_REFUSED,
}


class GrantWordingTokenHandler(TokenHandler):
    """The SDK's /token handler, its invalid_grant descriptions worded as GRANT_REFUSED says."""

    def response(self, obj: Any) -> Response:
        if isinstance(obj, TokenErrorResponse) and obj.error_description in GRANT_REFUSED:
            obj = obj.model_copy(update={"error_description": GRANT_REFUSED[obj.error_description]})
        response: Response = super().response(obj)
        return response


class ClientAuthRevocationHandler(RevocationHandler):
    """The SDK's /revoke handler, refusing a failed client authentication as /token does: 401 `invalid_client`
    (RFC 7009 §2.2.1 refers to RFC 6749 §5.2; the SDK answers `unauthorized_client`, which means another thing)."""

    async def handle(self, request: Request) -> Response:
        try:
            await self.client_authenticator.authenticate_request(request)
        except AuthenticationError as error:
            return JSONResponse(
                {"error": "invalid_client", "error_description": error.message},
                status_code=401,
                headers={"Cache-Control": "no-store", "Pragma": "no-cache"},
            )
        return await super().handle(request)  # authenticates again: one more indexed read of the client


def browser_errors(handle: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """/authorize answers a person's browser: an error it cannot redirect to the client (unknown client, bad
    redirect_uri; RFC 6749 §4.1.2.1) is a page saying what went wrong, not the SDK's JSON. Redirected errors
    stay redirects."""

    async def authorize(request: Request) -> Response:
        response = await handle(request)
        if response.status_code < 400 or not response.headers.get("content-type", "").startswith("application/json"):
            return response
        try:
            answer = json.loads(bytes(response.body))
        except ValueError:
            return response
        error = str(answer.get("error") or "invalid_request")
        description = str(answer.get("error_description") or "")
        body = (
            f"<p>Your MCP client sent an authorization request this server cannot answer, and cannot be sent back "
            f'to it safely.</p><p class="error"><code>{html.escape(error)}</code>: {html.escape(description)}</p>'
            "<p>Start again from your MCP client; if this persists, remove the client's stored registration "
            "(its client id may belong to another server) and let it register again.</p>"
        )
        return _page("Authorization request refused", body, status=response.status_code)

    return authorize


def api_token_role(db: Any) -> TokenCheck:
    """The role of a valid static API token (None: unknown, revoked or expired)."""

    async def check(token: str) -> Role | None:
        async with db.autocommit() as session:
            principal = await AuthService(session).verify(token)
        return principal.role if principal is not None else None

    return check


class AdminOnly:
    """Closed registration: /register needs an admin's API token as its initial access token (RFC 7591 §3)."""

    def __init__(self, app: ASGIApp, check: TokenCheck) -> None:
        self.app = app
        self.check = check

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("method") != "OPTIONS":
            header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
            scheme, _, token = header.partition(" ")
            role = await self.check(token.strip()) if scheme.lower() == "bearer" and token.strip() else None
            if role is not Role.admin:
                description = "registration is closed: send an admin's API token as 'Authorization: Bearer <token>'"
                response = JSONResponse(
                    {"error": "invalid_token", "error_description": description},
                    status_code=401,
                    headers={"WWW-Authenticate": f'Bearer error="invalid_token", error_description="{description}"'},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


# The pages: no script, no external resource; framing refused (clickjacking of the consent button).
PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem;color:#222}"
    "input[type=password],input[type=text]{width:100%;padding:.5rem;margin:.5rem 0}"
    "button{padding:.5rem 1rem;margin-right:.5rem}fieldset{margin:1rem 0;border:1px solid #ccc}"
    ".error{color:#a00}code{background:#eee;padding:0 .2rem}"
)


def _page(title: str, body: str, status: int = 200, csrf: str | None = None, secure: bool = False) -> HTMLResponse:
    document = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f'<meta name="viewport" content="width=device-width"><style>{STYLE}</style></head>'
        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )
    response = HTMLResponse(document, status_code=status, headers=PAGE_HEADERS)
    if csrf is not None:
        # Double-submit: a cross-site form cannot read this cookie to copy it into its fields.
        response.set_cookie(
            CSRF_COOKIE, csrf, max_age=900, path="/oauth", httponly=True, samesite="strict", secure=secure
        )
    return response


def _hidden(**fields: str) -> str:
    return "".join(
        f'<input type="hidden" name="{name}" value="{html.escape(value)}">' for name, value in fields.items()
    )


# One text for an unknown user, a user without a password and a wrong password: the page tells none apart.
PASSWORD_REFUSED = "user name or password not valid"
TOKEN_REFUSED = "api_token: not a valid SynaptoMind API token (unknown, revoked or expired)"


class SignInPages:
    """Sign in with a user name and password or with an API token, then consent; every state lives in the
    authorization's row."""

    def __init__(self, provider: OAuthProvider, config: OAuthConfig, upstream: UpstreamSignIn | None = None) -> None:
        self.provider = provider
        self.secure = config.issuer.startswith("https://")
        self.upstream = upstream

    def _expired(self) -> HTMLResponse:
        body = "<p>This sign-in request is unknown, expired or already answered. Start again from your MCP client.</p>"
        return _page("Sign-in request expired", body, status=400)

    def _csrf_refused(self) -> HTMLResponse:
        body = "<p>The form's CSRF token does not match this browser's: reload the sign-in page and retry.</p>"
        return _page("Form refused", body, status=403)

    def _signin_form(
        self, handle: str, client_name: str, csrf: str, error: str | None = None, status: int = 401, user: str = ""
    ) -> HTMLResponse:
        problem = f'<p class="error">{html.escape(error)}</p>' if error else ""
        hidden = _hidden(request=handle, csrf=csrf)
        single_sign_on = ""
        if self.upstream is not None:
            # A link, not a form: starting writes nothing here, and the callback's state check is bound to the
            # cookie this browser gets, so a forged start only signs the victim in as themselves.
            start = f"{START_PATH}?{urlencode({'request': handle})}"
            name = html.escape(self.upstream.oidc.name)
            single_sign_on = f'<p><a href="{html.escape(start)}"><strong>Sign in with {name}</strong></a></p>'
        body = (
            f"<p><strong>{html.escape(client_name)}</strong> asks to use your SynaptoMind memory.</p>{problem}"
            f"{single_sign_on}"
            f'<form method="post" action="{SIGNIN_PATH}"><fieldset><legend>User name and password</legend>{hidden}'
            '<label for="user">User name</label>'
            f'<input type="text" id="user" name="user" value="{html.escape(user)}" autocomplete="username" required>'
            '<label for="password">Password (set by your administrator)</label>'
            '<input type="password" id="password" name="password" autocomplete="current-password" required>'
            '<button type="submit">Sign in</button></fieldset></form>'
            f'<form method="post" action="{SIGNIN_PATH}"><fieldset><legend>Or an API token</legend>{hidden}'
            '<label for="api_token">Your SynaptoMind API token (<code>smt_…</code>)</label>'
            '<input type="password" id="api_token" name="api_token" autocomplete="off" required>'
            '<button type="submit">Sign in</button></fieldset></form>'
        )
        code = status if error else 200
        return _page("Sign in to SynaptoMind", body, status=code, csrf=csrf, secure=self.secure)

    async def signin_page(self, request: Request) -> Response:
        handle = request.query_params.get("request", "")
        pending = await self.provider.pending(handle)
        if pending is None:
            return self._expired()
        return self._signin_form(handle, pending.client_name, secrets.token_urlsafe(32))

    async def _form(self, request: Request) -> dict[str, str] | None:
        """The posted fields, or None when the CSRF token is not this browser's cookie."""
        form = await request.form()
        fields = {key: value for key, value in form.items() if isinstance(value, str)}
        cookie = request.cookies.get(CSRF_COOKIE, "")
        posted = fields.get("csrf", "")
        if not cookie or not posted or not secrets.compare_digest(cookie.encode(), posted.encode()):
            return None
        return fields

    async def signin(self, request: Request) -> Response:
        fields = await self._form(request)
        if fields is None:
            return self._csrf_refused()
        handle, csrf = fields.get("request", ""), fields["csrf"]
        by_password = "password" in fields or "user" in fields
        user_name = fields.get("user", "")[:200]
        try:
            if by_password:
                signed_in = await self.provider.sign_in_password(handle, user_name, fields.get("password", ""))
            else:
                signed_in = await self.provider.sign_in(handle, fields.get("api_token", ""))
        except TooManyAttempts as refusal:
            pending = await self.provider.pending(handle)
            if pending is None:
                return self._expired()
            message = f"Too many sign-in attempts for this user name: retry in {refusal.retry_after:.0f} s."
            response = self._signin_form(handle, pending.client_name, csrf, message, status=429, user=user_name)
            response.headers["Retry-After"] = str(max(1, round(refusal.retry_after)))
            return response
        if signed_in is None:
            pending = await self.provider.pending(handle)
            if pending is None:
                return self._expired()
            message = PASSWORD_REFUSED if by_password else TOKEN_REFUSED
            return self._signin_form(handle, pending.client_name, csrf, message, user=user_name)
        return self._consent_page(handle, signed_in, csrf)

    def _consent_page(self, handle: str, signed_in: SignedIn, csrf: str) -> HTMLResponse:
        user, row = signed_in.principal, signed_in.pending.row
        target = urlsplit(row.redirect_uri)
        body = (
            f"<p>Signed in as <strong>{html.escape(user.name)}</strong>.</p>"
            f"<p><strong>{html.escape(signed_in.pending.client_name)}</strong> will act as you with the role "
            f"<strong>{html.escape(user.role.value)}</strong> on this SynaptoMind memory "
            f"(<code>{html.escape(row.resource)}</code>) until its tokens expire or are revoked.</p>"
            f"<p>You will return to <code>{html.escape(f'{target.scheme}://{target.netloc}')}</code>.</p>"
            f'<form method="post" action="{CONSENT_PATH}">'
            f"{_hidden(request=handle, consent=signed_in.consent_secret, csrf=csrf)}"
            '<button type="submit" name="decision" value="approve">Allow</button>'
            '<button type="submit" name="decision" value="deny">Deny</button></form>'
        )
        return _page("Allow access?", body, csrf=csrf, secure=self.secure)

    async def consent(self, request: Request) -> Response:
        fields = await self._form(request)
        if fields is None:
            return self._csrf_refused()
        approve = fields.get("decision") == "approve"
        issuer = self.provider.config.origin_for(request.headers.get("host"))
        target = await self.provider.consent(fields.get("request", ""), fields.get("consent", ""), approve, issuer)
        if target is None:
            return self._expired()
        return RedirectResponse(target, status_code=302, headers={"Cache-Control": "no-store"})

    # Upstream single sign-on (oauth.oidc): one start and one callback for the MCP sign-in and the console's.

    def _upstream_refused(self, message: str, status: int, back: str | None) -> HTMLResponse:
        link = f'<p><a href="{html.escape(back)}">Back to the sign-in page</a></p>' if back else ""
        response = _page("Single sign-on refused", f'<p class="error">{html.escape(message)}</p>{link}', status=status)
        response.delete_cookie(PENDING_COOKIE, path=PENDING_COOKIE_PATH, httponly=True, secure=self.secure)
        return response

    async def upstream_start(self, request: Request) -> Response:
        """Redirect to the provider with a fresh state, nonce and PKCE verifier, kept in this browser's signed
        cookie. `?request=` continues an MCP authorization request; `?console=` a console sign-in."""
        assert self.upstream is not None
        handle = request.query_params.get("request")
        console_next = request.query_params.get("console")
        if handle is not None:
            if await self.provider.pending(handle) is None:
                return self._expired()
        elif console_next is None or self.upstream.console is None:
            return self._upstream_refused("Nothing to sign in to: start from a sign-in page.", 400, None)
        else:
            console_next = _console_page(console_next)
        try:
            target, pending = await self.upstream.oidc.begin(oauth_request=handle, console_next=console_next)
        except AppError as error:
            return self._upstream_refused(error.message, error.status_code, _back(handle))
        response = RedirectResponse(target, status_code=302, headers={"Cache-Control": "no-store"})
        # Lax, not Strict: the provider sends the browser back with a cross-site top-level GET, which must carry it.
        response.set_cookie(
            PENDING_COOKIE,
            self.upstream.pending.dump(pending),
            max_age=self.upstream.pending.max_age(),
            path=PENDING_COOKIE_PATH,
            httponly=True,
            samesite="lax",
            secure=self.secure,
        )
        return response

    async def upstream_callback(self, request: Request) -> Response:
        """The provider's answer: checked against this browser's pending sign-in, the code exchanged, the ID
        token verified, the user found (or created, if so configured); then the MCP request's consent page, or
        the console. Any refusal signs nobody in and issues nothing."""
        assert self.upstream is not None
        pending = self.upstream.pending.load(request.cookies.get(PENDING_COOKIE))
        if pending is None:
            message = "This single sign-on is unknown or expired, or another browser started it: start again."
            return self._upstream_refused(message, 400, None)
        back = _back(pending.oauth_request)
        answer = {key: value for key, value in request.query_params.items() if key in ("code", "state", "error")}
        try:
            identity = await self.upstream.oidc.complete(pending, answer)
            principal = await self.upstream.oidc.user(self.provider.db, identity)
        except AppError as error:
            return self._upstream_refused(error.message, error.status_code, back)
        if pending.oauth_request is not None:
            signed_in = await self.provider.sign_in_upstream(pending.oauth_request, principal)
            if signed_in is None:
                response: Response = self._expired()
            else:  # a fresh CSRF cookie: the Strict one of the sign-in page did not come along the provider's GET
                response = self._consent_page(pending.oauth_request, signed_in, secrets.token_urlsafe(32))
        else:
            codec = self.upstream.console
            if codec is None or principal.user_id is None:
                return self._upstream_refused("The console is off on this server.", 404, None)
            cookie = await open_session(self.provider.db, codec, principal.user_id, UPSTREAM)
            response = RedirectResponse(
                _console_page(pending.console_next), status_code=303, headers={"Cache-Control": "no-store"}
            )
            response.set_cookie(
                CONSOLE_SESSION_COOKIE,
                cookie,
                max_age=codec.max_age,
                path=CONSOLE_PATH,
                httponly=True,
                samesite="lax",
                secure=self.secure,
            )
        response.delete_cookie(PENDING_COOKIE, path=PENDING_COOKIE_PATH, httponly=True, secure=self.secure)
        return response


def _back(handle: str | None) -> str | None:
    """The sign-in page a refused single sign-on returns to."""
    if handle is None:
        return f"{CONSOLE_PATH}/sign-in"
    return f"{SIGNIN_PATH}?{urlencode({'request': handle})}"


def _console_page(target: str | None) -> str:
    """Only a console path (as the console's own sign-in checks it): never an open redirect."""
    if target and target.startswith(CONSOLE_PATH + "/") and not target.startswith("//") and "\\" not in target:
        return target
    return f"{CONSOLE_PATH}/"
