"""The argument mixins shared by the per-action models, and small adapter helpers.

Every kind of argument (an id, a tag list, a path, a query, a text, a time, …) has its range declared once, in
`app.services.kinds`, where a service's request model can use it too; this module re-exports the kinds for the
argument models. Numbers and booleans are strict (`ArgumentModel`); the contract lists the ranges in mcp-tools.md
"Argument types".
"""

from __future__ import annotations

import uuid
from typing import Annotated

from mcp_types import ToolAnnotations
from pydantic import Field, StringConstraints

from app.ids import parse_uuid
from app.mcp.arguments import ActionArgs
from app.services.kinds import MAX_BATCH as MAX_BATCH
from app.services.kinds import CwdRequest, LinksRequest
from app.services.kinds import CwdStr as CwdStr
from app.services.kinds import EdgeTypeArg as EdgeTypeArg
from app.services.kinds import IdList as IdList
from app.services.kinds import IdStr as IdStr
from app.services.kinds import Moment as Moment
from app.services.kinds import QueryStr as QueryStr
from app.services.kinds import TagList as TagList
from app.services.kinds import TagStr as TagStr
from app.services.kinds import TextStr as TextStr


class CwdArgs(CwdRequest, ActionArgs):
    pass


class ShapeArgs(ActionArgs):
    compact: bool | None = Field(default=None, description="minimal fields")
    fields: list[Annotated[str, StringConstraints(max_length=64)]] | None = Field(
        default=None, max_length=32, description="only these fields"
    )


class LinksArgs(LinksRequest, ActionArgs):
    pass


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
