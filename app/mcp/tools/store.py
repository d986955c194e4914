"""memory_store: create, update, bulk_create, and the edge writers."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from app.db.models import EdgeType, Role
from app.db.repositories.projects import ProjectRepository
from app.errors import AppError, bad_request
from app.mcp.envelope import Meta, collection, single
from app.mcp.registry import Action, ActionArgs, CallContext, ToolAnswer, ToolSpec
from app.mcp.shaping import ThoughtShaper
from app.mcp.tools import store_edges
from app.mcp.tools.common import (
    COMMON_FIELD_DOCS,
    DESTRUCTIVE,
    ConfirmArgs,
    CwdArgs,
    IdStr,
    TagStr,
    uuid_arg,
)
from app.services.context import Limits
from app.services.scope import normalize_path, resolve_write_project, scope_of
from app.services.store import (
    EMBED_INSERT_CHUNK,
    NewThought,
    StoreService,
    check_content,
    check_status,
    normalize_tags,
    parse_parent,
)

logger = logging.getLogger(__name__)

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


def to_new_thought(row: ThoughtInput, limits: Limits, prefix: str = "") -> NewThought:
    """Checks that need our limits (pydantic already checked shapes); raises AppError naming the argument."""
    return NewThought(
        content=check_content(row.content, limits.content_hard, f"{prefix}content"),
        tags=normalize_tags(row.tags, f"{prefix}tags"),
        status=check_status(row.status, f"{prefix}status"),
        is_protected=row.is_protected,
        is_global=row.is_global,
        parent_id=parse_parent(row.parent_id),
        url_links=[(link.text.strip(), link.url) for link in row.url_links or []],
    )


def soft_limit_warnings(contents: list[str], limits: Limits) -> list[str]:
    long = [len(content) for content in contents if len(content) > limits.content_soft]
    if not long:
        return []
    logger.info("%d thought(s) over the %d-character soft limit", len(long), limits.content_soft)
    return [
        f"{len(long)} thought(s) over the {limits.content_soft}-character soft limit (longest {max(long)}); "
        "short thoughts recall better"
    ]


async def create_thought(args: CreateArgs, ctx: CallContext) -> ToolAnswer:
    row = to_new_thought(args, ctx.app.limits)
    vectors = await ctx.app.embedding.embed_passages([row.content])
    model_id = ctx.app.embedding.profile.model_id if vectors and ctx.app.embedding.profile else None
    async with ctx.app.db.unit_of_work() as session:
        project, scope = await resolve_write_project(ProjectRepository(session), args.cwd)
        [outcome] = await StoreService(session, ctx.principal).create_many(project, [row], vectors, model_id)
        if outcome.error is not None:
            raise outcome.error
    assert outcome.thought is not None
    meta = Meta("create", scope=scope, warnings=soft_limit_warnings([row.content], ctx.app.limits))
    return ToolAnswer(single(meta, ThoughtShaper(compact=False)(outcome.thought)))


async def update_thought(args: UpdateArgs, ctx: CallContext) -> ToolAnswer:
    thought_id = uuid_arg(args.thought_id, "thought_id")
    # null means "not given" (a NOT NULL column must not become NULL), except surface_after, where it clears
    changes = {
        name: value
        for name, value in args.model_dump(exclude={"action", "thought_id"}, exclude_unset=True).items()
        if value is not None or name == "surface_after"
    }
    if not set(changes) - {"tags_mode"}:
        raise bad_request(
            "memory_store action=update needs at least one field to change: content, tags (with tags_mode), "
            "status, cwd, is_protected, is_global or surface_after"
        )
    if "status" in changes:
        check_status(changes["status"])
    vector, model_id = None, None
    if "content" in changes:
        check_content(changes["content"], ctx.app.limits.content_hard)
        vectors = await ctx.app.embedding.embed_passages([changes["content"]])
        if vectors and ctx.app.embedding.profile:
            vector, model_id = vectors[0], ctx.app.embedding.profile.model_id
    scope: dict[str, Any] | None = None
    async with ctx.app.db.unit_of_work() as session:
        thought = await StoreService(session, ctx.principal).update(thought_id, changes, vector, model_id)
        path = normalize_path(changes.get("cwd") or "")
        target = await ProjectRepository(session).find_for_path(path) if path else None
        if target is not None:  # a registered cwd: the thought now lives there, say so like create does
            scope = scope_of(target)
    warnings = soft_limit_warnings([changes["content"]], ctx.app.limits) if "content" in changes else []
    meta = Meta("update", scope=scope, warnings=warnings)
    return ToolAnswer(single(meta, ThoughtShaper(compact=False)(thought)))


def _bulk_row(raw: dict[str, Any], index: int, limits: Limits) -> NewThought | AppError:
    prefix = f"thoughts[{index}]."
    try:
        return to_new_thought(ThoughtInput.model_validate(raw), limits, prefix)
    except ValidationError as error:
        first = error.errors()[0]
        name = ".".join(str(part) for part in first["loc"])
        return bad_request(f"Invalid argument '{prefix}{name}': {first['msg']}")
    except AppError as error:
        return error


async def bulk_create(args: BulkCreateArgs, ctx: CallContext) -> ToolAnswer:
    rows = [_bulk_row(raw, index, ctx.app.limits) for index, raw in enumerate(args.thoughts)]
    valid = [(index, row) for index, row in enumerate(rows) if isinstance(row, NewThought)]
    vectors: list[list[float] | None] | None = None
    model_id = None
    # A small batch embeds before its transaction; a large one embeds inside it, overlapped with the inserts.
    pipelined = len(valid) > EMBED_INSERT_CHUNK
    embedded = None if pipelined or not valid else await ctx.app.embedding.embed_passages([r.content for _, r in valid])
    if embedded is not None and ctx.app.embedding.profile is not None:
        vectors = [None] * len(rows)
        for (index, _), vector in zip(valid, embedded, strict=True):
            vectors[index] = vector
        model_id = ctx.app.embedding.profile.model_id
    async with ctx.app.db.unit_of_work() as session:
        project, scope = await resolve_write_project(ProjectRepository(session), args.cwd)
        store = StoreService(session, ctx.principal)
        outcomes = await store.create_many(project, rows, vectors, model_id, ctx.app.embedding if pipelined else None)
    shape = ThoughtShaper(compact=True)
    items = [
        {"index": o.index, "status": "created", "thought": shape(o.thought)}
        if o.thought is not None
        else {"index": o.index, "status": "failed", "error": o.error.message if o.error else "failed"}
        for o in outcomes
    ]
    failed = sum(1 for item in items if item["status"] == "failed")
    warnings = soft_limit_warnings([row.content for _, row in valid], ctx.app.limits)
    meta = Meta(
        "bulk_create",
        scope=scope,
        warnings=warnings,
        counts={"created": len(items) - failed, "failed": failed},
    )
    return ToolAnswer(collection(meta, items))


SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Write thoughts and edges. create {content, tags?, status?, parent_id?, url_links?, cwd?}; update "
        "{thought_id, …fields} (never archives: use memory_supersede); bulk_create {thoughts[1–10000]}; link "
        "{source_id, target_id, edge_type?}; link_batch {links[{source, target, type?}]}; unlink {edge_id}; "
        "unlink_batch {edge_ids}; retype {edge_id, new_type}. unlink/retype preview first."
    ),
    actions=(
        Action("create", CreateArgs, create_thought, Role.writer),
        Action("update", UpdateArgs, update_thought, Role.writer),
        Action("link", LinkArgs, store_edges.link, Role.writer),
        Action("link_batch", LinkBatchArgs, store_edges.link_batch, Role.writer),
        Action("unlink", UnlinkArgs, store_edges.unlink, Role.writer),
        Action("unlink_batch", UnlinkBatchArgs, store_edges.unlink_batch, Role.writer),
        Action("retype", RetypeArgs, store_edges.retype, Role.writer),
        Action("bulk_create", BulkCreateArgs, bulk_create, Role.writer),
    ),
    annotations=DESTRUCTIVE,
    retired={
        "is_profile": "is_profile was removed and has no replacement; remove the field from requests",
        "project_id": "project_id was removed; use cwd",
    },
    retired_per_action={"link": {"thought_id": "thought_id was removed for link; use source_id"}},
    field_docs={
        **COMMON_FIELD_DOCS,
        "status": "draft|active (archiving is memory_supersede)",
        "tags_mode": "replace (default)|add|remove",
        "parent_id": "creates a parent edge parent → this thought",
        "url_links": "[{text, url}] http(s) links",
        "surface_after": "ISO time before which a draft stays hidden from the frontier",
        "edge_type": "edge type, default related",
        "thoughts": "[{content, tags?, status?, is_protected?, is_global?, parent_id?, url_links?}]",
    },
)
