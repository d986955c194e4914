"""memory_reflect: reflect (writes slots and thoughts), timeline (paged thought list)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.db.models import Role
from app.mcp.registry import Action, ToolSpec
from app.mcp.tools.common import COMMON_FIELD_DOCS, WRITES, CwdArgs, LinksArgs, ShapeArgs, not_implemented

TOOL = "memory_reflect"
StatusFilter = Literal["draft", "active", "archived", "all"]


class ReflectArgs(CwdArgs):
    action: Literal["reflect"]
    summary: str | None = None
    goals_add: list[str] | None = None
    goals_remove: list[str] | None = None
    decisions: list[str] | None = None
    pending: list[str] | None = None
    wake_days: int = Field(default=7, ge=1, le=365)


class TimelineArgs(CwdArgs, ShapeArgs, LinksArgs):
    action: Literal["timeline"]
    status: StatusFilter = "all"
    limit: int = Field(default=50, ge=1, le=500)
    offset: int = Field(default=0, ge=0)


SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Session reflection; cwd scopes both. reflect (writes): summary → project_context slot, "
        "goals_add/goals_remove → active_goals, decisions → active thoughts, pending → drafts that surface "
        "after wake_days (default 7). timeline {status?, limit 1–500, offset?} pages thoughts."
    ),
    actions=(
        Action("reflect", ReflectArgs, not_implemented(TOOL, "reflect"), Role.writer),
        Action("timeline", TimelineArgs, not_implemented(TOOL, "timeline"), Role.reader),
    ),
    annotations=WRITES,
    retired={
        "goals_delta": "goals_delta was removed; use goals_add / goals_remove",
        "project_id": "project_id was removed; use cwd",
    },
    field_docs={
        **COMMON_FIELD_DOCS,
        "cwd": "working directory: scope (timeline) or target project (reflect)",
        "goals_remove": "drop goal lines containing any of these (case-insensitive)",
        "status": "draft, active, archived or all",
    },
)
