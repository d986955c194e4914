"""Wire formats shared by every layer."""

from __future__ import annotations

from datetime import UTC, datetime


def iso(moment: datetime | None) -> str | None:
    """UTC with milliseconds and a Z, as the contract's examples show (2026-10-25T10:56:55.972Z)."""
    if moment is None:
        return None
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
