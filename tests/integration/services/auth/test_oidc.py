"""Upstream OpenID Connect sign-in on the OAuth and console sign-in pages, against an in-process provider
(tests/support/oidc_provider.py) reached through httpx's ASGI transport.

The browser starts on the sign-in page, follows the redirect to the provider, comes back to the callback; every
refused answer (a wrong nonce, audience, issuer or signature, an expired ID token, a state mismatch, an unknown
user) signs nobody in: the authorization request stays unbound, no code or token exists, no console session is set.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
import pytest
from pydantic import SecretStr
from sqlalchemy import text
from starlette.applications import Starlette

from app.config import OAuthSettings, OidcSettings
from app.db.engine import Database
from app.db.models import Role
from app.http.oauth import api_token_role, oauth_routes
from app.http.oidc import PENDING_COOKIE, UpstreamSignIn
from app.http.ui.session import SESSION_COOKIE, SessionCodec
from app.services.admin.users import UserService
from app.services.auth import sessions
from app.services.auth.oauth import OAuthConfig, OAuthProvider
from app.services.auth.oidc import CALLBACK_PATH, STATE_MISMATCH, OidcSignIn
from app.services.auth.sessions import ConsoleSessionService
from tests.support.oidc_provider import CLIENT_ID, CLIENT_SECRET, FakeOidcProvider, signing_key

ISSUER = "http://127.0.0.1:8765"  # SynaptoMind's public URL
UPSTREAM = "https://idp.example.test/realms/team"  # the provider's issuer: a path, as Keycloak's have
REDIRECT = "http://127.0.0.1:9/callback"
SESSION_KEY = b"k" * 32


def _field(page: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', page)
    assert found is not None, (name, page)
    return found[1]


@dataclass
class SingleSignOn:
    provider: OAuthProvider
    upstream: FakeOidcProvider
    transport: httpx2.ASGITransport  # SynaptoMind's pages
    http: httpx2.AsyncClient  # the user's browser on SynaptoMind (cookies kept)
    idp: httpx2.AsyncClient  # the same browser on the provider
    db: Database
    client_id: str
    client_secret: str
    codec: SessionCodec

    async def count(self, query: str) -> int:
        async with self.db.unit_of_work() as session:
            return int((await session.execute(text(query))).scalar_one())

    async def signin_page(self, verifier: str) -> str:
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
        return page.text

    async def via_provider(self, start: str, tamper: Callable[[str], str] = lambda url: url) -> httpx2.Response:
        """Follow a start link to the provider and back (the callback URL optionally tampered with)."""
        started = await self.http.get(start)
        assert started.status_code == 302, started.text
        assert started.headers["location"].startswith(f"{UPSTREAM}/authorize?")
        back = await self.idp.get(started.headers["location"])
        assert back.status_code == 302, back.text
        assert back.headers["location"].startswith(f"{ISSUER}{CALLBACK_PATH}?")
        return await self.http.get(tamper(back.headers["location"]))

    async def oauth_sign_on(self, tamper: Callable[[str], str] = lambda url: url) -> tuple[httpx2.Response, str]:
        """The MCP sign-in page's "Sign in with …" link, through the provider: the callback's answer and the
        request handle."""
        page = await self.signin_page(secrets.token_urlsafe(48))
        found = re.search(r'<a href="(/oauth/oidc/start\?[^"]+)"><strong>Sign in with Test IdP</strong></a>', page)
        assert found is not None, page
        handle = _field(page, "request")
        return await self.via_provider(found[1].replace("&amp;", "&"), tamper), handle

    async def nothing_signed_in(self) -> None:
        assert await self.count("SELECT count(*) FROM oauth_authorization WHERE user_id IS NOT NULL") == 0
        assert await self.count("SELECT count(*) FROM oauth_authorization WHERE code_hash IS NOT NULL") == 0
        assert await self.count("SELECT count(*) FROM oauth_token") == 0
        assert self.http.cookies.get(SESSION_COOKIE) is None


def _oidc_settings(**changes: Any) -> OidcSettings:
    values: dict[str, Any] = {
        "issuer": UPSTREAM,
        "client_id": CLIENT_ID,
        "client_secret": SecretStr(CLIENT_SECRET),
        "provider_name": "Test IdP",
        **changes,
    }
    return OidcSettings(**values)


@pytest.fixture
async def sso(clean_database: Database, request: pytest.FixtureRequest) -> AsyncIterator[SingleSignOn]:
    oidc_settings = _oidc_settings(**getattr(request, "param", {}))
    settings = OAuthSettings(enabled=True, public_url=ISSUER, oidc=oidc_settings)
    provider = OAuthProvider(clean_database, OAuthConfig(settings))
    upstream = FakeOidcProvider(UPSTREAM)
    idp_transport = httpx2.ASGITransport(app=upstream.app())
    codec = SessionCodec(SESSION_KEY, 3600)
    single_sign_on = UpstreamSignIn(
        OidcSignIn(oidc_settings, ISSUER + CALLBACK_PATH, idp_transport), SESSION_KEY, codec
    )
    app = Starlette(routes=oauth_routes(provider, provider.config, api_token_role(clean_database), single_sign_on))
    async with clean_database.unit_of_work() as session:
        await UserService(session).ensure_user("ada", Role.writer)
    transport = httpx2.ASGITransport(app=app)
    async with (
        httpx2.AsyncClient(transport=transport, base_url=ISSUER) as http,
        httpx2.AsyncClient(transport=idp_transport, base_url=UPSTREAM) as idp,
    ):
        registered = await http.post("/register", json={"client_name": "Test client", "redirect_uris": [REDIRECT]})
        assert registered.status_code == 201, registered.text
        body = registered.json()
        yield SingleSignOn(
            provider, upstream, transport, http, idp, clean_database, body["client_id"], body["client_secret"], codec
        )


async def test_single_sign_on_leads_to_the_same_consent_and_a_token(sso: SingleSignOn) -> None:
    verifier = secrets.token_urlsafe(48)
    page = await sso.signin_page(verifier)
    assert "Sign in with Test IdP" in page and 'name="api_token"' in page  # beside the token and password forms
    found = re.search(r'href="(/oauth/oidc/start\?[^"]+)"', page)
    assert found is not None
    callback = await sso.via_provider(found[1].replace("&amp;", "&"))

    # What went to the provider: the code flow with PKCE S256, a state and a nonce, our callback.
    [asked] = sso.upstream.authorizations
    assert asked["response_type"] == "code" and asked["client_id"] == CLIENT_ID
    assert asked["redirect_uri"] == ISSUER + CALLBACK_PATH and asked["scope"] == "openid email profile"
    assert asked["code_challenge_method"] == "S256" and len(asked["code_challenge"]) == 43
    assert len(asked["state"]) >= 32 and len(asked["nonce"]) >= 32 and asked["state"] != asked["nonce"]

    assert callback.status_code == 200, callback.text
    assert "Signed in as <strong>ada</strong>" in callback.text and "<strong>writer</strong>" in callback.text
    assert callback.headers["content-security-policy"].endswith("frame-ancestors 'none'")
    assert sso.http.cookies.get(PENDING_COOKIE) is None  # spent: the callback cannot be replayed
    fields = {
        "request": _field(callback.text, "request"),
        "csrf": _field(callback.text, "csrf"),
        "consent": _field(callback.text, "consent"),
    }
    back = await sso.http.post("/oauth/consent", data={**fields, "decision": "approve"})
    assert back.status_code == 302 and back.headers["location"].startswith(REDIRECT)
    code = parse_qs(urlsplit(back.headers["location"]).query)["code"][0]
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "code_verifier": verifier,
        "redirect_uri": REDIRECT,
        "client_id": sso.client_id,
        "client_secret": sso.client_secret,
    }
    answer = await sso.http.post("/token", data=form)
    assert answer.status_code == 200, answer.text
    token = await sso.provider.load_access_token(answer.json()["access_token"])
    assert token is not None and token.principal().name == "ada" and token.role is Role.writer

    # The same callback again (its code spent, its pending cookie gone): refused, nothing more issued.
    again = await sso.http.get(f"{CALLBACK_PATH}?{urlencode({'code': 'x', 'state': asked['state']})}")
    assert again.status_code == 400 and "unknown or expired" in again.text
    assert await sso.count("SELECT count(*) FROM oauth_token") == 2


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        pytest.param({"nonce": "another sign-in's nonce"}, "Invalid claim: 'nonce'", id="wrong-nonce"),
        pytest.param({"aud": "another-client"}, "Invalid claim: 'aud'", id="wrong-audience"),
        pytest.param({"iss": "https://idp.example.test/realms/other"}, "Invalid claim: 'iss'", id="wrong-issuer"),
        pytest.param({"exp": -600, "iat": -900}, "The token is expired", id="expired"),
        pytest.param({"sign_with": "stranger"}, "bad_signature", id="bad-signature"),
    ],
)
async def test_a_refused_id_token_signs_nobody_in(sso: SingleSignOn, fault: dict[str, Any], reason: str) -> None:
    if "sign_with" in fault:
        sso.upstream.sign_with = signing_key(fault["sign_with"])  # published kid, another key
    else:  # exp and iat are given relative to now
        timed = {"exp", "iat"}
        sso.upstream.id_token_changes = {
            claim: int(time.time()) + value if claim in timed else value for claim, value in fault.items()
        }
    callback, handle = await sso.oauth_sign_on()
    assert callback.status_code == 401, callback.text
    assert "Test IdP&#x27;s ID token was refused" in callback.text and reason in callback.text.replace("&#x27;", "'")
    assert f"/oauth/signin?request={handle}" in callback.text  # the way back to the other sign-ins
    await sso.nothing_signed_in()
    assert await sso.provider.pending(handle) is not None  # the request itself still waits for a sign-in


async def test_a_state_mismatch_is_refused_before_the_code_is_exchanged(sso: SingleSignOn) -> None:
    def other_state(url: str) -> str:
        parts = urlsplit(url)
        query = {key: values[0] for key, values in parse_qs(parts.query).items()}
        return f"{parts.path}?{urlencode({**query, 'state': secrets.token_urlsafe(32)})}"

    callback, _ = await sso.oauth_sign_on(other_state)
    assert callback.status_code == 400 and STATE_MISMATCH.replace("(", "") in callback.text.replace("(", "")
    assert sso.upstream.token_requests == 0
    await sso.nothing_signed_in()


async def test_a_callback_in_another_browser_is_refused(sso: SingleSignOn) -> None:
    """Login CSRF: an attacker's own code and state, replayed in the victim's browser (no pending cookie)."""
    started = await sso.http.get(f"/oauth/oidc/start?{urlencode({'console': '/ui/'})}")
    back = await sso.idp.get(started.headers["location"])
    async with httpx2.AsyncClient(transport=sso.transport, base_url=ISSUER) as victim:
        answer = await victim.get(back.headers["location"])
        assert answer.status_code == 400 and "unknown or expired" in answer.text
        assert victim.cookies.get(SESSION_COOKIE) is None
    assert sso.upstream.token_requests == 0


async def test_an_unknown_user_is_refused_and_not_created(sso: SingleSignOn) -> None:
    sso.upstream.user_claims = {"sub": "upstream-grace", "preferred_username": "grace", "email": "grace@example.test"}
    callback, _ = await sso.oauth_sign_on()
    assert callback.status_code == 403
    assert "signed you in as &#x27;grace&#x27;, but SynaptoMind has no such user" in callback.text
    await sso.nothing_signed_in()
    assert await sso.count("SELECT count(*) FROM app_user WHERE name = 'grace'") == 0


@pytest.mark.parametrize("sso", [{"create_users": True}], indirect=True)
async def test_an_unknown_user_is_created_as_a_reader_when_configured(sso: SingleSignOn) -> None:
    # No preferred_username: the next claim of user_claims, the (verified) email, names the user.
    sso.upstream.user_claims = {"sub": "upstream-grace", "email": "grace@example.test", "email_verified": True}
    callback, _ = await sso.oauth_sign_on()
    assert callback.status_code == 200, callback.text
    assert "Signed in as <strong>grace@example.test</strong>" in callback.text
    assert "<strong>reader</strong>" in callback.text
    assert await sso.count("SELECT count(*) FROM app_user WHERE name = 'grace@example.test' AND role = 'reader'") == 1
    callback, _ = await sso.oauth_sign_on()  # the second sign-in finds the user: still one
    assert callback.status_code == 200
    assert await sso.count("SELECT count(*) FROM app_user WHERE name = 'grace@example.test'") == 1


@pytest.mark.parametrize("sso", [{"create_users": True}], indirect=True)
async def test_an_unverified_email_names_nobody(sso: SingleSignOn) -> None:
    sso.upstream.user_claims = {"sub": "upstream-eve", "email": "ada@example.test", "email_verified": False}
    callback, _ = await sso.oauth_sign_on()
    assert callback.status_code == 403 and "has not verified the email address" in callback.text
    await sso.nothing_signed_in()
    assert await sso.count("SELECT count(*) FROM app_user") == 1  # ada only


async def test_the_provider_declining_signs_nobody_in(sso: SingleSignOn) -> None:
    def declined(url: str) -> str:
        state = parse_qs(urlsplit(url).query)["state"][0]
        return f"{CALLBACK_PATH}?{urlencode({'error': 'access_denied', 'state': state})}"

    callback, _ = await sso.oauth_sign_on(declined)
    assert callback.status_code == 401 and "Test IdP did not sign you in (access_denied)" in callback.text
    assert sso.upstream.token_requests == 0
    await sso.nothing_signed_in()


async def test_the_console_signs_in_through_the_provider(sso: SingleSignOn) -> None:
    callback = await sso.via_provider(f"/oauth/oidc/start?{urlencode({'console': '/ui/search?q=x'})}")
    assert callback.status_code == 303 and callback.headers["location"] == "/ui/search?q=x"
    session = sso.codec.read(sso.http.cookies.get(SESSION_COOKIE))
    assert session is not None
    async with sso.db.unit_of_work() as db:  # the server-side session it names (app.services.auth.sessions)
        found = await ConsoleSessionService(db).current(session.secret)
        ada = await UserService(db).find("ada")
    assert found is not None and found.kind == sessions.UPSTREAM and found.principal.user_id == ada.user_id
    # Only console pages: another target is replaced by the console's home, never followed off-site.
    sso.http.cookies.clear()
    callback = await sso.via_provider(f"/oauth/oidc/start?{urlencode({'console': '//evil.example/'})}")
    assert callback.status_code == 303 and callback.headers["location"] == "/ui/"


async def test_a_refused_console_sign_on_sets_no_session(sso: SingleSignOn) -> None:
    sso.upstream.id_token_changes = {"aud": "another-client"}
    callback = await sso.via_provider(f"/oauth/oidc/start?{urlencode({'console': '/ui/'})}")
    assert callback.status_code == 401 and 'href="/ui/sign-in"' in callback.text
    await sso.nothing_signed_in()


async def test_a_start_needs_a_live_request_or_the_console(sso: SingleSignOn) -> None:
    expired = await sso.http.get(f"/oauth/oidc/start?{urlencode({'request': 'not-a-request'})}")
    assert expired.status_code == 400 and "unknown, expired or already answered" in expired.text
    nothing = await sso.http.get("/oauth/oidc/start")
    assert nothing.status_code == 400
    assert sso.upstream.authorizations == [] and sso.http.cookies.get(PENDING_COOKIE) is None
