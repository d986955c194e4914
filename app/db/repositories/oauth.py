"""OAuth clients, authorization requests/codes and tokens (app.services.auth.oauth); only SHA-256 hashes of secrets.

Every state change is one conditional UPDATE whose WHERE clause is the rule (unused, unexpired, the right
consent secret…): two replicas racing on the same code or refresh token cannot both win.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Update, and_, delete, exists, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.db.models import AppUser, OAuthAuthorization, OAuthClient, OAuthToken, Role
from app.ids import new_id


@dataclass(frozen=True)
class ClientRow:
    id: str
    secret_hash: bytes | None
    metadata: dict[str, Any]


@dataclass(frozen=True)
class AuthorizationRow:
    id: uuid.UUID
    client_id: str
    user_id: uuid.UUID | None
    user_name: str | None
    role: Role | None
    code_challenge: str
    redirect_uri: str
    redirect_uri_explicit: bool
    scopes: list[str]
    resource: str
    state: str | None
    expires_at: datetime
    used: bool


@dataclass(frozen=True)
class TokenRow:
    id: uuid.UUID
    kind: str
    client_id: str
    user_id: uuid.UUID
    user_name: str
    role: Role  # granted at consent
    user_role: Role  # the user's role now: the ceiling
    scopes: list[str]
    resource: str
    family_id: uuid.UUID
    expires_at: datetime
    used: bool
    revoked: bool


@dataclass(frozen=True)
class GrantRow:
    """One grant: the tokens of one code exchange and their refreshes (`oauth_token.family_id`)."""

    id: uuid.UUID
    user_name: str
    user_role: Role  # the user's role now: the ceiling
    granted_role: Role  # the role at consent
    client_id: str
    client_name: str | None
    started_at: datetime  # the code exchange
    refreshed_at: datetime  # the latest pair issued
    expires_at: datetime  # when its live refresh token expires (the grant's end unless refreshed)


_AUTHORIZATION = select(
    OAuthAuthorization.id,
    OAuthAuthorization.client_id,
    OAuthAuthorization.user_id,
    AppUser.name.label("user_name"),
    OAuthAuthorization.role,
    OAuthAuthorization.code_challenge,
    OAuthAuthorization.redirect_uri,
    OAuthAuthorization.redirect_uri_explicit,
    OAuthAuthorization.scopes,
    OAuthAuthorization.resource,
    OAuthAuthorization.state,
    OAuthAuthorization.expires_at,
    OAuthAuthorization.used_at.is_not(None).label("used"),
).outerjoin(AppUser, AppUser.id == OAuthAuthorization.user_id)


def _pending(request_hash: bytes) -> tuple[ColumnElement[bool], ...]:
    """The rule for a request still waiting for sign-in or consent: no code yet, unused, unexpired."""
    return (
        OAuthAuthorization.request_hash == request_hash,
        OAuthAuthorization.code_hash.is_(None),
        OAuthAuthorization.used_at.is_(None),
        OAuthAuthorization.expires_at > func.now(),
    )


_TOKEN = select(
    OAuthToken.id,
    OAuthToken.kind,
    OAuthToken.client_id,
    OAuthToken.user_id,
    AppUser.name.label("user_name"),
    OAuthToken.role,
    AppUser.role.label("user_role"),
    OAuthToken.scopes,
    OAuthToken.resource,
    OAuthToken.family_id,
    OAuthToken.expires_at,
    OAuthToken.used_at.is_not(None).label("used"),
    OAuthToken.revoked_at.is_not(None).label("revoked"),
).join(AppUser, AppUser.id == OAuthToken.user_id)


class OAuthRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    # Clients

    async def insert_client(self, client_id: str, secret_hash: bytes | None, metadata: dict[str, Any]) -> None:
        await self.session.execute(
            insert(OAuthClient).values(id=client_id, secret_hash=secret_hash, client_metadata=metadata)
        )

    async def client(self, client_id: str) -> ClientRow | None:
        row = (
            await self.session.execute(
                select(OAuthClient.id, OAuthClient.secret_hash, OAuthClient.client_metadata).where(
                    OAuthClient.id == client_id
                )
            )
        ).first()
        return ClientRow(row.id, row.secret_hash, dict(row.client_metadata)) if row else None

    # Authorization requests and codes

    async def insert_authorization(
        self,
        client_id: str,
        request_hash: bytes,
        code_challenge: str,
        redirect_uri: str,
        redirect_uri_explicit: bool,
        scopes: list[str],
        resource: str,
        state: str | None,
        expires_at: datetime,
    ) -> uuid.UUID:
        authorization_id = new_id()
        await self.session.execute(
            insert(OAuthAuthorization).values(
                id=authorization_id,
                client_id=client_id,
                request_hash=request_hash,
                code_challenge=code_challenge,
                redirect_uri=redirect_uri,
                redirect_uri_explicit=redirect_uri_explicit,
                scopes=scopes,
                resource=resource,
                state=state,
                expires_at=expires_at,
            )
        )
        return authorization_id

    async def pending_request(self, request_hash: bytes) -> AuthorizationRow | None:
        """An authorization request still waiting for sign-in or consent (no code yet, unexpired, unused)."""
        statement = _AUTHORIZATION.where(*_pending(request_hash))
        row = (await self.session.execute(statement)).first()
        return AuthorizationRow(**row._mapping) if row else None

    async def sign_in(self, request_hash: bytes, user_id: uuid.UUID, role: Role, consent_hash: bytes) -> bool:
        """Bind a pending request to the signed-in user and the browser's consent secret."""
        result = await self.session.execute(
            update(OAuthAuthorization)
            .where(*_pending(request_hash))
            .values(user_id=user_id, role=role, consent_hash=consent_hash)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def issue_code(
        self, request_hash: bytes, consent_hash: bytes, code_hash: bytes, expires_at: datetime
    ) -> AuthorizationRow | None:
        """Give the consented request its code (once: a second consent finds `code_hash` set)."""
        statement = (
            update(OAuthAuthorization)
            .where(
                *_pending(request_hash),
                OAuthAuthorization.consent_hash == consent_hash,
                OAuthAuthorization.user_id.is_not(None),
            )
            .values(code_hash=code_hash, expires_at=expires_at)
        )
        return await self._answered(statement)

    async def deny(self, request_hash: bytes, consent_hash: bytes) -> AuthorizationRow | None:
        """The user declined: the request is spent (used, no code)."""
        statement = (
            update(OAuthAuthorization)
            .where(
                OAuthAuthorization.request_hash == request_hash,
                OAuthAuthorization.consent_hash == consent_hash,
                OAuthAuthorization.code_hash.is_(None),
                OAuthAuthorization.used_at.is_(None),
            )
            .values(used_at=func.now())
        )
        return await self._answered(statement)

    async def _answered(self, statement: Update) -> AuthorizationRow | None:
        """Run a consent answer's conditional UPDATE; the request it changed, None when none matched."""
        found = (await self.session.execute(statement.returning(OAuthAuthorization.id))).scalar_one_or_none()
        if found is None:
            return None
        row = (await self.session.execute(_AUTHORIZATION.where(OAuthAuthorization.id == found))).one()
        return AuthorizationRow(**row._mapping)

    async def code(self, code_hash: bytes, client_id: str) -> AuthorizationRow | None:
        """A code of this client, used or not (the exchange refuses a used one and ends what it issued)."""
        statement = _AUTHORIZATION.where(
            OAuthAuthorization.code_hash == code_hash, OAuthAuthorization.client_id == client_id
        )
        row = (await self.session.execute(statement)).first()
        return AuthorizationRow(**row._mapping) if row else None

    async def use_code(self, authorization_id: uuid.UUID) -> bool:
        """Mark the code used; False when it already was (a replay) or has expired."""
        result = await self.session.execute(
            update(OAuthAuthorization)
            .where(
                OAuthAuthorization.id == authorization_id,
                OAuthAuthorization.used_at.is_(None),
                OAuthAuthorization.expires_at > func.now(),
            )
            .values(used_at=func.now())
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    # Tokens

    async def insert_token(
        self,
        kind: str,
        token_hash: bytes,
        client_id: str,
        user_id: uuid.UUID,
        role: Role,
        scopes: list[str],
        resource: str,
        family_id: uuid.UUID,
        parent_id: uuid.UUID | None,
        expires_at: datetime,
    ) -> uuid.UUID:
        token_id = new_id()
        await self.session.execute(
            insert(OAuthToken).values(
                id=token_id,
                kind=kind,
                token_hash=token_hash,
                client_id=client_id,
                user_id=user_id,
                role=role,
                scopes=scopes,
                resource=resource,
                family_id=family_id,
                parent_id=parent_id,
                expires_at=expires_at,
            )
        )
        return token_id

    async def token(self, token_hash: bytes, kind: str) -> TokenRow | None:
        """The token of that kind, revoked, used or expired alike (the caller decides)."""
        statement = _TOKEN.where(OAuthToken.token_hash == token_hash, OAuthToken.kind == kind)
        row = (await self.session.execute(statement)).first()
        return TokenRow(**row._mapping) if row else None

    async def use_refresh_token(self, token_id: uuid.UUID) -> bool:
        """Spend a refresh token (rotation); False when it was spent, revoked or expired meanwhile."""
        result = await self.session.execute(
            update(OAuthToken)
            .where(
                OAuthToken.id == token_id,
                OAuthToken.kind == "refresh",
                OAuthToken.used_at.is_(None),
                OAuthToken.revoked_at.is_(None),
                OAuthToken.expires_at > func.now(),
            )
            .values(used_at=func.now(), revoked_at=func.now())
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def revoke_family(self, family_id: uuid.UUID) -> int:
        """Revoke every token of one grant (its access tokens and its refresh chain)."""
        result = await self.session.execute(
            update(OAuthToken)
            .where(OAuthToken.family_id == family_id, OAuthToken.revoked_at.is_(None))
            .values(revoked_at=func.now())
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    # Grants (`synaptomind oauth grants|revoke`, app.services.auth.oauth_grants)

    async def live_grants(self, user_id: uuid.UUID | None = None) -> list[GrantRow]:
        """The grants with a live token (unrevoked, unexpired), oldest first; one user's with `user_id`."""
        live = and_(OAuthToken.revoked_at.is_(None), OAuthToken.expires_at > func.now())
        statement = (
            select(
                OAuthToken.family_id.label("id"),
                AppUser.name.label("user_name"),
                AppUser.role.label("user_role"),
                OAuthToken.role.label("granted_role"),
                OAuthToken.client_id,
                OAuthClient.client_metadata["client_name"].astext.label("client_name"),
                func.min(OAuthToken.created_at).label("started_at"),
                func.max(OAuthToken.created_at).label("refreshed_at"),
                func.max(OAuthToken.expires_at).label("expires_at"),
            )
            .join(AppUser, AppUser.id == OAuthToken.user_id)
            .join(OAuthClient, OAuthClient.id == OAuthToken.client_id)
            .group_by(OAuthToken.family_id, AppUser.name, AppUser.role, OAuthToken.role, OAuthToken.client_id)
            .group_by(OAuthClient.client_metadata)
            .having(func.bool_or(live))
            .order_by(func.min(OAuthToken.created_at), OAuthToken.family_id)
        )
        if user_id is not None:
            statement = statement.where(OAuthToken.user_id == user_id)
        return [GrantRow(**row._mapping) for row in await self.session.execute(statement)]

    async def revoke_user_tokens(self, user_id: uuid.UUID) -> int:
        """Revoke every token of the user; the number of grants that had one unrevoked."""
        families = (
            await self.session.execute(
                update(OAuthToken)
                .where(OAuthToken.user_id == user_id, OAuthToken.revoked_at.is_(None))
                .values(revoked_at=func.now())
                .returning(OAuthToken.family_id)
            )
        ).scalars()
        return len(set(families))

    # Housekeeping (the expiry job)

    async def purge_authorizations(self) -> int:
        """Authorization requests and codes past their expiry, answered, used or not: none can be redeemed (the
        token endpoint refuses an expired code before anything else), so nothing is lost with them."""
        result = await self.session.execute(
            delete(OAuthAuthorization).where(OAuthAuthorization.expires_at < func.now())
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    async def purge_tokens(self) -> int:
        """Tokens past their expiry, and every token of a grant with no live token left. A spent or revoked token
        of a live grant stays until it expires: presenting it again must still end the grant (reuse detection)."""
        live = aliased(OAuthToken)
        grant_alive = exists().where(
            live.family_id == OAuthToken.family_id, live.revoked_at.is_(None), live.expires_at > func.now()
        )
        result = await self.session.execute(
            delete(OAuthToken).where((OAuthToken.expires_at < func.now()) | ~grant_alive)
        )
        return int(result.rowcount)  # type: ignore[attr-defined]
