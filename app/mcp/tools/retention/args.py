"""retention_review argument models: list, protect, delete, compact."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.mcp.arguments import ActionArgs
from app.mcp.tools.common import CONFIRM, ConfirmArgs, IdList, IdStr, ShapeArgs, TagList, TextStr

TOOL = "retention_review"
THOUGHT_ID = "thought id"


class ListArgs(ShapeArgs):
    action: Literal["list"]
    min_age_days: float | None = Field(default=None, gt=0, le=36_500, description="minimum age in days")
    importance_floor: float | None = Field(default=None, ge=0, le=1, description="importance below")
    limit: int | None = Field(default=None, ge=1, le=100, description="page size")
    offset: int = Field(default=0, ge=0, description="rows to skip")


class ProtectArgs(ActionArgs):
    action: Literal["protect"]
    thought_id: IdStr = Field(description=THOUGHT_ID)
    protected: bool = Field(default=True, description="false unprotects")


class DeleteArgs(ConfirmArgs):
    action: Literal["delete"]
    thought_id: IdStr = Field(description=THOUGHT_ID)


class CompactSummary(ActionArgs):
    """The summary thought `compact` creates (a nested object, not an action)."""

    content: TextStr
    tags: TagList | None = None
    project_id: IdStr | None = None


class CompactArgs(ActionArgs):
    action: Literal["compact"]
    source_ids: IdList = Field(description="thoughts to compact")
    summary: CompactSummary = Field(description="{content, tags?, project_id?}")
    confirm: bool = Field(default=False, description=CONFIRM)
