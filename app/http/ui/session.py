"""Console sessions: an HMAC-signed cookie every replica accepts, and the CSRF tokens of the forms.

The cookie carries when it was issued, the session's CSRF token and what the user signed in with: the SHA-256
of their API token (never the token itself, which also opens /mcp), or — signed in with a password — their user
id and a mark of their stored password hash (an HMAC of it under the session key, never the hash), or — signed in
through the upstream OpenID Connect provider — their user id and that mark of the sign-in's kind. Each request
looks the user up again — for a token the same query `AuthService.verify` runs — so a revoked or expired token,
a changed or cleared password, or a changed role applies at once, on any replica: what replicas must share is
the database and `console.secret_key`, nothing held in memory.
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

from pydantic import SecretStr

logger = logging.getLogger(__name__)

SESSION_COOKIE = "synaptomind_console"
# The sign-in form's CSRF token, before there is a session to bind one to (double-submit cookie).
SIGN_IN_COOKIE = "synaptomind_console_csrf"
COOKIE_PATH = "/ui"
KEY_FILE = "console.key"
_KEY_CONTEXT = b"synaptomind console session v1"


@dataclass(frozen=True)
class SessionData:
    token_hash: bytes | None  # hash_token(the API token): the key AuthService's lookup uses; None: a password
    issued_at: int
    csrf: str
    user_id: uuid.UUID | None = None  # signed in with a password: the user, and the mark of the hash it matched
    password_mark: str | None = None
    upstream: bool = False  # signed in through the OpenID Connect provider: `user_id` alone, no password mark


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

    def issue(self, token_hash: bytes, now: float | None = None) -> tuple[str, SessionData]:
        """A session opened with an API token."""
        return self._issue(SessionData(token_hash, _now(now), secrets.token_urlsafe(32)))

    def issue_for_password(
        self, user_id: uuid.UUID, password_hash: str, now: float | None = None
    ) -> tuple[str, SessionData]:
        """A session opened with a password: it lasts while the user's stored hash is the one that matched."""
        mark = self.password_mark(password_hash)
        return self._issue(SessionData(None, _now(now), secrets.token_urlsafe(32), user_id, mark))

    def issue_for_upstream(self, user_id: uuid.UUID, now: float | None = None) -> tuple[str, SessionData]:
        """A session opened through the upstream OpenID Connect provider: it lasts `max_age`, the user's role is
        read again on every request."""
        return self._issue(SessionData(None, _now(now), secrets.token_urlsafe(32), user_id, upstream=True))

    def _issue(self, data: SessionData) -> tuple[str, SessionData]:
        values: dict[str, object] = {"t": data.issued_at, "c": data.csrf}
        if data.token_hash is not None:
            values["h"] = data.token_hash.hex()
        elif data.upstream:
            values.update(u=str(data.user_id), o=1)
        else:
            values.update(u=str(data.user_id), p=data.password_mark)
        body = _b64(json.dumps(values).encode())
        return f"{body}.{self._mac(body)}", data

    def password_mark(self, password_hash: str) -> str:
        """What a password session keeps of the hash it matched: keyed, so the cookie reveals nothing of it."""
        return self._mac("password " + password_hash)

    def same_password(self, session: SessionData, password_hash: str | None) -> bool:
        """Whether the user's stored hash is still the one this password session signed in with."""
        return password_hash is not None and same_token(session.password_mark, self.password_mark(password_hash))

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
            if "h" in values:
                data = SessionData(bytes.fromhex(values["h"]), int(values["t"]), str(values["c"]))
            elif values.get("o") == 1:
                data = SessionData(None, int(values["t"]), str(values["c"]), uuid.UUID(values["u"]), upstream=True)
            else:
                user_id, mark = uuid.UUID(values["u"]), str(values["p"])
                data = SessionData(None, int(values["t"]), str(values["c"]), user_id, mark)
        except (ValueError, KeyError, TypeError, binascii.Error):
            return None
        age = (time.time() if now is None else now) - data.issued_at
        return data if 0 <= age < self.max_age else None


def _now(now: float | None) -> int:
    return int(time.time() if now is None else now)


def same_token(expected: str | None, given: str | None) -> bool:
    """Constant-time comparison of a CSRF token with the one a form sent back."""
    return bool(expected) and bool(given) and hmac.compare_digest(str(expected).encode(), str(given).encode())
