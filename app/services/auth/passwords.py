"""Admin-set passwords: the scrypt hash string, and the one sign-in check every password form calls.

`synaptomind user password` and the console's users page set them (app.services.admin.users); the OAuth sign-in page
and the console's sign-in page check them through one `PasswordCheck` per process, so both refuse an unknown user, a
user without a password and a wrong password alike, and as slowly. The throttle's buckets are rows of `rate_bucket`
in PostgreSQL (app.services.auth.ratelimit.SharedRateLimiter), so both pages of every worker of `serve --workers N`
and of every replica on the database count one user name's attempts together.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import hashlib
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from app.db.records import Principal
from app.db.repositories.users import UserRepository
from app.services.auth.ratelimit import SharedRateLimiter

if TYPE_CHECKING:
    from app.db.engine import Database

logger = logging.getLogger(__name__)

# scrypt from the standard library with OWASP's parameters (N=2^17, r=8, p=1: 128 MiB and about 0.3 s per hash),
# a 16-byte random salt per hash, a 32-byte key; the parameters travel in the string (`scrypt$n$r$p$salt$hash`,
# base64url without padding), so they can be raised later and old hashes still verify.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**17, 8, 1
SCRYPT_PREFIX = "scrypt"
MIN_PASSWORD_LENGTH = 12
MAX_PASSWORD_LENGTH = 1024  # a sign-in form's password is hashed: no megabyte of input per attempt
_MAX_N, _MAX_R, _MAX_P = 2**20, 32, 16  # what a stored hash may ask of verify_password (a bad row is no DoS)

# Password sign-in: attempts per user name and minute across every process on the database (a bucket: a burst of
# this many, then one every 60/N s), a pause after each failure, and at most this many scrypt hashes at once in one
# process (128 MiB each: a bound on each process's memory, so it stays per process).
PASSWORD_ATTEMPTS_PER_MINUTE = 10
PASSWORD_FAILURE_DELAY_SECONDS = 0.5
CONCURRENT_PASSWORD_HASHES = 2
# Every this many attempts of a process, the buckets that are full again are deleted: names typed for unknown users
# are made up by the caller, so without it each would leave a row behind.
PASSWORD_BUCKETS_PURGE_EVERY = 1000
# The throttle's keys in `rate_bucket`, apart from the tool limit's (token ids, user ids, stdio names): a known user
# by id, an unknown name by a digest of its case-folded form (any length fits the key column).
USER_KEY_PREFIX = "password-user:"
NAME_KEY_PREFIX = "password-name:"


def password_problem(password: str) -> str | None:
    """Why this password may not be set (None: acceptable)."""
    if len(password) < MIN_PASSWORD_LENGTH:
        return f"password: at least {MIN_PASSWORD_LENGTH} characters (this one has {len(password)})"
    if len(password) > MAX_PASSWORD_LENGTH:
        return f"password: at most {MAX_PASSWORD_LENGTH} characters (this one has {len(password)})"
    return None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int, length: int) -> bytes:
    # OpenSSL needs 128·r·(n + p + 2) bytes; Python's default limit (32 MiB) is below N=2^17.
    memory = 128 * r * (n + p + 2) + 2**20
    return hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, maxmem=memory, dklen=length)


def hash_password(password: str, *, n: int = SCRYPT_N, r: int = SCRYPT_R, p: int = SCRYPT_P) -> str:
    """`scrypt$n$r$p$salt$hash` of the password with a fresh random salt (CPU-bound: call it off the event loop)."""
    salt = secrets.token_bytes(16)
    return f"{SCRYPT_PREFIX}${n}${r}${p}${_b64(salt)}${_b64(_scrypt(password, salt, n, r, p, 32))}"


def verify_password(password: str, stored: str) -> bool:
    """Whether the password matches a `hash_password` string (constant-time compare); False for a malformed one."""
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != SCRYPT_PREFIX or len(password) > MAX_PASSWORD_LENGTH:
        return False
    try:
        n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
        salt, expected = _unb64(parts[4]), _unb64(parts[5])
    except (ValueError, binascii.Error):
        return False
    if not (1 < n <= _MAX_N and n & (n - 1) == 0 and 0 < r <= _MAX_R and 0 < p <= _MAX_P):
        return False
    if len(salt) < 8 or not 16 <= len(expected) <= 64:
        return False
    return secrets.compare_digest(_scrypt(password, salt, n, r, p, len(expected)), expected)


@functools.cache
def decoy_password_hash() -> str:
    """A hash no password is known for: checked when the user is unknown or has no password, so that answer
    takes as long as a wrong password's."""
    return hash_password(secrets.token_urlsafe(32))


