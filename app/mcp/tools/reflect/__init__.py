"""memory_reflect: reflect (writes slots and thoughts), timeline (paged thought list)."""

from __future__ import annotations

from app.mcp.registry import Action, ToolSpec
from app.mcp.tools.common import WRITES
from app.mcp.tools.reflect import handlers
from app.mcp.tools.reflect.args import TOOL, ReflectArgs, TimelineArgs
from app.services.values import Role

SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Session reflection. reflect {summary|goals_add|goals_remove|decisions|pending} writes slots and "
        "thoughts; timeline pages thoughts."
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
)
