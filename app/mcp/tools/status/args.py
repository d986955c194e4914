"""memory_status argument models: slots, frontier, config, health, propose."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from app.mcp.registry import ActionArgs
from app.mcp.tools.common import CwdArgs, IdStr, ShapeArgs

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
