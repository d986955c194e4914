"""memory_status argument models: slots, frontier, config, health, propose."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.mcp.arguments import ActionArgs
from app.mcp.tools.common import CwdArgs, IdStr, ShapeArgs, TextStr

TOOL = "memory_status"


class SlotsArgs(CwdArgs):
    action: Literal["slots"]
    slots_limit: int | None = Field(default=None, ge=1, le=500, description="pending_items page size")
    offset: int = Field(default=0, ge=0, description="pending_items rows to skip")


class FrontierArgs(CwdArgs, ShapeArgs):
    action: Literal["frontier"]
    limit: int = Field(default=10, ge=1, le=50, description="frontier entries")


class ConfigArgs(ActionArgs):
    action: Literal["config"]


class HealthArgs(ActionArgs):
    action: Literal["health"]
    include_details: bool = Field(default=False, description="per-check detail arrays")
    severity: Literal["critical", "warning", "info"] | None = Field(default=None, description="minimum severity")


class ProposeArgs(CwdArgs, ShapeArgs):
    action: Literal["propose"]
    thought_id: IdStr | None = Field(default=None, description="thought to place")
    # a size guard only: the handler holds content to the configured hard limit (content.hard_limit)
    content: TextStr | None = Field(default=None, description="draft text to place")
    include_signals: bool = Field(default=False, description="every edge with its signals")
    max_edges: int | None = Field(default=None, ge=1, le=100, description="planned edges to show (slim: 3)")
