"""memory_reflect argument models: reflect, timeline."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from app.mcp.tools.common import CwdArgs, LinksArgs, ShapeArgs, TextStr

TOOL = "memory_reflect"
GoalStr = Annotated[str, StringConstraints(max_length=500)]
StatusFilter = Literal["draft", "active", "archived", "all"]


class ReflectArgs(CwdArgs):
    action: Literal["reflect"]
    summary: Annotated[str, StringConstraints(max_length=2000)] | None = Field(
        default=None, description="→ the project_context slot"
    )
    goals_add: list[GoalStr] | None = Field(default=None, max_length=100, description="→ active_goals")
    goals_remove: list[GoalStr] | None = Field(
        default=None, max_length=100, description="drop goals containing any of these"
    )
    decisions: list[TextStr] | None = Field(default=None, max_length=100, description="→ active thoughts")
    pending: list[TextStr] | None = Field(
        default=None, max_length=100, description="→ drafts surfacing after wake_days"
    )
    wake_days: int = Field(default=7, ge=1, le=365, description="days until pending surfaces")


class TimelineArgs(CwdArgs, ShapeArgs, LinksArgs):
    action: Literal["timeline"]
    status: StatusFilter = Field(default="all", description="thought status")
    limit: int = Field(default=50, ge=1, le=500, description="page size")
    offset: int = Field(default=0, ge=0, description="rows to skip")
