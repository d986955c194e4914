"""MCP authorization end to end: the MCP SDK's own OAuth client (mcp.client.auth) against the served app.

Discovery from the 401, dynamic registration, PKCE, the sign-in and consent pages driven like a browser,
the token, tools/list with it, refresh with rotation (a replayed refresh token ends the grant), revocation,
and a token issued for another resource refused. Static API tokens keep working beside it. With upstream single
sign-on, the same flow through an OpenID Connect provider (tests/support/oidc_provider.py, served on its own port),
and the console's sign-in through it.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from mcp.client.auth import OAuthClientProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.provider import AuthorizationParams
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl
from sqlalchemy import text

from app.config import OAuthSettings, Settings
from app.db.engine import Database
from app.db.models import Role
from app.embedding.profiles import OFFLINE_MINILM
from app.main import build_context, create_http_app
from app.services.admin.users import UserService
from app.services.auth.oauth import OAuthConfig, OAuthProvider
from app.services.auth.tokens import AuthService
from bench.common import loopback_listener, mcp_session, uvicorn_serving
from tests.conftest import MODEL_CACHE
from tests.support.oidc_provider import CLIENT_ID, CLIENT_SECRET, FakeOidcProvider

REDIRECT = "http://127.0.0.1:9/callback"  # never contacted: the test reads the redirect's Location itself
UNAUTHORIZED = {
    "error": "Unauthorized: send 'Authorization: Bearer <token>' (create one with `synaptomind token create`)"
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}},
}


@dataclass
class Served:
    base_url: str
    database: Database
    user_token: str  # a writer's static API token: what the user pastes on the sign-in page

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}/mcp"

    async def count(self, query: str) -> int:
        async with self.database.unit_of_work() as session:
            return int((await session.execute(text(query))).scalar_one())


@asynccontextmanager
async def serve_with_oauth(
    database_url: str, database: Database, data_dir: Path, **oauth: Any
) -> AsyncIterator[Served]:
    """`create_http_app` under uvicorn with oauth on (and these oauth settings); the public URL is the loopback
    port it listens on."""
    listener, port = loopback_listener()
    base_url = f"http://127.0.0.1:{port}"
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        auth={"mode": "token"},
        database_url=database_url,
        embedding={"model": OFFLINE_MINILM, "cache_dir": MODEL_CACHE},
        data_dir=data_dir,
        port=port,
        pool_size=2,
        oauth={"enabled": True, "public_url": base_url, "access_token_minutes": 5, **oauth},
    )
    context = build_context(settings, database_url)
    async with uvicorn_serving(create_http_app(settings, context), listener):
        assert await context.embedding.wait_ready(30), context.embedding.note
        async with database.unit_of_work() as session:
            token, _ = await AuthService(session).create_token("ada", Role.writer, "e2e")
        yield Served(base_url, database, token)


@pytest.fixture
async def served(database_url: str, clean_database: Database, tmp_path: Path) -> AsyncIterator[Served]:
    async with serve_with_oauth(database_url, clean_database, tmp_path) as running:
        yield running


class MemoryStorage:
    """The SDK's TokenStorage in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def _field(page: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', page)
    assert found is not None, (name, page)
    return found[1]


@dataclass
class Browser:
    """The user's browser on the sign-in and consent pages (cookies kept, redirects read, not followed)."""

    served: Served
    consent_pages: list[str] = field(default_factory=list)
    result: AuthorizationCodeResult | None = None
    password: tuple[str, str] | None = None  # (user name, password): sign in with them instead of the API token
    single_sign_on: str | None = None  # the provider's name: sign in through it instead

    async def open(self, authorization_url: str) -> None:
        async with httpx2.AsyncClient(timeout=30) as browser:
            authorize = await browser.get(authorization_url)
            assert authorize.status_code == 302, authorize.text
            signin = await browser.get(authorize.headers["location"])
            assert signin.status_code == 200, signin.text
            assert "E2E client" in signin.text and "frame-ancestors 'none'" in signin.headers["content-security-policy"]
            fields = {"request": _field(signin.text, "request"), "csrf": _field(signin.text, "csrf")}
            # A cross-site post (no CSRF cookie) is refused before the token is even looked at.
            async with httpx2.AsyncClient(timeout=30) as attacker:
                forged = await attacker.post(f"{self.served.base_url}/oauth/signin", data={**fields, "api_token": "x"})
            assert forged.status_code == 403
            signin_url = f"{self.served.base_url}/oauth/signin"
            if self.single_sign_on is not None:
                consent = await _through_provider(browser, self.served, signin.text, self.single_sign_on)
            elif self.password is None:
                wrong = await browser.post(signin_url, data={**fields, "api_token": "smt_no"})
                assert wrong.status_code == 401 and "api_token: not a valid" in wrong.text
                credentials = {"api_token": self.served.user_token}
            else:
                user, password = self.password
                for refused in ({"user": user, "password": password + "!"}, {"user": "nobody", "password": password}):
                    wrong = await browser.post(signin_url, data={**fields, **refused})
                    assert wrong.status_code == 401 and "user name or password not valid" in wrong.text
                credentials = {"user": user, "password": password}
            if self.single_sign_on is None:
                consent = await browser.post(signin_url, data={**fields, **credentials})
            assert consent.status_code == 200, consent.text
            self.consent_pages.append(consent.text)
            csrf = _field(consent.text, "csrf")  # the single sign-on's consent page set a fresh one
            decision = {**fields, "csrf": csrf, "consent": _field(consent.text, "consent"), "decision": "approve"}
            back = await browser.post(f"{self.served.base_url}/oauth/consent", data=decision)
            assert back.status_code == 302, back.text
        location = back.headers["location"]
        assert location.startswith(REDIRECT)
        query = {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}
        self.result = AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None
        return self.result


