"""edge_review handlers: the placement proposal queue."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.errors import AppError, ErrorKind, not_found
from app.formats import iso
from app.mcp.calls import CallContext, ToolAnswer
from app.mcp.confirm import ConfirmFlow, Preview
from app.mcp.envelope import Meta, collection, single
from app.mcp.tools.common import uuid_arg
from app.mcp.tools.edge_review.args import (
    ApplyArgs,
    ApplyBatchArgs,
    EnqueueArgs,
    ListArgs,
    RejectArgs,
    RollbackArgs,
)
from app.services.review import operations as review_operations
from app.services.review.proposals import Proposal, ProposalService


def shape_proposal(proposal: Proposal) -> dict[str, Any]:
    return {
        "id": str(proposal.id),
        "kind": proposal.kind,
        "status": proposal.status.value,
        "source_id": str(proposal.source_id),
        "target_id": str(proposal.target_id) if proposal.target_id else None,
        "edge_type": proposal.edge_type.value if proposal.edge_type else None,
        "confidence": proposal.confidence,
        "rationale": proposal.rationale,
        "project_id": str(proposal.project_id),
        "run_id": str(proposal.run_id) if proposal.run_id else None,
        "created_at": iso(proposal.created_at),
        "expires_at": iso(proposal.expires_at),
        "applied_at": iso(proposal.applied_at),
    }


async def enqueue(args: EnqueueArgs, ctx: CallContext) -> ToolAnswer:
    thought_id = uuid_arg(args.thought_id, "thought_id")
    queued = await review_operations.enqueue(ctx.app, ctx.principal, thought_id, args.cwd, args.max_proposals)
    item = {
        "thought_id": str(thought_id),
        "proposal_ids": [str(p) for p in queued.created],
        "degraded": queued.plan.degraded,
    }
    counts = {"proposals": len(queued.created), "skipped": queued.skipped}
    meta = Meta("enqueue", degraded=queued.plan.degraded, counts=counts)
    return ToolAnswer(single(meta, item))


async def list_proposals(args: ListArgs, ctx: CallContext) -> ToolAnswer:
    page = await review_operations.queue_page(
        ctx.app,
        ctx.principal,
        args.cwd,
        args.status,
        args.kind,
        args.include_retired,
        args.limit,
        args.offset,
    )
    counts = {"retired_count": page.retired, "all_total": page.all_total}
    meta = Meta("list", scope=page.scope.scope, warnings=page.scope.warnings, counts=counts)
    return ToolAnswer(collection(meta, [shape_proposal(row) for row in page.rows], total=page.total))


# ---------------------------------------------------------------- apply, apply_batch, rollback (preview → confirm)


async def _proposal_id(args: ApplyArgs, ctx: CallContext) -> uuid.UUID:
    return uuid_arg(args.proposal_id, "proposal_id")


async def _plan_apply(args: ApplyArgs, ctx: CallContext, session: AsyncSession, proposal_id: uuid.UUID) -> Preview:
    service = ProposalService(session, ctx.principal)
    proposal = await service.get_to_apply(proposal_id)
    current = proposal.fingerprint == await service.fingerprint(proposal.source_id, proposal.target_id)
    item = {
        "status": "dry_run",
        "proposal_id": str(proposal_id),
        "proposal": shape_proposal(proposal),
        "would": service.describe(proposal),
        "current": current and proposal.status.value == "pending",
    }
    return Preview(Meta("apply"), item)


async def _apply(args: ApplyArgs, ctx: CallContext, session: AsyncSession, proposal_id: uuid.UUID) -> ToolAnswer:
    report = await ProposalService(session, ctx.principal).apply(proposal_id, uuid.uuid4())
    return ToolAnswer(single(Meta("apply"), report))


apply = ConfirmFlow(prepare=_proposal_id, plan=_plan_apply, execute=_apply)


async def _proposal_ids(args: ApplyBatchArgs, ctx: CallContext) -> list[uuid.UUID]:
    return [uuid_arg(value, f"proposal_ids[{index}]") for index, value in enumerate(args.proposal_ids)]


async def _plan_apply_batch(
    args: ApplyBatchArgs, ctx: CallContext, session: AsyncSession, ids: list[uuid.UUID]
) -> Preview:
    service = ProposalService(session, ctx.principal)
    rows = []
    for proposal_id in dict.fromkeys(ids):
        try:
            proposal = await service.get_to_apply(proposal_id)
            rows.append(
                {
                    "proposal_id": str(proposal_id),
                    "status": "dry_run",
                    "would": service.describe(proposal),
                }
            )
        except AppError as error:
            if error.kind is ErrorKind.forbidden:
                raise
            rows.append({"proposal_id": str(proposal_id), "status": "failed", "reason": error.message})
    return Preview(Meta("apply_batch", counts=_status_counts(rows)), items=rows)


async def _apply_batch(
    args: ApplyBatchArgs, ctx: CallContext, session: AsyncSession, ids: list[uuid.UUID]
) -> ToolAnswer:
    service = ProposalService(session, ctx.principal)
    run_id = uuid.uuid4()
    rows = []
    for proposal_id in dict.fromkeys(ids):
        try:
            rows.append(await service.apply(proposal_id, run_id))
        except AppError as error:  # a missing proposal fails its row, not the run
            if error.kind is ErrorKind.forbidden:  # a role refusal refuses the call: nothing is written
                raise
            rows.append({"proposal_id": str(proposal_id), "status": "failed", "reason": error.message})
        # Anything else (a deadlock, a lost connection) aborted the transaction: it fails the whole call,
        # since a caught database error would let the commit roll back rows reported as applied.
    counts = _status_counts(rows)
    warnings = [] if counts.get("accepted") else ["no proposal of this batch was applied"]
    return ToolAnswer(collection(Meta("apply_batch", counts=counts, warnings=warnings), rows))


apply_batch = ConfirmFlow(prepare=_proposal_ids, plan=_plan_apply_batch, execute=_apply_batch)


def _status_counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    counts = dict(Counter(row["status"] for row in rows))
    counts.setdefault("failed", 0)
    return counts


async def _run_id(args: RollbackArgs, ctx: CallContext) -> uuid.UUID:
    return uuid_arg(args.run_id, "run_id")


async def _rollback_rows(
    args: RollbackArgs, ctx: CallContext, session: AsyncSession, run_id: uuid.UUID
) -> tuple[Meta, list[dict[str, Any]]]:
    """The preview and the execution walk the same rows; only `confirm` tells them apart."""
    service = ProposalService(session, ctx.principal)
    proposals = await service.run_rows(run_id)
    if not proposals:
        raise not_found(f"No accepted proposal carries run_id {run_id}")
    rows = [await service.rollback(proposal, args.confirm) for proposal in proposals]
    counts = {
        "reverted": sum(1 for row in rows if row["status"] in ("reverted", "would_revert")),
        "skipped": sum(1 for row in rows if row["status"] == "skipped"),
        "refused": sum(1 for row in rows if row["status"] == "refused"),
    }
    return Meta("rollback", counts=counts), rows


async def _plan_rollback(args: RollbackArgs, ctx: CallContext, session: AsyncSession, run_id: uuid.UUID) -> Preview:
    meta, rows = await _rollback_rows(args, ctx, session, run_id)
    return Preview(meta, items=rows)


async def _rollback(args: RollbackArgs, ctx: CallContext, session: AsyncSession, run_id: uuid.UUID) -> ToolAnswer:
    meta, rows = await _rollback_rows(args, ctx, session, run_id)
    return ToolAnswer(collection(meta, rows))


rollback = ConfirmFlow(prepare=_run_id, plan=_plan_rollback, execute=_rollback)


async def reject(args: RejectArgs, ctx: CallContext) -> ToolAnswer:
    return rejected_answer(await review_operations.reject(ctx.app, ctx.principal, args.proposal_id))


def rejected_answer(report: dict[str, Any]) -> ToolAnswer:
    """reject's answer (and the console's outcome page of a reject, app/http/ui/review.py)."""
    return ToolAnswer(single(Meta("reject"), report))
