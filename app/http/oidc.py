"""Upstream OpenID Connect sign-in on the HTTP side: the signed cookie that carries a pending sign-in from the
redirect to the provider back to its callback, and what the OAuth pages need to run the flow.

The protocol itself is app.services.auth.oidc; the pages that start and finish it are app.http.oauth's `SignInPages`
(one callback, `<public URL>/oauth/oidc/callback`, for both the MCP authorization sign-in and the console's).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import asdict, dataclass
from typing import Any

from app.http.ui.session import SessionCodec
from app.services.auth.oidc import PENDING_SECONDS, OidcSignIn, PendingSignIn

PENDING_COOKIE = "synapto_oidc_pending"
PENDING_COOKIE_PATH = "/oauth/oidc"
_KEY_CONTEXT = b"synaptomind oidc pending sign-in v1"


@dataclass(frozen=True)
class UpstreamSignIn:
    """Single sign-on as the pages run it: the relying party, the key that signs pending sign-ins (derived from
    the console's session key, which every replica shares), and the console's session codec (None: no console)."""

    oidc: OidcSignIn
    key: bytes
    console: SessionCodec | None = None

    @property
    def pending(self) -> PendingCookie:
        return PendingCookie(self.key)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class PendingCookie:
    """`PendingSignIn` as an HMAC-signed cookie value: a replica that did not start the sign-in can finish it, and
    a browser cannot alter where it returns to; `PendingSignIn.fresh` bounds its age."""

    def __init__(self, session_key: bytes) -> None:
        self._key = hmac.new(session_key, _KEY_CONTEXT, hashlib.sha256).digest()

    def _mac(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())

    def dump(self, pending: PendingSignIn) -> str:
        body = _b64(json.dumps(asdict(pending), separators=(",", ":")).encode())
        return f"{body}.{self._mac(body)}"

    def load(self, cookie: str | None) -> PendingSignIn | None:
        if not cookie or len(cookie) > 4096:
            return None
        body, _, mac = cookie.partition(".")
        if not hmac.compare_digest(mac.encode(), self._mac(body).encode()):
            return None
        try:
            values: dict[str, Any] = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            pending = PendingSignIn(**values)
        except (ValueError, TypeError, binascii.Error):
            return None
        return pending if pending.fresh() else None

    @staticmethod
    def max_age() -> int:
        return PENDING_SECONDS
