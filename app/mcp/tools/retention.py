"""retention_review: list candidates, protect, delete (token-gated), compact (tokenless)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.db.models import Role
from app.mcp.registry import Action, ActionArgs, ToolSpec
from app.mcp.tools import retention_handlers
from app.mcp.tools.common import (
    COMMON_FIELD_DOCS,
    DESTRUCTIVE,
    ConfirmArgs,
    IdStr,
    ShapeArgs,
    TagStr,
)

TOOL = "retention_review"


class ListArgs(ShapeArgs):
    action: Literal["list"]
    min_age_days: float | None = Field(default=None, gt=0, le=36_500)
    importance_floor: float | None = Field(default=None, ge=0, le=1)
    limit: int | None = Field(default=None, ge=1, le=100)
    offset: int = Field(default=0, ge=0)


class ProtectArgs(ActionArgs):
    action: Literal["protect"]
    thought_id: IdStr
    protected: bool = True


class DeleteArgs(ConfirmArgs):
    action: Literal["delete"]
    thought_id: IdStr


class CompactSummary(ActionArgs):
    """The summary thought `compact` creates (a nested object, not an action)."""

    content: str
    tags: list[TagStr] | None = None
    project_id: IdStr | None = None


class CompactArgs(ActionArgs):
    action: Literal["compact"]
    source_ids: list[IdStr] = Field(min_length=1, max_length=1000)
    summary: CompactSummary
    confirm: bool = False


SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Retention candidates: old, unimportant, unused archived/draft thoughts, all projects. list "
        "{min_age_days?, importance_floor?, limit?, offset?}; protect {thought_id, protected?}; delete "
        "{thought_id} hard-deletes (preview, then confirm+preview_token); compact {source_ids, summary "
        "{content, tags?, project_id?}} merges them into a protected summary (confirm=true, no token)."
    ),
    actions=(
        Action("list", ListArgs, retention_handlers.list_candidates, Role.reader),
        Action("protect", ProtectArgs, retention_handlers.protect, Role.writer),
        Action("delete", DeleteArgs, retention_handlers.delete, Role.writer),
        Action("compact", CompactArgs, retention_handlers.compact, Role.writer),
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
