"""The kinds of value a request takes, each with its range declared once: an id, a tag and a tag list, a path, a
query, a text, a list of ids, a time, an edge type.

Declared here, below the tool adapters, so that a service's request model (`app.services.recall.requests`) and a
tool's argument model (`app/mcp/tools/<tool>/args.py`, through `app.mcp.tools.common`) type an argument the same
way: a new action that takes tags (say) takes them with the same bounds as every other one (issue 22: three actions
took tag lists without any). The contract lists the ranges in mcp-tools.md "Argument types".
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, Strict, StringConstraints, WithJsonSchema
from pydantic_core import PydanticCustomError

from app.db.models import EdgeType
from app.formats import MAX_TAG_LENGTH, MAX_TAGS, parse_moment

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


class CwdRequest(BaseModel):
    """A request scoped by the caller's working directory (`app.services.scope`)."""

    cwd: CwdStr | None = Field(default=None, description="working directory (scope)")


class LinksRequest(BaseModel):
    """A read that can attach each thought's url links."""

    include_url_links: bool = Field(default=False, description="attach url_links")
