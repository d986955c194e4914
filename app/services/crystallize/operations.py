"""memory_crystallize's graph and cluster as units of work; auto_cluster's plan and run, in its confirm flow's
transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.records import EdgeRecord, Principal, ProjectRecord, ThoughtRecord
from app.db.repositories.neighbours import NeighbourProbe
from app.db.repositories.projects import ProjectRepository
from app.db.repositories.thoughts import ThoughtFilter, status_filter
from app.errors import unavailable
from app.ids import parse_uuid
from app.services.context import AppContext
from app.services.crystallize.clusters import ClusterGroup, ClusterService, GraphPage
from app.services.scope import ReadScope, normalize_path, resolve_read_scope
from app.services.store.thoughts import check_content, normalize_tags

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
    member_ids: Sequence[str],
    title: str | None,
    tags: Sequence[str] | None,
    cwd: str | None,
) -> NewClusterResult:
    """A cluster thought over the members, as every door receives them: the ids parsed (refused as
    `thought_ids[i]`), the tags normalised; a title is checked and embedded before the transaction."""
    members = [parse_uuid(value, f"thought_ids[{index}]") for index, value in enumerate(member_ids)]
    normalized = normalize_tags(tags)
    title = (title or "").strip() or None
    if title is not None:
        check_content(title, app.settings.content.hard_limit, "title")
    vectors = await app.embedding.embed_passages([title]) if title else None
    profile = app.embedding.profile
    async with app.db.unit_of_work() as session:
        path = normalize_path(cwd or "")
        project = await ProjectRepository(session).find_for_path(path) if path else None
        created, edges, found = await ClusterService(session, principal).create_cluster(
            members,
            title,
            normalized,
            project,
            vectors[0] if vectors else None,
            profile.model_id if vectors and profile else None,
        )
    return NewClusterResult(created, list(edges), list(found), project)


# ---------------------------------------------------------------- auto_cluster (run in its confirm flow's transaction)


@dataclass(frozen=True)
class AutoClusterCall:
    """auto_cluster's thresholds, fixed before the transaction: the preview and the confirm use the same."""

    max_distance: float
    min_members: int
    model_id: str


def auto_cluster_call(app: AppContext, min_similarity: float | None, min_members: int | None) -> AutoClusterCall:
    """The caller's thresholds, else the settings', else the model profile's distance; needs the embedder."""
    profile = app.embedding.profile
    if profile is None:
        raise unavailable("auto_cluster needs the embedder, which is not ready; retry shortly")
    max_distance = min_similarity or app.settings.auto_cluster.min_similarity or profile.auto_cluster_distance
    return AutoClusterCall(max_distance, min_members or app.settings.auto_cluster.min_members, profile.model_id)


async def plan_auto_cluster(
    app: AppContext, session: AsyncSession, principal: Principal, call: AutoClusterCall
) -> tuple[list[ClusterGroup], int]:
    """The groups auto_cluster would create now, and how many thoughts were eligible (the preview)."""
    return await _auto_groups(app, ClusterService(session, principal), call)


async def run_auto_cluster(
    app: AppContext, session: AsyncSession, principal: Principal, call: AutoClusterCall
) -> tuple[list[ClusterGroup], int]:
    """Plans again under the auto_cluster lock and creates each group's cluster thought."""
    service = ClusterService(session, principal)
    await service.lock_auto_cluster()
    groups, candidates = await _auto_groups(app, service, call)
    await service.materialize(groups)
    return groups, candidates


async def _auto_groups(
    app: AppContext, service: ClusterService, call: AutoClusterCall
) -> tuple[list[ClusterGroup], int]:
    probe = NeighbourProbe(app.db, app.settings.auto_cluster.probe_workers)
    min_age_days = app.settings.auto_cluster.min_age_days
    return await service.auto_groups(call.max_distance, call.min_members, min_age_days, call.model_id, probe)
