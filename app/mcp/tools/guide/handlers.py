"""memory_guide handler: the in-band quick map (raw text, app/mcp/guide.md)."""

from __future__ import annotations

from importlib import resources

from app.mcp.calls import CallContext, ToolAnswer
from app.mcp.tools.guide.args import GuideArgs

GUIDE_TEXT = resources.files("app.mcp").joinpath("guide.md").read_text(encoding="utf-8")


async def guide(args: GuideArgs, ctx: CallContext) -> ToolAnswer:
    return ToolAnswer({"text": GUIDE_TEXT}, raw_text=GUIDE_TEXT)
