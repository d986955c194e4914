"""memory_supersede: archive, archive_batch, merge (all preview-first)."""

from __future__ import annotations

from app.mcp.registry import Action, ToolSpec
from app.mcp.tools.common import DESTRUCTIVE
from app.mcp.tools.supersede import handlers
from app.mcp.tools.supersede.args import (
    TOOL,
    ArchiveArgs,
    ArchiveBatchArgs,
    MergeArgs,
)
from app.services.values import Role

SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Archive and merge thoughts, each previewed first. archive {thought_id}; archive_batch {thought_ids}; "
        "merge {source_id, target_id}: edges move to the target, the source is archived."
    ),
    actions=(
        Action("archive", ArchiveArgs, handlers.archive, Role.writer),
        Action("archive_batch", ArchiveBatchArgs, handlers.archive_batch, Role.writer),
        Action("merge", MergeArgs, handlers.merge, Role.writer),
    ),
    annotations=DESTRUCTIVE,
    retired={"project_id": "project_id was removed; use cwd"},
)
