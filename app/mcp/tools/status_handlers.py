"""memory_status handlers: slots, frontier, config."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.db.repositories.projects import ProjectRepository
from app.formats import iso
from app.mcp.envelope import Meta, collection, single
from app.mcp.registry import CallContext, ToolAnswer
from app.mcp.shaping import ThoughtShaper
from app.services.frontier import FrontierService, content_short
from app.services.health import HealthService
from app.services.scope import resolve_read_scope
from app.services.slots import SlotService

if TYPE_CHECKING:
    from app.mcp.tools.status import ConfigArgs, FrontierArgs, HealthArgs, SlotsArgs

NO_SLOT_SCOPE_WARNING = "no project scope — the project-scoped slot overrides were not applied (pass cwd to read them)"
DEFAULT_PENDING_PAGE = 50


async def slots(args: SlotsArgs, ctx: CallContext) -> ToolAnswer:
    async with ctx.app.db.unit_of_work() as session:
        scope = await resolve_read_scope(ProjectRepository(session), args.cwd)
        project_id = scope.project.id if scope.project else None
        views = await SlotService(session, ctx.app.limits.slot_max_chars).read_all(
            project_id, args.slots_limit or DEFAULT_PENDING_PAGE, args.offset
        )
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
    async with ctx.app.db.unit_of_work() as session:
        scope = await resolve_read_scope(ProjectRepository(session), args.cwd)
        entries = await FrontierService(session).frontier(scope.project.id if scope.project else None)
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
    async with ctx.app.db.unit_of_work() as session:
        report = await HealthService(session).report(args.include_details, args.severity)
    return ToolAnswer(single(Meta("health"), report))
