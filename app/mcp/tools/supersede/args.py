"""memory_supersede argument models: archive, archive_batch, merge."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.mcp.tools.common import ConfirmArgs, CwdStr, IdList, IdStr, TagList, TextStr

TOOL = "memory_supersede"


class ArchiveArgs(ConfirmArgs):
    action: Literal["archive"]
    thought_id: IdStr = Field(description="thought to archive")


class ArchiveBatchArgs(ConfirmArgs):
    action: Literal["archive_batch"]
    thought_ids: IdList = Field(description="thoughts to archive")


class MergeArgs(ConfirmArgs):
    action: Literal["merge"]
    source_id: IdStr = Field(description="thought merged away")
    target_id: IdStr = Field(description="surviving thought")
    merged_content: TextStr | None = Field(default=None, description="new content of the target")
    merged_tags: TagList | None = Field(default=None, description="new tag set of the target")
    cwd: CwdStr | None = Field(default=None, description="result's project (default: target's)")
