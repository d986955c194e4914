"""memory_crystallize's graph and cluster as units of work (auto_cluster runs in its confirm flow)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from app.db.records import EdgeRecord, Principal, ProjectRecord, ThoughtRecord
from app.db.repositories.projects import ProjectRepository
from app.db.repositories.thoughts import ThoughtFilter, status_filter
from app.services.clusters import ClusterService, GraphPage
from app.services.context import AppContext
from app.services.scope import ReadScope, normalize_path, resolve_read_scope
from app.services.store import check_content

DEFAULT_GRAPH_LIMIT = 500


async def graph(
    app: AppContext, principal: Principal, cwd: str | None, status: str | None, limit: int | None, offset: int
) -> tuple[ReadScope, GraphPage]:
    """Nodes of the scope (active and draft unless `status` says otherwise) and the edges between them."""
    statuses = status_filter(status) if status else status_filter("active") + status_filter("draft")
    async with app.db.unit_of_work() as session:
        scope = await resolve_read_scope(ProjectRepository(session), cwd)
        where = ThoughtFilter(project_id=scope.project.id if scope.project else None, statuses=statuses)
        page = await ClusterService(session, principal).graph(where, limit or DEFAULT_GRAPH_LIMIT, offset)
    return scope, page


@dataclass(frozen=True)
class NewClusterResult:
    cluster: ThoughtRecord
    edges: list[EdgeRecord]
    members: list[ThoughtRecord]
    project: ProjectRecord | None  # the cwd's project, if it names one


async def create_cluster(
    app: AppContext,
    principal: Principal,
    member_ids: Sequence[uuid.UUID],
    title: str | None,
    tags: list[str],
    cwd: str | None,
) -> NewClusterResult:
    """A cluster thought over the members; a title is checked and embedded before the transaction."""
    title = (title or "").strip() or None
    if title is not None:
        check_content(title, app.limits.content_hard, "title")
    vectors = await app.embedding.embed_passages([title]) if title else None
    profile = app.embedding.profile
    async with app.db.unit_of_work() as session:
        path = normalize_path(cwd or "")
        project = await ProjectRepository(session).find_for_path(path) if path else None
        created, edges, members = await ClusterService(session, principal).create_cluster(
            list(member_ids),
            title,
            tags,
            project,
            vectors[0] if vectors else None,
            profile.model_id if vectors and profile else None,
        )
    return NewClusterResult(created, list(edges), list(members), project)
