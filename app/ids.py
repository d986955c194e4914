"""UUIDv7 ids and the parsing of ids a caller sends."""

from __future__ import annotations

import re
import uuid

import uuid_utils

from app.errors import invalid

_HEX = re.compile(r"^[0-9a-f]+$")


def new_id() -> uuid.UUID:
    """A UUIDv7: its first 12 hex digits are the creation millisecond (id-prefix lookup relies on it)."""
    return uuid.UUID(bytes=uuid_utils.uuid7().bytes)


def parse_uuid(value: str, argument: str) -> uuid.UUID:
    """Parse a full id; hyphens anywhere, any case. Refuses naming the argument."""
    compact = value.replace("-", "").strip().lower() if isinstance(value, str) else ""
    if len(compact) != 32 or not _HEX.match(compact):
        raise invalid(argument, f"{value!r} is not a valid id (a UUID)")
    return uuid.UUID(hex=compact)


def as_hex_id(value: str) -> str | None:
    """The hex digits of an id-shaped string (hyphens dropped, lower case) or None."""
    compact = value.replace("-", "").strip().lower()
    return compact if compact and _HEX.match(compact) else None
