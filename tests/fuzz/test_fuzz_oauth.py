"""Property-based fuzzing of the OAuth endpoints (/register, /authorize, /token, /revoke) on the real PostgreSQL.

The app is the OAuth routes in-process (the SDK's handlers over app.services.auth.oauth, as tests/integration/
test_oauth.py builds it), reached through httpx. For every generated request that is wrong — a malformed
registration, an authorization request with an unknown client, a foreign redirect_uri, no PKCE or `plain`;
a token request with a wrong PKCE verifier, a replayed code, a redirect_uri mismatch, another client's code,
a bad client secret, an unsupported grant type, a garbage code or refresh token; a revocation by another
client or of garbage — the answer must be:
- a refusal with an RFC error code (RFC 6749 §4.1.2.1 / §5.2, RFC 7591 §3.2.2, RFC 7009 §2.2.1, RFC 8707),
  4xx and never 5xx: a JSON body `{"error": …}`, or for /authorize a page naming it or a redirect carrying
  `error=` back to a registered redirect_uri (413 for a body past the form limit);
- a refusal that issued nothing: the counts of clients, authorization requests, codes and tokens (and live
  tokens) are those of just before the call. A replayed code issues nothing and ends what the first
  exchange issued; a revocation of garbage or of another client's token revokes nothing (200, RFC 7009 §2.2).

Profiles (tests/fuzz/conftest.py): `ci` runs 30 examples per property in `make test`; `make fuzz` runs `deep`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from hypothesis import assume, event, example, given, settings
from hypothesis import strategies as st
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
from tests.conftest import TABLES as ALL_TABLES
from tests.fuzz.conftest import PROFILE
from tests.support.strategies import DRIVER_MARKERS, UNICODE_SPECIALS, junk

FUZZ = settings(settings.get_profile(PROFILE))
ISSUER = "http://127.0.0.1:8765"
RESOURCE = f"{ISSUER}/mcp"
REDIRECT = "http://127.0.0.1:9/callback"
OTHER_REDIRECT = "https://app.example/callback"

REGISTER_ERRORS = {"invalid_redirect_uri", "invalid_client_metadata", "invalid_software_statement"}
AUTHORIZE_ERRORS = {"invalid_request", "unauthorized_client", "unsupported_response_type", "invalid_scope"}
AUTHORIZE_ERRORS_REDIRECTED = AUTHORIZE_ERRORS | {"access_denied", "invalid_target"}
TOKEN_ERRORS = {
    "invalid_request",
    "invalid_client",
    "invalid_grant",
    "unauthorized_client",
    "unsupported_grant_type",
    "invalid_scope",
}
REVOKE_ERRORS = {"invalid_request", "invalid_client", "unauthorized_client", "unsupported_token_type"}
COUNTS = text(
    "SELECT (SELECT count(*) FROM oauth_client) AS clients,"
    " (SELECT count(*) FROM oauth_authorization) AS requests,"
    " (SELECT count(*) FROM oauth_authorization WHERE user_id IS NOT NULL) AS signed_in,"
    " (SELECT count(*) FROM oauth_authorization WHERE code_hash IS NOT NULL) AS codes,"
    " (SELECT count(*) FROM oauth_token) AS tokens,"
    " (SELECT count(*) FROM oauth_token WHERE revoked_at IS NULL) AS live"
)


def challenge_of(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")


@dataclass(repr=False)
class World:
    provider: OAuthProvider
    http: httpx2.AsyncClient
    db: Database
    api_token: str
    confidential: OAuthClientInformationFull  # client_secret_post, redirect REDIRECT
    public: OAuthClientInformationFull  # token_endpoint_auth_method none, redirect OTHER_REDIRECT
    live: dict[str, str]  # a live pair of the confidential client: what a revocation must not end by mistake

    def __repr__(self) -> str:  # hypothesis prints the fixtures of a failing example: keep it short
        return "World(oauth)"

    async def counts(self) -> dict[str, int]:
        async with self.db.unit_of_work() as session:
            return {key: int(value) for key, value in (await session.execute(COUNTS)).mappings().one().items()}

    def credentials(self, client: OAuthClientInformationFull) -> dict[str, str]:
        found = {"client_id": client.client_id or ""}
        if client.client_secret:
            found["client_secret"] = client.client_secret
        return found

    async def code(self, verifier: str, client: OAuthClientInformationFull | None = None) -> str:
        """A code as the sign-in and consent pages issue it (the pages:
        tests/integration/services/auth/test_passwords.py)."""
        client = client or self.confidential
        params = AuthorizationParams(
            state="s",
            scopes=None,
            code_challenge=challenge_of(verifier),
            redirect_uri=AnyUrl(str((client.redirect_uris or [])[0])),
            redirect_uri_provided_explicitly=True,
            resource=RESOURCE,
        )
        signin = await self.provider.authorize(client, params)
        handle = parse_qs(urlsplit(signin).query)["request"][0]
        signed_in = await self.provider.sign_in(handle, self.api_token)
        assert signed_in is not None
        target = await self.provider.consent(handle, signed_in.consent_secret, approve=True)
        assert target is not None
        return parse_qs(urlsplit(target).query)["code"][0]

    async def exchange(self, code: str, verifier: str) -> dict[str, Any]:
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "code_verifier": verifier,
            "redirect_uri": REDIRECT,
            **self.credentials(self.confidential),
        }
        answer = await self.http.post("/token", data=form)
        assert answer.status_code == 200, answer.text
        return dict(answer.json())


@pytest.fixture(scope="module")
async def world(database: Database) -> AsyncIterator[World]:
    async with database.unit_of_work() as session:
        await session.execute(text(f"TRUNCATE {ALL_TABLES} RESTART IDENTITY CASCADE"))
        api_token, _ = await AuthService(session).create_token("fuzz-oauth", Role.writer, "fuzz")
    provider = OAuthProvider(
        database, OAuthConfig(OAuthSettings(enabled=True, public_url=ISSUER)), password_failure_delay=0.0
    )
    app = Starlette(routes=oauth_routes(provider, provider.config, api_token_role(database)))
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=ISSUER) as http:
        confidential = await http.post("/register", json={"client_name": "Fuzz", "redirect_uris": [REDIRECT]})
        public = await http.post(
            "/register", json={"redirect_uris": [OTHER_REDIRECT], "token_endpoint_auth_method": "none"}
        )
        assert confidential.status_code == 201 and public.status_code == 201, (confidential.text, public.text)
        world = World(
            provider,
            http,
            database,
            api_token,
            OAuthClientInformationFull.model_validate(confidential.json()),
            OAuthClientInformationFull.model_validate(public.json()),
            {},
        )
        verifier = secrets.token_urlsafe(48)
        world.live = await world.exchange(await world.code(verifier), verifier)
        yield world


def assert_refused(answer: httpx2.Response, errors: set[str], request: str) -> str:
    """A 4xx with an RFC error (or 413 past the form limit); the error code, for statistics."""
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text[:300], request[:300])
    for marker in DRIVER_MARKERS:
        assert marker not in answer.text, (marker, answer.text[:300])
    if answer.status_code == 413:
        return "413"
    body = answer.json()
    assert body["error"] in errors, (body, request[:300])
    assert isinstance(body.get("error_description", ""), str)
    return str(body["error"])


# ---------------------------------------------------------------- strategies

hostile = st.one_of(
    st.text(max_size=40),
    st.sampled_from(UNICODE_SPECIALS),
    st.sampled_from(["'; DROP TABLE oauth_token;--", "%00", "..", "smc_", "sma_", "smr_", "null", "{}", "[]"]),
    st.builds(lambda prefix, rest: prefix + rest, st.sampled_from(["smc_", "sma_", "smr_", "smt_"]), st.text()),
    st.integers(60, 300).map(lambda n: "x" * n),
)
BAD_REDIRECTS = [
    "http://attacker.example/cb",  # plain http off loopback
    "https://app.example/cb#fragment",
    "javascript:alert(1)",
    "data:text/html,hi",
    "file:///etc/passwd",
    "vbscript:msgbox",
    "/relative/path",
    "not a url",
    "",
    "http://",
    "https://\x00.example/cb",
]
good_metadata = st.fixed_dictionaries(
    {"redirect_uris": st.just([REDIRECT])},
    optional={"client_name": st.text(max_size=30), "scope": st.sampled_from(["", "read"])},
)


@st.composite
def malformed_registration(draw: st.DrawFn) -> tuple[str, bytes]:
    """A registration body that must be refused, and what is wrong with it."""
    kind = draw(
        st.sampled_from(
            [
                "not json",
                "not an object",
                "no redirect_uris",
                "bad redirect_uris",
                "redirect_uris not a list",
                "bad grant_types",
                "bad response_types",
                "bad auth method",
                "wrong types",
                "NUL in a field",
            ]
        )
    )
    metadata: dict[str, Any] = dict(draw(good_metadata))
    extra = draw(st.dictionaries(st.text(max_size=10), junk(), max_size=3))
    metadata = {**extra, **metadata}
    if kind == "not json":
        raw = draw(st.one_of(st.binary(max_size=200), st.sampled_from([b"{not json", b"", b"{", b"\xff\xfe", b"NaN"])))
        assume(not _is_json_object(raw))
        return kind, raw
    if kind == "not an object":
        return kind, json.dumps(draw(st.one_of(st.lists(junk(), max_size=3), st.text(), st.integers()))).encode()
    if kind == "no redirect_uris":
        metadata.pop("redirect_uris")
        metadata.pop("redirect_uri", None)
        if draw(st.booleans()):
            metadata["redirect_uris"] = draw(st.sampled_from([[], None]))
    elif kind == "bad redirect_uris":
        bad = draw(st.lists(st.sampled_from(BAD_REDIRECTS), min_size=1, max_size=3))
        metadata["redirect_uris"] = draw(st.permutations([*bad, *draw(st.sampled_from([[], [REDIRECT]]))]))
    elif kind == "redirect_uris not a list":
        metadata["redirect_uris"] = draw(st.one_of(st.just(REDIRECT), st.integers(), st.just({"uri": REDIRECT})))
    elif kind == "bad grant_types":
        metadata["grant_types"] = draw(
            st.sampled_from(
                [
                    [],
                    ["refresh_token"],
                    ["client_credentials"],
                    ["password"],
                    ["implicit"],
                    ["authorization_code", "urn:ietf:params:oauth:grant-type:jwt-bearer"],
                    "authorization_code",
                ]
            )
        )
    elif kind == "bad response_types":
        metadata["response_types"] = draw(st.sampled_from([["token"], ["id_token"], [], "code", [None]]))
    elif kind == "bad auth method":
        metadata["token_endpoint_auth_method"] = draw(
            st.sampled_from(["private_key_jwt", "tls_client_auth", "client_secret_jwt", "", "NONE", 7])
        )
    elif kind == "NUL in a field":  # well-formed otherwise: jsonb cannot hold it, so refused (not a driver error)
        metadata[draw(st.sampled_from(["client_name", "software_id", "scope"]))] = draw(
            st.sampled_from(["\x00", "a\x00b", "Fuzz\x00"])
        )
    else:
        field = draw(st.sampled_from(["client_name", "scope", "client_uri", "contacts", "grant_types"]))
        metadata[field] = draw(st.sampled_from([{"a": 1}, 12, [1, 2], True]))
    return kind, json.dumps(metadata).encode()


def _is_json_object(raw: bytes) -> bool:
    try:
        return isinstance(json.loads(raw), dict)
    except ValueError:
        return False


@st.composite
def bad_authorization(draw: st.DrawFn, world: World) -> tuple[str, dict[str, str]]:
    """An authorization request with at least one thing wrong, and which."""
    verifier = secrets.token_urlsafe(48)
    query: dict[str, str] = {
        "response_type": "code",
        "client_id": world.confidential.client_id or "",
        "redirect_uri": REDIRECT,
        "code_challenge": challenge_of(verifier),
        "code_challenge_method": "S256",
        "state": draw(st.sampled_from(["s", "", "state with spaces", "é😀"])),
        "resource": RESOURCE,
    }
    flaws = draw(
        st.sets(
            st.sampled_from(
                [
                    "unknown client",
                    "other client's redirect_uri",
                    "foreign redirect_uri",
                    "no challenge",
                    "plain",
                    "bad method",
                    "response_type",
                    "foreign resource",
                    "no client",
                    "NUL in state",
                ]
            ),
            min_size=1,
            max_size=3,
        )
    )
    for flaw in sorted(flaws):
        if flaw == "unknown client":
            query["client_id"] = draw(hostile.filter(lambda value: value != world.confidential.client_id))
        elif flaw == "no client":
            query.pop("client_id")
        elif flaw == "other client's redirect_uri":
            query["redirect_uri"] = OTHER_REDIRECT
        elif flaw == "foreign redirect_uri":
            query["redirect_uri"] = draw(
                st.one_of(
                    st.sampled_from([*BAD_REDIRECTS, REDIRECT + "/", REDIRECT + "?x=1", REDIRECT.upper()]),
                    hostile,
                ).filter(lambda value: value != REDIRECT)
            )
        elif flaw == "NUL in state":  # PostgreSQL text cannot hold it: refused, not a driver error
            query["state"] = draw(st.sampled_from(["\x00", "a\x00b", "s\x00"]))
        elif flaw == "no challenge":
            query.pop("code_challenge")
        elif flaw == "plain":
            query["code_challenge_method"] = "plain"
            query["code_challenge"] = verifier
        elif flaw == "bad method":
            query["code_challenge_method"] = draw(hostile.filter(lambda value: value != "S256"))
        elif flaw == "response_type":
            query["response_type"] = draw(
                st.one_of(st.sampled_from(["token", "id_token", "code token", "CODE", ""]), hostile).filter(
                    lambda value: value != "code"
                )
            )
        else:
            query["resource"] = draw(
                st.one_of(
                    st.sampled_from(["https://elsewhere.example/mcp", f"{ISSUER}/other", ISSUER, "urn:x"]), hostile
                ).filter(lambda value: value.strip() and value.rstrip("/") != RESOURCE)  # "": no resource asked
            )
    return " + ".join(sorted(flaws)), query


TOKEN_FLAWS = [
    "wrong verifier",
    "no verifier",
    "replayed code",
    "redirect_uri mismatch",
    "no redirect_uri",
    "another client",
    "unknown client",
    "wrong secret",
    "no secret",
    "mangled code",
    "garbage code",
    "grant type",
    "refresh with the code",
]


# ---------------------------------------------------------------- properties


@FUZZ
@given(case=malformed_registration())
@example(case=("NUL in a field", json.dumps({"redirect_uris": [REDIRECT], "client_name": "a\x00b"}).encode()))
@example(case=("no redirect_uris", b'{"redirect_uris": null}'))
async def test_fuzz_malformed_registration_is_refused(world: World, case: tuple[str, bytes]) -> None:
    kind, body = case
    before = await world.counts()
    answer = await world.http.post("/register", content=body, headers={"Content-Type": "application/json"})
    event(f"register {kind} -> {assert_refused(answer, REGISTER_ERRORS, repr(body))}")
    assert await world.counts() == before


@FUZZ
@given(data=st.data())
async def test_fuzz_bad_authorization_requests_are_refused(world: World, data: st.DataObject) -> None:
    flaws, query = data.draw(bad_authorization(world), label="authorization request")
    method = data.draw(st.sampled_from(["GET", "POST"]), label="method")
    before = await world.counts()
    if method == "GET":
        answer = await world.http.get("/authorize", params=query)
    else:
        answer = await world.http.post("/authorize", data=query)
    if answer.status_code == 302:
        # A trusted redirect_uri: the refusal goes back to it (RFC 6749 §4.1.2.1), never to the sign-in page.
        location = answer.headers["location"]
        assert location.startswith((REDIRECT, OTHER_REDIRECT)), (location, flaws)
        back = parse_qs(urlsplit(location).query)
        assert back["error"][0] in AUTHORIZE_ERRORS_REDIRECTED, (back, flaws)
        outcome = back["error"][0]
    elif answer.status_code == 413:
        outcome = assert_refused(answer, AUTHORIZE_ERRORS, f"{flaws}: {query}")
    else:
        # Not redirectable: a page for the person in the browser, naming the RFC error code.
        assert answer.status_code == 400 and answer.headers["content-type"].startswith("text/html"), answer.text[:300]
        named = re.search(r"<code>([a-z_]+)</code>", answer.text)
        assert named is not None and named.group(1) in AUTHORIZE_ERRORS, (answer.text[:300], flaws)
        outcome = named.group(1)
    event(f"authorize {flaws} -> {outcome}")
    assert await world.counts() == before, flaws


@FUZZ
@given(data=st.data())
async def test_fuzz_bad_token_requests_issue_nothing(world: World, data: st.DataObject) -> None:
    flaw = data.draw(st.sampled_from(TOKEN_FLAWS), label="flaw")
    verifier = secrets.token_urlsafe(48)
    code = await world.code(verifier)
    form: dict[str, str] = {
        "grant_type": "authorization_code",
        "code": code,
        "code_verifier": verifier,
        "redirect_uri": REDIRECT,
        **world.credentials(world.confidential),
    }
    first: dict[str, Any] | None = None
    if flaw == "wrong verifier":
        form["code_verifier"] = data.draw(
            st.one_of(st.just(secrets.token_urlsafe(48)), st.just(verifier[:-1]), st.just(verifier + "A"), hostile),
            label="verifier",
        )
    elif flaw == "no verifier":
        form.pop("code_verifier")
    elif flaw == "replayed code":
        first = await world.exchange(code, verifier)
    elif flaw == "redirect_uri mismatch":
        form["redirect_uri"] = data.draw(
            st.sampled_from([OTHER_REDIRECT, REDIRECT + "/", REDIRECT + "?x=1", "http://127.0.0.1:9/elsewhere"]),
            label="redirect_uri",
        )
    elif flaw == "no redirect_uri":
        form.pop("redirect_uri")  # required: it was given explicitly at /authorize (RFC 6749 §4.1.3)
    elif flaw == "another client":
        form = {**form, **world.credentials(world.public)}
        form.pop("client_secret", None)
    elif flaw == "unknown client":
        form["client_id"] = data.draw(hostile, label="client_id")
    elif flaw == "wrong secret":
        form["client_secret"] = data.draw(
            hostile.filter(lambda value: value != world.confidential.client_secret), label="secret"
        )
    elif flaw == "no secret":
        form.pop("client_secret")
    elif flaw == "mangled code":
        form["code"] = data.draw(
            st.sampled_from([code[:-1], code + "x", code.upper(), code.replace("smc_", "sma_"), " " + code]),
            label="code",
        )
    elif flaw == "garbage code":
        form["code"] = data.draw(hostile, label="code")
    elif flaw == "grant type":
        form["grant_type"] = data.draw(
            st.one_of(
                st.sampled_from(["password", "client_credentials", "implicit", "AUTHORIZATION_CODE", ""]),
                st.just("urn:ietf:params:oauth:grant-type:jwt-bearer"),
                hostile,
            ).filter(lambda value: value != "authorization_code"),
            label="grant_type",
        )
    else:  # the code sent as a refresh token
        form["grant_type"] = "refresh_token"
        form["refresh_token"] = code
    junk_fields = data.draw(
        st.dictionaries(st.sampled_from(["scope", "resource", "state", "zzz"]), hostile, max_size=2), label="extra"
    )
    form.update(junk_fields)
    before = await world.counts()
    answer = await world.http.post("/token", data=form)
    event(f"token {flaw} -> {assert_refused(answer, TOKEN_ERRORS, f'{flaw}: {form}')}")
    after = await world.counts()
    assert after["tokens"] == before["tokens"] and after["clients"] == before["clients"], (flaw, before, after)
    if first is not None:
        # The replay issued nothing and ended what the first exchange issued (the code may have been stolen).
        assert after["live"] == before["live"] - 2
        assert await world.provider.load_access_token(first["access_token"]) is None
    else:
        assert after == before, flaw
    assert await world.provider.load_access_token(world.live["access_token"]) is not None


@FUZZ
@given(data=st.data())
async def test_fuzz_garbage_refresh_and_revocation_end_nothing(world: World, data: st.DataObject) -> None:
    """Garbage or foreign refresh tokens are refused; garbage or another client's tokens are not revoked."""
    endpoint = data.draw(st.sampled_from(["/token", "/revoke"]), label="endpoint")
    token = data.draw(
        st.one_of(
            hostile,
            st.just(world.live["refresh_token"]),  # paired with the other client below
            st.just(world.live["access_token"]),
            st.builds(
                lambda value: value[:-1], st.sampled_from([world.live["refresh_token"], world.live["access_token"]])
            ),
        ),
        label="token",
    )
    own = token not in (world.live["refresh_token"], world.live["access_token"])
    client = data.draw(
        st.sampled_from(["public", "unknown", "wrong secret"] + (["own"] if own else [])), label="client"
    )
    credentials = world.credentials(world.public if client == "public" else world.confidential)
    if client == "unknown":
        credentials = {"client_id": data.draw(hostile, label="client_id")}
    elif client == "wrong secret":
        credentials["client_secret"] = data.draw(
            hostile.filter(lambda value: value != world.confidential.client_secret), label="secret"
        )
    if endpoint == "/token":
        form = {"grant_type": "refresh_token", "refresh_token": token, **credentials}
        if data.draw(st.booleans(), label="scope"):
            form["scope"] = data.draw(hostile, label="scope value")
    else:
        form = {"token": token, **credentials}
        hint = data.draw(st.sampled_from([None, "access_token", "refresh_token", "garbage"]), label="hint")
        if hint:
            form["token_type_hint"] = hint
    before = await world.counts()
    answer = await world.http.post(endpoint, data=form)
    if endpoint == "/revoke" and answer.status_code == 200:
        # RFC 7009 §2.2: an invalid token, or another client's, answers 200 — and must revoke nothing.
        assert client in ("public", "own") and form.get("token_type_hint") != "garbage", (client, form)
        outcome = "200"
    else:
        outcome = assert_refused(answer, TOKEN_ERRORS if endpoint == "/token" else REVOKE_ERRORS, str(form))
    event(f"{endpoint} {client} -> {outcome}")
    assert await world.counts() == before, (endpoint, client)
    assert await world.provider.load_access_token(world.live["access_token"]) is not None


async def test_the_world_has_a_live_pair_and_two_clients(world: World) -> None:
    counts = await world.counts()
    assert counts["clients"] == 2 and counts["live"] >= 2
    assert await world.provider.load_access_token(world.live["access_token"]) is not None
