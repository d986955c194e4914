"""memory_store argument models: create, update, bulk_create and the edge writers."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from app.db.models import EdgeType
from app.mcp.registry import ActionArgs
from app.mcp.tools.common import ConfirmArgs, CwdArgs, IdStr, TagStr

TOOL = "memory_store"
ContentStr = Annotated[str, StringConstraints(max_length=100_000)]
UrlStr = Annotated[str, StringConstraints(min_length=1, max_length=2048, pattern=r"^[Hh][Tt][Tt][Pp][Ss]?://\S+$")]
Status = Literal["draft", "active", "archived"]


class UrlLinkInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: Annotated[str, StringConstraints(min_length=1, max_length=500, pattern=r"\S")]
    url: UrlStr


class ThoughtInput(BaseModel):
    """One thought to create (create's own arguments, and a bulk_create row)."""

    model_config = ConfigDict(extra="forbid")
    content: ContentStr
    tags: list[TagStr] | None = Field(default=None, max_length=50)
    status: Status | None = None
    is_protected: bool = False
    is_global: bool = False
    parent_id: IdStr | None = None
    url_links: list[UrlLinkInput] | None = Field(default=None, max_length=50)


class CreateArgs(ThoughtInput, CwdArgs):
    action: Literal["create"]


class UpdateArgs(CwdArgs):
    action: Literal["update"]
    thought_id: IdStr
    content: ContentStr | None = None
    tags: list[TagStr] | None = Field(default=None, max_length=50)
    tags_mode: Literal["replace", "add", "remove"] | None = None
    status: Status | None = None
    is_protected: bool | None = None
    is_global: bool | None = None
    surface_after: datetime | None = None


class BulkCreateArgs(CwdArgs):
    action: Literal["bulk_create"]
    thoughts: list[dict[str, Any]] = Field(min_length=1, max_length=10_000)


class LinkArgs(ActionArgs):
    action: Literal["link"]
    source_id: IdStr
    target_id: IdStr
    edge_type: EdgeType = EdgeType.related


class LinkItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: IdStr
    target: IdStr
    type: EdgeType = EdgeType.related


class LinkBatchArgs(ActionArgs):
    action: Literal["link_batch"]
    links: list[LinkItem] = Field(min_length=1, max_length=1000)
    edge_type: EdgeType | None = None


class UnlinkArgs(ConfirmArgs):
    action: Literal["unlink"]
    edge_id: IdStr


class UnlinkBatchArgs(ActionArgs):
    action: Literal["unlink_batch"]
    edge_ids: list[IdStr] = Field(min_length=1, max_length=1000)
    confirm: bool = False


class RetypeArgs(ConfirmArgs):
    action: Literal["retype"]
    edge_id: IdStr
    new_type: EdgeType
