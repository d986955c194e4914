"""Clusters: the project graph, explicit clusters and union-find auto-clustering."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.locks import AUTO_CLUSTER_LOCK_KEY, hold_until_commit
from app.db.models import Edge, EdgeType, Thought, ThoughtStatus
from app.db.records import EdgeRecord, Principal, ProjectRecord, ThoughtRecord
from app.db.repositories.neighbours import NeighbourProbe
from app.db.repositories.projects import ProjectRepository
from app.db.repositories.thoughts import ThoughtFilter, ThoughtRepository, thought_select, to_record
from app.errors import not_found
from app.ids import new_id
from app.services.admin.membership import may_write, require_role, writable_projects
from app.services.store.edges import EdgeService, edge_record
from app.services.store.thoughts import normalize_tags

CLUSTER_TITLE_WORDS = 8


@dataclass(frozen=True)
class GraphPage:
    nodes: list[ThoughtRecord]
    edges: list[EdgeRecord]
    total: int


@dataclass(frozen=True)
class NewCluster:
    member_ids: Sequence[uuid.UUID]
    content: str
    tags: list[str]
    project_id: uuid.UUID
    vector: list[float] | None = None
    model_id: str | None = None


@dataclass
class ClusterGroup:
    members: list[ThoughtRecord]
    project_id: uuid.UUID | None = None
    title: str = ""
    cluster: ThoughtRecord | None = field(default=None)


def cluster_title(member: ThoughtRecord) -> str:
    words = member.content.split()
    title = " ".join(words[:CLUSTER_TITLE_WORDS])
    return title + ("…" if len(words) > CLUSTER_TITLE_WORDS else "")


class ClusterService:
    def __init__(self, session: AsyncSession, principal: Principal) -> None:
        self.session = session
        self.principal = principal
        self.thoughts = ThoughtRepository(session)

    async def graph(self, where: ThoughtFilter, limit: int, offset: int) -> GraphPage:
        total = await self.thoughts.count(where)
        statement = thought_select().where(*where.clauses()).order_by(Thought.id).limit(limit).offset(offset)
        nodes = [to_record(row) for row in await self.session.execute(statement)]
        ids = [node.id for node in nodes]
        edges: list[EdgeRecord] = []
        if ids:
            edge_rows = await self.session.execute(
                select(Edge.id, Edge.source_id, Edge.target_id, Edge.type, Edge.created_at)
                .where(Edge.source_id.in_(ids), Edge.target_id.in_(ids))
                .order_by(Edge.id)
            )
            edges = [edge_record(row) for row in edge_rows]
        return GraphPage(nodes, edges, total)

    async def create_cluster(
        self,
        member_ids: Sequence[uuid.UUID],
        title: str | None,
        tags: list[str],
        project: ProjectRecord | None,
        vector: list[float] | None,
        model_id: str | None,
    ) -> tuple[ThoughtRecord, list[EdgeRecord], list[ThoughtRecord]]:
        unique = list(dict.fromkeys(member_ids))
        members = await self.thoughts.get_many(unique, lock="key share")
        missing = [str(thought_id) for thought_id in unique if thought_id not in members]
        if missing:
            raise not_found(f"Thought {', '.join(missing)} not found (thought_ids)")
        ordered = [members[thought_id] for thought_id in unique]
        newest = max(ordered, key=lambda member: member.created_at)
        content = (title or "").strip() or cluster_title(newest)
        target_project = project.id if project is not None else await self._shared_project(ordered)
        # The cluster and its edges live in that project; the members are only linked to (and may be read-only).
        await require_role(self.session, [target_project])
        new = NewCluster(unique, content, normalize_tags(["cluster", *tags]), target_project, vector, model_id)
        [(cluster, edges)] = await self.create_clusters([new])
        return cluster, edges, ordered

    async def create_clusters(self, clusters: Sequence[NewCluster]) -> list[tuple[ThoughtRecord, list[EdgeRecord]]]:
        """Cluster thoughts and their member edges, all in a handful of statements (members already checked)."""
        ids = [new_id() for _ in clusters]
        rows = [
            {
                "id": cluster_id,
                "project_id": new.project_id,
                "content": new.content,
                "status": ThoughtStatus.active,
                "tags": new.tags,
                "is_cluster": True,
                "created_by": self.principal.user_id,
                "embedding": new.vector,
                "embedding_model": new.model_id if new.vector is not None else None,
            }
            for cluster_id, new in zip(ids, clusters, strict=True)
        ]
        await self.thoughts.insert_many(rows)
        links = [(cluster_id, new.project_id, new.member_ids) for cluster_id, new in zip(ids, clusters, strict=True)]
        edges = await EdgeService(self.session, self.principal).link_new_clusters(links)
        created = await self.thoughts.get_many(ids)
        return [(created[cluster_id], cluster_edges) for cluster_id, cluster_edges in zip(ids, edges, strict=True)]

    async def _shared_project(self, members: list[ThoughtRecord]) -> uuid.UUID:
        projects = {member.project_id for member in members}
        if len(projects) == 1:
            return projects.pop()
        return (await ProjectRepository(self.session).ensure_default()).id

    async def lock_auto_cluster(self) -> None:
        """Held to the commit: two confirms at once would otherwise both cluster the same eligible thoughts."""
        await hold_until_commit(self.session, AUTO_CLUSTER_LOCK_KEY)

    async def auto_groups(
        self, max_distance: float, min_members: int, min_age_days: int, model_id: str, probe: NeighbourProbe
    ) -> tuple[list[ClusterGroup], int]:
        """Union-find over nearest neighbours closer than `max_distance` among eligible thoughts: those the
        caller may write (the clusters go into the members' projects)."""
        eligible = select(Thought.id, Thought.project_id).where(
            Thought.is_cluster.is_(False),
            Thought.status.in_((ThoughtStatus.active, ThoughtStatus.draft)),
            Thought.created_at < func.now() - timedelta(days=min_age_days),
            Thought.embedding_model == model_id,
            ~select(Edge.id).where(Edge.target_id == Thought.id, Edge.type == EdgeType.cluster).exists(),
        )
        rows = await self.session.execute(eligible.order_by(Thought.id))
        ids = [row.id for row in rows if await may_write(self.session, row.project_id)]
        if not ids:
            return [], 0
        eligible_ids = set(ids)
        writable = await writable_projects(self.session)
        pairs = [(a, b) for a, b in await probe.pairs(ids, model_id, max_distance, writable) if b in eligible_ids]
        parent = {thought_id: thought_id for thought_id in ids}

        def find(node: uuid.UUID) -> uuid.UUID:
            while parent[node] != node:
                parent[node] = parent[parent[node]]
                node = parent[node]
            return node

        for a, b in pairs:
            left, right = find(a), find(b)
            if left != right:
                parent[max(left, right)] = min(left, right)
        components: dict[uuid.UUID, list[uuid.UUID]] = {}
        for thought_id in ids:
            components.setdefault(find(thought_id), []).append(thought_id)
        big = [sorted(group) for group in components.values() if len(group) >= min_members]
        records = await self.thoughts.get_many([thought_id for group in big for thought_id in group])
        groups = []
        for group in sorted(big, key=lambda members: members[0]):
            # A member deleted after the probes ran (READ COMMITTED) is left out, and so is a group it shrinks.
            members = [records[thought_id] for thought_id in group if thought_id in records]
            if len(members) < min_members:
                continue
            projects = {member.project_id for member in members}
            newest = max(members, key=lambda member: member.created_at)
            groups.append(ClusterGroup(members, projects.pop() if len(projects) == 1 else None, cluster_title(newest)))
        if any(group.project_id is None for group in groups):
            # Such a group's cluster goes into the default project (materialize): the preview checks that role as
            # its confirm does, so it never issues a token the confirm refuses.
            await require_role(self.session, [(await ProjectRepository(self.session).ensure_default()).id])
        return groups, len(ids)

    async def materialize(self, groups: list[ClusterGroup]) -> None:
        """Create every group's cluster (in the members' project when they share one, else the default)."""
        spread = any(group.project_id is None for group in groups)
        default = (await ProjectRepository(self.session).ensure_default()).id if spread else uuid.UUID(int=0)
        if spread:
            await require_role(self.session, [default])
        tags = normalize_tags(["cluster", "auto"])
        new = [
            NewCluster([m.id for m in group.members], group.title, tags, group.project_id or default)
            for group in groups
        ]
        for group, (cluster, _) in zip(groups, await self.create_clusters(new), strict=True):
            group.cluster = cluster
