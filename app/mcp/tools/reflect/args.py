"""memory_reflect argument models: reflect, timeline."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from app.mcp.tools.common import CwdArgs, LinksArgs, ShapeArgs

TOOL = "memory_reflect"
GoalStr = Annotated[str, StringConstraints(max_length=500)]
StatusFilter = Literal["draft", "active", "archived", "all"]


class ReflectArgs(CwdArgs):
    action: Literal["reflect"]
    summary: Annotated[str, StringConstraints(max_length=2000)] | None = None
    goals_add: list[GoalStr] | None = Field(default=None, max_length=100)
    goals_remove: list[GoalStr] | None = Field(default=None, max_length=100)
    decisions: list[str] | None = Field(default=None, max_length=100)
    pending: list[str] | None = Field(default=None, max_length=100)
    wake_days: int = Field(default=7, ge=1, le=365)


class TimelineArgs(CwdArgs, ShapeArgs, LinksArgs):
    action: Literal["timeline"]
    status: StatusFilter = "all"
    limit: int = Field(default=50, ge=1, le=500)
    offset: int = Field(default=0, ge=0)
