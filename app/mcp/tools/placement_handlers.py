"""memory_status propose and the edge_review queue actions."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.records import ProjectRecord, ThoughtRecord
from app.db.repositories.projects import ProjectRepository
from app.db.repositories.thoughts import ThoughtRepository
from app.embedding.profiles import E5_SMALL
from app.errors import AppError, bad_request, not_found
from app.formats import iso
from app.mcp.envelope import Meta, collection, preview_meta, single
from app.mcp.registry import CallContext, ToolAnswer
from app.mcp.tools.common import previewed_arguments, uuid_arg
from app.services.placement import PlacementEngine, Plan, Subject
from app.services.previews import PreviewService
from app.services.proposals import Proposal, ProposalService
from app.services.scope import (
    UNRESOLVED_SCOPE,
    normalize_path,
    resolve_read_scope,
    scope_of,
    unknown_cwd_prefix,
)

if TYPE_CHECKING:
    from app.mcp.tools.edge_review import (
        ApplyArgs,
        ApplyBatchArgs,
        EnqueueArgs,
        ListArgs,
        RejectArgs,
        RollbackArgs,
    )
    from app.mcp.tools.status import ProposeArgs

TOOL = "edge_review"
SLIM_EDGES = 3
PIN_THOUGHT = (
    "propose is not cross-project: the plan is restricted to the project the addressed thought (thought_id) belongs to"
)
PIN_DRAFT = "propose is not cross-project: the plan is restricted to the default project (draft content)"


def neighbour_threshold(ctx: CallContext) -> float:
    profile = ctx.app.embedding.profile
    if profile is None or profile.model_id == E5_SMALL:
        return 0.75
    return profile.unrelated_floor + 0.1


async def _subject(ctx: CallContext, session: AsyncSession, thought: ThoughtRecord | None, content: str) -> Subject:
    vector = None
    profile = ctx.app.embedding.profile
    if thought is not None and profile is not None and thought.embedding_model == profile.model_id:
        vector = await ctx.app.embedding.embed_passages([thought.content])
    elif profile is not None:
        vector = await ctx.app.embedding.embed_passages([content])
    return Subject(thought, content, thought.created_at if thought else None, vector[0] if vector else None)


def shape_plan(plan: Plan, full: bool, max_edges: int | None) -> dict[str, Any]:
    """Slim (top 3 edges, no signals) unless `full` (compact=false or include_signals=true: every edge, signals)."""
    limit = max_edges or (len(plan.edges) if full else SLIM_EDGES)
    edges = []
    for edge in plan.edges[:limit]:
        entry: dict[str, Any] = {
            "target_id": str(edge.target.id),
            "type": edge.type.value,
            "confidence": edge.confidence,
            "rationale": edge.rationale,
        }
        if full:
            entry["target_content"] = edge.target.content
            entry["signals"] = edge.signals
        edges.append(entry)
    return {
        "project_id": str(plan.project_id),
        "placement": plan.placement,
        "edges": edges,
        "lifecycle": plan.lifecycle,
        "degraded": plan.degraded,
    }


async def propose(args: ProposeArgs, ctx: CallContext) -> ToolAnswer:
    if (args.thought_id is None) == (args.content is None or not args.content.strip()):
        raise bad_request("memory_status action=propose needs exactly one of 'thought_id' or 'content'")
    async with ctx.app.db.unit_of_work() as session:
        projects = ProjectRepository(session)
        thought = None
        if args.thought_id is not None:
            thought = await ThoughtRepository(session).get(uuid_arg(args.thought_id, "thought_id"))
            if thought is None:
                raise not_found(f"Thought {args.thought_id} not found")
        path = normalize_path(args.cwd or "")
        resolved = await projects.find_for_path(path) if path else None
        pinned: ProjectRecord | None = resolved
        if pinned is None and thought is not None:
            pinned = await projects.get(thought.project_id)
        if pinned is None:  # no thought, or its project was deleted (its thoughts moved to the default) meanwhile
            pinned = await projects.ensure_default()
        subject = await _subject(ctx, session, thought, thought.content if thought else (args.content or ""))
        profile = ctx.app.embedding.profile
        plan = await PlacementEngine(session, neighbour_threshold(ctx)).plan(
            subject, pinned.id, profile.model_id if profile else None
        )
    clause = PIN_THOUGHT if thought is not None else PIN_DRAFT
    warnings: list[str] = []
    scope: dict[str, Any] | None = scope_of(resolved) if resolved else None
    if not path:
        warnings.append(f"no cwd — {clause}")
    elif resolved is None:
        warnings.append(f"{unknown_cwd_prefix(args.cwd or path)} — {clause}")
        scope = dict(UNRESOLVED_SCOPE)
    item = shape_plan(plan, args.compact is False or args.include_signals, args.max_edges)
    if args.fields:
        item = {key: value for key, value in item.items() if key in args.fields}
    meta = Meta("propose", scope=scope, warnings=warnings, degraded=plan.degraded)
    answer = single(meta, item)
    answer["meta"]["counts"]["total"] = len(plan.edges)
    return ToolAnswer(answer)


# ---------------------------------------------------------------- edge_review


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
    async with ctx.app.db.unit_of_work() as session:
        thought = await ThoughtRepository(session).get(thought_id)
        if thought is None:
            raise not_found(f"Thought {thought_id} not found")
        if thought.status.value != "active":
            raise bad_request(
                f"edge_review action=enqueue needs an active thought; {thought_id} is {thought.status.value}"
            )
        path = normalize_path(args.cwd or "")
        resolved = await ProjectRepository(session).find_for_path(path) if path else None
        project_id = resolved.id if resolved else thought.project_id
        subject = await _subject(ctx, session, thought, thought.content)
        profile = ctx.app.embedding.profile
        plan = await PlacementEngine(session, neighbour_threshold(ctx)).plan(
            subject, project_id, profile.model_id if profile else None
        )
        created, skipped = await ProposalService(session, ctx.principal).enqueue(thought, plan, args.max_proposals)
    item = {
        "thought_id": str(thought_id),
        "proposal_ids": [str(p) for p in created],
        "degraded": plan.degraded,
    }
    meta = Meta("enqueue", degraded=plan.degraded, counts={"proposals": len(created), "skipped": skipped})
    return ToolAnswer(single(meta, item))


async def list_proposals(args: ListArgs, ctx: CallContext) -> ToolAnswer:
    async with ctx.app.db.unit_of_work() as session:
        scope = await resolve_read_scope(ProjectRepository(session), args.cwd)
        rows, total, retired, all_total = await ProposalService(session, ctx.principal).page(
            scope.project.id if scope.project else None,
            args.status,
            args.kind,
            args.include_retired,
            args.limit,
            args.offset,
        )
    meta = Meta(
        "list", scope=scope.scope, warnings=scope.warnings, counts={"retired_count": retired, "all_total": all_total}
    )
    return ToolAnswer(collection(meta, [shape_proposal(row) for row in rows], total=total))


async def apply(args: ApplyArgs, ctx: CallContext) -> ToolAnswer:
    proposal_id = uuid_arg(args.proposal_id, "proposal_id")
    async with ctx.app.db.unit_of_work() as session:
        service = ProposalService(session, ctx.principal)
        previews = PreviewService(session, ctx.app.limits.preview_ttl_seconds)
        if args.confirm:
            await previews.redeem(ctx.principal, TOOL, "apply", previewed_arguments(args), args.preview_token)
            report = await service.apply(proposal_id, uuid.uuid4())
            return ToolAnswer(single(Meta("apply"), report))
        proposal = await service.get(proposal_id)
        current = proposal.fingerprint == await service.fingerprint(proposal.source_id, proposal.target_id)
        token = await previews.issue(ctx.principal, TOOL, "apply", previewed_arguments(args))
    item = {
        "status": "dry_run",
        "proposal_id": str(proposal_id),
        "proposal": shape_proposal(proposal),
        "would": service.describe(proposal),
        "current": current and proposal.status.value == "pending",
        "preview_token": token,
    }
    return ToolAnswer(single(Meta("apply", preview=preview_meta(token)), item))


async def apply_batch(args: ApplyBatchArgs, ctx: CallContext) -> ToolAnswer:
    ids = [uuid_arg(value, f"proposal_ids[{index}]") for index, value in enumerate(args.proposal_ids)]
    async with ctx.app.db.unit_of_work() as session:
        service = ProposalService(session, ctx.principal)
        previews = PreviewService(session, ctx.app.limits.preview_ttl_seconds)
        if args.confirm:
            await previews.redeem(ctx.principal, TOOL, "apply_batch", previewed_arguments(args), args.preview_token)
            run_id = uuid.uuid4()
            rows = []
            for proposal_id in dict.fromkeys(ids):
                try:
                    rows.append(await service.apply(proposal_id, run_id))
                except AppError as error:  # a missing proposal fails its row, not the run
                    rows.append({"proposal_id": str(proposal_id), "status": "failed", "reason": error.message})
                # Anything else (a deadlock, a lost connection) aborted the transaction: it fails the whole call,
                # since a caught database error would let the commit roll back rows reported as applied.
            counts = _status_counts(rows)
            warnings = [] if counts.get("accepted") else ["no proposal of this batch was applied"]
            return ToolAnswer(collection(Meta("apply_batch", counts=counts, warnings=warnings), rows))
        rows = []
        for proposal_id in dict.fromkeys(ids):
            try:
                proposal = await service.get(proposal_id)
                rows.append(
                    {
                        "proposal_id": str(proposal_id),
                        "status": "dry_run",
                        "would": service.describe(proposal),
                    }
                )
            except AppError as error:
                rows.append({"proposal_id": str(proposal_id), "status": "failed", "reason": error.message})
        token = await previews.issue(ctx.principal, TOOL, "apply_batch", previewed_arguments(args))
    return ToolAnswer(collection(Meta("apply_batch", counts=_status_counts(rows), preview=preview_meta(token)), rows))


def _status_counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    counts = dict(Counter(row["status"] for row in rows))
    counts.setdefault("failed", 0)
    return counts


async def rollback(args: RollbackArgs, ctx: CallContext) -> ToolAnswer:
    run_id = uuid_arg(args.run_id, "run_id")
    async with ctx.app.db.unit_of_work() as session:
        service = ProposalService(session, ctx.principal)
        previews = PreviewService(session, ctx.app.limits.preview_ttl_seconds)
        if args.confirm:
            await previews.redeem(ctx.principal, TOOL, "rollback", previewed_arguments(args), args.preview_token)
        proposals = await service.run_rows(run_id)
        if not proposals:
            raise not_found(f"No accepted proposal carries run_id {run_id}")
        rows = [await service.rollback(proposal, args.confirm) for proposal in proposals]
        token = (
            None if args.confirm else await previews.issue(ctx.principal, TOOL, "rollback", previewed_arguments(args))
        )
    counts = {
        "reverted": sum(1 for row in rows if row["status"] in ("reverted", "would_revert")),
        "skipped": sum(1 for row in rows if row["status"] == "skipped"),
        "refused": sum(1 for row in rows if row["status"] == "refused"),
    }
    preview = preview_meta(token) if token else None
    return ToolAnswer(collection(Meta("rollback", counts=counts, preview=preview), rows))


async def reject(args: RejectArgs, ctx: CallContext) -> ToolAnswer:
    proposal_id = uuid_arg(args.proposal_id, "proposal_id")
    async with ctx.app.db.unit_of_work() as session:
        report = await ProposalService(session, ctx.principal).reject(proposal_id)
    return ToolAnswer(single(Meta("reject"), report))
