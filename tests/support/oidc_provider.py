"""A small OpenID Connect provider for the single sign-on tests: discovery, JWKS, an authorization endpoint that
signs its one user in at once, and a token endpoint that checks the client, the redirect URI and PKCE.

Its keys are generated here (joserfc), its ID tokens signed with them. A test changes what the next ID token says
(`id_token_changes`: another nonce, audience, expiry…) or signs it with another key (`sign_with`) to check that
the relying party refuses it.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route

CLIENT_ID = "synaptomind-test"
CLIENT_SECRET = "upstream-client-secret"
_KEYS: dict[str, RSAKey] = {}


def signing_key(kid: str) -> RSAKey:
    """An RSA key per kid, generated once per test session (2048-bit generation takes a while)."""
    if kid not in _KEYS:
        _KEYS[kid] = RSAKey.generate_key(2048, parameters={"kid": kid})
    return _KEYS[kid]


@dataclass
class FakeOidcProvider:
    issuer: str
    user_claims: dict[str, Any] = field(default_factory=lambda: {"sub": "upstream-ada", "preferred_username": "ada"})
    id_token_changes: dict[str, Any] = field(default_factory=dict)  # merged into the next ID tokens' claims
    sign_with: RSAKey | None = None  # sign with this key (same kid as the published one) instead
    codes: dict[str, dict[str, str]] = field(default_factory=dict)
    authorizations: list[dict[str, str]] = field(default_factory=list)  # each /authorize query, as received
    token_requests: int = 0

    @property
    def key(self) -> RSAKey:
        return signing_key("provider-key")

    def app(self) -> Starlette:
        routes: list[BaseRoute] = [
            Route("/.well-known/openid-configuration", self.discovery, methods=["GET"]),
            Route("/jwks", self.jwks, methods=["GET"]),
            Route("/authorize", self.authorize, methods=["GET"]),
            Route("/token", self.token, methods=["POST"]),
        ]
        prefix = urlsplit(self.issuer).path.rstrip("/")  # an issuer with a path serves below it
        return Starlette(routes=[Mount(prefix, routes=routes)] if prefix else routes)

    async def discovery(self, request: Request) -> Response:
        return JSONResponse(
            {
                "issuer": self.issuer,
                "authorization_endpoint": f"{self.issuer}/authorize",
                "token_endpoint": f"{self.issuer}/token",
                "jwks_uri": f"{self.issuer}/jwks",
                "response_types_supported": ["code"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
                "code_challenge_methods_supported": ["S256"],
            }
        )

    async def jwks(self, request: Request) -> Response:
        return JSONResponse(KeySet([self.key]).as_dict(private=False))

    async def authorize(self, request: Request) -> Response:
        query = dict(request.query_params)
        self.authorizations.append(query)
        if query.get("client_id") != CLIENT_ID or query.get("response_type") != "code":
            return JSONResponse({"error": "unauthorized_client"}, status_code=400)
        if query.get("code_challenge_method") != "S256" or "openid" not in query.get("scope", "").split():
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        code = secrets.token_urlsafe(24)
        self.codes[code] = query
        back = urlencode({"code": code, "state": query.get("state", "")})
        return RedirectResponse(f"{query['redirect_uri']}?{back}", status_code=302)

    async def token(self, request: Request) -> Response:
        self.token_requests += 1
        form = {key: value for key, value in (await request.form()).items() if isinstance(value, str)}
        if _client_credentials(request, form) != (CLIENT_ID, CLIENT_SECRET):
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        asked = self.codes.pop(form.get("code", ""), None)
        if asked is None or form.get("grant_type") != "authorization_code":
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        if form.get("redirect_uri") != asked["redirect_uri"]:
            return JSONResponse({"error": "invalid_grant", "error_description": "redirect_uri"}, status_code=400)
        digest = hashlib.sha256(form.get("code_verifier", "").encode()).digest()
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != asked["code_challenge"]:
            return JSONResponse({"error": "invalid_grant", "error_description": "code_verifier"}, status_code=400)
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "aud": CLIENT_ID,
            "iat": now,
            "exp": now + 300,
            "nonce": asked.get("nonce"),
            **self.user_claims,
            **self.id_token_changes,
        }
        key = self.sign_with or self.key
        id_token = jwt.encode({"alg": "RS256", "kid": self.key.kid}, claims, key)
        access = secrets.token_urlsafe(24)
        return JSONResponse({"access_token": access, "token_type": "Bearer", "expires_in": 300, "id_token": id_token})


def _client_credentials(request: Request, form: dict[str, str]) -> tuple[str, str]:
    header = request.headers.get("authorization", "")
    if header.startswith("Basic "):
        name, _, secret = base64.b64decode(header[6:]).decode().partition(":")
        return name, secret
    return form.get("client_id", ""), form.get("client_secret", "")
