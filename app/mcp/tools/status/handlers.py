"""memory_status handlers: slots, frontier, config, health, propose."""

from __future__ import annotations

from typing import Any

from app.errors import bad_request
from app.formats import iso
from app.mcp.calls import CallContext, ToolAnswer
from app.mcp.envelope import Meta, collection, single
from app.mcp.shaping import ThoughtShaper
from app.mcp.tools.status.args import ConfigArgs, FrontierArgs, HealthArgs, ProposeArgs, SlotsArgs
from app.services.review import operations as review_operations
from app.services.review.placement import Plan
from app.services.scope import UNRESOLVED_SCOPE, scope_of, unknown_cwd_prefix
from app.services.status import operations as status_operations
from app.services.status.frontier import content_short

NO_SLOT_SCOPE_WARNING = "no project scope — the project-scoped slot overrides were not applied (pass cwd to read them)"
SLIM_EDGES = 3
PIN_THOUGHT = (
    "propose is not cross-project: the plan is restricted to the project the addressed thought (thought_id) belongs to"
)
PIN_DRAFT = "propose is not cross-project: the plan is restricted to the default project (draft content)"


async def slots(args: SlotsArgs, ctx: CallContext) -> ToolAnswer:
    scope, views = await status_operations.read_slots(ctx.app, args.cwd, args.slots_limit, args.offset)
    warnings = list(scope.warnings)
    if not scope.cwd_given:
        warnings.append(NO_SLOT_SCOPE_WARNING)
    items = [
        {
            "name": view.name,
            "scope": view.scope,
            "virtual": view.virtual,
            "content": view.content,
            "truncated": view.truncated,
            "max_chars": view.max_chars,
            "updated_at": iso(view.updated_at),
        }
        for view in views
    ]
    return ToolAnswer(collection(Meta("slots", scope=scope.scope, warnings=warnings), items))


async def frontier(args: FrontierArgs, ctx: CallContext) -> ToolAnswer:
    scope, entries = await status_operations.read_frontier(ctx.app, args.cwd)
    shape = ThoughtShaper(compact=bool(args.compact), fields=args.fields)
    items: list[dict[str, Any]] = [
        {
            "thought": shape(entry.thought),
            "content_short": content_short(entry.thought.content),
            "reason": entry.reason,
            "priority": entry.priority,
            "blocked_by": [str(thought_id) for thought_id in entry.blocked_by],
        }
        for entry in entries[: args.limit]
    ]
    meta = Meta("frontier", scope=scope.scope, warnings=scope.warnings)
    return ToolAnswer(collection(meta, items, total=len(entries)))


def render_config(ctx: CallContext) -> str:
    lines = ["SynaptoMind configuration (effective values; secrets masked)"]
    lines += [f"{key} = {value}" for key, value in ctx.app.settings_view.items()]
    status = ctx.app.embedding.status()
    lines.append(f"embedder.state = {status['state']}")
    lines.append(f"embedder.active_model = {status['active_model'] or '(none)'}")
    if status["note"]:
        lines.append(f"embedder.note = {status['note']}")
    return "\n".join(lines)


async def config(args: ConfigArgs, ctx: CallContext) -> ToolAnswer:
    text = render_config(ctx)
    return ToolAnswer(single(Meta("config"), {"text": text}), raw_text=text)


async def health(args: HealthArgs, ctx: CallContext) -> ToolAnswer:
    report = await status_operations.health_report(ctx.app, args.include_details, args.severity)
    return ToolAnswer(single(Meta("health"), report))


def shape_plan(plan: Plan, full: bool, max_edges: int | None) -> dict[str, Any]:
    """Slim (top 3 edges, no signals) unless `full` (compact=false or include_signals=true: every edge, signals)."""
    limit = max_edges or (len(plan.edges) if full else SLIM_EDGES)
    edges = []
    for edge in plan.edges[:limit]:
        entry: dict[str, Any] = {
            "target_id": str(edge.target.id),
            "type": edge.type.value,
            "confidence": edge.confidence,
            "rationale": edge.rationale,
        }
        if full:
            entry["target_content"] = edge.target.content
            entry["signals"] = edge.signals
        edges.append(entry)
    return {
        "project_id": str(plan.project_id),
        "placement": plan.placement,
        "edges": edges,
        "lifecycle": plan.lifecycle,
        "degraded": plan.degraded,
    }


async def propose(args: ProposeArgs, ctx: CallContext) -> ToolAnswer:
    hard_limit = ctx.app.settings.content.hard_limit
    if args.content is not None and len(args.content) > hard_limit:  # worded as the argument model words a bound
        raise bad_request(
            "Invalid argument 'content' for memory_status action=propose: "
            f"String should have at most {hard_limit} characters",
            argument="content",
        )
    if (args.thought_id is None) == (args.content is None or not args.content.strip()):
        raise bad_request("memory_status action=propose needs exactly one of 'thought_id' or 'content'")
    proposed = await review_operations.propose(ctx.app, args.thought_id, args.content, args.cwd)
    plan, path, resolved = proposed.plan, proposed.path, proposed.resolved
    clause = PIN_THOUGHT if proposed.thought is not None else PIN_DRAFT
    warnings: list[str] = []
    scope: dict[str, Any] | None = scope_of(resolved) if resolved else None
    if not path:
        warnings.append(f"no cwd — {clause}")
    elif resolved is None:
        warnings.append(f"{unknown_cwd_prefix(args.cwd or path)} — {clause}")
        scope = dict(UNRESOLVED_SCOPE)
    item = shape_plan(plan, args.compact is False or args.include_signals, args.max_edges)
    if args.fields:
        item = {key: value for key, value in item.items() if key in args.fields}
    meta = Meta("propose", scope=scope, warnings=warnings, degraded=plan.degraded)
    answer = single(meta, item)
    answer["meta"]["counts"]["total"] = len(plan.edges)
    return ToolAnswer(answer)
