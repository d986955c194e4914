"""memory_supersede argument models: archive, archive_batch, merge."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.mcp.tools.common import ConfirmArgs, CwdStr, IdStr, TagStr

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
