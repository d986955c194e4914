"""memory_status: slots, frontier, config, health, propose (all read-only)."""

from __future__ import annotations

from app.mcp.registry import Action, ToolSpec
from app.mcp.tools.common import READ_ONLY
from app.mcp.tools.status import handlers
from app.mcp.tools.status.args import (
    TOOL,
    ConfigArgs,
    FrontierArgs,
    HealthArgs,
    ProposeArgs,
    SlotsArgs,
)
from app.services.values import Role

SPEC = ToolSpec(
    name=TOOL,
    description=(
        "System state, read-only. slots; frontier: what to do next; config; health; propose {thought_id|content}: "
        "placement plan, pinned to one project."
    ),
    actions=(
        Action("slots", SlotsArgs, handlers.slots, Role.reader),
        Action("frontier", FrontierArgs, handlers.frontier, Role.reader),
        Action("config", ConfigArgs, handlers.config, Role.reader),
        Action("health", HealthArgs, handlers.health, Role.reader),
        Action("propose", ProposeArgs, handlers.propose, Role.reader),
    ),
    annotations=READ_ONLY,
    retired={
        "k": "k was removed; use limit",
        "dry_run": "dry_run was removed; use confirm",
        "project_id": "project_id was removed; use cwd",
    },
)
