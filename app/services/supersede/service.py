"""Archiving and merging thoughts; execution always re-reads the current state."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import SYMMETRIC_EDGE_TYPES, Edge, EdgeType, Thought, ThoughtStatus
from app.db.records import EdgeRecord, Principal, ThoughtRecord
from app.db.repositories.audit import AuditRepository
from app.db.repositories.projects import ProjectRepository
from app.db.repositories.thoughts import ThoughtRepository
from app.db.row_locks import lock_rows
from app.errors import conflict, not_found
from app.ids import new_id
from app.services.admin.membership import may_write, require_role
from app.services.context import AppContext
from app.services.scope import normalize_path
from app.services.store.edges import EdgeService, edge_record
from app.services.store.thoughts import check_content, normalize_tags

MERGE_PREVIEW_EDGES = 50
_EDGE_COLUMNS = (Edge.id, Edge.source_id, Edge.target_id, Edge.type, Edge.created_at)


def archive_outcome(thought: ThoughtRecord | None) -> str:
    if thought is None:
        return "not_found"
    return "already_archived" if thought.status == ThoughtStatus.archived else "would_archive"


@dataclass
class MergePlan:
    source_id: uuid.UUID
    target_id: uuid.UUID
    source: ThoughtRecord | None
    target: ThoughtRecord | None
    source_edges: list[EdgeRecord] = field(default_factory=list)
    allow_archived_source: bool = False  # retention compaction folds archived thoughts in too

    @property
    def outcome(self) -> str:
        if self.source is None or self.target is None:
            return "not_found"
        return "ineligible" if self.reason else "would_merge"

    @property
    def reason(self) -> str | None:
        if self.source is None or self.target is None:
            return None
        if self.source.id == self.target.id:
            return "source and target are the same thought"
        if self.source.status == ThoughtStatus.archived and not self.allow_archived_source:
            return "the source is archived"
        if self.target.status == ThoughtStatus.archived:
            return "the target is archived"
        return None


class SupersedeService:
    def __init__(self, session: AsyncSession, principal: Principal) -> None:
        self.session = session
        self.principal = principal
        self.thoughts = ThoughtRepository(session)
        self.audit = AuditRepository(session)

    async def archive(self, thought_id: uuid.UUID) -> ThoughtRecord:
        thought = await self.thoughts.get(thought_id, for_update=True)
        if thought is None:
            raise not_found(f"Thought {thought_id} not found")
        await require_role(self.session, [thought.project_id])
        if thought.status != ThoughtStatus.archived:  # idempotent: never re-stamped
            await self._archive_rows([thought_id])
            await self.audit.record(
                self.principal.user_id, "memory_supersede", "archive", [thought_id], thought.project_id
            )
            thought = await self.thoughts.get(thought_id)
            assert thought is not None
        return thought

    async def archive_preview(self, thought_id: uuid.UUID) -> tuple[ThoughtStatus | None, str]:
        """The thought's status now (None: not found) and what archiving it would do, once the caller's role in its
        project allows the archive."""
        thought = await self.thoughts.get(thought_id)
        if thought is not None:
            await require_role(self.session, [thought.project_id])  # previews included
        return (thought.status if thought else None), archive_outcome(thought)

    async def archive_batch_preview(self, thought_ids: Sequence[uuid.UUID]) -> list[str]:
        """What archiving each id would do, in the caller's order."""
        found = await self.thoughts.get_many(thought_ids)
        await require_role(self.session, [thought.project_id for thought in found.values()])  # previews included
        seen: set[uuid.UUID] = set()
        outcomes = []
        for thought_id in thought_ids:
            # A repeated id previews as already_archived after its first occurrence.
            repeated = thought_id in seen and thought_id in found
            outcomes.append("already_archived" if repeated else archive_outcome(found.get(thought_id)))
            seen.add(thought_id)
        return outcomes

    async def archive_batch(self, thought_ids: Sequence[uuid.UUID]) -> list[dict[str, Any]]:
        unique = sorted(set(thought_ids))  # lock in a stable order
        found = {thought_id: await self.thoughts.get(thought_id, for_update=True) for thought_id in unique}
        await require_role(self.session, [thought.project_id for thought in found.values() if thought is not None])
        to_archive = [tid for tid, t in found.items() if t is not None and t.status != ThoughtStatus.archived]
        await self._archive_rows(to_archive)
        if to_archive:
            await self.audit.record(self.principal.user_id, "memory_supersede", "archive_batch", to_archive)
        return [
            {"thought_id": str(tid), "status": "archived"}
            if found[tid] is not None
            else {"thought_id": str(tid), "status": "failed", "error": f"Thought {tid} not found"}
            for tid in thought_ids
        ]

    async def _archive_rows(self, thought_ids: Sequence[uuid.UUID]) -> None:
        if thought_ids:
            await self.session.execute(
                update(Thought)
                .where(Thought.id.in_(thought_ids))
                .values(status=ThoughtStatus.archived, archived_at=func.now(), updated_at=func.now())
            )

    async def merge_plan(
        self,
        source_id: uuid.UUID,
        target_id: uuid.UUID,
        lock: bool = False,
        allow_archived_source: bool = False,
    ) -> MergePlan:
        if lock:
            await self._lock_for_merge(source_id, target_id)
        source = await self.thoughts.get(source_id)
        target = await self.thoughts.get(target_id)
        await require_role(self.session, [thought.project_id for thought in (source, target) if thought is not None])
        plan = MergePlan(source_id, target_id, source, target, allow_archived_source=allow_archived_source)
        if source is not None:
            statement = (
                select(*_EDGE_COLUMNS)
                .where(or_(Edge.source_id == source_id, Edge.target_id == source_id))
                .order_by(Edge.created_at, Edge.id)
            )
            plan.source_edges = [edge_record(row) for row in await self.session.execute(statement)]
        return plan

    async def _lock_for_merge(self, source_id: uuid.UUID, target_id: uuid.UUID) -> None:
        """The pairs the merge touches (source–, target–neighbour, target–source) first, then both rows, each sorted:
        the lock order of every graph writer (app.services.store.edges), so a merge never deadlocks with them."""
        ends = (Edge.source_id == source_id) | (Edge.target_id == source_id)
        neighbours = await self.session.execute(select(Edge.source_id, Edge.target_id).where(ends))
        others = {row.source_id if row.target_id == source_id else row.target_id for row in neighbours}
        pairs = [(target_id, other) for other in others | {source_id}] + [(source_id, other) for other in others]
        await EdgeService(self.session, self.principal).lock_pairs(pairs, rows=False)
        await lock_rows(self.session, select(Thought.id), Thought, {source_id, target_id}, "update")

    async def merge(self, plan: MergePlan, values: dict[str, Any]) -> tuple[ThoughtRecord, int]:
        """Transfer edges under the drop rules, update the target, archive the source, record `replaces`."""
        if plan.source is None or plan.target is None:
            missing = plan.source_id if plan.source is None else plan.target_id
            raise not_found(f"Thought {missing} not found")
        if plan.reason:
            raise conflict(f"Merge refused: {plan.reason}")
        source, target = plan.source, plan.target
        if "project_id" in values:
            await require_role(self.session, [values["project_id"]])  # the target moves into that project
        # An edge of another thought's project (from a thought the caller may only read) is theirs: it stays on
        # the archived source, as one from a thought the caller cannot see does (it was never read).
        movable = await self._writable_edges(plan.source_edges, source.id)
        if values:  # first, so every moved edge takes the project of its (possibly moved) source thought
            await self.thoughts.update_fields(target.id, values)
        project_id = values.get("project_id", target.project_id)
        edges = EdgeService(self.session, self.principal)
        transferred = 0
        for edge in movable:
            other = edge.target_id if edge.source_id == source.id else edge.source_id
            await edges.lock_pair(target.id, other)
            if await self._transfer(edge, other, source, target, edges):
                transferred += 1
        if source.status != ThoughtStatus.archived:
            await self._archive_rows([source.id])
        await self.session.execute(
            insert(Edge).values(
                id=new_id(),
                project_id=project_id,
                source_id=target.id,
                target_id=source.id,
                type=EdgeType.replaces,
                created_by=self.principal.user_id,
            )
        )
        await self.audit.record(
            self.principal.user_id,
            "memory_supersede",
            "merge",
            [source.id, target.id],
            project_id,
            {"edges_transferred": transferred},
        )
        merged = await self.thoughts.get(target.id)
        assert merged is not None
        return merged, transferred

    async def _writable_edges(self, edges: Sequence[EdgeRecord], source_id: uuid.UUID) -> list[EdgeRecord]:
        """The source's edges the caller may move: an edge belongs to its source's project, so one *from* another
        thought needs the action's role in that thought's project (the source's own edges were checked with it)."""
        others = {edge.source_id for edge in edges if edge.source_id != source_id}
        projects = await self.thoughts.projects_of(sorted(others))
        allowed = {
            thought_id for thought_id, project_id in projects.items() if await may_write(self.session, project_id)
        }
        return [edge for edge in edges if edge.source_id == source_id or edge.source_id in allowed]

    async def _transfer(
        self,
        edge: EdgeRecord,
        other: uuid.UUID,
        source: ThoughtRecord,
        target: ThoughtRecord,
        edges: EdgeService,
    ) -> bool:
        """Move one source edge onto the target; False when a drop rule removes it instead."""
        dropped = (
            other == target.id  # would collapse into a self-loop
            or (edge.type == EdgeType.cluster and edge.source_id == source.id and not target.is_cluster)
        )
        existing = None if dropped else await edges.pair_edge(target.id, other)
        if not await edges.delete(edge.id) or dropped:  # gone meanwhile (an unlink committed): nothing to move
            return False
        if existing is not None:
            # The target owns an equal symmetric relation already; any other duplicate is dropped.
            return existing.type == edge.type and edge.type in SYMMETRIC_EDGE_TYPES
        new_source = target.id if edge.source_id == source.id else edge.source_id
        new_target = target.id if edge.target_id == source.id else edge.target_id
        await self.session.execute(
            insert(Edge).values(
                id=edge.id,
                project_id=select(Thought.project_id).where(Thought.id == new_source).scalar_subquery(),
                source_id=new_source,
                target_id=new_target,
                type=edge.type,
                created_by=self.principal.user_id,
                created_at=edge.created_at,
            )
        )
        return True


