"""memory_store argument models: create, update, bulk_create and the edge writers."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, WithJsonSchema

from app.mcp.arguments import ActionArgs, ArgumentModel
from app.mcp.tools.common import (
    CONFIRM,
    MAX_BATCH,
    ConfirmArgs,
    CwdArgs,
    EdgeTypeArg,
    IdList,
    IdStr,
    Moment,
    TagList,
    TextStr,
)
from app.services.values import EdgeType

TOOL = "memory_store"
UrlStr = Annotated[str, StringConstraints(min_length=1, max_length=2048, pattern=r"^[Hh][Tt][Tt][Pp][Ss]?://\S+$")]
Status = Literal["draft", "active", "archived"]


TAGS = "tags"
EDGE_ID = "edge id"


class UrlLinkInput(ArgumentModel):
    text: Annotated[str, StringConstraints(min_length=1, max_length=500, pattern=r"\S")]
    url: UrlStr


class ThoughtInput(ArgumentModel):
    """One thought to create (create's own arguments, and a bulk_create row)."""

    content: TextStr = Field(description="the thought's text")
    tags: TagList | None = Field(default=None, description=TAGS)
    status: Status | None = Field(default=None, description="not archived (memory_supersede)")
    is_protected: bool = Field(default=False, description="exempt from retention")
    is_global: bool = Field(default=False, description="visible in every project")
    parent_id: IdStr | None = Field(default=None, description="adds edge parent → this")
    url_links: list[UrlLinkInput] | None = Field(default=None, max_length=50, description="[{text, url}] http(s) links")


class CreateArgs(ThoughtInput, CwdArgs):
    action: Literal["create"]


class UpdateArgs(CwdArgs):
    action: Literal["update"]
    thought_id: IdStr = Field(description="thought to update")
    content: TextStr | None = Field(default=None, description="the thought's text")
    tags: TagList | None = Field(default=None, description=TAGS)
    tags_mode: Literal["replace", "add", "remove"] | None = Field(default=None, description="default replace")
    status: Status | None = Field(default=None, description="not archived (memory_supersede)")
    is_protected: bool | None = Field(default=None, description="exempt from retention")
    is_global: bool | None = Field(default=None, description="visible in every project")
    surface_after: Moment | None = Field(default=None, description="ISO time a draft stays hidden until")

    def given(self) -> dict[str, Any]:
        """The fields the caller set, as app.services.store.operations.update_given takes them."""
        return self.model_dump(exclude={"action", "thought_id"}, exclude_unset=True)


class BulkCreateArgs(CwdArgs):
    action: Literal["bulk_create"]
    thoughts: list[dict[str, Any]] = Field(min_length=1, max_length=10_000, description="[{content, …create's fields}]")


class LinkArgs(ActionArgs):
    action: Literal["link"]
    source_id: IdStr = Field(description="source (parent/earlier)")
    target_id: IdStr = Field(description="edge target")
    edge_type: EdgeTypeArg = Field(default=EdgeType.related, description="link: default related; link_batch: ignored")


class LinkItem(ArgumentModel):
    source: IdStr
    target: IdStr
    type: EdgeTypeArg = EdgeType.related


class LinkBatchArgs(ActionArgs):
    action: Literal["link_batch"]
    links: list[LinkItem] = Field(min_length=1, max_length=MAX_BATCH, description="[{source, target, type?}]")
    edge_type: EdgeTypeArg | None = Field(default=None, description="link: default related; link_batch: ignored")


class UnlinkArgs(ConfirmArgs):
    action: Literal["unlink"]
    edge_id: IdStr = Field(description=EDGE_ID)


class UnlinkBatchArgs(ActionArgs):
    action: Literal["unlink_batch"]
    edge_ids: IdList = Field(description="edges to remove")
    confirm: bool = Field(default=False, description=CONFIRM)


class RetypeArgs(ConfirmArgs):
    action: Literal["retype"]
    edge_id: IdStr = Field(description=EDGE_ID)
    # Its values are edge_type's, listed once in the schema (the model still refuses any other).
    new_type: Annotated[EdgeTypeArg, WithJsonSchema({"type": "string"})] = Field(description="an edge_type value")
