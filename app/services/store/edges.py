"""The edge writers: link (one edge per unordered pair), unlink, retype.

Every writer takes a transaction-scoped advisory lock on the pair first, so concurrent callers on
the same pair run one after the other; the unique pair index is the backstop. A writer that needs
several pairs (link_batch, merge) takes all its pair locks first, sorted, and only then locks thought
rows, sorted too: the one lock order that keeps concurrent graph writers free of deadlocks.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.locks import EDGE_PAIR_SEED, hold_text_until_commit, hold_texts_until_commit
from app.db.models import SYMMETRIC_EDGE_TYPES, Edge, EdgeType, Thought
from app.db.records import EdgeRecord, Principal
from app.db.repositories.audit import AuditRepository
from app.db.row_locks import lock_rows
from app.db.visibility import UNSCOPED
from app.errors import AppError, bad_request, conflict, not_found
from app.ids import new_id
from app.services.admin.membership import require_role, require_thought_roles, writable_projects

TOOL = "memory_store"  # the audit's name for the writes its actions ask for
LINK_IMPORTANCE_BONUS = 0.1
SELF_LOOP = "Edge cannot link a thought to itself (source_id and target_id are the same)"
_COLUMNS = (Edge.id, Edge.source_id, Edge.target_id, Edge.type, Edge.created_at)


# Thoughts the caller read through the rule (the bump's ids come from rows already read), so UNSCOPED; a restricted
# caller's bump is held to the projects they may write (`_BUMP_WRITABLE`).
_BUMP_SQL = (
    "UPDATE thought SET importance = least(1.0, thought.importance + CAST(:bonus AS float8) * bumps.links) "
    "FROM unnest(CAST(:ids AS uuid[]), CAST(:links AS int[])) AS bumps(id, links) "
    "WHERE thought.id = bumps.id AND thought.importance < 1.0"  # at the cap: no new row version
)
_BUMP = text(_BUMP_SQL).execution_options(**UNSCOPED)
_BUMP_WRITABLE = text(f"{_BUMP_SQL} AND thought.project_id = ANY(CAST(:projects AS uuid[]))").execution_options(
    **UNSCOPED
)


def edge_record(row: object) -> EdgeRecord:
    return EdgeRecord(**row._mapping)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class LinkResult:
    edge: EdgeRecord
    created: bool  # False for an idempotent replay or an in-place upgrade


def _pair_key(a: uuid.UUID, b: uuid.UUID) -> str:
    """The advisory-lock key of an unordered pair of thoughts (at most one edge per pair)."""
    low, high = sorted((a, b))
    return f"edge:{low}:{high}"


class EdgeService:
    def __init__(self, session: AsyncSession, principal: Principal) -> None:
        self.session = session
        self.principal = principal

    async def lock_pair(self, a: uuid.UUID, b: uuid.UUID) -> None:
        await hold_text_until_commit(self.session, _pair_key(a, b), EDGE_PAIR_SEED)

    async def lock_pairs(self, pairs: Iterable[tuple[uuid.UUID, uuid.UUID]], *, rows: bool = True) -> None:
        """Every pair lock in one global order (then, with `rows`, the endpoint rows in id order)."""
        keys = sorted({(min(a, b), max(a, b)) for a, b in pairs if a != b})
        if not keys:
            return
        await hold_texts_until_commit(self.session, [_pair_key(low, high) for low, high in keys], EDGE_PAIR_SEED)
        if rows:
            ends = {end for key in keys for end in key}
            await lock_rows(self.session, select(Thought.id), Thought, ends, "no key update")

    async def get(self, edge_id: uuid.UUID, *, for_update: bool = False) -> EdgeRecord | None:
        if for_update:
            rows = await lock_rows(self.session, select(*_COLUMNS), Edge, [edge_id], "update")
            return edge_record(rows[0]) if rows else None
        row = (await self.session.execute(select(*_COLUMNS).where(Edge.id == edge_id))).first()
        return edge_record(row) if row else None

    async def pair_edge(self, a: uuid.UUID, b: uuid.UUID) -> EdgeRecord | None:
        low, high = sorted((a, b))
        statement = select(*_COLUMNS).where(
            func.least(Edge.source_id, Edge.target_id) == low,
            func.greatest(Edge.source_id, Edge.target_id) == high,
        )
        row = (await self.session.execute(statement)).first()
        return edge_record(row) if row else None

    async def link(self, source_id: uuid.UUID, target_id: uuid.UUID, edge_type: EdgeType) -> LinkResult:
        if source_id == target_id:
            raise bad_request(SELF_LOOP)
        await self.lock_pair(source_id, target_id)
        ends, source_project = await self._ends(source_id, target_id)
        await require_role(self.session, [source_project])  # an edge belongs to its source's project
        if edge_type == EdgeType.cluster and not ends[source_id]:
            raise bad_request(cluster_rule(source_id))
        existing = await self.pair_edge(source_id, target_id)
        if existing is not None:
            relinked = await self._relink(existing, source_id, target_id, edge_type, source_project)
            if relinked is not None:
                return relinked
        edge_id = new_id()
        await self.session.execute(
            insert(Edge).values(
                id=edge_id,
                project_id=source_project,
                source_id=source_id,
                target_id=target_id,
                type=edge_type,
                created_by=self.principal.user_id,
            )
        )
        await self._bump_importance(source_id, target_id)
        edge = await self.get(edge_id)
        assert edge is not None
        return LinkResult(edge, created=True)

    async def link_new_clusters(
        self, clusters: Sequence[tuple[uuid.UUID, uuid.UUID, Sequence[uuid.UUID]]]
    ) -> list[list[EdgeRecord]]:
        """`cluster` edges from cluster thoughts created in this transaction, given as (id, project, members).

        No other transaction can see the new thoughts, so none of their pairs can carry an edge or be linked
        concurrently: every edge goes in with one INSERT and the importance bonuses with two UPDATEs, as
        link() gives them (each member once per link, each cluster once per member, capped at 1).
        """
        rows = [
            {
                "id": new_id(),
                "project_id": project_id,
                "source_id": cluster_id,
                "target_id": member_id,
                "type": EdgeType.cluster,
                "created_by": self.principal.user_id,
            }
            for cluster_id, project_id, member_ids in clusters
            for member_id in member_ids
        ]
        if not rows:
            return [[] for _ in clusters]
        inserted = await self.session.execute(
            insert(Edge).returning(
                Edge.id, Edge.source_id, Edge.target_id, Edge.type, Edge.created_at, sort_by_parameter_order=True
            ),
            rows,
        )
        by_cluster: dict[uuid.UUID, list[EdgeRecord]] = {cluster_id: [] for cluster_id, _, _ in clusters}
        for row in inserted:
            by_cluster[row.source_id].append(edge_record(row))
        members = Counter(member_id for _, _, member_ids in clusters for member_id in member_ids)
        await self._bump_importance_by(members)
        await self._bump_importance_by({cluster_id: len(member_ids) for cluster_id, _, member_ids in clusters})
        return [by_cluster[cluster_id] for cluster_id, _, _ in clusters]

    async def _bump_importance_by(self, links: Mapping[uuid.UUID, int]) -> None:
        """LINK_IMPORTANCE_BONUS per link for each thought (capped at 1); rows locked in id order.

        Only thoughts of projects where the caller holds the action's role get it: an end the caller may only read
        (linked *to*, or a cluster's member) is a row of another project, which this write must not change.
        """
        ids = sorted(links)
        parameters: dict[str, Any] = {
            "bonus": LINK_IMPORTANCE_BONUS,
            "ids": ids,
            "links": [links[thought_id] for thought_id in ids],
        }
        writable = await writable_projects(self.session)
        statement = _BUMP
        if writable is not None:
            statement, parameters["projects"] = _BUMP_WRITABLE, writable
        await self.session.execute(statement, parameters)

    async def _relink(
        self,
        existing: EdgeRecord,
        source_id: uuid.UUID,
        target_id: uuid.UUID,
        edge_type: EdgeType,
        source_project: uuid.UUID,
    ) -> LinkResult | None:
        """The answer for a pair that already has an edge; None when that edge was deleted meanwhile (an unlink
        committed after it was read), so the caller creates the edge instead."""
        if existing.type == edge_type and edge_type in SYMMETRIC_EDGE_TYPES:
            return LinkResult(existing, created=False)  # symmetric re-link is an idempotent replay
        if existing.type == EdgeType.related and edge_type != EdgeType.related:
            # A `related` placeholder is upgraded in place: same id, the asked type and direction. It is a row of
            # its source's project, maybe the other end's: changing it needs the role there too.
            await self.require_writable([existing])
            await self.session.execute(
                update(Edge)
                .where(Edge.id == existing.id)
                .values(type=edge_type, source_id=source_id, target_id=target_id, project_id=source_project)
            )
            upgraded = await self.get(existing.id)
            return None if upgraded is None else LinkResult(upgraded, created=False)
        if existing.type == edge_type:
            raise conflict(
                f"Edge already exists: {existing.source_id} -[{existing.type.value}]-> {existing.target_id} "
                f"(edge {existing.id}); a pair carries one edge"
            )
        raise conflict(
            f"The pair already carries a '{existing.type.value}' edge (edge {existing.id}); a pair carries one edge — "
            f"change it with memory_store action=retype, edge_id={existing.id}, new_type={edge_type.value}"
        )

    async def _ends(self, source_id: uuid.UUID, target_id: uuid.UUID) -> tuple[dict[uuid.UUID, bool], uuid.UUID]:
        """{id: is_cluster} of both ends, kept from deletion until the commit (FOR KEY SHARE, as the edge's
        foreign keys would lock them), and the source's project; refuses a missing one naming its argument."""
        columns = select(Thought.id, Thought.is_cluster, Thought.project_id)
        rows = await lock_rows(self.session, columns, Thought, {source_id, target_id}, "key share")
        found = {row.id: bool(row.is_cluster) for row in rows}
        for thought_id, name in ((source_id, "source_id"), (target_id, "target_id")):
            if thought_id not in found:
                raise not_found(f"Thought {thought_id} not found ({name})", argument=name, reason="no such thought")
        return found, next(row.project_id for row in rows if row.id == source_id)

    async def require_writable(self, edges: Iterable[EdgeRecord | None]) -> None:
        """Refuse the call unless the caller may write every edge given: an edge belongs to its source's
        project (app.services.admin.membership.require_role); None entries (missing edges) are skipped."""
        await require_thought_roles(self.session, {edge.source_id for edge in edges if edge is not None})

    async def _bump_importance(self, *thought_ids: uuid.UUID) -> None:
        await self._bump_importance_by(Counter(thought_ids))

    async def delete(self, edge_id: uuid.UUID) -> bool:
        result = await self.session.execute(delete(Edge).where(Edge.id == edge_id))
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def unlink(self, edge: EdgeRecord) -> bool:
        """Deletes a previewed edge and records it in the audit; False when it is gone already."""
        await self.require_writable([edge])
        if not await self.delete(edge.id):
            return False
        details = {"source_id": str(edge.source_id), "target_id": str(edge.target_id), "type": edge.type.value}
        await AuditRepository(self.session).record(self.principal.user_id, TOOL, "unlink", [edge.id], None, details)
        return True

    async def unlink_batch(self, edges: Mapping[uuid.UUID, EdgeRecord | None]) -> None:
        """Deletes every previewed edge or none: an id missing now (None) or deleted meanwhile refuses the batch."""
        missing = [str(edge_id) for edge_id, edge in edges.items() if edge is None]
        if missing:  # validated before any delete: never a partial prune
            raise edges_not_found(missing)
        await self.require_writable(edges.values())
        gone = [str(edge_id) for edge_id in edges if not await self.delete(edge_id)]
        if gone:  # deleted by a concurrent call since the check: refuse the whole batch, as for a missing id
            raise edges_not_found(gone)
        await AuditRepository(self.session).record(self.principal.user_id, TOOL, "unlink_batch", list(edges))

    async def validate_retype(self, edge: EdgeRecord, new_type: EdgeType) -> None:
        if edge.type == new_type:
            raise bad_request(f"Edge {edge.id} is already of type '{new_type.value}'")
        if new_type == EdgeType.cluster:
            ends, _ = await self._ends(edge.source_id, edge.target_id)
            if not ends[edge.source_id]:
                raise bad_request(cluster_rule(edge.source_id))

    async def retype(self, edge: EdgeRecord, new_type: EdgeType) -> tuple[EdgeRecord, EdgeRecord]:
        """Delete + insert in this transaction: a new id, the original created_at kept. Answers (old, new)."""
        await self.lock_pair(edge.source_id, edge.target_id)
        current = await self.get(edge.id)
        if current is None:  # deleted since it was read: a stale preview never writes blindly
            raise edge_not_found(edge.id)
        await self.require_writable([current])
        await self.validate_retype(current, new_type)
        deleted = await self.session.execute(delete(Edge).where(Edge.id == edge.id).returning(Edge.project_id))
        project_id = deleted.scalar_one_or_none()
        if project_id is None:  # an unlink committed while this delete waited for the row: never resurrect it
            raise edge_not_found(edge.id)
        new_edge_id = new_id()
        await self.session.execute(
            insert(Edge).values(
                id=new_edge_id,
                project_id=project_id,
                source_id=current.source_id,
                target_id=current.target_id,
                type=new_type,
                created_by=self.principal.user_id,
                created_at=current.created_at,
            )
        )
        created = await self.get(new_edge_id)
        assert created is not None
        details: dict[str, Any] = {"new_type": new_type.value}
        await AuditRepository(self.session).record(
            self.principal.user_id, TOOL, "retype", [edge.id, created.id], None, details
        )
        return current, created


def cluster_rule(source_id: uuid.UUID) -> str:
    return (
        f"Only a cluster thought may carry a cluster edge: source {source_id} is not a cluster thought "
        "(create one with memory_crystallize action=cluster)"
    )


def edge_not_found(edge_id: uuid.UUID) -> AppError:
    return not_found(f"Edge not found: {edge_id}")


def edges_not_found(missing: list[str]) -> AppError:
    return not_found(f"Edge not found: {', '.join(missing)} — nothing was deleted; drop the missing ids and retry")
