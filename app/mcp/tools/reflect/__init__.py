"""memory_reflect: reflect (writes slots and thoughts), timeline (paged thought list)."""

from __future__ import annotations

from app.db.models import Role
from app.mcp.registry import Action, ToolSpec
from app.mcp.tools.common import COMMON_FIELD_DOCS, WRITES
from app.mcp.tools.reflect import handlers
from app.mcp.tools.reflect.args import TOOL, ReflectArgs, TimelineArgs

SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Session reflection; cwd scopes both. reflect (writes): summary → project_context slot, "
        "goals_add/goals_remove → active_goals, decisions → active thoughts, pending → drafts that surface "
        "after wake_days (default 7). timeline {status?, limit 1–500, offset?} pages thoughts."
    ),
    actions=(
        Action("reflect", ReflectArgs, handlers.reflect, Role.writer),
        Action("timeline", TimelineArgs, handlers.timeline, Role.reader),
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
