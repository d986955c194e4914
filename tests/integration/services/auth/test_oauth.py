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
from app.services.auth.oauth import OAuthConfig, OAuthProvider
from app.services.auth.tokens import AuthService

ISSUER = "http://127.0.0.1:8765"
REDIRECT = "http://127.0.0.1:9/callback"


def authorization(
    verifier: str, redirect_uri: str = REDIRECT, explicit: bool = True, resource: str = f"{ISSUER}/mcp"
) -> AuthorizationParams:
    """The authorization request a client sends for this PKCE verifier (S256)."""
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return AuthorizationParams(
        state="s",
        scopes=None,
        code_challenge=challenge,
        redirect_uri=AnyUrl(redirect_uri),
        redirect_uri_provided_explicitly=explicit,
        resource=resource,
    )


@dataclass
class Flow:
    provider: OAuthProvider
    http: httpx2.AsyncClient
    db: Database
    client: OAuthClientInformationFull
    api_token: str

    async def code(self, verifier: str, redirect_uri: str = REDIRECT, explicit: bool = True) -> str:
        """A code as the sign-in and consent pages would issue it (the pages themselves: tests/e2e)."""
        signin = await self.provider.authorize(self.client, authorization(verifier, redirect_uri, explicit))
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
    # Worded as an unknown code's: docs/SECURITY.md, a caller cannot tell an expired grant from one never issued.
    assert answer.json() == {
        "error": "invalid_grant",
        "error_description": "code: not valid (unknown, expired or already used)",
    }
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


# ------------------------------------------------ first contact (issue 22): answers as the RFCs word them

GRANT_REFUSED = {
    "error": "invalid_grant",
    "error_description": "refresh_token: not valid (unknown, expired, revoked or already used)",
}


async def test_a_spent_refresh_token_is_refused_like_an_unknown_one(flow: Flow) -> None:
    """RFC 6749 §5.2 invalid_grant; the text never says "does not exist" of a token that did, and tells a spent
    token from a never-issued one in no way (docs/SECURITY.md)."""
    verifier = secrets.token_urlsafe(48)
    first = (await flow.exchange(await flow.code(verifier), verifier)).json()
    client = {"client_id": flow.client.client_id or "", "client_secret": flow.client.client_secret or ""}
    refresh = {"grant_type": "refresh_token", **client}
    rotated = await flow.http.post("/token", data={**refresh, "refresh_token": first["refresh_token"]})
    assert rotated.status_code == 200, rotated.text
    spent = await flow.http.post("/token", data={**refresh, "refresh_token": first["refresh_token"]})
    unknown = await flow.http.post("/token", data={**refresh, "refresh_token": "smr_" + secrets.token_urlsafe(32)})
    assert spent.status_code == unknown.status_code == 400
    assert spent.json() == unknown.json() == GRANT_REFUSED


async def test_revoke_refuses_a_failed_client_authentication_as_token_does(flow: Flow) -> None:
    """RFC 7009 §2.2.1 refers to RFC 6749 §5.2: 401 invalid_client, as /token answers it."""
    verifier = secrets.token_urlsafe(48)
    pair = (await flow.exchange(await flow.code(verifier), verifier)).json()
    wrong = {"client_id": flow.client.client_id or "", "client_secret": "not-the-secret"}
    revoked = await flow.http.post("/revoke", data={"token": pair["access_token"], **wrong})
    token = await flow.http.post("/token", data={"grant_type": "refresh_token", "refresh_token": "x", **wrong})
    assert revoked.status_code == token.status_code == 401
    assert (
        revoked.json()
        == token.json()
        == {"error": "invalid_client", "error_description": "client_secret: does not match"}
    )
    unknown = await flow.http.post("/revoke", data={"token": pair["access_token"], "client_id": "nobody"})
    assert unknown.status_code == 401 and unknown.json()["error"] == "invalid_client"
    assert await flow.live_tokens() == 2  # nothing revoked


async def test_an_authorize_error_a_person_sees_is_a_page(flow: Flow) -> None:
    """An unknown client or an unregistered redirect_uri cannot be redirected (RFC 6749 §4.1.2.1): the browser
    gets a page naming the error, not JSON; an error that can go back to the client still does."""
    challenge = base64.urlsafe_b64encode(hashlib.sha256(b"v" * 43).digest()).decode().rstrip("=")
    query = {
        "response_type": "code",
        "client_id": flow.client.client_id or "",
        "redirect_uri": REDIRECT,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "s",
    }
    for refused in ({**query, "client_id": "no-such-client"}, {**query, "redirect_uri": "http://127.0.0.1:9/other"}):
        answer = await flow.http.get("/authorize", params=refused)
        assert answer.status_code == 400, answer.text
        assert answer.headers["content-type"].startswith("text/html")
        assert (
            "<code>invalid_request</code>" in answer.text
            and "frame-ancestors 'none'" in answer.headers["content-security-policy"]
        )
    unknown = await flow.http.get("/authorize", params={**query, "client_id": "<script>"})
    assert "<script>" not in unknown.text  # escaped
    redirected = await flow.http.get("/authorize", params={**query, "scope": "not-a-scope"})
    assert redirected.status_code == 302 and "error=invalid_scope" in redirected.headers["location"]


