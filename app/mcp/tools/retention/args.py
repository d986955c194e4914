"""retention_review argument models: list, protect, delete, compact."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.mcp.registry import ActionArgs
from app.mcp.tools.common import ConfirmArgs, IdStr, ShapeArgs, TagStr

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
