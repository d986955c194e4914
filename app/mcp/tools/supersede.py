"""memory_supersede: archive, archive_batch, merge (all preview-first)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.db.models import Role
from app.mcp.registry import Action, ToolSpec
from app.mcp.tools import supersede_handlers
from app.mcp.tools.common import (
    COMMON_FIELD_DOCS,
    DESTRUCTIVE,
    ConfirmArgs,
    CwdStr,
    IdStr,
    TagStr,
)

TOOL = "memory_supersede"


class ArchiveArgs(ConfirmArgs):
    action: Literal["archive"]
    thought_id: IdStr


class ArchiveBatchArgs(ConfirmArgs):
    action: Literal["archive_batch"]
    thought_ids: list[IdStr] = Field(min_length=1, max_length=1000)


class MergeArgs(ConfirmArgs):
    action: Literal["merge"]
    source_id: IdStr
    target_id: IdStr
    merged_content: str | None = None
    merged_tags: list[TagStr] | None = None
    cwd: CwdStr | None = None


SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Archive and merge thoughts; every action previews, then confirm=true+preview_token executes. "
        "archive {thought_id}; archive_batch {thought_ids (1–1000)}; merge {source_id, target_id, "
        "merged_content?, merged_tags?, cwd?}: source's edges move to target, source is archived."
    ),
    actions=(
        Action("archive", ArchiveArgs, supersede_handlers.archive, Role.writer),
        Action("archive_batch", ArchiveBatchArgs, supersede_handlers.archive_batch, Role.writer),
        Action("merge", MergeArgs, supersede_handlers.merge, Role.writer),
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
