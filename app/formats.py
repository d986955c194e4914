"""Wire formats shared by every layer: times as the contract writes them, and the range of a time a caller may send.

A time a caller sends (a tool argument, a console form, a CLI option) is parsed by `parse_moment` alone: ISO 8601,
a date or a date-time, UTC assumed when it carries no offset, between `EARLIEST` and `LATEST`. Both ends are
represented by Python's `datetime` and by PostgreSQL's `timestamptz` in every time zone (Python's own range ends
at the years 1 and 9999, so a time near either end in another offset could not be read back: issue 22, B5).
"""

from __future__ import annotations

from datetime import UTC, datetime

# A tag list, wherever one is sent or kept by an update (app.mcp.tools.common.TagList, app.services.store.thoughts).
MAX_TAGS = 50
MAX_TAG_LENGTH = 100

EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)
MOMENT_RANGE = "1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z"
MOMENT_FORMAT = (
    "an ISO 8601 date or date-time such as 2027-06-30 or 2027-06-30T09:00:00Z (UTC when it has no offset), "
    f"from {MOMENT_RANGE}"
)


def _shown(value: str) -> str:
    return repr(value if len(value) <= 40 else value[:40] + "…")


def parse_moment(value: object) -> datetime:
    """A caller's time, as an aware UTC datetime; ValueError (saying what is accepted) for anything else."""
    if not isinstance(value, str):
        raise ValueError(f"expected {MOMENT_FORMAT}")
    spelled = value.strip()
    try:
        moment = datetime.fromisoformat(spelled.replace("z", "Z"))  # a date alone: its start
    except ValueError:
        raise ValueError(f"{_shown(value)} is not {MOMENT_FORMAT}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        moment = moment.astimezone(UTC)
    except OverflowError:  # an offset that moves it past the year 9999 or before the year 1
        raise ValueError(f"{_shown(value)} is outside {MOMENT_RANGE}") from None
    if not EARLIEST <= moment <= LATEST:
        raise ValueError(f"{_shown(value)} is outside {MOMENT_RANGE}")
    return moment


def clamped(moment: datetime) -> datetime:
    """`moment` in UTC, held to `EARLIEST`..`LATEST`: a stored time outside the range (PostgreSQL's ±infinity, which
    the driver hands back as naive `datetime.min`/`max`, or a year 1 a client wrote before the range was checked)
    reads as the nearest end instead of failing every read that returns its row."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        utc = moment.astimezone(UTC)
    except OverflowError:
        return EARLIEST if moment.year < EARLIEST.year else LATEST
    return min(max(utc, EARLIEST), LATEST)


def iso(moment: datetime | None) -> str | None:
    """UTC with milliseconds and a Z, as the contract's examples show (2026-10-25T10:56:55.972Z).

    Total over `datetime`: a stored time outside the accepted range is shown clamped to it (`clamped`), so what a
    read answers can be sent back as an argument."""
    if moment is None:
        return None
    return clamped(moment).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
