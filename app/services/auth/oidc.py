"""Upstream single sign-on through an OpenID Connect provider (the `oauth.oidc` settings).

Authlib's OAuth 2 client does the protocol: discovery (`<issuer>/.well-known/openid-configuration`), the
authorization code flow with PKCE (S256), `state` and `nonce`, the code exchange; the ID token is verified with
joserfc (the provider's JWKS, the algorithms its metadata names) and Authlib's OIDC claim rules, with `iss` and
`aud` pinned to the configured issuer and client id.

A pending sign-in (state, nonce, PKCE verifier, where to return) is a `PendingSignIn` value the transport keeps in
a signed, short-lived cookie: any replica serves the callback, nothing is held in process memory but the
provider's public metadata and keys, cached for an hour.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx2
from authlib.integrations.httpx_client import AsyncOAuth2Client, OAuthError
from authlib.oidc.core import CodeIDToken
from joserfc import jwt
from joserfc.errors import InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet
from joserfc.jws import JWSRegistry

from app.db.records import Principal
from app.errors import AppError, ErrorKind, bad_request, forbidden, unavailable
from app.services.admin.users import UserService

if TYPE_CHECKING:
    from app.config import OidcSettings
    from app.db.engine import Database

logger = logging.getLogger(__name__)

DISCOVERY_PATH = "/.well-known/openid-configuration"
CALLBACK_PATH = "/oauth/oidc/callback"  # the redirect URI to register at the provider: <public URL> + this
START_PATH = "/oauth/oidc/start"
PENDING_SECONDS = 600  # as long as an MCP authorization request waits for its sign-in (app.services.auth.oauth)
METADATA_SECONDS = 3600.0
CLOCK_LEEWAY_SECONDS = 60
HTTP_TIMEOUT_SECONDS = 10.0
# Asymmetric signatures only: `none` is never a signature, and an HMAC would be keyed by the client secret.
SIGNING_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)

STATE_MISMATCH = "This sign-in answer does not match the one this browser started (state mismatch): start again."


def unauthorized(message: str) -> AppError:
    return AppError(ErrorKind.unauthorized, message)


@dataclass(frozen=True)
class PendingSignIn:
    """An upstream sign-in between the redirect to the provider and its callback; exactly one of `oauth_request`
    (the MCP authorization request's handle, app.services.auth.oauth) and `console_next` (the console page to return
    to) says where the user goes on."""

    state: str
    nonce: str
    code_verifier: str
    started_at: int
    oauth_request: str | None = None
    console_next: str | None = None

    def fresh(self, now: float | None = None) -> bool:
        age = (time.time() if now is None else now) - self.started_at
        return 0 <= age < PENDING_SECONDS


@dataclass(frozen=True)
class UpstreamIdentity:
    """A verified ID token's claims and the SynaptoMind user name they carry."""

    user_name: str
    subject: str
    claims: dict[str, Any]


def _error_text(error: JoseError) -> str:
    return error.description or error.error or type(error).__name__


