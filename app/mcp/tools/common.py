"""Argument types shared by the per-action models, and small adapter helpers.

Every kind of argument has its range declared here, once: an id, a tag and a tag list, a path, a query, a text,
a list of ids, a time. An action's model uses the type, so a new action that takes tags (say) takes them with
the same bounds as every other one (issue 22: three actions took tag lists without any). Numbers and booleans
are strict (`ArgumentModel`); the contract lists the ranges in mcp-tools.md "Argument types".
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from mcp_types import ToolAnnotations
from pydantic import AfterValidator, BeforeValidator, Field, Strict, StringConstraints, WithJsonSchema
from pydantic_core import PydanticCustomError

from app.formats import MAX_TAG_LENGTH, MAX_TAGS, parse_moment
from app.ids import parse_uuid
from app.mcp.arguments import ActionArgs
from app.services.values import EdgeType

MAX_BATCH = 1000  # ids or rows one call names: archive_batch, cluster members, link_batch, unlink_batch, compact
MAX_TEXT = 100_000  # a size guard on a thought's text: the services hold it to `content.hard_limit`
MAX_QUERY = 2000
MAX_PATH = 4096

IdStr = Annotated[str, StringConstraints(min_length=1, max_length=64)]
TagStr = Annotated[str, StringConstraints(max_length=MAX_TAG_LENGTH)]
# The services trim each tag, refuse a blank one (`Invalid '<argument>': tags must be non-empty strings`) and
# drop case-insensitive repeats (`app.services.store.thoughts.normalize_tags`).
TagList = Annotated[list[TagStr], Field(max_length=MAX_TAGS)]  # create, update, bulk rows, cluster, merge, compact
CwdStr = Annotated[str, StringConstraints(max_length=MAX_PATH)]
TextStr = Annotated[str, StringConstraints(max_length=MAX_TEXT)]
IdList = Annotated[list[IdStr], Field(min_length=1, max_length=MAX_BATCH)]
# Its values are the strings of `EdgeType`: strict models take an enum's values, not only its members.
EdgeTypeArg = Annotated[EdgeType, Strict(False)]


def _not_blank(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("blank", "must not be blank (only whitespace): send words to search for, or an id")
    return value


QueryStr = Annotated[str, StringConstraints(min_length=1, max_length=MAX_QUERY), AfterValidator(_not_blank)]


def _moment(value: Any) -> datetime:
    try:
        return parse_moment(value)
    except ValueError as error:
        raise PydanticCustomError("moment", str(error)) from None


# A time argument (`surface_after`, and any later one): see app/formats.py for the range and the spellings.
Moment = Annotated[
    datetime,
    BeforeValidator(_moment),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


class CwdArgs(ActionArgs):
    cwd: CwdStr | None = Field(default=None, description="working directory (scope)")


class ShapeArgs(ActionArgs):
    compact: bool | None = Field(default=None, description="minimal fields")
    fields: list[Annotated[str, StringConstraints(max_length=64)]] | None = Field(
        default=None, max_length=32, description="only these fields"
    )


class LinksArgs(ActionArgs):
    include_url_links: bool = Field(default=False, description="attach url_links")


CONFIRM = "true executes"


class ConfirmArgs(ActionArgs):
    confirm: bool = Field(default=False, description=CONFIRM)
    preview_token: Annotated[str, StringConstraints(max_length=64)] | None = Field(
        default=None, description="the preview's token"
    )


def uuid_arg(value: str, name: str) -> uuid.UUID:
    return parse_uuid(value, name)


# Hints at the protocol's defaults are left out (readOnlyHint false, destructiveHint true, idempotentHint false;
# destructiveHint means nothing beside readOnlyHint true): every client reads the same, in fewer bytes.
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(destructive_hint=False, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(open_world_hint=False)
