"""The OAuth provider over PostgreSQL behind the SDK's /token handler: every refused exchange issues nothing."""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from mcp.server.auth.provider import AuthorizationParams
from mcp.shared.auth import OAuthClientInformationFull
from pydantic import AnyUrl
from sqlalchemy import text
from starlette.applications import Starlette

from app.config import OAuthSettings
from app.db.engine import Database
from app.db.models import Role
from app.http.oauth import api_token_role, oauth_routes
from app.services.auth import AuthService
from app.services.oauth import OAuthConfig, OAuthProvider

ISSUER = "http://127.0.0.1:8765"
REDIRECT = "http://127.0.0.1:9/callback"


@dataclass
class Flow:
    provider: OAuthProvider
    http: httpx2.AsyncClient
    db: Database
    client: OAuthClientInformationFull
    api_token: str

    async def code(self, verifier: str, redirect_uri: str = REDIRECT, explicit: bool = True) -> str:
        """A code as the sign-in and consent pages would issue it (the pages themselves: tests/e2e)."""
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
        params = AuthorizationParams(
            state="s",
            scopes=None,
            code_challenge=challenge,
            redirect_uri=AnyUrl(redirect_uri),
            redirect_uri_provided_explicitly=explicit,
            resource=f"{ISSUER}/mcp",
        )
        signin = await self.provider.authorize(self.client, params)
        handle = parse_qs(urlsplit(signin).query)["request"][0]
        signed_in = await self.provider.sign_in(handle, self.api_token)
        assert signed_in is not None and signed_in.principal.role is Role.writer
        target = await self.provider.consent(handle, signed_in.consent_secret, approve=True)
        assert target is not None
        query = parse_qs(urlsplit(target).query)
        assert query["state"] == ["s"] and query["iss"] == [ISSUER]
        return query["code"][0]

    async def exchange(self, code: str, verifier: str, redirect_uri: str = REDIRECT) -> httpx2.Response:
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "code_verifier": verifier,
            "redirect_uri": redirect_uri,
            "client_id": self.client.client_id or "",
            "client_secret": self.client.client_secret or "",
        }
        return await self.http.post("/token", data=form)

    async def tokens(self) -> int:
        async with self.db.unit_of_work() as session:
            return int((await session.execute(text("SELECT count(*) FROM oauth_token"))).scalar_one())

    async def live_tokens(self) -> int:
        async with self.db.unit_of_work() as session:
            query = text("SELECT count(*) FROM oauth_token WHERE revoked_at IS NULL")
            return int((await session.execute(query)).scalar_one())


@pytest.fixture
async def flow(clean_database: Database) -> AsyncIterator[Flow]:
    provider = OAuthProvider(clean_database, OAuthConfig(OAuthSettings(enabled=True, public_url=ISSUER)))
    app = Starlette(routes=oauth_routes(provider, provider.config, api_token_role(clean_database)))
    async with clean_database.unit_of_work() as session:
        api_token, _ = await AuthService(session).create_token("ada", Role.writer, "test")
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=ISSUER) as http:
        registered = await http.post("/register", json={"client_name": "Test client", "redirect_uris": [REDIRECT]})
        assert registered.status_code == 201, registered.text
        client = OAuthClientInformationFull.model_validate(registered.json())
        assert client.client_secret  # client_secret_post by default: the hashed-secret path
        yield Flow(provider, http, clean_database, client, api_token)


async def test_the_code_flow_issues_a_pair_and_only_hashes_are_stored(flow: Flow) -> None:
    verifier = secrets.token_urlsafe(48)
    answer = await flow.exchange(await flow.code(verifier), verifier)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["token_type"] == "Bearer" and body["expires_in"] == 3600
    assert body["access_token"].startswith("sma_") and body["refresh_token"].startswith("smr_")
    async with flow.db.unit_of_work() as session:
        stored = (await session.execute(text("SELECT secret_hash FROM oauth_client"))).scalar_one()
        dump = (
            await session.execute(text("SELECT string_agg(encode(token_hash, 'escape'), '') FROM oauth_token"))
        ).scalar_one()
    assert stored == hashlib.sha256((flow.client.client_secret or "").encode()).digest()
    assert body["access_token"] not in dump and body["refresh_token"] not in dump
    token = await flow.provider.load_access_token(body["access_token"])
    assert token is not None and token.principal().name == "ada" and token.resource == f"{ISSUER}/mcp"


async def test_a_wrong_verifier_is_refused_and_nothing_issued(flow: Flow) -> None:
    verifier = secrets.token_urlsafe(48)
    answer = await flow.exchange(await flow.code(verifier), secrets.token_urlsafe(48))
    assert answer.status_code == 400
    assert answer.json() == {"error": "invalid_grant", "error_description": "incorrect code_verifier"}
    assert await flow.tokens() == 0


async def test_a_replayed_code_is_refused_and_ends_what_it_issued(flow: Flow) -> None:
    verifier = secrets.token_urlsafe(48)
    code = await flow.code(verifier)
    first = await flow.exchange(code, verifier)
    assert first.status_code == 200, first.text
    replay = await flow.exchange(code, verifier)
    assert replay.status_code == 400
    assert replay.json()["error"] == "invalid_grant" and "code" in replay.json()["error_description"]
    assert await flow.tokens() == 2  # the first pair only, and now revoked: the code may have been stolen
    assert await flow.live_tokens() == 0
    assert await flow.provider.load_access_token(first.json()["access_token"]) is None