def _password_matches(password: str, stored: str | None) -> bool:
    return verify_password(password, stored or decoy_password_hash())


class TooManyAttempts(Exception):
    """Password sign-in refused before checking: too many attempts for this user name; retry after `retry_after` s."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"too many sign-in attempts: retry in {retry_after:.0f} s")
        self.retry_after = retry_after


@dataclass(frozen=True)
class PasswordMatch:
    principal: Principal
    password_hash: str  # the stored hash that matched: a session bound to it ends when the password changes


class PasswordCheck:
    """A user name and password, checked as every sign-in form checks them: throttled per user name across every
    process on the database, at most CONCURRENT_PASSWORD_HASHES hashes at once in this process, the same answer
    (None) and time for an unknown user, one without a password and a wrong password, and a pause after each
    failure."""

    def __init__(
        self, failure_delay: float = PASSWORD_FAILURE_DELAY_SECONDS, clock: Callable[[], float] | None = None
    ) -> None:
        """`clock`: the throttle's, in seconds since the epoch (None: the database's clock, which every worker and
        replica shares); a test passes one it moves itself, so refills never depend on how fast hashes run."""
        self.failure_delay = failure_delay
        self._moment = (lambda: datetime.fromtimestamp(clock(), UTC)) if clock is not None else None
        self._attempts: SharedRateLimiter | None = None
        self._hashing = asyncio.Semaphore(CONCURRENT_PASSWORD_HASHES)

    def _limiter(self, db: Database) -> SharedRateLimiter:
        if self._attempts is None or self._attempts.db is not db:
            self._attempts = SharedRateLimiter(
                db, PASSWORD_ATTEMPTS_PER_MINUTE, self._moment, purge_every=PASSWORD_BUCKETS_PURGE_EVERY
            )
        return self._attempts

    async def check(self, db: Database, user_name: str, password: str) -> PasswordMatch | None:
        """The user and their matching hash; None when the user is unknown, has no password or gave another one;
        TooManyAttempts past the rate."""
        name = user_name.strip()
        found = None
        if name and len(name) <= 200 and "\x00" not in name:  # PostgreSQL text never holds NUL
            async with db.autocommit() as session:
                found = await UserRepository(session).password_hash(name)
        # Keyed by user id for known users and by the name typed for unknown ones, so both are throttled alike
        # (the answer does not tell them apart).
        if found is None:
            key = NAME_KEY_PREFIX + hashlib.sha256(name.casefold().encode()).hexdigest()
        else:
            key = USER_KEY_PREFIX + str(found[0].user_id)
        wait = await self._limiter(db).retry_after(key)
        if wait is not None:
            raise TooManyAttempts(wait)
        stored = found[1] if found is not None else None
        async with self._hashing:
            # Unknown user or no password: the decoy hash is checked all the same (same time, same answer).
            matched = len(password) <= MAX_PASSWORD_LENGTH and await asyncio.to_thread(
                _password_matches, password, stored
            )
        if not matched or found is None or stored is None:
            logger.info("password sign-in refused for user name %r", name[:200])
            await asyncio.sleep(self.failure_delay)
            return None
        return PasswordMatch(found[0], stored)
