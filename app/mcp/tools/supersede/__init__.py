"""memory_supersede: archive, archive_batch, merge (all preview-first)."""

from __future__ import annotations

from app.db.models import Role
from app.mcp.registry import Action, ToolSpec
from app.mcp.tools.common import COMMON_FIELD_DOCS, DESTRUCTIVE
from app.mcp.tools.supersede import handlers
from app.mcp.tools.supersede.args import (
    TOOL,
    ArchiveArgs,
    ArchiveBatchArgs,
    MergeArgs,
)

SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Archive and merge thoughts; every action previews, then confirm=true+preview_token executes. "
        "archive {thought_id}; archive_batch {thought_ids (1–1000)}; merge {source_id, target_id, "
        "merged_content?, merged_tags?, cwd?}: source's edges move to target, source is archived."
    ),
    actions=(
        Action("archive", ArchiveArgs, handlers.archive, Role.writer),
        Action("archive_batch", ArchiveBatchArgs, handlers.archive_batch, Role.writer),
        Action("merge", MergeArgs, handlers.merge, Role.writer),
    ),
    annotations=DESTRUCTIVE,
    retired={"project_id": "project_id was removed; use cwd"},
    field_docs={
        **COMMON_FIELD_DOCS,
        "cwd": "merge only: project of the result (default: the target's)",
        "source_id": "thought merged away (archived)",
        "target_id": "thought that survives and receives the edges",
        "merged_content": "new content of the target",
        "merged_tags": "new tag set of the target",
    },
)
