"""memory_crystallize handlers: graph, cluster, auto_cluster."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.mcp.calls import CallContext, ToolAnswer
from app.mcp.confirm import ConfirmFlow, Preview
from app.mcp.envelope import Meta, collection, single
from app.mcp.shaping import ThoughtShaper
from app.mcp.tools.crystallize.args import AutoClusterArgs, ClusterArgs, GraphArgs
from app.services.crystallize import operations as crystallize_operations
from app.services.crystallize.clusters import ClusterGroup
from app.services.values import ThoughtRecord

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
    scope, page = await crystallize_operations.graph(
        ctx.app, ctx.principal, args.cwd, args.status, args.limit, args.offset
    )
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
    made = await crystallize_operations.create_cluster(
        ctx.app, ctx.principal, args.thought_ids, args.title, args.tags, args.cwd
    )
    created, edges, members, project = made.cluster, made.edges, made.members, made.project
    shape = ThoughtShaper(compact=False)
    item = {
        "cluster": shape(created),
        "edges": [{"source_id": str(e.source_id), "target_id": str(e.target_id), "type": e.type.value} for e in edges],
        "members": [shape(member) for member in members],
    }
    scope = None if project is None else {"project": str(project.id), "project_name": project.name, "global": False}
    meta = Meta("cluster", scope=scope, counts={"members": len(members), "edges": len(edges)})
    return ToolAnswer(single(meta, item))


# ---------------------------------------------------------------- auto_cluster (preview → confirm)


async def _prepare_auto_cluster(args: AutoClusterArgs, ctx: CallContext) -> crystallize_operations.AutoClusterCall:
    return crystallize_operations.auto_cluster_call(ctx.app, args.min_similarity, args.min_members)


def _group_items(groups: list[ClusterGroup]) -> list[dict[str, Any]]:
    shape = ThoughtShaper(compact=True)
    return [
        {
            "title": group.title,
            "project_id": str(group.project_id) if group.project_id else None,
            "cluster_id": str(group.cluster.id) if group.cluster else None,
            "members": [shape(member) for member in group.members],
        }
        for group in groups
    ]


async def _plan_auto_cluster(
    args: AutoClusterArgs, ctx: CallContext, session: AsyncSession, call: crystallize_operations.AutoClusterCall
) -> Preview:
    groups, candidates = await crystallize_operations.plan_auto_cluster(ctx.app, session, ctx.principal, call)
    meta = Meta("auto_cluster", counts={"candidates": candidates, "clusters": len(groups)})
    consequence = f"Creates {len(groups)} cluster thought(s) with a cluster edge to each member."
    return Preview(
        meta, items=_group_items(groups), consequence=consequence, confirm_with="the same min_similarity/min_members"
    )


async def _auto_cluster(
    args: AutoClusterArgs, ctx: CallContext, session: AsyncSession, call: crystallize_operations.AutoClusterCall
) -> ToolAnswer:
    groups, candidates = await crystallize_operations.run_auto_cluster(ctx.app, session, ctx.principal, call)
    meta = Meta("auto_cluster", counts={"candidates": candidates, "clusters": len(groups)})
    return ToolAnswer(collection(meta, _group_items(groups)))


auto_cluster = ConfirmFlow(
    prepare=_prepare_auto_cluster,
    plan=_plan_auto_cluster,
    execute=_auto_cluster,
    in_meta={"consequence": "consequence", "instruction": "instruction"},
)
