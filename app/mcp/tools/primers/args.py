"""memory_primers argument models: list, delete."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.mcp.arguments import ActionArgs
from app.mcp.tools.common import ConfirmArgs, IdStr

TOOL = "memory_primers"


class ListArgs(ActionArgs):
    action: Literal["list"]


class DeleteArgs(ConfirmArgs):
    action: Literal["delete"]
    primer_id: IdStr = Field(description="primer id")
