"""Admin-set passwords (app.services.auth.passwords): the scrypt hash string, its verification, the length rules."""

from __future__ import annotations

import base64

import pytest

from app.services.auth.passwords import (
    MAX_PASSWORD_LENGTH,
    MIN_PASSWORD_LENGTH,
    SCRYPT_N,
    SCRYPT_P,
    SCRYPT_R,
    decoy_password_hash,
    hash_password,
    password_problem,
    verify_password,
)

FAST = {"n": 2**10, "r": 8, "p": 1}  # the format is the same at any cost: keep the unit tests quick


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_the_hash_string_carries_its_parameters_and_a_random_salt() -> None:
    first, second = hash_password("correct horse battery", **FAST), hash_password("correct horse battery", **FAST)
    scheme, n, r, p, salt, key = first.split("$")
    assert (scheme, n, r, p) == ("scrypt", "1024", "8", "1")
    assert len(_unb64(salt)) == 16 and len(_unb64(key)) == 32
    assert "=" not in first and "correct" not in first
    assert first != second  # a fresh salt per hash: equal passwords do not show in a dump
    assert first.split("$")[4] != second.split("$")[4]


def test_the_default_parameters_are_owasps() -> None:
    assert (SCRYPT_N, SCRYPT_R, SCRYPT_P) == (2**17, 8, 1)
    assert decoy_password_hash().startswith(f"scrypt${2**17}$8$1$")
    assert not verify_password("", decoy_password_hash())


def test_verification_accepts_the_password_only() -> None:
    stored = hash_password("correct horse battery", **FAST)
    assert verify_password("correct horse battery", stored)
    for wrong in ("correct horse batterY", "correct horse battery ", "", "correct horse"):
        assert not verify_password(wrong, stored)


def test_verification_reads_the_parameters_from_the_string() -> None:
    stronger = hash_password("correct horse battery", n=2**11, r=4, p=2)
    assert stronger.startswith("scrypt$2048$4$2$") and verify_password("correct horse battery", stronger)


@pytest.mark.parametrize(
    "stored",
    [
        "",
        "plain text",
        "scrypt$1024$8$1$c2FsdA",  # a field missing
        "bcrypt$1024$8$1$c2FsdHNhbHRzYWx0$a2V5",
        "scrypt$1000$8$1$c2FsdHNhbHRzYWx0c2FsdA$" + "A" * 43,  # n not a power of two
        "scrypt$4194304$8$1$c2FsdHNhbHRzYWx0c2FsdA$" + "A" * 43,  # n beyond what a stored row may ask
        "scrypt$1024$999$1$c2FsdHNhbHRzYWx0c2FsdA$" + "A" * 43,
        "scrypt$1024$8$x$c2FsdHNhbHRzYWx0c2FsdA$" + "A" * 43,
        "scrypt$1024$8$1$!!!$" + "A" * 43,
        "scrypt$1024$8$1$c2FsdHNhbHRzYWx0c2FsdA$QQ",  # a key too short to mean anything
    ],
)
def test_a_malformed_hash_matches_nothing(stored: str) -> None:
    assert not verify_password("correct horse battery", stored)


def test_the_length_rules_name_the_limit() -> None:
    assert MIN_PASSWORD_LENGTH == 12
    assert password_problem("x" * 11) == "password: at least 12 characters (this one has 11)"
    assert password_problem("x" * 12) is None
    assert password_problem("x" * (MAX_PASSWORD_LENGTH + 1)) == (
        f"password: at most {MAX_PASSWORD_LENGTH} characters (this one has {MAX_PASSWORD_LENGTH + 1})"
    )
    assert not verify_password("x" * (MAX_PASSWORD_LENGTH + 1), hash_password("x" * 12, **FAST))
