"""app/services/previews.py: what a preview token is bound to."""

from __future__ import annotations

from app.services.previews import fingerprint


def test_fingerprint_ignores_argument_order_and_the_flow_arguments() -> None:
    base = {"thought_id": "abc", "reason": "dup", "thought_ids": ["a", "b"]}
    reordered = {"thought_ids": ["a", "b"], "reason": "dup", "thought_id": "abc"}
    with_flow = {**base, "confirm": True, "preview_token": "tok", "action": "archive"}
    with_none = {**base, "cwd": None}
    digests = {fingerprint(candidate) for candidate in (base, reordered, with_flow, with_none)}
    assert len(digests) == 1
    digest = digests.pop()
    assert len(digest) == 64 and all(char in "0123456789abcdef" for char in digest)
    assert fingerprint(base) == fingerprint(dict(base))  # stable across calls


def test_fingerprint_changes_with_what_is_written() -> None:
    base = {"thought_id": "abc", "reason": "dup"}
    assert fingerprint(base) != fingerprint({**base, "thought_id": "abd"})
    assert fingerprint(base) != fingerprint({**base, "cwd": "/work"})
    assert fingerprint({"ids": ["a", "b"]}) != fingerprint({"ids": ["a", "b", "c"]})
    assert fingerprint({"flag": False}) != fingerprint({})
