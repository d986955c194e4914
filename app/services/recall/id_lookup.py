"""Id-shaped queries: a full UUID (an explicit reference) or a ≥13-hex prefix (a timestamp window)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from app.ids import as_hex_id

PREFIX_MIN = 13  # a UUIDv7 spends its first 12 hex digits on the millisecond
ID_PREFIX_MATCH_HARD_CAP = 100


@dataclass(frozen=True)
class IdQuery:
    full: uuid.UUID | None  # a full id
    low: uuid.UUID | None  # a prefix, as the id range it addresses
    high: uuid.UUID | None


def parse_id_query(query: str) -> IdQuery | None:
    """None for anything that is not id-shaped (a word, a hex run under 13 digits)."""
    digits = as_hex_id(query)
    if digits is None or len(digits) < PREFIX_MIN or len(digits) > 32:
        return None
    if len(digits) == 32:
        return IdQuery(uuid.UUID(hex=digits), None, None)
    return IdQuery(None, uuid.UUID(hex=digits.ljust(32, "0")), uuid.UUID(hex=digits.ljust(32, "f")))


def id_not_found_warning(query: str) -> str:
    return (
        f'id_not_found: "{query}" is id-shaped but no thought carries it — the answer is a normal search for that text'
    )