# ---------------------------------------------------------------- merge (run in its confirm flow's transaction)


@dataclass(frozen=True)
class MergeRequest:
    """A merge as the caller asked it, checked and embedded before the transaction."""

    source_id: uuid.UUID
    target_id: uuid.UUID
    content: str | None = None
    tags: list[str] | None = None
    cwd: str | None = None
    vectors: list[list[float]] | None = None  # the merged content's


async def merge_request(
    app: AppContext,
    source_id: uuid.UUID,
    target_id: uuid.UUID,
    content: str | None,
    tags: list[str] | None,
    cwd: str | None,
) -> MergeRequest:
    if content is not None:
        check_content(content, app.settings.content.hard_limit, "merged_content")
    vectors = await app.embedding.embed_passages([content]) if content else None
    return MergeRequest(source_id, target_id, content, tags, cwd, vectors)


async def plan_merge(
    app: AppContext, session: AsyncSession, principal: Principal, request: MergeRequest
) -> tuple[MergePlan, dict[str, Any]]:
    """The preview: the plan, and the values the target would take."""
    plan = await SupersedeService(session, principal).merge_plan(request.source_id, request.target_id)
    return plan, await _merge_values(app, session, request, plan)


async def run_merge(
    app: AppContext, session: AsyncSession, principal: Principal, request: MergeRequest
) -> tuple[ThoughtRecord, int]:
    """Plans again under the merge's locks and merges: the target and the edges moved onto it."""
    service = SupersedeService(session, principal)
    plan = await service.merge_plan(request.source_id, request.target_id, lock=True)
    values = await _merge_values(app, session, request, plan)
    if "content" in values:
        profile = app.embedding.profile
        vectors = request.vectors
        values["embedding"] = vectors[0] if vectors and profile else None
        values["embedding_model"] = profile.model_id if vectors and profile else None
    return await service.merge(plan, values)


async def _merge_values(
    app: AppContext, session: AsyncSession, request: MergeRequest, plan: MergePlan
) -> dict[str, Any]:
    """The merged content and tags as given, and the cwd's project when it is not the target's."""
    values: dict[str, Any] = {}
    if request.content is not None:
        values["content"] = check_content(request.content, app.settings.content.hard_limit, "merged_content")
    if request.tags is not None:
        values["tags"] = normalize_tags(request.tags, "merged_tags")
    path = normalize_path(request.cwd or "")
    project = await ProjectRepository(session).find_for_path(path) if path else None
    if project is not None and plan.target is not None and project.id != plan.target.project_id:
        values["project_id"] = project.id
        # The target would move into that project: the preview checks the role its confirm needs there, so it
        # never issues a token the confirm refuses.
        await require_role(session, [project.id])
    return values
