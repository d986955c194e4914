"""The console's health page says how old the stored report is: app.http.ui.operations.checked_ago."""

from __future__ import annotations

import pytest

from app.http.ui.operations import checked_ago


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (0, "less than a minute ago"),
        (59.9, "less than a minute ago"),
        (60, "1 min ago"),
        (4 * 60 + 10, "4 min ago"),
        (3600, "1 h ago"),
        (2 * 3600 + 5 * 60, "2 h 5 min ago"),
        (47 * 3600 + 59 * 60, "47 h 59 min ago"),
        (3 * 86400 + 600, "3 days ago"),
    ],
)
def test_how_old_a_report_is_said(seconds: float, said: str) -> None:
    assert checked_ago(seconds) == said
