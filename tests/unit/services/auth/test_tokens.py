"""`--expires`: lifetimes, ISO dates, `never` only by name, and refusals that name the argument."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.errors import AppError
from app.services.auth.tokens import parse_expiry

NOW = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
USAGE = "use a number of hours/days/weeks/years such as 12h, 90d or 1y, an ISO date such as 2027-06-30, or never"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("30d", NOW + timedelta(days=30)),
        ("90d", NOW + timedelta(days=90)),
        ("12h", NOW + timedelta(hours=12)),
        ("2w", NOW + timedelta(weeks=2)),
        ("1y", NOW + timedelta(days=365)),
        (" 90D ", NOW + timedelta(days=90)),
        ("2027-06-30", datetime(2027, 6, 30, tzinfo=UTC)),  # a date: its start, UTC
        ("2027-06-30T18:00", datetime(2027, 6, 30, 18, tzinfo=UTC)),  # no offset: UTC
        ("2027-06-30T18:00+02:00", datetime(2027, 6, 30, 16, tzinfo=UTC)),
        ("2027-06-30T18:00Z", datetime(2027, 6, 30, 18, tzinfo=UTC)),
    ],
)
def test_lifetimes_and_dates(value: str, expected: datetime) -> None:
    assert parse_expiry(value, NOW, 90) == expected


def test_the_default_lifetime_applies_without_the_option() -> None:
    assert parse_expiry(None, NOW, 90) == NOW + timedelta(days=90)
    assert parse_expiry(None, NOW, 7) == NOW + timedelta(days=7)


def test_never_only_when_said() -> None:
    assert parse_expiry("never", NOW, 90) is None
    assert parse_expiry("NEVER", NOW, 90) is None


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("10x", USAGE),
        ("", USAGE),
        ("0", USAGE),  # no "0 = never": never is spelled out
        ("d", USAGE),
        ("-5d", USAGE),
        ("1.5d", USAGE),
        ("90 days", USAGE),
        ("1m", USAGE),  # minutes or months: ambiguous, refused
        ("0d", f"a lifetime must be longer than zero; {USAGE}"),
        ("2026-12-01", f"that is not in the future (now is 2026-12-01 09:30 UTC); {USAGE}"),
        ("2026-12-01T09:30Z", f"that is not in the future (now is 2026-12-01 09:30 UTC); {USAGE}"),
        ("999999y", f"too far in the future; {USAGE}"),
    ],
)
def test_refusals_name_the_argument(value: str, reason: str) -> None:
    with pytest.raises(AppError) as refused:
        parse_expiry(value, NOW, 90)
    assert refused.value.message == f'--expires "{value}": {reason}'
    assert refused.value.status_code == 400


def test_an_offset_is_honoured() -> None:
    """10:00+02:00 is 08:00 UTC, before NOW (refused); 10:00-02:00 is 12:00 UTC."""
    with pytest.raises(AppError):
        parse_expiry("2026-12-01T10:00+02:00", NOW, 90)
    later = parse_expiry("2026-12-01T10:00-02:00", NOW, 90)
    assert (
        later
        == datetime(2026, 12, 1, 12, tzinfo=UTC)
        == datetime(2026, 12, 1, 10, tzinfo=timezone(-timedelta(hours=2)))
    )
