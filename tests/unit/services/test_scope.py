"""app/services/scope.py: one spelling of a path per directory."""

from __future__ import annotations

import pytest

from app.services.scope import normalize_path


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/work/demo", "/work/demo"),
        ("/work/demo/", "/work/demo"),
        ("/work//demo///", "/work/demo"),
        ("  /work/demo  ", "/work/demo"),
        ("/work/./demo/sub/..", "/work/demo"),
        ("/", "/"),
        ("//", "/"),
        ("///work", "/work"),
        ("/..", "/"),
        ("relative/dir/", "relative/dir"),
        ("", ""),
        ("   ", ""),
    ],
)
def test_normalize_path_gives_one_spelling_per_directory(path: str, expected: str) -> None:
    assert normalize_path(path) == expected


def test_normalize_path_collapses_a_doubled_leading_slash() -> None:
    assert normalize_path("//work/demo") == "/work/demo"
