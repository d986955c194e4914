"""edge_review: the placement proposal queue (enqueue, list, apply, apply_batch, rollback, reject)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.db.models import Role
from app.mcp.registry import Action, ActionArgs, ToolSpec
from app.mcp.tools import placement_handlers
from app.mcp.tools.common import COMMON_FIELD_DOCS, DESTRUCTIVE, ConfirmArgs, CwdArgs, IdStr

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


SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Placement proposal queue. enqueue {thought_id (active), max_proposals?}; list {status?, kind?, "
        "include_retired?, limit?, offset?, cwd?}; reject {proposal_id}. Preview-first, then "
        "confirm=true+preview_token: apply {proposal_id}; apply_batch {proposal_ids}; rollback {run_id} "
        "reverts an apply run."
    ),
    actions=(
        Action("enqueue", EnqueueArgs, placement_handlers.enqueue, Role.writer),
        Action("list", ListArgs, placement_handlers.list_proposals, Role.reader),
        Action("apply", ApplyArgs, placement_handlers.apply, Role.writer),
        Action("apply_batch", ApplyBatchArgs, placement_handlers.apply_batch, Role.writer),
        Action("rollback", RollbackArgs, placement_handlers.rollback, Role.writer),
        Action("reject", RejectArgs, placement_handlers.reject, Role.writer),
    ),
    annotations=DESTRUCTIVE,
    retired={"project_id": "project_id was removed; use cwd"},
    retired_per_action={"enqueue": {"max_items": "max_items was removed; use max_proposals"}},
    field_docs={
        **COMMON_FIELD_DOCS,
        "cwd": "enqueue: project of the proposals; list: scope (omit = every project)",
        "max_proposals": "most proposals to queue",
        "include_retired": "also show the retired triage kinds",
        "run_id": "apply run to revert (from apply/apply_batch)",
    },
)
