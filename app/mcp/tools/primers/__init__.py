"""memory_primers: list and delete the always-at-hand set."""

from __future__ import annotations

from app.mcp.registry import Action, ToolSpec
from app.mcp.tools.common import DESTRUCTIVE
from app.mcp.tools.primers import handlers
from app.mcp.tools.primers.args import TOOL, DeleteArgs, ListArgs
from app.services.values import Role

SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Primers: thoughts promoted after repeated recalls. list; delete {primer_id}, previewed first, removes the "
        "primer, never the thought."
    ),
    actions=(
        Action("list", ListArgs, handlers.list_primers, Role.reader),
        Action("delete", DeleteArgs, handlers.delete_primer, Role.writer),
    ),
    annotations=DESTRUCTIVE,
)
