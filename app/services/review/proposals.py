"""The placement review queue: enqueue, list, apply (one writer per proposal), rollback, reject."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import and_, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.locks import PROPOSAL_QUEUE_SEED, hold_text_until_commit
from app.db.models import Edge, EdgeType, PlacementProposal, ProposalStatus, Thought, ThoughtStatus
from app.db.records import Principal, ThoughtRecord
from app.db.repositories.audit import AuditRepository
from app.db.repositories.thoughts import ThoughtRepository
from app.db.row_locks import lock_rows
from app.errors import AppError, ErrorKind, bad_request, not_found
from app.ids import new_id
from app.services.admin.membership import require_role, require_thought_roles
from app.services.review.placement import Plan
from app.services.store.edges import EdgeService
from app.services.supersede.service import SupersedeService

RETIRED_KINDS = ("triage_activate", "triage_archive")
PENDING_CAP = 500
PENDING_DAYS = 30
ROLLBACK_WINDOW_DAYS = 7

_COLUMNS = (
    PlacementProposal.id,
    PlacementProposal.project_id,
    PlacementProposal.source_id,
    PlacementProposal.target_id,
    PlacementProposal.kind,
    PlacementProposal.edge_type,
    PlacementProposal.status,
    PlacementProposal.confidence,
    PlacementProposal.rationale,
    PlacementProposal.payload,
    PlacementProposal.fingerprint,
    PlacementProposal.run_id,
    PlacementProposal.created_at,
    PlacementProposal.updated_at,
    PlacementProposal.applied_at,
    PlacementProposal.expires_at,
)


@dataclass(frozen=True)
class Proposal:
    id: uuid.UUID
    project_id: uuid.UUID
    source_id: uuid.UUID
    target_id: uuid.UUID | None
    kind: str
    edge_type: EdgeType | None
    status: ProposalStatus
    confidence: float | None
    rationale: str | None
    payload: dict[str, Any]
    fingerprint: str
    run_id: uuid.UUID | None
    created_at: Any
    updated_at: Any
    applied_at: Any
    expires_at: Any


def _proposal(row: Any) -> Proposal:
    return Proposal(**row._mapping)


class ProposalService:
    def __init__(self, session: AsyncSession, principal: Principal) -> None:
        self.session = session
        self.principal = principal
        self.thoughts = ThoughtRepository(session)

    # ------------------------------------------------------------ fingerprints

    async def fingerprint(self, source_id: uuid.UUID, target_id: uuid.UUID | None) -> str:
        """Both endpoints (id, updated_at, status) and the edge type between them, hashed."""
        ids = [source_id] if target_id is None else [source_id, target_id]
        rows = await self.session.execute(
            select(Thought.id, Thought.updated_at, Thought.status).where(Thought.id.in_(ids)).order_by(Thought.id)
        )
        parts = [f"{row.id}:{row.updated_at.isoformat()}:{row.status.value}" for row in rows]
        if target_id is not None:
            edge = await EdgeService(self.session, self.principal).pair_edge(source_id, target_id)
            parts.append(edge.type.value if edge else "-")
        return hashlib.sha256("|".join(parts).encode()).hexdigest()

    # ------------------------------------------------------------ enqueue

    async def enqueue(self, subject: ThoughtRecord, plan: Plan, max_proposals: int) -> tuple[list[uuid.UUID], int]:
        await require_role(self.session, [subject.project_id, plan.project_id])
        # Enqueues into one project take turns: each counts the pending rows and then fills the room left, so
        # two that counted before either committed would both fill it.
        await hold_text_until_commit(self.session, str(plan.project_id), PROPOSAL_QUEUE_SEED)
        pending = (
            await self.session.execute(
                select(func.count())
                .select_from(PlacementProposal)
                .where(
                    PlacementProposal.project_id == plan.project_id,
                    PlacementProposal.status == ProposalStatus.pending,
                )
            )
        ).scalar_one()
        room = max(0, min(max_proposals, PENDING_CAP - int(pending)))
        rows = self._rows(subject, plan)
        created: list[uuid.UUID] = []
        skipped = 0
        for values in rows:
            if len(created) >= room:
                skipped += 1
                continue
            values["fingerprint"] = await self.fingerprint(values["source_id"], values.get("target_id"))
            inserted = await self.session.execute(
                pg_insert(PlacementProposal).values(**values).on_conflict_do_nothing().returning(PlacementProposal.id)
            )
            proposal_id = inserted.scalar_one_or_none()
            if proposal_id is None:
                skipped += 1
            else:
                created.append(proposal_id)
        return created, skipped

    def _rows(self, subject: ThoughtRecord, plan: Plan) -> list[dict[str, Any]]:
        base = {
            "project_id": plan.project_id,
            "source_id": subject.id,
            "created_by": self.principal.user_id,
            "expires_at": func.now() + timedelta(days=PENDING_DAYS),
        }
        rows = [
            {
                **base,
                "id": new_id(),
                "kind": "edge",
                "target_id": edge.target.id,
                "edge_type": edge.type,
                "confidence": edge.confidence,
                "rationale": edge.rationale,
                "payload": edge.signals,
            }
            for edge in plan.edges
        ]
        placement = plan.placement
        if placement["kind"] in ("cluster", "parent"):
            target = uuid.UUID(placement.get("cluster_id") or placement["parent_id"])
            edge_type = EdgeType.cluster if placement["kind"] == "cluster" else EdgeType.parent
            rows.append(
                {
                    **base,
                    "id": new_id(),
                    "kind": "placement",
                    "target_id": target,
                    "edge_type": edge_type,
                    "rationale": placement["rationale"],
                    "payload": placement,
                }
            )
        lifecycle = plan.lifecycle
        if lifecycle["action"] in ("merge", "replaces+archive"):
            rows.append(
                {
                    **base,
                    "id": new_id(),
                    "kind": "lifecycle",
                    "target_id": uuid.UUID(lifecycle["target_id"]),
                    "edge_type": None,
                    "rationale": lifecycle["rationale"],
                    "payload": lifecycle,
                }
            )
        return rows

    # ------------------------------------------------------------ list

    async def page(
        self,
        project_id: uuid.UUID | None,
        status: str | None,
        kind: str | None,
        include_retired: bool,
        limit: int,
        offset: int,
    ) -> tuple[list[Proposal], int, int, int]:
        """(page, total matching the filters, retired rows hidden, all rows in scope whatever the filters)."""
        await self.expire_due()
        clauses = []
        if project_id is not None:
            clauses.append(PlacementProposal.project_id == project_id)
        all_total = await self._count(list(clauses))
        if status is not None:
            clauses.append(PlacementProposal.status == ProposalStatus(status))
        if kind is not None:
            clauses.append(PlacementProposal.kind == kind)
        total = await self._count(clauses)
        retired = 0 if include_retired else await self._count([*clauses, PlacementProposal.kind.in_(RETIRED_KINDS)])
        visible = clauses if include_retired else [*clauses, PlacementProposal.kind.not_in(RETIRED_KINDS)]
        statement = (
            select(*_COLUMNS)
            .where(and_(True, *visible))
            .order_by(PlacementProposal.created_at.desc(), PlacementProposal.id)
            .limit(limit)
            .offset(offset)
        )
        return [_proposal(row) for row in await self.session.execute(statement)], total, retired, all_total

    async def _count(self, clauses: list[Any]) -> int:
        statement = select(func.count()).select_from(PlacementProposal).where(and_(True, *clauses))
        return int((await self.session.execute(statement)).scalar_one())

    async def expire_due(self) -> int:
        return await expire_due_proposals(self.session)

    # ------------------------------------------------------------ apply

    async def get(self, proposal_id: uuid.UUID, lock: bool = False) -> Proposal:
        if lock:
            rows = await lock_rows(self.session, select(*_COLUMNS), PlacementProposal, [proposal_id], "update")
            row = rows[0] if rows else None
        else:
            row = (await self.session.execute(select(*_COLUMNS).where(PlacementProposal.id == proposal_id))).first()
        if row is None:
            raise not_found(f"Proposal {proposal_id} not found (list them with edge_review action=list)")
        proposal = _proposal(row)
        await require_role(self.session, [proposal.project_id])  # every caller of get applies, rejects or previews them
        return proposal

    async def get_to_apply(self, proposal_id: uuid.UUID, lock: bool = False) -> Proposal:
        """The proposal (as `get`), once the caller's role allows what applying it writes: the link's source (the
        edge lives in its project), the merge's two thoughts, the archived one. The preview checks this too, so it
        never shows as applicable what the confirm would refuse."""
        proposal = await self.get(proposal_id, lock=lock)
        await require_thought_roles(self.session, _written_thoughts(proposal))
        return proposal

    def describe(self, proposal: Proposal) -> str:
        if proposal.kind == "lifecycle":
            action = proposal.payload.get("action", "?")
            return f"{action}: {proposal.source_id} → {proposal.target_id}"
        edge_type = proposal.edge_type.value if proposal.edge_type else "?"
        if proposal.kind == "placement" and proposal.edge_type in (EdgeType.cluster, EdgeType.parent):
            return f"link {proposal.target_id} -[{edge_type}]-> {proposal.source_id}"
        return f"link {proposal.source_id} -[{edge_type}]-> {proposal.target_id}"

    async def apply(self, proposal_id: uuid.UUID, run_id: uuid.UUID) -> dict[str, Any]:
        """Apply one pending proposal through exactly one existing writer; the row changes in this transaction."""
        proposal = await self.get_to_apply(proposal_id, lock=True)  # one writer per proposal
        if proposal.status != ProposalStatus.pending:
            return {
                "proposal_id": str(proposal_id),
                "status": "refused",
                "reason": f"proposal is {proposal.status.value}",
            }
        if proposal.fingerprint != await self.fingerprint(proposal.source_id, proposal.target_id):
            await self._set_status(proposal.id, ProposalStatus.stale)
            return {
                "proposal_id": str(proposal_id),
                "status": "stale",
                "reason": "an endpoint or their edge changed",
            }
        try:
            async with self.session.begin_nested():
                undo = await self._write(proposal)
        except AppError as error:
            if error.kind is ErrorKind.forbidden:  # a role refusal refuses the call (nothing written), not a row
                raise
            return {"proposal_id": str(proposal_id), "status": "failed", "reason": error.message}
        await self.session.execute(
            update(PlacementProposal)
            .where(PlacementProposal.id == proposal.id)
            .values(
                status=ProposalStatus.accepted,
                run_id=run_id,
                applied_at=func.now(),
                updated_at=func.now(),
                payload={**proposal.payload, "undo": undo},
            )
        )
        await AuditRepository(self.session).record(
            self.principal.user_id,
            "edge_review",
            "apply",
            [proposal.id],
            proposal.project_id,
            {"run_id": str(run_id)},
        )
        return {
            "proposal_id": str(proposal_id),
            "status": "accepted",
            "run_id": str(run_id),
            "applied": self.describe(proposal),
        }

    async def _write(self, proposal: Proposal) -> dict[str, Any]:
        edges = EdgeService(self.session, self.principal)
        target = proposal.target_id
        if target is None:
            raise bad_request("proposal has no target")
        if proposal.kind == "lifecycle":
            if proposal.payload.get("action") == "merge":
                supersede = SupersedeService(self.session, self.principal)
                await supersede.merge(await supersede.merge_plan(proposal.source_id, target, lock=True), {})
                return {"kind": "merge"}
            thought = await self.thoughts.get(target)
            await SupersedeService(self.session, self.principal).archive(target)
            return {
                "kind": "archive",
                "thought_id": str(target),
                "previous_status": thought.status.value if thought else None,
            }
        edge_type = proposal.edge_type or EdgeType.related
        before = await edges.pair_edge(proposal.source_id, target)
        if proposal.kind == "placement":
            result = await edges.link(target, proposal.source_id, edge_type)
        else:
            result = await edges.link(proposal.source_id, target, edge_type)
        undo: dict[str, Any] = {
            "kind": "edge",
            "edge_id": str(result.edge.id),
            "type": result.edge.type.value,
        }
        if before is not None:
            undo.update(
                previous_type=before.type.value,
                previous_source=str(before.source_id),
                previous_target=str(before.target_id),
            )
        return undo

    async def _set_status(self, proposal_id: uuid.UUID, status: ProposalStatus) -> None:
        await self.session.execute(
            update(PlacementProposal)
            .where(PlacementProposal.id == proposal_id)
            .values(status=status, updated_at=func.now())
        )

    # ------------------------------------------------------------ rollback and reject

    async def run_rows(self, run_id: uuid.UUID) -> list[Proposal]:
        of_the_run = select(*_COLUMNS).where(
            PlacementProposal.run_id == run_id, PlacementProposal.status == ProposalStatus.accepted
        )
        places = {row.id: row.project_id for row in await self.session.execute(of_the_run)}
        locked = await lock_rows(self.session, of_the_run, PlacementProposal, places, "update", places=places)
        # Newest first, as the rollback reverts them.
        proposals = sorted((_proposal(row) for row in locked), key=lambda p: (p.applied_at, p.id), reverse=True)
        await require_role(self.session, [proposal.project_id for proposal in proposals])
        return proposals

    async def rollback(self, proposal: Proposal, execute: bool) -> dict[str, Any]:
        """Revert one accepted row (newest first); never deletes a thought, skips rows changed since."""
        row = {"proposal_id": str(proposal.id), "kind": proposal.kind}
        undo = proposal.payload.get("undo") or {}
        now = (await self.session.execute(select(func.now()))).scalar_one()
        if proposal.applied_at is None or now - proposal.applied_at > timedelta(days=ROLLBACK_WINDOW_DAYS):
            return {
                **row,
                "status": "refused",
                "reason": f"applied more than {ROLLBACK_WINDOW_DAYS} days ago",
            }
        if undo.get("kind") == "merge":
            return {**row, "status": "refused", "reason": "merges are not rolled back"}
        if undo.get("kind") == "archive":
            return await self._unarchive(proposal, undo, row, execute)
        edge_id = uuid.UUID(undo["edge_id"])
        # Locked: an unlink or retype of this edge waits, so what is reported reverted is what was reverted.
        edges = EdgeService(self.session, self.principal)
        current = await edges.get(edge_id, for_update=True)
        if current is None or current.type.value != undo.get("type"):
            return {**row, "status": "skipped", "reason": "the edge changed since it was applied"}
        await edges.require_writable([current])  # the edge reverted is a row of its source's project
        if execute:
            if "previous_type" in undo:
                await self.session.execute(
                    update(Edge)
                    .where(Edge.id == edge_id)
                    .values(
                        type=EdgeType(undo["previous_type"]),
                        source_id=uuid.UUID(undo["previous_source"]),
                        target_id=uuid.UUID(undo["previous_target"]),
                    )
                )
            else:
                await EdgeService(self.session, self.principal).delete(edge_id)
            await self._set_status(proposal.id, ProposalStatus.rolled_back)
        return {**row, "status": "reverted" if execute else "would_revert"}

    async def _unarchive(
        self, proposal: Proposal, undo: dict[str, Any], row: dict[str, Any], execute: bool
    ) -> dict[str, Any]:
        thought_id = uuid.UUID(undo["thought_id"])
        thought = await self.thoughts.get(thought_id, for_update=True)
        previous = undo.get("previous_status")
        if thought is None or thought.status != ThoughtStatus.archived or previous in (None, "archived"):
            return {**row, "status": "skipped", "reason": "the thought changed since it was archived"}
        await require_role(self.session, [thought.project_id])  # it may have moved since it was archived
        if execute:
            await self.thoughts.update_fields(thought_id, {"status": ThoughtStatus(previous), "archived_at": None})
            await self._set_status(proposal.id, ProposalStatus.rolled_back)
        return {**row, "status": "reverted" if execute else "would_revert"}

    async def reject(self, proposal_id: uuid.UUID) -> dict[str, Any]:
        proposal = await self.get(proposal_id, lock=True)
        if proposal.status != ProposalStatus.pending:
            return {"proposal_id": str(proposal_id), "status": proposal.status.value, "changed": False}
        await self._set_status(proposal.id, ProposalStatus.rejected)
        return {"proposal_id": str(proposal_id), "status": "rejected", "changed": True}


def _written_thoughts(proposal: Proposal) -> list[uuid.UUID]:
    """The thoughts whose projects applying the proposal writes (ProposalService._write)."""
    if proposal.target_id is None:
        return [proposal.source_id]
    if proposal.kind == "lifecycle":
        merge = proposal.payload.get("action") == "merge"
        return [proposal.source_id, proposal.target_id] if merge else [proposal.target_id]
    return [proposal.target_id] if proposal.kind == "placement" else [proposal.source_id]


async def expire_due_proposals(session: AsyncSession) -> int:
    """Pending proposals past their expiry become `expired`."""
    result = await session.execute(
        update(PlacementProposal)
        .where(PlacementProposal.status == ProposalStatus.pending, PlacementProposal.expires_at <= func.now())
        .values(status=ProposalStatus.expired, updated_at=func.now())
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
