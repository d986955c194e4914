"""Console session cookies (app/http/ui/session.py): signed, expiring, tamper-evident; the key's sources."""

from __future__ import annotations

import base64
import stat
import uuid
from pathlib import Path

from pydantic import SecretStr

from app.http.ui.session import KEY_FILE, SessionCodec, load_secret, same_token
from app.services.auth import hash_token

HOUR = 3600


def codec(key: bytes = b"k" * 32) -> SessionCodec:
    return SessionCodec(key, 12 * HOUR)


def test_a_cookie_reads_back_until_it_expires() -> None:
    cookie, issued = codec().issue(hash_token("smt_x"), now=1_000_000)
    assert "smt_x" not in cookie
    assert codec().read(cookie, now=1_000_000 + 11 * HOUR) == issued
    assert codec().read(cookie, now=1_000_000 + 12 * HOUR) is None
    assert codec().read(cookie, now=1_000_000 - 60) is None  # issued in the future: not ours


def test_another_key_or_any_changed_byte_is_refused() -> None:
    cookie, _ = codec().issue(hash_token("smt_x"))
    assert codec(b"other" * 8).read(cookie) is None
    body, _, mac = cookie.partition(".")
    assert codec().read(body[:-1] + ("A" if body[-1] != "A" else "B") + "." + mac) is None
    for junk in ("", ".", "x.y", "%%%", cookie + "A", "a" * 2000):
        assert codec().read(junk) is None


def test_each_session_has_its_own_csrf_token() -> None:
    _, first = codec().issue(hash_token("smt_x"))
    _, second = codec().issue(hash_token("smt_x"))
    assert first.csrf != second.csrf and len(first.csrf) >= 32
    assert same_token(first.csrf, first.csrf)
    assert not same_token(first.csrf, second.csrf)
    assert not same_token("", "") and not same_token(None, "x")


def test_the_key_comes_from_settings_else_from_a_private_file(tmp_path: Path) -> None:
    configured = load_secret(SecretStr("shared by every replica"), tmp_path)
    assert configured == load_secret(SecretStr("shared by every replica"), tmp_path / "elsewhere")
    assert not (tmp_path / KEY_FILE).exists()
    kept = load_secret(None, tmp_path)
    assert kept == load_secret(None, tmp_path) != configured  # the same file on a restart
    assert stat.S_IMODE((tmp_path / KEY_FILE).stat().st_mode) == 0o600


def test_a_password_session_names_the_user_and_marks_the_hash_it_matched() -> None:
    user_id = uuid.UUID("01900000-0000-7000-8000-000000000001")
    stored = "scrypt$131072$8$1$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5a2V5a2V5a2V5"
    cookie, issued = codec().issue_for_password(user_id, stored, now=1_000_000)
    assert stored not in cookie and "a2V5a2V5" not in base64.urlsafe_b64decode(cookie.split(".")[0] + "==").decode()
    read = codec().read(cookie, now=1_000_000 + HOUR)
    assert read == issued and read.token_hash is None and read.user_id == user_id
    assert codec().same_password(read, stored)
    assert not codec().same_password(read, stored.replace("a2V5", "b2V5"))  # the password was changed
    assert not codec().same_password(read, None)  # or cleared
    assert not codec(b"other" * 8).same_password(read, stored)  # the mark is keyed


def test_a_single_sign_on_session_names_the_user_only() -> None:
    user_id = uuid.UUID("01900000-0000-7000-8000-000000000002")
    cookie, issued = codec().issue_for_upstream(user_id, now=1_000_000)
    read = codec().read(cookie, now=1_000_000 + HOUR)
    assert read == issued and read.upstream and read.user_id == user_id
    assert read.token_hash is None and read.password_mark is None
    assert not codec().same_password(read, "scrypt$1$1$1$x$y")  # it never stands for a password session
    assert codec().read(cookie, now=1_000_000 + 12 * HOUR) is None  # it expires like the others
