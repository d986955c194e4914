"""MCP authorization (OAuth 2.1) over PostgreSQL: the MCP SDK's provider protocol, the sign-in and consent steps.

The SDK's handlers (mcp.server.auth) parse and validate the protocol (PKCE S256, redirect_uri, client
authentication); this provider stores every client, authorization request, code and token in PostgreSQL as a
SHA-256 hash, so any replica serves any step and a database dump grants nothing. Tokens are opaque random
strings with a prefix telling the bearer check where to look (`smt_` API tokens, `sma_` OAuth access tokens).

A code exchange starts a token *family* (its id is the authorization's): a refresh spends its refresh token
and issues a new pair in the family; presenting a spent refresh token or a used code again is treated as
theft (OAuth 2.1 §4.3.1, RFC 9700 §4.14) and revokes the whole family; revocation ends the family too.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    RegistrationError,
    TokenError,
    construct_redirect_uri,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from app.db.models import Role
from app.db.records import Principal
from app.db.repositories.oauth import AuthorizationRow, OAuthRepository, TokenRow
from app.db.visibility import ROLE_RANK
from app.services.auth.passwords import PASSWORD_FAILURE_DELAY_SECONDS, PasswordCheck
from app.services.auth.tokens import AuthService, hash_token

if TYPE_CHECKING:
    from app.config import OAuthSettings
    from app.db.engine import Database

logger = logging.getLogger(__name__)

ACCESS_PREFIX = "sma_"
REFRESH_PREFIX = "smr_"
CODE_PREFIX = "smc_"
# The sign-in and consent pages must be done within this; the code then lives one minute (RFC 6749 §4.1.2
# asks for short-lived codes): the client exchanges it right after the redirect.
REQUEST_TTL = timedelta(minutes=10)
CODE_TTL = timedelta(seconds=60)
SIGNIN_PATH = "/oauth/signin"
CONSENT_PATH = "/oauth/consent"
LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
# invalid_grant (RFC 6749 §5.2) with one text whether the grant is unknown, expired, revoked or spent: a caller
# cannot tell them apart (docs/SECURITY.md), and none of them is said not to exist.
CODE_REFUSED = "code: not valid (unknown, expired or already used)"
REFRESH_REFUSED = "refresh_token: not valid (unknown, expired, revoked or already used)"


def _secret(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)  # 256 bits (RFC 6749 §10.10 asks for at least 128)


def lower_role(first: Role, second: Role) -> Role:
    return first if ROLE_RANK[first] <= ROLE_RANK[second] else second


@dataclass(frozen=True)
class OAuthConfig:
    """What the provider and the routes read of an enabled `oauth` settings group, derived from it alone."""

    settings: OAuthSettings

    def __post_init__(self) -> None:
        if not self.settings.enabled or not self.settings.public_url:
            raise ValueError("OAuthConfig needs an enabled oauth settings group with its public_url")

    @classmethod
    def from_settings(cls, settings: OAuthSettings) -> OAuthConfig | None:
        """None when OAuth is off."""
        return cls(settings) if settings.enabled and settings.public_url else None

    @property
    def issuer(self) -> str:
        """The public URL: an origin without a trailing slash, as the settings group normalised it."""
        assert self.settings.public_url is not None  # checked by __post_init__
        return self.settings.public_url

    @property
    def resource(self) -> str:
        """The protected resource (RFC 8707 / RFC 9728): the MCP endpoint; every token is bound to it."""
        return f"{self.issuer}/mcp"

    @property
    def loopback(self) -> bool:
        """Whether the public URL names this machine (localhost, 127.0.0.1, [::1])."""
        return urlsplit(self.issuer).hostname in LOOPBACK

    def origin_for(self, host: str | None) -> str:
        """The issuer as a client that addressed this server by `host` (the request's Host header) knows it.

        With a loopback public URL, a client may name the machine `localhost`, `127.0.0.1` or `[::1]`; the SDK
        clients compare the protected resource with the URL they were given as strings (RFC 9728 §3.3), so the
        metadata answers in the name the client used. Only loopback names on the public URL's port qualify
        (the Host/Origin check allows no others for them); any other Host gets the public URL.
        """
        public = urlsplit(self.issuer)
        if not host or not self.loopback:
            return self.issuer
        try:
            named = urlsplit(f"//{host.strip().lower()}")
            port = named.port
        except ValueError:
            return self.issuer
        if named.hostname not in LOOPBACK or port != public.port or named.path or named.username is not None:
            return self.issuer
        return f"{public.scheme}://{named.netloc}"

    @property
    def origins(self) -> tuple[str, ...]:
        """Every issuer this server answers as: the public URL, then its loopback aliases (if loopback)."""
        if not self.loopback:
            return (self.issuer,)
        public = urlsplit(self.issuer)
        port = f":{public.port}" if public.port is not None else ""
        aliases = (f"{public.scheme}://{name}{port}" for name in ("localhost", "127.0.0.1", "[::1]"))
        return (self.issuer, *(alias for alias in aliases if alias != self.issuer))

    def accepts_resource(self, resource: str | None) -> bool:
        """Whether an authorization request for `resource` is for this deployment (RFC 8707): its MCP endpoint
        under the public URL or one of its loopback aliases."""
        return resource is not None and resource.rstrip("/") in {f"{origin}/mcp" for origin in self.origins}

    def issued_here(self, resource: str | None) -> bool:
        """Whether a stored code or token is this deployment's: bound to its resource (every one it issues is,
        whichever alias the client used). Another deployment on the same database binds them to its own."""
        return resource is not None and resource.rstrip("/") == self.resource

    @property
    def access_ttl(self) -> timedelta:
        return timedelta(minutes=self.settings.access_token_minutes)

    @property
    def refresh_ttl(self) -> timedelta:
        return timedelta(days=self.settings.refresh_token_days)

    @property
    def registration_open(self) -> bool:
        return self.settings.registration_open


class StoredCode(AuthorizationCode):
    authorization_id: uuid.UUID
    user_id: uuid.UUID
    role: Role
    used: bool


class StoredRefreshToken(RefreshToken):
    token_id: uuid.UUID
    family_id: uuid.UUID
    user_id: uuid.UUID
    role: Role


class StoredAccessToken(AccessToken):
    token_id: uuid.UUID
    family_id: uuid.UUID
    user_id: uuid.UUID
    user_name: str
    role: Role  # the lower of the role granted at consent and the user's role now

    def principal(self) -> Principal:
        # token_id = the family: the rate limiter counts one grant as one token across its refreshes.
        return Principal(self.user_id, self.user_name, self.role, token_id=self.family_id)


@dataclass(frozen=True)
class PendingRequest:
    """An authorization request on the sign-in or consent page."""

    row: AuthorizationRow
    client_name: str


@dataclass(frozen=True)
class SignedIn:
    consent_secret: str  # shown once in the consent form; only its hash is stored
    principal: Principal
    pending: PendingRequest


def _timestamp(moment: datetime) -> int:
    return int(moment.timestamp())


def _token_fields(token: str, row: TokenRow) -> dict[str, Any]:
    """What a loaded refresh or access token carries of its row; its role is the lower of the one granted at
    consent and the user's role now."""
    return {
        "token": token,
        "client_id": row.client_id,
        "scopes": row.scopes,
        "expires_at": _timestamp(row.expires_at),
        "resource": row.resource,
        "subject": str(row.user_id),
        "token_id": row.id,
        "family_id": row.family_id,
        "user_id": row.user_id,
        "role": lower_role(row.role, row.user_role),
    }


