"""memory_guide: the in-band quick map (raw text)."""

from __future__ import annotations

from importlib import resources

from mcp_types import ToolAnnotations

from app.mcp.registry import Action, ActionArgs, CallContext, ToolAnswer, ToolSpec

GUIDE_TEXT = resources.files("app.mcp").joinpath("guide.md").read_text(encoding="utf-8")


class GuideArgs(ActionArgs):
    pass


async def guide(args: GuideArgs, ctx: CallContext) -> ToolAnswer:
    return ToolAnswer({"text": GUIDE_TEXT}, raw_text=GUIDE_TEXT)


SPEC = ToolSpec(
    name="memory_guide",
    description="Quick map of every SynaptoMind tool and action, with the answer conventions. No arguments.",
    actions=(Action("", GuideArgs, guide),),
    annotations=ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    ),
)
