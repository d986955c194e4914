"""Argument fragments shared by the per-action models, and small adapter helpers."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from mcp_types import ToolAnnotations
from pydantic import Field, StringConstraints

from app.ids import parse_uuid
from app.mcp.registry import ActionArgs

IdStr = Annotated[str, StringConstraints(min_length=1, max_length=64)]
TagStr = Annotated[str, StringConstraints(max_length=100)]
CwdStr = Annotated[str, StringConstraints(max_length=4096)]


class CwdArgs(ActionArgs):
    cwd: CwdStr | None = None


class ShapeArgs(ActionArgs):
    compact: bool | None = None
    fields: list[Annotated[str, StringConstraints(max_length=64)]] | None = Field(default=None, max_length=32)


class LinksArgs(ActionArgs):
    include_url_links: bool = False


class ConfirmArgs(ActionArgs):
    confirm: bool = False
    preview_token: Annotated[str, StringConstraints(max_length=64)] | None = None


def uuid_arg(value: str, name: str) -> uuid.UUID:
    return parse_uuid(value, name)


def previewed_arguments(args: ActionArgs) -> dict[str, Any]:
    """What a preview token is bound to: the call's arguments minus the flow arguments."""
    return args.model_dump(exclude={"confirm", "preview_token"}, exclude_none=True)


READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)

COMMON_FIELD_DOCS = {
    "cwd": "working directory; scopes to its project (omit = every project / default project for writes)",
    "compact": "minimal thought fields",
    "fields": "only these thought fields",
    "include_url_links": "attach url_links to every thought",
    "confirm": "true executes; absent/false previews",
    "preview_token": "token from the preview (required with confirm)",
    "limit": "max rows",
    "offset": "rows to skip",
}
