"""app/http/ui/humane.py: counts in words."""

from __future__ import annotations

from app.http.ui.humane import counted


def test_an_exact_count_reads_as_is_and_a_capped_one_as_more_than_its_bound() -> None:
    assert counted(0) == "0 thoughts"
    assert counted(1) == "1 thought"
    assert counted(999) == "999 thoughts"
    assert counted(1000, capped=True) == "more than 1,000 thoughts"
    assert counted(1250, True) == "more than 1,250 thoughts"
    assert counted(2, noun="proposal") == "2 proposals"
