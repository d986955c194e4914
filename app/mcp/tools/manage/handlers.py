"""memory_manage handlers: list, create, update, delete, resolve."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.errors import bad_request
from app.mcp.calls import CallContext, ToolAnswer
from app.mcp.confirm import ConfirmFlow, Preview, previewed_arguments
from app.mcp.envelope import Meta, collection, single
from app.mcp.shaping import shape_project
from app.mcp.tools.common import uuid_arg
from app.mcp.tools.manage.args import CreateArgs, DeleteArgs, ListArgs, ResolveArgs, UpdateArgs
from app.services.admin import operations as admin_operations
from app.services.admin.projects import ProjectService


async def list_projects(args: ListArgs, ctx: CallContext) -> ToolAnswer:
    projects = await admin_operations.list_projects(ctx.app)
    rows = [shape_project(project) for project in projects]
    if args.fields:
        rows = [{key: row[key] for key in row if key in args.fields} for row in rows]
    return ToolAnswer(collection(Meta("list"), rows))


async def create_project(args: CreateArgs, ctx: CallContext) -> ToolAnswer:
    project = await admin_operations.create_project(
        ctx.app, ctx.principal, args.name, args.local_path, args.description
    )
    return ToolAnswer(single(Meta("create"), shape_project(project)))


async def update_project(args: UpdateArgs, ctx: CallContext) -> ToolAnswer:
    project_id = uuid_arg(args.project_id, "project_id")
    values = args.model_dump(include={"name", "local_path", "description"}, exclude_unset=True)
    if "name" in values and values["name"] is None:
        raise bad_request(
            "Invalid argument 'name' for memory_manage action=update: a project always has a name "
            "(omit 'name' to keep it)",
            argument="name",
        )
    await admin_operations.update_project(ctx.app, project_id, values)
    return ToolAnswer(single(Meta("update"), {"success": True, "project_id": str(project_id)}))


async def _project_id(args: DeleteArgs, ctx: CallContext) -> uuid.UUID:
    return uuid_arg(args.project_id, "project_id")


def _bound_to_canonical_id(args: DeleteArgs, project_id: uuid.UUID) -> dict[str, Any]:
    """Bound to the canonical id, so the confirm call the instruction spells out matches the preview
    whatever spelling of the id the preview was given."""
    return {**previewed_arguments(args), "project_id": str(project_id)}


async def _plan_delete(args: DeleteArgs, ctx: CallContext, session: AsyncSession, project_id: uuid.UUID) -> Preview:
    plan = await ProjectService(session).plan_delete(project_id)
    consequence = (
        f"Deletes project '{plan.project.name}' and moves its {plan.thought_count} thought(s) "
        f"to the default project '{plan.default_project.name}'; its slots are dropped."
    )
    item = {
        "status": "preview",
        "action": "preview",
        "project": shape_project(plan.project),
        "thought_count": plan.thought_count,
    }
    return Preview(Meta("delete"), item, consequence=consequence, confirm_with=f"project_id={project_id}")


async def _delete(args: DeleteArgs, ctx: CallContext, session: AsyncSession, project_id: uuid.UUID) -> ToolAnswer:
    # The token is redeemed first: replaying a spent token is refused as already used, even though
    # the project it deleted is gone by then.
    service = ProjectService(session)
    plan = await service.plan_delete(project_id, lock=True)
    moved = await service.delete(plan, ctx.principal)
    item: dict[str, Any] = {
        "action": "deleted",
        "project": shape_project(plan.project),
        "thoughts_moved": moved,
        "moved_to": str(plan.default_project.id),
    }
    return ToolAnswer(single(Meta("delete"), item))


delete_project = ConfirmFlow(
    prepare=_project_id,
    plan=_plan_delete,
    execute=_delete,
    bind=_bound_to_canonical_id,
    in_item=("consequence", "instruction", "preview_token"),
    in_meta={"consequence": "consequence", "instruction": "instruction"},
)


async def resolve_project(args: ResolveArgs, ctx: CallContext) -> ToolAnswer:
    if not args.cwd or not args.cwd.strip():
        raise bad_request(
            "Missing required argument 'cwd' for memory_manage action=resolve: pass the working directory, "
            'e.g. {"action": "resolve", "cwd": "/path/to/project"}',
            argument="cwd",
        )
    project = await admin_operations.resolve_project(ctx.app, args.cwd or "")
    item = None if project is None else {"id": str(project.id), "name": project.name, "local_path": project.local_path}
    meta = Meta("resolve", reason=None if project else "no_match")
    return ToolAnswer(single(meta, item))
