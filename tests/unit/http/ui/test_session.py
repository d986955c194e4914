"""Console session cookies (app/http/ui/session.py): signed, expiring, tamper-evident; the key's sources. What the
cookie names, the server-side session, is tests/security/test_sessions.py's."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

from pydantic import SecretStr

from app.http.ui.session import KEY_FILE, SessionCodec, load_secret, same_token

HOUR = 3600


def codec(key: bytes = b"k" * 32) -> SessionCodec:
    return SessionCodec(key, 12 * HOUR)


def test_a_cookie_reads_back_until_it_expires() -> None:
    cookie, issued = codec().issue("the session secret", now=1_000_000)
    assert issued.secret == "the session secret"
    assert codec().read(cookie, now=1_000_000 + 11 * HOUR) == issued
    assert codec().read(cookie, now=1_000_000 + 12 * HOUR) is None
    assert codec().read(cookie, now=1_000_000 - 60) is None  # issued in the future: not ours


def test_another_key_or_any_changed_byte_is_refused() -> None:
    cookie, _ = codec().issue("the session secret")
    assert codec(b"other" * 8).read(cookie) is None
    body, _, mac = cookie.partition(".")
    assert codec().read(body[:-1] + ("A" if body[-1] != "A" else "B") + "." + mac) is None
    for junk in ("", ".", "x.y", "%%%", cookie + "A", "a" * 2000):
        assert codec().read(junk) is None


def test_each_session_has_its_own_csrf_token() -> None:
    _, first = codec().issue("the session secret")
    _, second = codec().issue("the session secret")
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


def test_a_cookie_of_the_earlier_format_names_no_session() -> None:
    """Before migration 0018 a cookie carried a token's hash or a user id, well signed: it now reads as nothing."""
    signer = codec()
    for values in ({"t": 1_000_000, "c": "csrf", "h": "ab" * 32}, {"t": 1_000_000, "c": "csrf", "u": "x", "p": "m"}):
        body = base64.urlsafe_b64encode(json.dumps(values).encode()).rstrip(b"=").decode()
        assert signer.read(f"{body}.{signer._mac(body)}", now=1_000_000 + HOUR) is None
