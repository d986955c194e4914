"""memory_manage argument models: list, create, update, delete, resolve."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from app.mcp.registry import ActionArgs
from app.mcp.tools.common import ConfirmArgs, CwdStr, IdStr

TOOL = "memory_manage"
NameStr = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"\S")]
PathStr = Annotated[str, StringConstraints(max_length=512)]  # ≤ 2 kB of UTF-8: fits the unique index
DescriptionStr = Annotated[str, StringConstraints(max_length=2000)]


class ListArgs(ActionArgs):
    action: Literal["list"]
    fields: list[Annotated[str, StringConstraints(max_length=64)]] | None = Field(default=None, max_length=16)


class CreateArgs(ActionArgs):
    action: Literal["create"]
    name: NameStr
    local_path: PathStr | None = None
    description: DescriptionStr | None = None


class UpdateArgs(ActionArgs):
    action: Literal["update"]
    project_id: IdStr
    name: NameStr | None = None
    local_path: PathStr | None = None
    description: DescriptionStr | None = None


class DeleteArgs(ConfirmArgs):
    action: Literal["delete"]
    project_id: IdStr


class ResolveArgs(ActionArgs):
    action: Literal["resolve"]
    cwd: CwdStr | None = None
