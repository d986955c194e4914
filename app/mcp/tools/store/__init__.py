"""memory_store: create, update, bulk_create, and the edge writers."""

from __future__ import annotations

from app.mcp.registry import Action, ToolSpec
from app.mcp.tools.common import DESTRUCTIVE
from app.mcp.tools.store import handlers
from app.mcp.tools.store.args import (
    TOOL,
    BulkCreateArgs,
    CreateArgs,
    LinkArgs,
    LinkBatchArgs,
    RetypeArgs,
    UnlinkArgs,
    UnlinkBatchArgs,
    UpdateArgs,
)
from app.services.values import Role

SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Write thoughts and edges. create {content}; update {thought_id} (archive: memory_supersede); bulk_create "
        "{thoughts}; link {source_id, target_id}; link_batch {links}; unlink {edge_id}; unlink_batch {edge_ids}; "
        "retype {edge_id, new_type}. unlink, unlink_batch and retype preview first."
    ),
    actions=(
        Action("create", CreateArgs, handlers.create_thought, Role.writer),
        Action("update", UpdateArgs, handlers.update_thought, Role.writer),
        Action("link", LinkArgs, handlers.link, Role.writer),
        Action("link_batch", LinkBatchArgs, handlers.link_batch, Role.writer),
        Action("unlink", UnlinkArgs, handlers.unlink, Role.writer),
        Action("unlink_batch", UnlinkBatchArgs, handlers.unlink_batch, Role.writer),
        Action("retype", RetypeArgs, handlers.retype, Role.writer),
        Action("bulk_create", BulkCreateArgs, handlers.bulk_create, Role.writer),
    ),
    annotations=DESTRUCTIVE,
    retired={
        "is_profile": "is_profile was removed and has no replacement; remove the field from requests",
        "project_id": "project_id was removed; use cwd",
    },
    retired_per_action={"link": {"thought_id": "thought_id was removed for link; use source_id"}},
)