async def _through_provider(browser: httpx2.AsyncClient, served: Served, page: str, name: str) -> httpx2.Response:
    """Click "Sign in with <name>" and follow the provider's redirects back to the callback."""
    found = re.search(
        rf'<a href="(/oauth/oidc/start\?[^"]+)"><strong>Sign in with {re.escape(name)}</strong></a>', page
    )
    assert found is not None, page
    return await _follow_single_sign_on(browser, f"{served.base_url}{found[1].replace('&amp;', '&')}")


async def _follow_single_sign_on(browser: httpx2.AsyncClient, start: str) -> httpx2.Response:
    started = await browser.get(start)
    assert started.status_code == 302, started.text
    back = await browser.get(started.headers["location"])  # the provider signs its user in at once
    assert back.status_code == 302 and "/oauth/oidc/callback?" in back.headers["location"], back.text
    return await browser.get(back.headers["location"])


def oauth_client(served: Served, browser: Browser, storage: MemoryStorage) -> OAuthClientProvider:
    metadata = OAuthClientMetadata(
        client_name="E2E client",
        redirect_uris=[AnyUrl(REDIRECT)],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
    )
    return OAuthClientProvider(served.mcp_url, metadata, storage, browser.open, browser.callback)


@asynccontextmanager
async def oauth_session(served: Served, auth: OAuthClientProvider) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(auth=auth, timeout=60) as http,
        streamable_http_client(served.mcp_url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def post_mcp(served: Served, token: str) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.post(
            served.mcp_url, json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"}
        )


async def test_the_sdk_client_signs_in_refreshes_and_is_revoked(served: Served) -> None:
    # Discovery starts from the 401: same body as for static tokens, plus the RFC 9728 pointer.
    async with httpx2.AsyncClient(timeout=30) as http:
        anonymous = await http.post(served.mcp_url, json=INITIALIZE, headers=MCP_HEADERS)
        metadata = await http.get(f"{served.base_url}/.well-known/oauth-protected-resource/mcp")
        root = await http.get(f"{served.base_url}/.well-known/oauth-protected-resource")
        server = await http.get(f"{served.base_url}/.well-known/oauth-authorization-server")
    assert anonymous.status_code == 401 and anonymous.json() == UNAUTHORIZED
    pointer = f"{served.base_url}/.well-known/oauth-protected-resource/mcp"
    assert anonymous.headers["www-authenticate"] == f'Bearer realm="synaptomind", resource_metadata="{pointer}"'
    assert metadata.json()["resource"] == served.mcp_url == root.json()["resource"]
    assert metadata.json()["authorization_servers"] == [served.base_url]
    assert server.json()["issuer"] == served.base_url
    assert server.json()["code_challenge_methods_supported"] == ["S256"]

    browser, storage = Browser(served), MemoryStorage()
    auth = oauth_client(served, browser, storage)
    async with oauth_session(served, auth) as session:
        listing = await session.list_tools()
    assert "memory_recall" in [tool.name for tool in listing.tools]
    assert len(browser.consent_pages) == 1
    consent = browser.consent_pages[0]
    assert "E2E client" in consent and "<strong>writer</strong>" in consent and "ada" in consent
    assert storage.client is not None and storage.client.client_secret  # registered, secret hashed server-side
    assert storage.tokens is not None and storage.tokens.refresh_token
    first = storage.tokens
    assert first.access_token.startswith("sma_") and first.expires_in == 300
    assert await served.count("SELECT count(*) FROM oauth_token WHERE revoked_at IS NULL") == 2

    # The access token expires (client side): the SDK refreshes, the refresh token rotates.
    auth.context.token_expiry_time = time.time() - 1
    async with oauth_session(served, auth) as session:
        await session.list_tools()
    second = storage.tokens
    assert second is not None and second.refresh_token not in (None, first.refresh_token)
    assert second.access_token != first.access_token
    assert len(browser.consent_pages) == 1  # no new sign-in
    assert (await post_mcp(served, second.access_token)).status_code == 200

    # The spent refresh token presented again: refused, and the whole grant ends (it may have been stolen).
    client = storage.client
    assert client is not None and client.client_id is not None
    credentials = {"client_id": client.client_id, "client_secret": client.client_secret or ""}
    async with httpx2.AsyncClient(timeout=30) as http:
        replay = await http.post(
            f"{served.base_url}/token",
            data={"grant_type": "refresh_token", "refresh_token": first.refresh_token or "", **credentials},
        )
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    refused = await post_mcp(served, second.access_token)
    assert refused.status_code == 401 and refused.json() == UNAUTHORIZED

    # The SDK signs in again on that 401; then the client revokes its token (RFC 7009): 401 from then on.
    async with oauth_session(served, auth) as session:
        await session.list_tools()
    assert len(browser.consent_pages) == 2
    third = storage.tokens
    assert third is not None
    assert (await post_mcp(served, third.access_token)).status_code == 200
    async with httpx2.AsyncClient(timeout=30) as http:
        revoked = await http.post(f"{served.base_url}/revoke", data={"token": third.access_token, **credentials})
    assert revoked.status_code == 200
    assert (await post_mcp(served, third.access_token)).status_code == 401
    assert await served.count("SELECT count(*) FROM oauth_token WHERE revoked_at IS NULL") == 0

    # Static API tokens keep working beside OAuth.
    async with mcp_session(served.mcp_url, served.user_token) as session:
        assert (await session.list_tools()).tools


async def test_the_sdk_client_signs_in_with_a_password(served: Served) -> None:
    async with served.database.unit_of_work() as session:
        await UserService(session).set_password("ada", "correct horse battery staple")
    browser, storage = Browser(served, password=("ada", "correct horse battery staple")), MemoryStorage()
    async with oauth_session(served, oauth_client(served, browser, storage)) as session:
        listing = await session.list_tools()
    assert "memory_recall" in [tool.name for tool in listing.tools]
    assert len(browser.consent_pages) == 1 and "Signed in as <strong>ada</strong>" in browser.consent_pages[0]
    assert storage.tokens is not None and storage.tokens.access_token.startswith("sma_")
    assert (await post_mcp(served, storage.tokens.access_token)).status_code == 200
    # The two refused attempts issued nothing: one grant, one pair.
    assert await served.count("SELECT count(*) FROM oauth_token") == 2
    assert await served.count("SELECT count(*) FROM oauth_authorization WHERE user_id IS NOT NULL") == 1


async def test_a_token_for_another_resource_is_refused(served: Served) -> None:
    # Another deployment on the same database (another public URL) issues a token for *its* /mcp.
    other = OAuthProvider(served.database, OAuthConfig(OAuthSettings(enabled=True, public_url="https://other.example")))
    client = OAuthClientInformationFull(client_id="other-client", redirect_uris=[AnyUrl(REDIRECT)])
    client.token_endpoint_auth_method = "none"
    await other.register_client(client)
    params = AuthorizationParams(
        state=None,
        scopes=None,
        code_challenge="c" * 43,
        redirect_uri=AnyUrl(REDIRECT),
        redirect_uri_provided_explicitly=True,
        resource="https://other.example/mcp",
    )
    handle = parse_qs(urlsplit(await other.authorize(client, params)).query)["request"][0]
    signed_in = await other.sign_in(handle, served.user_token)
    assert signed_in is not None
    target = await other.consent(handle, signed_in.consent_secret, approve=True)
    assert target is not None
    code = await other.load_authorization_code(client, parse_qs(urlsplit(target).query)["code"][0])
    assert code is not None
    token = await other.exchange_authorization_code(client, code)
    assert await other.load_access_token(token.access_token) is not None  # valid where it was issued for

    answer = await post_mcp(served, token.access_token)
    assert answer.status_code == 401 and answer.json() == UNAUTHORIZED

    # Nor does this server's /authorize issue anything for a foreign resource.
    query: dict[str, Any] = {
        "response_type": "code",
        "client_id": "other-client",
        "redirect_uri": REDIRECT,
        "code_challenge": "c" * 43,
        "code_challenge_method": "S256",
        "state": "s",
        "resource": "https://other.example/mcp",
    }
    async with httpx2.AsyncClient(timeout=30) as http:
        authorize = await http.get(f"{served.base_url}/authorize", params=query)
    assert authorize.status_code == 302
    assert parse_qs(urlsplit(authorize.headers["location"]).query)["error"] == ["invalid_target"]


@asynccontextmanager
async def upstream_provider() -> AsyncIterator[FakeOidcProvider]:
    listener, port = loopback_listener()
    provider = FakeOidcProvider(f"http://127.0.0.1:{port}")
    async with uvicorn_serving(provider.app(), listener):
        yield provider


async def test_single_sign_on_through_an_openid_connect_provider(
    database_url: str, clean_database: Database, tmp_path: Path
) -> None:
    """`serve` with oauth.oidc: the SDK's client signs in through the provider (then the same consent), and the
    console's sign-in goes through it too (then the console's own session)."""
    async with upstream_provider() as upstream:
        oidc = {"issuer": upstream.issuer, "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}
        async with serve_with_oauth(database_url, clean_database, tmp_path, oidc=oidc) as served:
            browser, storage = Browser(served, single_sign_on="127.0.0.1"), MemoryStorage()
            async with oauth_session(served, oauth_client(served, browser, storage)) as session:
                listing = await session.list_tools()
            assert "memory_recall" in [tool.name for tool in listing.tools]
            assert "Signed in as <strong>ada</strong>" in browser.consent_pages[0]
            assert storage.tokens is not None
            assert (await post_mcp(served, storage.tokens.access_token)).status_code == 200
            assert await served.count("SELECT count(*) FROM oauth_token") == 2
            [asked] = upstream.authorizations
            assert asked["redirect_uri"] == f"{served.base_url}/oauth/oidc/callback"

            async with httpx2.AsyncClient(timeout=30) as console:
                sign_in = await console.get(f"{served.base_url}/ui/sign-in")
                assert "Sign in with 127.0.0.1" in sign_in.text
                back = await _follow_single_sign_on(
                    console, f"{served.base_url}/oauth/oidc/start?console=%2Fui%2Fsearch"
                )
                assert back.status_code == 303 and back.headers["location"] == "/ui/search"
                page = await console.get(f"{served.base_url}/ui/")
            assert page.status_code == 200 and "Signed in as <strong>ada</strong> (writer)" in page.text


async def test_the_sdk_client_signs_in_whichever_loopback_name_it_was_given(served: Served) -> None:
    """PUBLIC_URL says 127.0.0.1, the client's URL says localhost (the README's and DEPLOY.md's names once
    differed): the SDK's resource and issuer checks pass, the sign-in stays on the client's name (issue 22)."""
    port = urlsplit(served.base_url).port
    as_localhost = Served(f"http://localhost:{port}", served.database, served.user_token)
    browser, storage = Browser(as_localhost), MemoryStorage()
    async with oauth_session(as_localhost, oauth_client(as_localhost, browser, storage)) as session:
        listing = await session.list_tools()
    assert "memory_recall" in [tool.name for tool in listing.tools]
    assert browser.result is not None and browser.result.iss == as_localhost.base_url
    assert storage.tokens is not None
    assert (await post_mcp(served, storage.tokens.access_token)).status_code == 200  # one token, either name


async def test_the_401_says_invalid_token_only_when_a_token_was_sent(served: Served) -> None:
    """RFC 6750 §3.1: no credentials, no error code; a token that is not valid (unknown, revoked or expired, told
    apart in no way) `error="invalid_token"`. Unknown /.well-known/ paths are absent (404), not 401."""
    pointer = f"{served.base_url}/.well-known/oauth-protected-resource/mcp"
    async with httpx2.AsyncClient(timeout=30) as http:
        anonymous = await http.post(served.mcp_url, json=INITIALIZE, headers=MCP_HEADERS)
        unknown = await post_mcp(served, "sma_" + "x" * 43)
        static = await post_mcp(served, "smt_not-a-token")
        absent = await http.get(f"{served.base_url}/.well-known/openid-configuration")
        nested = await http.get(f"{served.base_url}/.well-known/oauth-authorization-server/mcp")
        by_name = await http.post(
            f"http://localhost:{urlsplit(served.base_url).port}/mcp", json=INITIALIZE, headers=MCP_HEADERS
        )
    assert anonymous.headers["www-authenticate"] == f'Bearer realm="synaptomind", resource_metadata="{pointer}"'
    invalid = (
        'Bearer realm="synaptomind", error="invalid_token", '
        'error_description="the bearer token is not valid (unknown, revoked or expired)", '
        f'resource_metadata="{pointer}"'
    )
    assert unknown.status_code == static.status_code == 401
    assert unknown.headers["www-authenticate"] == static.headers["www-authenticate"] == invalid
    assert unknown.json() == static.json() == anonymous.json() == UNAUTHORIZED
    assert absent.status_code == nested.status_code == 404
    localhost_pointer = f"http://localhost:{urlsplit(served.base_url).port}/.well-known/oauth-protected-resource/mcp"
    assert f'resource_metadata="{localhost_pointer}"' in by_name.headers["www-authenticate"]
