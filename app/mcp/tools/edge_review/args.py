"""edge_review argument models: enqueue, list, apply, apply_batch, rollback, reject."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.mcp.arguments import ActionArgs
from app.mcp.tools.common import ConfirmArgs, CwdArgs, IdStr

TOOL = "edge_review"
PROPOSAL_ID = "proposal id"
ProposalStatusName = Literal["pending", "accepted", "rejected", "expired", "stale", "rolled_back"]
ProposalKind = Literal["edge", "placement", "lifecycle", "triage_activate", "triage_archive"]


class EnqueueArgs(CwdArgs):
    action: Literal["enqueue"]
    thought_id: IdStr = Field(description="active thought")
    max_proposals: int = Field(default=20, ge=1, le=100, description="most proposals to queue")


class ListArgs(CwdArgs):
    action: Literal["list"]
    status: ProposalStatusName | None = Field(default=None, description="proposal state")
    kind: ProposalKind | None = Field(default=None, description="proposal kind")
    include_retired: bool = Field(default=False, description="show retired triage kinds")
    limit: int = Field(default=50, ge=1, le=500, description="page size")
    offset: int = Field(default=0, ge=0, description="rows to skip")


class ApplyArgs(ConfirmArgs):
    action: Literal["apply"]
    proposal_id: IdStr = Field(description=PROPOSAL_ID)


class ApplyBatchArgs(ConfirmArgs):
    action: Literal["apply_batch"]
    proposal_ids: list[IdStr] = Field(min_length=1, max_length=500, description="proposals to apply")


class RollbackArgs(ConfirmArgs):
    action: Literal["rollback"]
    run_id: IdStr = Field(description="apply run to revert")


class RejectArgs(ActionArgs):
    action: Literal["reject"]
    proposal_id: IdStr = Field(description=PROPOSAL_ID)
