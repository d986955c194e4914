"""app/ids.py: the ids callers send, parsed in any spelling, refused by argument name."""

from __future__ import annotations

import pytest

from app.errors import AppError, ErrorKind
from app.ids import parse_uuid
from tests.support.helpers import SAMPLE


@pytest.mark.parametrize(
    "spelling",
    [
        "01a172b4-d486-700c-a16e-5ae3d2d77a90",
        "01A172B4-D486-700C-A16E-5AE3D2D77A90",
        "01a172b4d486700ca16e5ae3d2d77a90",
        "01a1-72b4d486-700ca16e5ae3d2d7-7a90",
        "-01a172b4d486700ca16e5ae3d2d77a90-",
        "01a172b4--d486700ca16e5ae3d2d77a90",
        "  01a172b4-d486-700c-A16E-5ae3d2d77a90 ",
    ],
)
def test_parse_uuid_accepts_hyphens_anywhere_and_any_case(spelling: str) -> None:
    assert parse_uuid(spelling, "thought_id") == SAMPLE


@pytest.mark.parametrize(
    "value",
    [
        "",
        "01a172b4-d486-700c-a16e-5ae3d2d77a9",  # 31 hex digits
        "01a172b4-d486-700c-a16e-5ae3d2d77a900",  # 33
        "01a172b4-d486-700c-a16e-5ae3d2d77a9g",  # not hex
        "01a172b4 d486 700c a16e 5ae3d2d77a90",  # inner spaces
        "{01a172b4-d486-700c-a16e-5ae3d2d77a90}",
        "urn:uuid:01a172b4-d486-700c-a16e-5ae3d2d77a90",
    ],
)
def test_parse_uuid_refusals_name_the_argument(value: str) -> None:
    with pytest.raises(AppError) as raised:
        parse_uuid(value, "parent_id")
    assert raised.value.kind is ErrorKind.bad_request
    assert raised.value.message == f"Invalid 'parent_id': {value!r} is not a valid id (a UUID)"


def test_parse_uuid_refuses_a_non_string() -> None:
    with pytest.raises(AppError) as raised:
        parse_uuid(12345, "edge_id")  # type: ignore[arg-type]
    assert raised.value.message.startswith("Invalid 'edge_id': 12345")
