"""memory_manage argument models: list, create, update, delete, resolve."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from app.mcp.arguments import ActionArgs
from app.mcp.tools.common import ConfirmArgs, CwdStr, IdStr

TOOL = "memory_manage"
NameStr = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"\S")]
PathStr = Annotated[str, StringConstraints(max_length=512)]  # ≤ 2 kB of UTF-8: fits the unique index
DescriptionStr = Annotated[str, StringConstraints(max_length=2000)]
NAME = "project name (unique)"
LOCAL_PATH = "project root path"
DESCRIPTION = "what the project is"
PROJECT_ID = "project id"


class ListArgs(ActionArgs):
    action: Literal["list"]
    fields: list[Annotated[str, StringConstraints(max_length=64)]] | None = Field(
        default=None, max_length=16, description="only these project fields"
    )


class CreateArgs(ActionArgs):
    action: Literal["create"]
    name: NameStr = Field(description=NAME)
    local_path: PathStr | None = Field(default=None, description=LOCAL_PATH)
    description: DescriptionStr | None = Field(default=None, description=DESCRIPTION)


class UpdateArgs(ActionArgs):
    action: Literal["update"]
    project_id: IdStr = Field(description=PROJECT_ID)
    name: NameStr | None = Field(default=None, description=NAME)
    local_path: PathStr | None = Field(default=None, description=LOCAL_PATH)
    description: DescriptionStr | None = Field(default=None, description=DESCRIPTION)


class DeleteArgs(ConfirmArgs):
    action: Literal["delete"]
    project_id: IdStr = Field(description=PROJECT_ID)


class ResolveArgs(ActionArgs):
    action: Literal["resolve"]
    cwd: CwdStr | None = Field(default=None, description="path to resolve")
