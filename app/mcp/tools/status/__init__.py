"""memory_status: slots, frontier, config, health, propose (all read-only)."""

from __future__ import annotations

from app.db.models import Role
from app.mcp.registry import Action, ToolSpec
from app.mcp.tools.common import COMMON_FIELD_DOCS, READ_ONLY
from app.mcp.tools.status import handlers
from app.mcp.tools.status.args import (
    TOOL,
    ConfigArgs,
    FrontierArgs,
    HealthArgs,
    ProposeArgs,
    SlotsArgs,
)

SPEC = ToolSpec(
    name=TOOL,
    description=(
        "System state, read-only. slots {cwd?, slots_limit?, offset?}; frontier {cwd?, limit 1–50} "
        "→ what to do next; config → settings text; health {include_details?, severity?}; "
        "propose {thought_id | content, cwd?, include_signals?, max_edges?} → placement plan "
        "(slim unless compact=false), pinned to one project."
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
    field_docs={
        **COMMON_FIELD_DOCS,
        "cwd": "working directory: project scope (omit = every project; propose stays pinned)",
        "limit": "frontier entries (1–50)",
        "offset": "pending_items rows to skip",
        "slots_limit": "pending_items page size",
        "include_details": "per-check detail arrays",
        "severity": "minimum finding severity",
        "content": "propose: draft text to place",
        "max_edges": "planned edges to show (slim default 3)",
    },
)
