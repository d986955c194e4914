"""memory_guide: the in-band quick map (raw text)."""

from __future__ import annotations

from mcp_types import ToolAnnotations

from app.mcp.registry import Action, ToolSpec
from app.mcp.tools.guide import handlers
from app.mcp.tools.guide.args import TOOL, GuideArgs

SPEC = ToolSpec(
    name=TOOL,
    description="Map of every tool, action and answer convention. No arguments.",
    actions=(Action("", GuideArgs, handlers.guide),),
    annotations=ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    ),
)
