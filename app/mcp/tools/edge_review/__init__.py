"""edge_review: the placement proposal queue (enqueue, list, apply, apply_batch, rollback, reject)."""

from __future__ import annotations

from app.mcp.registry import Action, ToolSpec
from app.mcp.tools.common import DESTRUCTIVE
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
from app.services.values import Role

SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Placement proposal queue. enqueue {thought_id}; list; reject {proposal_id}; previewed first: apply "
        "{proposal_id}, apply_batch {proposal_ids}, rollback {run_id}."
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
)
