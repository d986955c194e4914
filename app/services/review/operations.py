"""memory_status propose and edge_review enqueue and list as units of work: the project a plan is
pinned to, the plan, the proposals queued from it, and the queue's pages."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from app.db.records import Principal, ProjectRecord, ThoughtRecord
from app.db.repositories.projects import ProjectRepository
from app.db.repositories.thoughts import ThoughtRepository
from app.errors import bad_request, not_found
from app.ids import parse_uuid
from app.services.context import AppContext
from app.services.review.placement import Plan, plan_placement
from app.services.review.proposals import Proposal, ProposalService
from app.services.scope import ReadScope, normalize_path, resolve_project_scope, resolve_read_scope


@dataclass(frozen=True)
class Proposed:
    plan: Plan
    thought: ThoughtRecord | None  # None for draft content
    path: str  # the normalised cwd, "" without one
    resolved: ProjectRecord | None  # the cwd's project, if it names one


async def propose(app: AppContext, thought_ref: str | None, content: str | None, cwd: str | None) -> Proposed:
    """A read-only plan for a thought (`thought_ref`, the id as the caller wrote it) or draft content, pinned
    to the cwd's project, else the thought's, else the default project."""
    async with app.db.unit_of_work() as session:
        projects = ProjectRepository(session)
        thought = None
        if thought_ref is not None:
            thought = await ThoughtRepository(session).get(parse_uuid(thought_ref, "thought_id"))
            if thought is None:
                raise not_found(f"Thought {thought_ref} not found")
        path = normalize_path(cwd or "")
        resolved = await projects.find_for_path(path) if path else None
        pinned: ProjectRecord | None = resolved
        if pinned is None and thought is not None:
            pinned = await projects.get(thought.project_id)
        if pinned is None:  # no thought, or its project was deleted (its thoughts moved to the default) meanwhile
            pinned = await projects.ensure_default()
        text = thought.content if thought else (content or "")
        plan = await plan_placement(session, app.embedding, thought, text, pinned.id)
    return Proposed(plan, thought, path, resolved)


@dataclass(frozen=True)
class Enqueued:
    plan: Plan
    created: list[uuid.UUID]
    skipped: int


async def enqueue(
    app: AppContext, principal: Principal, thought_id: uuid.UUID, cwd: str | None, max_proposals: int
) -> Enqueued:
    """Plan an active thought against the cwd's project (else its own) and queue up to `max_proposals`."""
    async with app.db.unit_of_work() as session:
        thought = await ThoughtRepository(session).get(thought_id)
        if thought is None:
            raise not_found(f"Thought {thought_id} not found")
        if thought.status.value != "active":
            raise bad_request(
                f"edge_review action=enqueue needs an active thought; {thought_id} is {thought.status.value}"
            )
        path = normalize_path(cwd or "")
        resolved = await ProjectRepository(session).find_for_path(path) if path else None
        project_id = resolved.id if resolved else thought.project_id
        plan = await plan_placement(session, app.embedding, thought, thought.content, project_id)
        created, skipped = await ProposalService(session, principal).enqueue(thought, plan, max_proposals)
    return Enqueued(plan, list(created), skipped)


@dataclass(frozen=True)
class QueuePage:
    scope: ReadScope
    rows: list[Proposal]
    total: int  # rows matching the filters, ignoring the page
    retired: int  # retired (legacy) kinds hidden by default
    all_total: int  # every row in scope, whatever the filters


async def queue_page(
    app: AppContext,
    principal: Principal,
    cwd: str | None,
    status: str | None,
    kind: str | None,
    include_retired: bool,
    limit: int,
    offset: int,
    project_id: uuid.UUID | None = None,
) -> QueuePage:
    """A page of the proposal queue of the cwd's project (every project without one); `project_id` names the
    project instead of the cwd (the console, whose projects need not have a path)."""
    async with app.db.unit_of_work() as session:
        projects = ProjectRepository(session)
        scope = await (resolve_project_scope(projects, project_id) if project_id else resolve_read_scope(projects, cwd))
        project_id = scope.project.id if scope.project else None
        page = await ProposalService(session, principal).page(project_id, status, kind, include_retired, limit, offset)
    rows, total, retired, all_total = page
    return QueuePage(scope, rows, total, retired, all_total)


async def reject(app: AppContext, principal: Principal, proposal_id: str) -> dict[str, Any]:
    """edge_review reject as every door receives it: the id parsed (refused as `proposal_id`), then rejected."""
    parsed = parse_uuid(proposal_id, "proposal_id")
    async with app.db.unit_of_work() as session:
        return await ProposalService(session, principal).reject(parsed)
