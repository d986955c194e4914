"""memory_status: slots, frontier, config, health, propose (all read-only)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from app.db.models import Role
from app.mcp.registry import Action, ActionArgs, ToolSpec
from app.mcp.tools import placement_handlers, status_handlers
from app.mcp.tools.common import COMMON_FIELD_DOCS, READ_ONLY, CwdArgs, IdStr, ShapeArgs

TOOL = "memory_status"


class SlotsArgs(CwdArgs):
    action: Literal["slots"]
    slots_limit: int | None = Field(default=None, ge=1, le=500)
    offset: int = Field(default=0, ge=0)


class FrontierArgs(CwdArgs, ShapeArgs):
    action: Literal["frontier"]
    limit: int = Field(default=10, ge=1, le=50)


class ConfigArgs(ActionArgs):
    action: Literal["config"]


class HealthArgs(ActionArgs):
    action: Literal["health"]
    include_details: bool = False
    severity: Literal["critical", "warning", "info"] | None = None


class ProposeArgs(CwdArgs, ShapeArgs):
    action: Literal["propose"]
    thought_id: IdStr | None = None
    content: Annotated[str, StringConstraints(max_length=720)] | None = None
    include_signals: bool = False
    max_edges: int | None = Field(default=None, ge=1, le=100)


SPEC = ToolSpec(
    name=TOOL,
    description=(
        "System state, read-only. slots {cwd?, slots_limit?, offset?}; frontier {cwd?, limit 1–50} "
        "→ what to do next; config → settings text; health {include_details?, severity?}; "
        "propose {thought_id | content, cwd?, include_signals?, max_edges?} → placement plan "
        "(slim unless compact=false), pinned to one project."
    ),
    actions=(
        Action("slots", SlotsArgs, status_handlers.slots, Role.reader),
        Action("frontier", FrontierArgs, status_handlers.frontier, Role.reader),
        Action("config", ConfigArgs, status_handlers.config, Role.reader),
        Action("health", HealthArgs, status_handlers.health, Role.reader),
        Action("propose", ProposeArgs, placement_handlers.propose, Role.reader),
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
