"""Console sessions: an HMAC-signed cookie that names a server-side session, and the CSRF tokens of the forms.

The cookie carries when it was issued, the session's CSRF token and the session's random secret; the server
keeps only the secret's SHA-256, in `console_session` (app.services.auth.sessions). Each request looks that row up
again, with the user and what they signed in with, so signing out, an admin ending the user's sessions, a
revoked or expired token, a new or cleared password or a lowered role applies at once, on any replica, and a
copied cookie replayed after any of them is refused: what replicas must share is the database and
`console.secret_key` (the signature turns a forged cookie away before any lookup), nothing held in memory.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import os
import secrets
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import SecretStr

from app.services.auth import operations as auth_operations

if TYPE_CHECKING:
    from app.services.values import Database

logger = logging.getLogger(__name__)

SESSION_COOKIE = "synaptomind_console"
# The sign-in form's CSRF token, before there is a session to bind one to (double-submit cookie).
SIGN_IN_COOKIE = "synaptomind_console_csrf"
COOKIE_PATH = "/ui"
KEY_FILE = "console.key"
_KEY_CONTEXT = b"synaptomind console session v1"


@dataclass(frozen=True)
class SessionData:
    secret: str  # the server-side session's secret: its row holds the SHA-256 (app.services.auth.sessions)
    issued_at: int
    csrf: str


def load_secret(configured: SecretStr | None, data_dir: Path) -> bytes:
    """The configured secret, else one kept in the data directory (created 0600 on first use).

    Only its derivation is kept in memory, and it is never logged: whoever holds it can sign sessions.
    """
    if configured is not None and configured.get_secret_value():
        raw = configured.get_secret_value().encode()
    else:
        try:
            raw = _kept_key(data_dir / KEY_FILE)
        except OSError as error:  # a read-only data dir must not stop `serve`: sessions then end at restart
            logger.warning("console: no session key file (%s); sessions last until this process stops", error)
            raw = secrets.token_bytes(32)
    return hmac.new(raw, _KEY_CONTEXT, hashlib.sha256).digest()


def _kept_key(path: Path) -> bytes:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        # O_EXCL: two processes starting together on one data dir keep whichever wrote first.
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(descriptor, "w") as handle:
                handle.write(secrets.token_urlsafe(48))
            logger.info("console: created a session key in %s (set console.secret_key on every replica)", path)
    key = path.read_text().strip().encode()
    if not key:  # read between the other process's create and write
        raise OSError(f"{path} is empty")
    return key


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SessionCodec:
    """Signs and checks session cookies; a cookie older than `max_age` seconds is refused."""

    def __init__(self, key: bytes, max_age: int) -> None:
        self._key = key
        self.max_age = max_age

    def _mac(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())

    def issue(self, secret: str, now: float | None = None) -> tuple[str, SessionData]:
        """The cookie of the session whose secret this is, with a fresh CSRF token."""
        data = SessionData(secret, _now(now), secrets.token_urlsafe(32))
        body = _b64(json.dumps({"s": data.secret, "t": data.issued_at, "c": data.csrf}).encode())
        return f"{body}.{self._mac(body)}", data

    def local_csrf(self) -> str:
        """The forms' CSRF token with auth mode `none` (no session to hold one): derived from the signing key,
        so a cross-site page cannot know it."""
        return self._mac("local console forms")

    def read(self, cookie: str | None, now: float | None = None) -> SessionData | None:
        """The session of a well-signed, unexpired cookie; None for anything else (no reason: nothing to learn)."""
        if not cookie or len(cookie) > 1024:
            return None
        body, _, mac = cookie.partition(".")
        if not hmac.compare_digest(mac.encode(), self._mac(body).encode()):
            return None
        try:
            values = json.loads(_unb64(body))
            data = SessionData(str(values["s"]), int(values["t"]), str(values["c"]))
        except (ValueError, KeyError, TypeError, binascii.Error):
            return None
        age = (time.time() if now is None else now) - data.issued_at
        return data if 0 <= age < self.max_age else None


async def open_session(
    db: Database,
    codec: SessionCodec,
    user_id: uuid.UUID,
    kind: str,
    *,
    token_id: uuid.UUID | None = None,
    password_hash: str | None = None,
) -> str:
    """Open a server-side session for the user (app.services.auth.operations.open_console_session) and answer its
    cookie."""
    secret = await auth_operations.open_console_session(
        db, user_id, kind, codec.max_age, token_id=token_id, password_hash=password_hash
    )
    cookie, _ = codec.issue(secret)
    return cookie


def _now(now: float | None) -> int:
    return int(time.time() if now is None else now)


def same_token(expected: str | None, given: str | None) -> bool:
    """Constant-time comparison of a CSRF token with the one a form sent back."""
    return bool(expected) and bool(given) and hmac.compare_digest(str(expected).encode(), str(given).encode())