def _storable(*values: str | None) -> bool:
    """Whether PostgreSQL can hold these strings: text never holds NUL (the driver would fail the request)."""
    return not any(value and "\x00" in value for value in values)


def _redirect_uri_refusal(uri: str) -> str | None:
    """Why a redirect URI may not be registered (None: acceptable). OAuth 2.1 §2.3.1 / RFC 8252: https,
    http to a loopback host (native apps), or a private-use scheme; never a fragment."""
    parts = urlsplit(uri)
    if parts.fragment:
        return f"redirect_uris: {uri!r} must not contain a fragment"
    if parts.scheme in ("javascript", "data", "file", "vbscript"):
        return f"redirect_uris: {uri!r} uses a forbidden scheme"
    if parts.scheme == "http" and parts.hostname not in LOOPBACK:
        return f"redirect_uris: {uri!r} must be https (http only to a loopback host)"
    return None


class OAuthProvider:
    """`OAuthAuthorizationServerProvider[StoredCode, StoredRefreshToken, StoredAccessToken]` over PostgreSQL."""

    def __init__(
        self,
        db: Database,
        config: OAuthConfig,
        password_failure_delay: float = PASSWORD_FAILURE_DELAY_SECONDS,
        passwords: PasswordCheck | None = None,
    ) -> None:
        self.db = db
        self.config = config
        # The process's one password check (shared with the console's sign-in, so they throttle together).
        self.passwords = passwords if passwords is not None else PasswordCheck(password_failure_delay)

    # Clients (RFC 7591)

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        if not client_id or len(client_id) > 64 or not _storable(client_id):
            return None
        async with self.db.autocommit() as session:
            row = await OAuthRepository(session).client(client_id)
        if row is None:
            return None
        # The secret is never returned (only its hash exists): ClientSecretAuthenticator checks it instead.
        return OAuthClientInformationFull.model_validate({**row.metadata, "client_id": row.id, "client_secret": None})

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        if not client_info.redirect_uris:
            # The SDK's model lets `"redirect_uris": null` through; such a client could never be authorized
            # (authorization_code is its only grant), so it would only be a row (found by tests/fuzz).
            raise RegistrationError(
                "invalid_redirect_uri", "redirect_uris: at least one is required (the authorization code flow)"
            )
        for uri in client_info.redirect_uris:
            refusal = _redirect_uri_refusal(str(uri))
            if refusal is not None:
                raise RegistrationError("invalid_redirect_uri", refusal)
        if client_info.client_id is None:
            raise RegistrationError("invalid_client_metadata", "client_id: missing")
        secret = client_info.client_secret
        metadata = client_info.model_dump(mode="json", exclude={"client_id", "client_secret"}, exclude_none=True)
        if "\\u0000" in json.dumps(metadata):  # jsonb refuses NUL, escaped or not
            raise RegistrationError("invalid_client_metadata", "client metadata: no field may contain NUL (\\u0000)")
        async with self.db.unit_of_work() as session:
            await OAuthRepository(session).insert_client(
                client_info.client_id, hash_token(secret) if secret else None, metadata
            )

    async def verify_client_secret(self, client_id: str, secret: str) -> bool:
        async with self.db.autocommit() as session:
            row = await OAuthRepository(session).client(client_id)
        if row is None or row.secret_hash is None:
            return False
        return secrets.compare_digest(row.secret_hash, hash_token(secret))

    # Authorization (the SDK validated client, redirect_uri, scope, PKCE method)

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        named = (params.resource or self.config.resource).rstrip("/")
        if not self.config.accepts_resource(named):
            # RFC 8707 §2: this server issues tokens for its own MCP endpoint only.
            raise AuthorizeError("invalid_target", f"resource: {params.resource!r} is not {self.config.resource!r}")
        # Tokens are bound to the public URL's resource whichever loopback name the client used; the browser
        # stays on the client's name (its sign-in page answers the redirect's `iss` in that name).
        resource, origin = self.config.resource, named.removesuffix("/mcp")
        assert client.client_id is not None
        if not _storable(params.state, str(params.redirect_uri), *(params.scopes or [])):
            raise AuthorizeError("invalid_request", "state, redirect_uri and scope must not contain NUL")
        handle = _secret("")
        async with self.db.unit_of_work() as session:
            await OAuthRepository(session).insert_authorization(
                client.client_id,
                hash_token(handle),
                params.code_challenge,
                str(params.redirect_uri),
                params.redirect_uri_provided_explicitly,
                params.scopes or [],
                resource,
                params.state,
                datetime.now(UTC) + REQUEST_TTL,
            )
        return construct_redirect_uri(f"{origin}{SIGNIN_PATH}", request=handle)

    async def pending(self, handle: str) -> PendingRequest | None:
        if not handle or len(handle) > 100:
            return None
        async with self.db.autocommit() as session:
            repository = OAuthRepository(session)
            row = await repository.pending_request(hash_token(handle))
            client = await repository.client(row.client_id) if row else None
        if row is None or client is None:
            return None
        return PendingRequest(row, str(client.metadata.get("client_name") or row.client_id))

    async def sign_in(self, handle: str, api_token: str) -> SignedIn | None:
        """Authenticate the user with one of their API tokens; None when the token or the request is not valid."""
        pending = await self.pending(handle)
        if pending is None:
            return None
        async with self.db.autocommit() as session:
            principal = await AuthService(session).verify(api_token.strip())
        if principal is None or principal.user_id is None:
            return None
        return await self._bind(handle, principal, pending)

    async def sign_in_password(self, handle: str, user_name: str, password: str) -> SignedIn | None:
        """Authenticate the user with their admin-set password; None when the request is not valid, the user is
        unknown, has no password or gave another one (alike, and as slow); TooManyAttempts past the rate."""
        pending = await self.pending(handle)
        if pending is None:
            return None
        matched = await self.passwords.check(self.db, user_name, password)
        return await self._bind(handle, matched.principal, pending) if matched is not None else None

    async def sign_in_upstream(self, handle: str, principal: Principal) -> SignedIn | None:
        """Bind the request to a user an upstream OpenID Connect provider signed in (app.services.auth.oidc verified
        the ID token and found the user); None when the request is no longer pending."""
        pending = await self.pending(handle)
        if pending is None or principal.user_id is None:
            return None
        return await self._bind(handle, principal, pending)

    async def _bind(self, handle: str, principal: Principal, pending: PendingRequest) -> SignedIn | None:
        assert principal.user_id is not None
        consent_secret = _secret("")
        async with self.db.unit_of_work() as session:
            bound = await OAuthRepository(session).sign_in(
                hash_token(handle), principal.user_id, principal.role, hash_token(consent_secret)
            )
        return SignedIn(consent_secret, principal, pending) if bound else None

    async def consent(self, handle: str, consent_secret: str, approve: bool, issuer: str | None = None) -> str | None:
        """Where to send the browser: the client's redirect_uri with a code (or access_denied); None when the
        request is unknown, expired, already answered, or the consent secret is not the signed-in one's.
        `issuer`: the name the metadata answered the client in (`OAuthConfig.origin_for`), the public URL if None."""
        iss = issuer if issuer in self.config.origins else self.issuer_id
        code = _secret(CODE_PREFIX)
        async with self.db.unit_of_work() as session:
            repository = OAuthRepository(session)
            if approve:
                row = await repository.issue_code(
                    hash_token(handle), hash_token(consent_secret), hash_token(code), datetime.now(UTC) + CODE_TTL
                )
            else:
                row = await repository.deny(hash_token(handle), hash_token(consent_secret))
        if row is None:
            return None
        if approve:
            return construct_redirect_uri(row.redirect_uri, code=code, state=row.state, iss=iss)
        description = "the user declined the authorization"
        return construct_redirect_uri(
            row.redirect_uri, error="access_denied", error_description=description, state=row.state, iss=iss
        )

    @property
    def issuer_id(self) -> str:
        """The issuer as the metadata names it (RFC 9207 `iss`, compared as a string): the origin, no slash."""
        return self.config.issuer

    # Codes

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> StoredCode | None:
        if not authorization_code.startswith(CODE_PREFIX) or len(authorization_code) > 100 or not client.client_id:
            return None
        async with self.db.autocommit() as session:
            row = await OAuthRepository(session).code(hash_token(authorization_code), client.client_id)
        if row is None or row.user_id is None or row.role is None or not self.config.issued_here(row.resource):
            return None
        return StoredCode(
            code=authorization_code,
            scopes=row.scopes,
            expires_at=row.expires_at.timestamp(),
            client_id=row.client_id,
            code_challenge=row.code_challenge,
            redirect_uri=row.redirect_uri,  # pydantic parses it to AnyUrl
            redirect_uri_provided_explicitly=row.redirect_uri_explicit,
            resource=row.resource,
            subject=str(row.user_id),
            authorization_id=row.id,
            user_id=row.user_id,
            role=row.role,
            used=row.used,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: StoredCode
    ) -> OAuthToken:
        code = authorization_code
        async with self.db.unit_of_work() as session:
            repository = OAuthRepository(session)
            if await repository.use_code(code.authorization_id):
                return await self._issue(
                    repository,
                    code.client_id,
                    code.user_id,
                    code.role,
                    code.scopes,
                    code.resource or self.config.resource,
                    code.authorization_id,
                    None,
                )
        # A second exchange of one code: whoever holds it may have stolen it; end what the first one issued.
        async with self.db.unit_of_work() as session:
            ended = await OAuthRepository(session).revoke_family(code.authorization_id)
        logger.warning("authorization code of client %s presented again: %d token(s) revoked", code.client_id, ended)
        raise TokenError("invalid_grant", CODE_REFUSED)

    # Refresh (rotation)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> StoredRefreshToken | None:
        if not refresh_token.startswith(REFRESH_PREFIX) or len(refresh_token) > 100:
            return None
        async with self.db.autocommit() as session:
            row = await OAuthRepository(session).token(hash_token(refresh_token), "refresh")
        if row is None or row.client_id != client.client_id or not self.config.issued_here(row.resource):
            return None  # another deployment's token on the same database is not this issuer's to honour
        if row.used:
            # Loading is where the SDK's handler first sees a replay; refusing here without ending the family
            # would let a thief keep the successor it obtained first.
            await self._end_family(row, "spent refresh token presented again")
            return None
        if row.revoked:
            return None
        return StoredRefreshToken(**_token_fields(refresh_token, row))

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: StoredRefreshToken, scopes: list[str]
    ) -> OAuthToken:
        token = refresh_token
        async with self.db.unit_of_work() as session:
            repository = OAuthRepository(session)
            if await repository.use_refresh_token(token.token_id):
                return await self._issue(
                    repository,
                    token.client_id,
                    token.user_id,
                    token.role,
                    scopes,
                    token.resource or self.config.resource,
                    token.family_id,
                    token.token_id,
                )
        # Another request spent it between load and exchange (two replicas, one token): only one may win.
        async with self.db.unit_of_work() as session:
            await OAuthRepository(session).revoke_family(token.family_id)
        raise TokenError("invalid_grant", REFRESH_REFUSED)

    async def _issue(
        self,
        repository: OAuthRepository,
        client_id: str,
        user_id: uuid.UUID,
        role: Role,
        scopes: list[str],
        resource: str,
        family_id: uuid.UUID,
        parent_id: uuid.UUID | None,
    ) -> OAuthToken:
        now = datetime.now(UTC)
        access, refresh = _secret(ACCESS_PREFIX), _secret(REFRESH_PREFIX)
        issued = (("access", access, self.config.access_ttl), ("refresh", refresh, self.config.refresh_ttl))
        for kind, secret, ttl in issued:
            await repository.insert_token(
                kind, hash_token(secret), client_id, user_id, role, scopes, resource, family_id, parent_id, now + ttl
            )
        return OAuthToken(
            access_token=access,
            expires_in=int(self.config.access_ttl.total_seconds()),
            scope=" ".join(scopes) if scopes else None,
            refresh_token=refresh,
        )

    # Access tokens (the bearer check) and revocation (RFC 7009)

    async def load_access_token(self, token: str) -> StoredAccessToken | None:
        if not token.startswith(ACCESS_PREFIX) or len(token) > 100:
            return None
        async with self.db.autocommit() as session:
            row = await OAuthRepository(session).token(hash_token(token), "access")
        if row is None or row.revoked or row.expires_at.timestamp() <= time.time():
            return None
        if not self.config.issued_here(row.resource):
            return None
        return StoredAccessToken(**_token_fields(token, row), user_name=row.user_name)

    async def revoke_token(self, token: StoredAccessToken | StoredRefreshToken) -> None:
        async with self.db.unit_of_work() as session:
            await OAuthRepository(session).revoke_family(token.family_id)

    async def _end_family(self, row: TokenRow, why: str) -> None:
        async with self.db.unit_of_work() as session:
            ended = await OAuthRepository(session).revoke_family(row.family_id)
        logger.warning("%s (client %s, user %s): %d token(s) revoked", why, row.client_id, row.user_name, ended)


class OAuthTokenVerifier:
    """The SDK's `TokenVerifier` over the provider: what /mcp's bearer check calls for an `sma_` token."""

    def __init__(self, provider: OAuthProvider) -> None:
        self.provider = provider

    async def verify_token(self, token: str) -> StoredAccessToken | None:
        return await self.provider.load_access_token(token)