class OidcSignIn:
    """The OIDC relying party of one provider. `transport` lets tests reach an in-process provider."""

    def __init__(
        self, settings: OidcSettings, redirect_uri: str, transport: httpx2.AsyncBaseTransport | None = None
    ) -> None:
        if not settings.enabled or not settings.issuer or not settings.client_id:
            raise ValueError("OidcSignIn needs oauth.oidc.issuer and oauth.oidc.client_id")
        self.settings = settings
        self.issuer: str = settings.issuer
        self.client_id: str = settings.client_id
        self.redirect_uri = redirect_uri
        self.transport = transport
        # The provider's public documents: a cache (re-read hourly, and the keys on an unknown `kid`), not state.
        self._metadata: dict[str, Any] | None = None
        self._metadata_at = 0.0
        self._jwks: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.settings.name

    def _client(self, metadata: Mapping[str, Any]) -> AsyncOAuth2Client:
        secret = self.settings.client_secret.get_secret_value() if self.settings.client_secret else None
        methods = metadata.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
        method = "none" if not secret else "client_secret_post" if "client_secret_basic" not in methods else None
        return AsyncOAuth2Client(
            client_id=self.client_id,
            client_secret=secret,
            token_endpoint_auth_method=method,  # None: Authlib's choice, client_secret_basic
            scope=self.settings.scopes,
            redirect_uri=self.redirect_uri,
            code_challenge_method="S256",
            timeout=HTTP_TIMEOUT_SECONDS,
            transport=self.transport,
        )

    async def _get_json(self, url: str) -> dict[str, Any]:
        async with httpx2.AsyncClient(timeout=HTTP_TIMEOUT_SECONDS, transport=self.transport) as http:
            answer = await http.get(url, headers={"Accept": "application/json"})
            answer.raise_for_status()
            document = answer.json()
        if not isinstance(document, dict):
            raise ValueError(f"{url} did not answer a JSON object")
        return document

    async def metadata(self) -> dict[str, Any]:
        """The provider's discovery document (OpenID Connect Discovery 1.0 §4), checked and cached."""
        if self._metadata is not None and time.monotonic() - self._metadata_at < METADATA_SECONDS:
            return self._metadata
        url = self.issuer.rstrip("/") + DISCOVERY_PATH
        try:
            document = await self._get_json(url)
        except (httpx2.HTTPError, ValueError) as error:
            logger.warning("OIDC discovery at %s failed: %s", url, error)
            raise unavailable(f"{self.name} could not be reached; try again shortly") from None
        # §4.3: the issuer it names must be exactly the one discovery started from (else tokens are not ours).
        if document.get("issuer") != self.issuer:
            logger.warning("OIDC discovery at %s names issuer %r, not %r", url, document.get("issuer"), self.issuer)
            raise unavailable(
                f"{self.name} is misconfigured here: its discovery names the issuer {document.get('issuer')!r}, "
                f"not {self.issuer!r} (set SYNAPTO_OAUTH__OIDC__ISSUER to exactly its value)"
            )
        missing = [key for key in ("authorization_endpoint", "token_endpoint", "jwks_uri") if not document.get(key)]
        if missing:
            raise unavailable(f"{self.name}'s discovery document lacks {', '.join(missing)}")
        self._metadata, self._metadata_at, self._jwks = document, time.monotonic(), None
        return document

    async def begin(
        self, *, oauth_request: str | None = None, console_next: str | None = None
    ) -> tuple[str, PendingSignIn]:
        """The provider's authorization URL to send the browser to, and what the callback will need."""
        if (oauth_request is None) == (console_next is None):
            raise ValueError("begin: exactly one of oauth_request and console_next")
        metadata = await self.metadata()
        pending = PendingSignIn(
            state=secrets.token_urlsafe(32),
            nonce=secrets.token_urlsafe(32),
            code_verifier=secrets.token_urlsafe(48),  # 64 characters (RFC 7636: 43-128)
            started_at=int(time.time()),
            oauth_request=oauth_request,
            console_next=console_next,
        )
        async with self._client(metadata) as client:
            url, _ = client.create_authorization_url(
                metadata["authorization_endpoint"],
                state=pending.state,
                code_verifier=pending.code_verifier,
                nonce=pending.nonce,
            )
        return str(url), pending

    async def complete(self, pending: PendingSignIn, answer: Mapping[str, str]) -> UpstreamIdentity:
        """Check the provider's answer (the callback's query) against the pending sign-in, exchange the code and
        verify the ID token; raises AppError (nothing signed in) when any of it fails."""
        if not pending.fresh():
            raise bad_request("This sign-in took longer than 10 minutes: start again.")
        if answer.get("error"):
            logger.info("OIDC sign-in: %s answered %r", self.issuer, answer.get("error"))
            raise unauthorized(f"{self.name} did not sign you in ({answer['error'][:100]}).")
        state = answer.get("state") or ""
        if not secrets.compare_digest(state.encode(), pending.state.encode()):
            raise bad_request(STATE_MISMATCH)
        code = answer.get("code") or ""
        if not code:
            raise bad_request(f"{self.name}'s answer carries no authorization code: start again.")
        metadata = await self.metadata()
        try:
            async with self._client(metadata) as client:
                token = await client.fetch_token(
                    metadata["token_endpoint"],
                    grant_type="authorization_code",
                    code=code,
                    code_verifier=pending.code_verifier,
                )
        except OAuthError as error:
            logger.warning("OIDC code exchange refused by %s: %s", self.issuer, error.error)
            raise unauthorized(f"{self.name} refused the authorization code ({error.error}): start again.") from None
        except (httpx2.HTTPError, ValueError) as error:
            logger.warning("OIDC code exchange with %s failed: %s", self.issuer, error)
            raise unavailable(f"{self.name} could not be reached; try again shortly") from None
        id_token = token.get("id_token")
        if not isinstance(id_token, str) or not id_token:
            raise unauthorized(f"{self.name} answered without an ID token (is the openid scope allowed?)")
        claims = await self.verify_id_token(metadata, id_token, pending.nonce, token.get("access_token"))
        return UpstreamIdentity(self._user_name(claims), str(claims["sub"]), claims)

    async def _keys(self, metadata: Mapping[str, Any], refresh: bool = False) -> KeySet:
        if self._jwks is None or refresh:
            try:
                self._jwks = await self._get_json(str(metadata["jwks_uri"]))
            except (httpx2.HTTPError, ValueError) as error:
                logger.warning("OIDC keys at %s could not be read: %s", metadata["jwks_uri"], error)
                raise unavailable(f"{self.name}'s signing keys could not be read; try again shortly") from None
        try:
            return KeySet.import_key_set(self._jwks)  # type: ignore[arg-type]
        except (JoseError, KeyError, TypeError, ValueError):
            raise unavailable(f"{self.name}'s signing keys (jwks_uri) are not a valid JWK set") from None

    async def verify_id_token(
        self, metadata: Mapping[str, Any], id_token: str, nonce: str, access_token: Any = None
    ) -> dict[str, Any]:
        """The ID token's claims once its signature (the provider's keys), `iss`, `aud` (this client), `exp`,
        `iat`, `nonce`, `azp` and `at_hash` check out (OpenID Connect Core §3.1.3.7); else AppError."""
        offered = metadata.get("id_token_signing_alg_values_supported") or ["RS256"]
        algorithms = [name for name in offered if name in SIGNING_ALGORITHMS]
        if not algorithms:
            raise unauthorized(f"{self.name} signs ID tokens with none of {sorted(SIGNING_ALGORITHMS)}")
        registry = JWSRegistry(algorithms=algorithms, strict_check_header=False)
        try:
            try:
                decoded = jwt.decode(id_token, await self._keys(metadata), registry=registry)
            except InvalidKeyIdError:  # the provider rotated its keys since they were read
                decoded = jwt.decode(id_token, await self._keys(metadata, refresh=True), registry=registry)
            claims = CodeIDToken(
                decoded.claims,
                decoded.header,
                {
                    "iss": {"essential": True, "value": self.issuer},
                    # Authlib checks azp only; the audience must name this client (§3.1.3.7 step 3).
                    "aud": {"essential": True, "value": self.client_id},
                },
                {"nonce": nonce, "client_id": self.client_id, "access_token": access_token},
            )
            claims.validate(leeway=CLOCK_LEEWAY_SECONDS)
        except JoseError as error:
            logger.warning("OIDC ID token from %s refused: %s", self.issuer, error)
            raise unauthorized(f"{self.name}'s ID token was refused ({_error_text(error)}): start again.") from None
        except (ValueError, TypeError) as error:  # not a JWT at all
            logger.warning("OIDC ID token from %s unreadable: %s", self.issuer, type(error).__name__)
            raise unauthorized(f"{self.name}'s ID token could not be read: start again.") from None
        return dict(claims)

    def _user_name(self, claims: Mapping[str, Any]) -> str:
        for claim in self.settings.user_claims:
            value = claims.get(claim)
            if not isinstance(value, str) or not value.strip():
                continue
            # An address the provider says it did not verify names nobody (anyone could have typed it there).
            if claim == "email" and claims.get("email_verified") is False:
                raise forbidden(f"{self.name} has not verified the email address {value!r}: it cannot name a user.")
            return value.strip()
        raise forbidden(
            f"{self.name}'s ID token carries none of the claims {self.settings.user_claims} that name a "
            "SynaptoMind user (SYNAPTO_OAUTH__OIDC__USER_CLAIMS)."
        )

    async def user(self, db: Database, identity: UpstreamIdentity) -> Principal:
        """The SynaptoMind user the identity names; an unknown one is created as a reader only when
        `create_users` is on, else refused (403) and nothing is written."""
        async with db.unit_of_work() as session:
            principal = await UserService(session).upstream_user(identity.user_name, self.settings.create_users)
        if principal is None:
            raise forbidden(
                f"{self.name} signed you in as {identity.user_name!r}, but SynaptoMind has no such user: ask an "
                "admin to create it (the console's users page, or `synaptomind token create --user NAME`)."
            )
        logger.info("OIDC sign-in: %s subject %r is user %r", self.issuer, identity.subject, principal.name)
        return principal
