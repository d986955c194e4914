"""Argument fragments shared by the per-action models, and small adapter helpers."""

from __future__ import annotations

import uuid
from typing import Annotated

from mcp_types import ToolAnnotations
from pydantic import Field, StringConstraints

from app.ids import parse_uuid
from app.mcp.registry import ActionArgs

IdStr = Annotated[str, StringConstraints(min_length=1, max_length=64)]
TagStr = Annotated[str, StringConstraints(max_length=100)]
CwdStr = Annotated[str, StringConstraints(max_length=4096)]


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
