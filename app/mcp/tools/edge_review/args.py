"""edge_review argument models: enqueue, list, apply, apply_batch, rollback, reject."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.mcp.registry import ActionArgs
from app.mcp.tools.common import ConfirmArgs, CwdArgs, IdStr

TOOL = "edge_review"
ProposalStatusName = Literal["pending", "accepted", "rejected", "expired", "stale", "rolled_back"]
ProposalKind = Literal["edge", "placement", "lifecycle", "triage_activate", "triage_archive"]


class EnqueueArgs(CwdArgs):
    action: Literal["enqueue"]
    thought_id: IdStr
    max_proposals: int = Field(default=20, ge=1, le=100)


class ListArgs(CwdArgs):
    action: Literal["list"]
    status: ProposalStatusName | None = None
    kind: ProposalKind | None = None
    include_retired: bool = False
    limit: int = Field(default=50, ge=1, le=500)
    offset: int = Field(default=0, ge=0)


class ApplyArgs(ConfirmArgs):
    action: Literal["apply"]
    proposal_id: IdStr


class ApplyBatchArgs(ConfirmArgs):
    action: Literal["apply_batch"]
    proposal_ids: list[IdStr] = Field(min_length=1, max_length=500)


class RollbackArgs(ConfirmArgs):
    action: Literal["rollback"]
    run_id: IdStr


class RejectArgs(ActionArgs):
    action: Literal["reject"]
    proposal_id: IdStr
