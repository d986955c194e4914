"""Small text measures shared by the reflection de-duplication and the placement rules."""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+", re.UNICODE)


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def jaccard(a: str, b: str) -> float:
    """Word-set overlap of two texts (1.0 for two empty texts)."""
    left, right = words(a), words(b)
    if not left and not right:
        return 1.0
    return len(left & right) / len(left | right)


def normalised(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))