async def test_another_deployments_grants_are_refused_here(flow: Flow) -> None:
    """Two deployments on one database (another issuer and resource): the refresh token and the code one issued
    are refused at the other's /token, which issues nothing; its access token does not load here either."""
    verifier = secrets.token_urlsafe(48)
    pair = (await flow.exchange(await flow.code(verifier), verifier)).json()
    other_code = await flow.code(verifier)
    other = OAuthProvider(flow.db, OAuthConfig(OAuthSettings(enabled=True, public_url="https://other.example")))
    app = Starlette(routes=oauth_routes(other, other.config, api_token_role(flow.db)))
    client = {"client_id": flow.client.client_id or "", "client_secret": flow.client.client_secret or ""}
    before = await flow.tokens()
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="https://other.example") as http:
        refreshed = await http.post(
            "/token", data={"grant_type": "refresh_token", "refresh_token": pair["refresh_token"], **client}
        )
        exchanged = await http.post(
            "/token",
            data={
                "grant_type": "authorization_code",
                "code": other_code,
                "code_verifier": verifier,
                "redirect_uri": REDIRECT,
                **client,
            },
        )
    assert refreshed.status_code == 400 and refreshed.json() == GRANT_REFUSED
    assert exchanged.status_code == 400 and exchanged.json()["error"] == "invalid_grant"
    assert await flow.tokens() == before and await flow.live_tokens() == 2
    assert await other.load_access_token(pair["access_token"]) is None
    assert await flow.provider.load_access_token(pair["access_token"]) is not None


def test_loopback_aliases_only_for_a_loopback_public_url_and_its_port() -> None:
    loopback = OAuthConfig(OAuthSettings(enabled=True, public_url="http://127.0.0.1:8765"))
    assert loopback.origins == ("http://127.0.0.1:8765", "http://localhost:8765", "http://[::1]:8765")
    assert loopback.origin_for("localhost:8765") == "http://localhost:8765"
    assert loopback.origin_for("LOCALHOST:8765") == "http://localhost:8765"
    assert loopback.origin_for("[::1]:8765") == "http://[::1]:8765"
    for other in ("localhost:9999", "localhost", "evil.example:8765", "127.0.0.1.evil.example:8765", "", None, "[::1"):
        assert loopback.origin_for(other) == "http://127.0.0.1:8765", other
    public = OAuthConfig(OAuthSettings(enabled=True, public_url="https://memory.example.com"))
    assert public.origins == ("https://memory.example.com",)
    assert public.origin_for("localhost") == public.origin_for("127.0.0.1:443") == "https://memory.example.com"
    assert public.accepts_resource("https://memory.example.com/mcp")
    assert not public.accepts_resource("http://localhost/mcp") and not loopback.accepts_resource(None)
    assert loopback.accepts_resource("http://localhost:8765/mcp") and not loopback.issued_here(
        "http://localhost:8765/mcp"
    )
    assert loopback.issued_here("http://127.0.0.1:8765/mcp") and not loopback.issued_here(None)


async def test_the_metadata_and_the_code_flow_answer_in_the_loopback_name_the_client_used(flow: Flow) -> None:
    """PUBLIC_URL says 127.0.0.1, the client says localhost: the SDK clients compare the resource and the issuer
    as strings (RFC 9728 §3.3, RFC 8414 §3.3, RFC 9207), so each answers in the client's name; the tokens stay
    bound to the public URL's resource (what /mcp checks)."""
    alias = "http://localhost:8765"
    headers = {"Host": "localhost:8765"}
    resource = (await flow.http.get("/.well-known/oauth-protected-resource/mcp", headers=headers)).json()
    server = (await flow.http.get("/.well-known/oauth-authorization-server", headers=headers)).json()
    assert resource["resource"] == f"{alias}/mcp" and resource["authorization_servers"] == [alias]
    assert server["issuer"] == alias and server["token_endpoint"] == f"{alias}/token"
    public = (await flow.http.get("/.well-known/oauth-authorization-server", headers={"Host": "evil.example"})).json()
    assert public["issuer"] == ISSUER

    signin = await flow.provider.authorize(flow.client, authorization("v" * 43, resource=f"{alias}/mcp"))
    assert signin.startswith(f"{alias}/oauth/signin?")
    handle = parse_qs(urlsplit(signin).query)["request"][0]
    signed_in = await flow.provider.sign_in(handle, flow.api_token)
    assert signed_in is not None
    target = await flow.provider.consent(handle, signed_in.consent_secret, True, issuer=alias)
    assert target is not None and parse_qs(urlsplit(target).query)["iss"] == [alias]
    code = parse_qs(urlsplit(target).query)["code"][0]
    pair = await flow.exchange(code, "v" * 43)
    assert pair.status_code == 200, pair.text
    token = await flow.provider.load_access_token(pair.json()["access_token"])
    assert token is not None and token.resource == f"{ISSUER}/mcp"