async def test_a_redirect_uri_mismatch_is_refused_and_nothing_issued(flow: Flow) -> None:
    verifier = secrets.token_urlsafe(48)
    answer = await flow.exchange(await flow.code(verifier), verifier, "http://127.0.0.1:9/elsewhere")
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_request" and "redirect_uri" in answer.json()["error_description"]
    assert await flow.tokens() == 0


async def test_an_expired_code_is_refused_and_nothing_issued(flow: Flow) -> None:
    verifier = secrets.token_urlsafe(48)
    code = await flow.code(verifier)
    async with flow.db.unit_of_work() as session:
        await session.execute(text("UPDATE oauth_authorization SET expires_at = now() - interval '1 second'"))
    answer = await flow.exchange(code, verifier)
    assert answer.status_code == 400
    assert answer.json() == {"error": "invalid_grant", "error_description": "authorization code has expired"}
    assert await flow.tokens() == 0


async def test_another_clients_code_and_a_bad_secret_are_refused(flow: Flow) -> None:
    verifier = secrets.token_urlsafe(48)
    code = await flow.code(verifier)
    other = await flow.http.post("/register", json={"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"})
    form = {"grant_type": "authorization_code", "code": code, "code_verifier": verifier, "redirect_uri": REDIRECT}
    stolen = await flow.http.post("/token", data={**form, "client_id": other.json()["client_id"]})
    assert stolen.status_code == 400 and stolen.json()["error"] == "invalid_grant"
    wrong = await flow.http.post(
        "/token", data={**form, "client_id": flow.client.client_id or "", "client_secret": "not-the-secret"}
    )
    assert wrong.status_code == 401
    assert wrong.json() == {"error": "invalid_client", "error_description": "client_secret: does not match"}
    assert await flow.tokens() == 0


async def test_refresh_rotates_and_a_replayed_refresh_token_ends_the_family(flow: Flow) -> None:
    verifier = secrets.token_urlsafe(48)
    first = (await flow.exchange(await flow.code(verifier), verifier)).json()
    client = {"client_id": flow.client.client_id or "", "client_secret": flow.client.client_secret or ""}
    refreshed = await flow.http.post(
        "/token", data={"grant_type": "refresh_token", "refresh_token": first["refresh_token"], **client}
    )
    assert refreshed.status_code == 200, refreshed.text
    second = refreshed.json()
    assert second["refresh_token"] != first["refresh_token"]
    assert await flow.provider.load_access_token(second["access_token"]) is not None
    replay = await flow.http.post(
        "/token", data={"grant_type": "refresh_token", "refresh_token": first["refresh_token"], **client}
    )
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert await flow.live_tokens() == 0  # the thief's successor pair is revoked with the rest
    assert await flow.provider.load_access_token(second["access_token"]) is None


async def test_a_foreign_resource_and_a_plain_http_redirect_are_refused(flow: Flow) -> None:
    challenge = base64.urlsafe_b64encode(hashlib.sha256(b"v" * 43).digest()).decode().rstrip("=")
    query = {
        "response_type": "code",
        "client_id": flow.client.client_id or "",
        "redirect_uri": REDIRECT,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "s",
        "resource": "https://elsewhere.example/mcp",
    }
    answer = await flow.http.get("/authorize", params=query)
    assert answer.status_code == 302
    back = parse_qs(urlsplit(answer.headers["location"]).query)
    assert back["error"] == ["invalid_target"] and back["state"] == ["s"]
    plain = await flow.http.get("/authorize", params={**query, "code_challenge_method": "plain"})
    assert plain.status_code == 302 and parse_qs(urlsplit(plain.headers["location"]).query)["error"] == [
        "invalid_request"
    ]
    insecure = await flow.http.post("/register", json={"redirect_uris": ["http://attacker.example/cb"]})
    assert insecure.status_code == 400 and insecure.json()["error"] == "invalid_redirect_uri"
    malformed = await flow.http.post("/register", content=b"{not json")
    assert malformed.status_code == 400 and malformed.json()["error"] == "invalid_client_metadata"
    async with flow.db.unit_of_work() as session:
        clients = (await session.execute(text("SELECT count(*) FROM oauth_client"))).scalar_one()
    assert clients == 1 and await flow.tokens() == 0


async def test_closed_registration_needs_an_admin_token(clean_database: Database) -> None:
    provider = OAuthProvider(
        clean_database, OAuthConfig(OAuthSettings(enabled=True, public_url=ISSUER, registration_open=False))
    )
    app = Starlette(routes=oauth_routes(provider, provider.config, api_token_role(clean_database)))
    async with clean_database.unit_of_work() as session:
        writer, _ = await AuthService(session).create_token("w", Role.writer, "test")
        admin, _ = await AuthService(session).create_token("a", Role.admin, "test")
    body = {"redirect_uris": [REDIRECT]}
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=ISSUER) as http:
        anonymous = await http.post("/register", json=body)
        as_writer = await http.post("/register", json=body, headers={"Authorization": f"Bearer {writer}"})
        as_admin = await http.post("/register", json=body, headers={"Authorization": f"Bearer {admin}"})
    assert anonymous.status_code == 401 and anonymous.json()["error"] == "invalid_token"
    assert as_writer.status_code == 401
    assert as_admin.status_code == 201, as_admin.text
