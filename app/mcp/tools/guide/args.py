"""memory_guide argument model: no arguments."""

from __future__ import annotations

from app.mcp.registry import ActionArgs

TOOL = "memory_guide"


class GuideArgs(ActionArgs):
    pass
