"""edge_review: the placement proposal queue (enqueue, list, apply, apply_batch, rollback, reject)."""

from __future__ import annotations

from app.db.models import Role
from app.mcp.registry import Action, ToolSpec
from app.mcp.tools.common import COMMON_FIELD_DOCS, DESTRUCTIVE
from app.mcp.tools.edge_review import handlers
from app.mcp.tools.edge_review.args import (
    TOOL,
    ApplyArgs,
    ApplyBatchArgs,
    EnqueueArgs,
    ListArgs,
    RejectArgs,
    RollbackArgs,
)

SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Placement proposal queue. enqueue {thought_id (active), max_proposals?}; list {status?, kind?, "
        "include_retired?, limit?, offset?, cwd?}; reject {proposal_id}. Preview-first, then "
        "confirm=true+preview_token: apply {proposal_id}; apply_batch {proposal_ids}; rollback {run_id} "
        "reverts an apply run."
    ),
    actions=(
        Action("enqueue", EnqueueArgs, handlers.enqueue, Role.writer),
        Action("list", ListArgs, handlers.list_proposals, Role.reader),
        Action("apply", ApplyArgs, handlers.apply, Role.writer),
        Action("apply_batch", ApplyBatchArgs, handlers.apply_batch, Role.writer),
        Action("rollback", RollbackArgs, handlers.rollback, Role.writer),
        Action("reject", RejectArgs, handlers.reject, Role.writer),
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
