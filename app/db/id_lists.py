"""A list of ids as one `uuid[]` parameter: `column = ANY(:ids)`, not one bind per id (cheap to compile, no 32 767-bind
limit). Below the repositories and the row locks, which all filter by id lists."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from typing import Any

from sqlalchemy import any_, bindparam, literal
from sqlalchemy.dialects.postgresql import ARRAY, UUID

ID_LIST = ARRAY(UUID(as_uuid=True))


def id_in(column: Any, ids: Collection[uuid.UUID]) -> Any:
    """`column = ANY(:ids)`, the ids bound now."""
    return column == any_(literal(list(ids), ID_LIST))


def id_in_param(column: Any, name: str = "ids") -> Any:
    """`column = ANY(:name)` with the uuid[] bound at execution: for statements built once and reused."""
    return column == any_(bindparam(name, type_=ID_LIST))
