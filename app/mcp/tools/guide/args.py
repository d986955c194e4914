"""memory_guide argument model: no arguments."""

from __future__ import annotations

from app.mcp.arguments import ActionArgs

TOOL = "memory_guide"


class GuideArgs(ActionArgs):
    pass
