"""memory_crystallize handlers: graph, cluster, auto_cluster."""

from __future__ import annotations

from typing import Any

from app.db.records import ThoughtRecord
from app.db.repositories.neighbours import NeighbourProbe
from app.db.repositories.projects import ProjectRepository
from app.db.repositories.thoughts import ThoughtFilter, status_filter
from app.errors import unavailable
from app.mcp.envelope import Meta, collection, preview_meta, single
from app.mcp.registry import CallContext, ToolAnswer
from app.mcp.shaping import ThoughtShaper
from app.mcp.tools.common import previewed_arguments, uuid_arg
from app.mcp.tools.crystallize.args import TOOL, AutoClusterArgs, ClusterArgs, GraphArgs
from app.services.clusters import ClusterService
from app.services.previews import PreviewService
from app.services.scope import normalize_path, resolve_read_scope
from app.services.store import check_content, normalize_tags

DEFAULT_GRAPH_LIMIT = 500
NODE_FIELDS = ("id", "label", "title", "group", "tags", "category", "status", "is_cluster", "project_name")
COMPACT_NODE_FIELDS = ("id", "label", "status", "is_cluster")


def node(thought: ThoughtRecord) -> dict[str, Any]:
    label = " ".join(thought.content.split())
    return {
        "id": str(thought.id),
        "label": label if len(label) <= 80 else label[:80] + "…",
        "title": thought.content,
        "group": thought.tags[0] if thought.tags else thought.project_name,
        "tags": list(thought.tags),
        "category": "cluster" if thought.is_cluster else "concept",
        "status": thought.status.value,
        "is_cluster": thought.is_cluster,
        "project_name": thought.project_name,
    }


async def graph(args: GraphArgs, ctx: CallContext) -> ToolAnswer:
    limit = args.limit or DEFAULT_GRAPH_LIMIT
    statuses = status_filter(args.status) if args.status else status_filter("active") + status_filter("draft")
    async with ctx.app.db.unit_of_work() as session:
        scope = await resolve_read_scope(ProjectRepository(session), args.cwd)
        where = ThoughtFilter(project_id=scope.project.id if scope.project else None, statuses=statuses)
        page = await ClusterService(session, ctx.principal).graph(where, limit, args.offset)
    keys = [k for k in NODE_FIELDS if k in set(args.fields)] if args.fields else None
    keys = keys or (list(COMPACT_NODE_FIELDS) if args.compact else list(NODE_FIELDS))
    items = [{key: value for key, value in node(thought).items() if key in keys} for thought in page.nodes]
    edges = [
        {"id": str(e.id), "source": str(e.source_id), "target": str(e.target_id), "type": e.type.value}
        for e in page.edges
    ]
    meta = Meta("graph", scope=scope.scope, warnings=scope.warnings, counts={"edges": len(edges)})
    rendered = meta.render(page.total, len(items), page.total - len(items))
    return ToolAnswer({"items": items, "edges": edges, "meta": rendered})


async def cluster(args: ClusterArgs, ctx: CallContext) -> ToolAnswer:
    member_ids = [uuid_arg(value, f"thought_ids[{index}]") for index, value in enumerate(args.thought_ids)]
    tags = normalize_tags(args.tags)
    title = (args.title or "").strip() or None
    if title is not None:
        check_content(title, ctx.app.limits.content_hard, "title")
    vectors = await ctx.app.embedding.embed_passages([title]) if title else None
    profile = ctx.app.embedding.profile
    async with ctx.app.db.unit_of_work() as session:
        path = normalize_path(args.cwd or "")
        project = await ProjectRepository(session).find_for_path(path) if path else None
        created, edges, members = await ClusterService(session, ctx.principal).create_cluster(
            member_ids,
            title,
            tags,
            project,
            vectors[0] if vectors else None,
            profile.model_id if vectors and profile else None,
        )
    shape = ThoughtShaper(compact=False)
    item = {
        "cluster": shape(created),
        "edges": [{"source_id": str(e.source_id), "target_id": str(e.target_id), "type": e.type.value} for e in edges],
        "members": [shape(member) for member in members],
    }
    scope = None if project is None else {"project": str(project.id), "project_name": project.name, "global": False}
    meta = Meta("cluster", scope=scope, counts={"members": len(members), "edges": len(edges)})
    return ToolAnswer(single(meta, item))


async def auto_cluster(args: AutoClusterArgs, ctx: CallContext) -> ToolAnswer:
    profile = ctx.app.embedding.profile
    if profile is None:
        raise unavailable("auto_cluster needs the embedder, which is not ready; retry shortly")
    max_distance = args.min_similarity or ctx.app.limits.auto_cluster_distance or profile.auto_cluster_distance
    min_members = args.min_members or ctx.app.limits.auto_cluster_min_members
    shape = ThoughtShaper(compact=True)
    async with ctx.app.db.unit_of_work() as session:
        service = ClusterService(session, ctx.principal)
        previews = PreviewService(session, ctx.app.limits.preview_ttl_seconds)
        if args.confirm:
            await previews.redeem(ctx.principal, TOOL, "auto_cluster", previewed_arguments(args), args.preview_token)
            await service.lock_auto_cluster()
        probe = NeighbourProbe(ctx.app.db, ctx.app.limits.auto_cluster_probe_workers)
        groups, candidates = await service.auto_groups(
            max_distance, min_members, ctx.app.limits.auto_cluster_min_age_days, profile.model_id, probe
        )
        if args.confirm:
            await service.materialize(groups)
        else:
            token = await previews.issue(ctx.principal, TOOL, "auto_cluster", previewed_arguments(args))
    items = [
        {
            "title": group.title,
            "project_id": str(group.project_id) if group.project_id else None,
            "cluster_id": str(group.cluster.id) if group.cluster else None,
            "members": [shape(member) for member in group.members],
        }
        for group in groups
    ]
    counts = {"candidates": candidates, "clusters": len(groups)}
    if args.confirm:
        return ToolAnswer(_collection("auto_cluster", items, counts, None))
    consequence = f"Creates {len(groups)} cluster thought(s) with a cluster edge to each member."
    instruction = (
        "Call memory_crystallize again with action=auto_cluster, the same min_similarity/min_members, "
        f"confirm=true, preview_token={token} to proceed."
    )
    return ToolAnswer(_collection("auto_cluster", items, counts, preview_meta(token, consequence, instruction)))


def _collection(
    action: str, items: list[Any], counts: dict[str, int], preview: dict[str, Any] | None
) -> dict[str, Any]:
    return collection(Meta(action, counts=counts, preview=preview), items)
