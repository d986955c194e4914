"""retention_review: list candidates, protect, delete (token-gated), compact (tokenless)."""

from __future__ import annotations

from app.mcp.registry import Action, ToolSpec
from app.mcp.tools.common import DESTRUCTIVE
from app.mcp.tools.retention import handlers
from app.mcp.tools.retention.args import (
    TOOL,
    CompactArgs,
    DeleteArgs,
    ListArgs,
    ProtectArgs,
)
from app.services.values import Role

SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Retention candidates (old, unimportant, unused archived/draft thoughts). list; protect {thought_id}; delete "
        "{thought_id} hard-deletes, previewed first; compact {source_ids, summary} merges them into a protected "
        "summary on confirm=true (no token)."
    ),
    actions=(
        Action("list", ListArgs, handlers.list_candidates, Role.reader),
        Action("protect", ProtectArgs, handlers.protect, Role.writer),
        Action("delete", DeleteArgs, handlers.delete, Role.writer),
        Action("compact", CompactArgs, handlers.compact, Role.writer),
    ),
    annotations=DESTRUCTIVE,
)
