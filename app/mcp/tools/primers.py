"""memory_primers: list and delete the always-at-hand set."""

from __future__ import annotations

from typing import Literal

from app.db.models import Role
from app.mcp.registry import Action, ActionArgs, ToolSpec
from app.mcp.tools.common import COMMON_FIELD_DOCS, DESTRUCTIVE, ConfirmArgs, IdStr, not_implemented

TOOL = "memory_primers"


class ListArgs(ActionArgs):
    action: Literal["list"]


class DeleteArgs(ConfirmArgs):
    action: Literal["delete"]
    primer_id: IdStr


SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Primers: thoughts promoted after repeated recalls. list → most-hit first; delete {primer_id} "
        "removes the primer (never the thought): previews, then confirm=true+preview_token."
    ),
    actions=(
        Action("list", ListArgs, not_implemented(TOOL, "list"), Role.reader),
        Action("delete", DeleteArgs, not_implemented(TOOL, "delete"), Role.writer),
    ),
    annotations=DESTRUCTIVE,
    field_docs=dict(COMMON_FIELD_DOCS),
)
