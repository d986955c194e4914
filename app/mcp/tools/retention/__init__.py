"""retention_review: list candidates, protect, delete (token-gated), compact (tokenless)."""

from __future__ import annotations

from app.db.models import Role
from app.mcp.registry import Action, ToolSpec
from app.mcp.tools.common import COMMON_FIELD_DOCS, DESTRUCTIVE
from app.mcp.tools.retention import handlers
from app.mcp.tools.retention.args import (
    TOOL,
    CompactArgs,
    DeleteArgs,
    ListArgs,
    ProtectArgs,
)

SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Retention candidates: old, unimportant, unused archived/draft thoughts, all projects. list "
        "{min_age_days?, importance_floor?, limit?, offset?}; protect {thought_id, protected?}; delete "
        "{thought_id} hard-deletes (preview, then confirm+preview_token); compact {source_ids, summary "
        "{content, tags?, project_id?}} merges them into a protected summary (confirm=true, no token)."
    ),
    actions=(
        Action("list", ListArgs, handlers.list_candidates, Role.reader),
        Action("protect", ProtectArgs, handlers.protect, Role.writer),
        Action("delete", DeleteArgs, handlers.delete, Role.writer),
        Action("compact", CompactArgs, handlers.compact, Role.writer),
    ),
    annotations=DESTRUCTIVE,
    field_docs={
        **COMMON_FIELD_DOCS,
        "min_age_days": "minimum age in days (default: setting, 30)",
        "importance_floor": "importance must be below this (default: setting, 0.3)",
        "limit": "page size (default: setting, 20)",
        "protected": "false unprotects",
        "source_ids": "thoughts to compact (1–1000)",
        "confirm": "true executes; absent/false previews (compact needs no token)",
    },
)
