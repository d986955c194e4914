"""Retention review: the contract's candidate rule in SQL, protect, hard delete and compaction."""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import ColumnElement, and_, delete, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Edge, Thought, ThoughtHit, ThoughtStatus
from app.db.records import Principal, ThoughtRecord
from app.db.repositories.audit import AuditRepository
from app.db.repositories.projects import ProjectRepository
from app.db.repositories.thoughts import ThoughtRepository, thought_select, to_record
from app.errors import conflict, not_found
from app.ids import new_id
from app.services.admin.membership import require_role
from app.services.context import AppContext
from app.services.supersede.service import SupersedeService


@dataclass(frozen=True)
class RetentionRule:
    min_age_days: float
    importance_floor: float


def candidate_clauses(rule: RetentionRule) -> list[ColumnElement[bool]]:
    """Every signal at once (retention_review in the contract)."""
    source = Thought.__table__.alias("incoming_source")
    active_incoming = (
        select(Edge.id)
        .join(source, source.c.id == Edge.source_id)
        .where(Edge.target_id == Thought.id, source.c.status == ThoughtStatus.active.value)
        .exists()
    )
    hits = select(func.coalesce(func.max(ThoughtHit.hit_count), 0)).where(ThoughtHit.thought_id == Thought.id)
    anchor = func.coalesce(Thought.archived_at, Thought.created_at)
    return [
        Thought.status.in_((ThoughtStatus.archived, ThoughtStatus.draft)),
        anchor < func.now() - timedelta(days=rule.min_age_days),
        Thought.importance < rule.importance_floor,
        hits.scalar_subquery() == 0,
        ~active_incoming,
        Thought.is_protected.is_(False),
        or_(Thought.surface_after.is_(None), Thought.surface_after <= func.now()),
        Thought.is_global.is_(False),
    ]


@dataclass(frozen=True)
class Dependent:
    edge_id: uuid.UUID
    thought_id: uuid.UUID
    type: str
    direction: str  # "incoming" (edge into the thought) or "outgoing"


@dataclass(frozen=True)
class Summary:
    """The protected thought a compaction writes in its sources' place (content and tags already checked)."""

    content: str
    tags: list[str]
    project_id: uuid.UUID | None = None  # None: the first source's project
    embedding: list[float] | None = None
    embedding_model: str | None = None


async def embedded_summary(app: AppContext, summary: Summary) -> Summary:
    """The summary with its vector, embedded before the transaction; without one while the embedder is not ready
    (the backfill embeds it later)."""
    vectors = await app.embedding.embed_passages([summary.content])
    profile = app.embedding.profile
    if vectors and profile:
        return dataclasses.replace(summary, embedding=vectors[0], embedding_model=profile.model_id)
    return summary


class RetentionService:
    def __init__(self, session: AsyncSession, principal: Principal) -> None:
        self.session = session
        self.principal = principal
        self.thoughts = ThoughtRepository(session)

    async def candidates(self, rule: RetentionRule, limit: int, offset: int) -> tuple[list[ThoughtRecord], int]:
        clauses = candidate_clauses(rule)
        total = (
            await self.session.execute(select(func.count()).select_from(Thought).where(and_(*clauses)))
        ).scalar_one()
        anchor = func.coalesce(Thought.archived_at, Thought.created_at)
        statement = thought_select().where(*clauses).order_by(anchor, Thought.id).limit(limit).offset(offset)
        return [to_record(row) for row in await self.session.execute(statement)], int(total)

    async def protect(self, thought_id: uuid.UUID, protected: bool) -> ThoughtRecord:
        thought = await self.thoughts.get(thought_id, for_update=True)
        if thought is None:
            raise not_found(f"Thought {thought_id} not found")
        await require_role(self.session, [thought.project_id])
        if thought.is_protected != protected:
            await self.thoughts.update_fields(thought_id, {"is_protected": protected})
            thought = await self.thoughts.get(thought_id)
            assert thought is not None
        return thought

    async def dependents(self, thought_id: uuid.UUID) -> list[Dependent]:
        statement = (
            select(Edge.id, Edge.source_id, Edge.target_id, Edge.type)
            .where(or_(Edge.source_id == thought_id, Edge.target_id == thought_id))
            .order_by(Edge.created_at, Edge.id)
        )
        return [
            Dependent(
                row.id,
                row.source_id if row.target_id == thought_id else row.target_id,
                row.type.value,
                "incoming" if row.target_id == thought_id else "outgoing",
            )
            for row in await self.session.execute(statement)
        ]

    async def delete_preview(self, thought_id: uuid.UUID) -> list[Dependent] | None:
        """The edges a hard delete would remove with the thought; None when there is no such thought (the caller
        can see). The caller's role in its project must allow the delete: previews included."""
        thought = await self.thoughts.get(thought_id)
        if thought is None:
            return None
        await require_role(self.session, [thought.project_id])
        return await self.dependents(thought_id)

    async def hard_delete(self, thought_id: uuid.UUID) -> int:
        """Deletes an unprotected, non-active thought (its edges go with it); returns the edges removed."""
        thought = await self.thoughts.get(thought_id, for_update=True)
        if thought is None:
            raise not_found(f"Thought {thought_id} not found")
        await require_role(self.session, [thought.project_id])
        if thought.is_protected:
            raise conflict(
                f"Thought {thought_id} is protected; unprotect it with retention_review action=protect, protected=false"
            )
        if thought.status == ThoughtStatus.active:
            raise conflict(f"Thought {thought_id} is active; only draft or archived thoughts can be deleted")
        removed = len(await self.dependents(thought_id))
        await self.session.execute(delete(Thought).where(Thought.id == thought_id))
        await AuditRepository(self.session).record(
            self.principal.user_id,
            "retention_review",
            "delete",
            [thought_id],
            thought.project_id,
            {"edges_removed": removed},
        )
        return removed

    async def compact(self, source_ids: list[uuid.UUID], summary: Summary) -> ThoughtRecord:
        project = None
        if summary.project_id is not None:
            project = await ProjectRepository(self.session).get(summary.project_id)
            if project is None:
                raise not_found(f"Project {summary.project_id} not found (summary.project_id)")
        sources = await self.thoughts.get_many(source_ids, lock="key share")
        missing = [str(thought_id) for thought_id in source_ids if thought_id not in sources]
        if missing:
            raise not_found(f"Thought {', '.join(missing)} not found (source_ids)")
        project_id = project.id if project else sources[source_ids[0]].project_id
        # The summary's project, and every source's (each is merged into the summary and archived).
        await require_role(self.session, [project_id, *(source.project_id for source in sources.values())])
        summary_id = new_id()
        await self.thoughts.insert_many(
            [
                {
                    "id": summary_id,
                    "project_id": project_id,
                    "content": summary.content,
                    "status": ThoughtStatus.active,
                    "tags": summary.tags,
                    "is_protected": True,
                    "created_by": self.principal.user_id,
                    "embedding": summary.embedding,
                    "embedding_model": summary.embedding_model,
                }
            ]
        )
        merger = SupersedeService(self.session, self.principal)
        for source_id in dict.fromkeys(source_ids):
            plan = await merger.merge_plan(source_id, summary_id, lock=True, allow_archived_source=True)
            await merger.merge(plan, {})
        await self.session.execute(update(Thought).where(Thought.id == summary_id).values(updated_at=func.now()))
        created = await self.thoughts.get(summary_id)
        assert created is not None
        return created
