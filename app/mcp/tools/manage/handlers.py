"""memory_manage handlers: list, create, update, delete, resolve."""

from __future__ import annotations

from typing import Any

from app.errors import bad_request
from app.mcp.envelope import Meta, collection, preview_meta, single
from app.mcp.registry import CallContext, ToolAnswer
from app.mcp.shaping import shape_project
from app.mcp.tools.common import (
    previewed_arguments,
    uuid_arg,
)
from app.mcp.tools.manage.args import TOOL, CreateArgs, DeleteArgs, ListArgs, ResolveArgs, UpdateArgs
from app.services.previews import PreviewService
from app.services.projects import ProjectService


async def list_projects(args: ListArgs, ctx: CallContext) -> ToolAnswer:
    async with ctx.app.db.unit_of_work() as session:
        projects = await ProjectService(session).list()
    rows = [shape_project(project) for project in projects]
    if args.fields:
        rows = [{key: row[key] for key in row if key in args.fields} for row in rows]
    return ToolAnswer(collection(Meta("list"), rows))


async def create_project(args: CreateArgs, ctx: CallContext) -> ToolAnswer:
    async with ctx.app.db.unit_of_work() as session:
        project = await ProjectService(session).create(args.name, args.local_path, args.description)
    return ToolAnswer(single(Meta("create"), shape_project(project)))


async def update_project(args: UpdateArgs, ctx: CallContext) -> ToolAnswer:
    project_id = uuid_arg(args.project_id, "project_id")
    values = args.model_dump(include={"name", "local_path", "description"}, exclude_unset=True)
    if "name" in values and values["name"] is None:
        raise bad_request(
            "Invalid argument 'name' for memory_manage action=update: a project always has a name "
            "(omit 'name' to keep it)"
        )
    async with ctx.app.db.unit_of_work() as session:
        await ProjectService(session).update(project_id, values)
    return ToolAnswer(single(Meta("update"), {"success": True, "project_id": str(project_id)}))


async def delete_project(args: DeleteArgs, ctx: CallContext) -> ToolAnswer:
    project_id = uuid_arg(args.project_id, "project_id")
    # Bound to the canonical id, so the confirm call the instruction spells out matches the preview
    # whatever spelling of the id the preview was given.
    arguments = {**previewed_arguments(args), "project_id": str(project_id)}
    async with ctx.app.db.unit_of_work() as session:
        service = ProjectService(session)
        previews = PreviewService(session, ctx.app.limits.preview_ttl_seconds)
        if args.confirm:
            # The token first: replaying a spent token is refused as already used, even though
            # the project it deleted is gone by then (DESIGN §10).
            await previews.redeem(ctx.principal, TOOL, "delete", arguments, args.preview_token)
            plan = await service.plan_delete(project_id, lock=True)
            moved = await service.delete(plan, ctx.principal)
            item: dict[str, Any] = {
                "action": "deleted",
                "project": shape_project(plan.project),
                "thoughts_moved": moved,
                "moved_to": str(plan.default_project.id),
            }
            return ToolAnswer(single(Meta("delete"), item))
        plan = await service.plan_delete(project_id)
        token = await previews.issue(ctx.principal, TOOL, "delete", arguments)
    consequence = (
        f"Deletes project '{plan.project.name}' and moves its {plan.thought_count} thought(s) "
        f"to the default project '{plan.default_project.name}'; its slots are dropped."
    )
    instruction = (
        f"Call memory_manage again with action=delete, project_id={project_id}, confirm=true, "
        f"preview_token={token} to proceed."
    )
    item = {
        "status": "preview",
        "action": "preview",
        "project": shape_project(plan.project),
        "thought_count": plan.thought_count,
        "consequence": consequence,
        "instruction": instruction,
        "preview_token": token,
    }
    meta = Meta("delete", preview=preview_meta(token, consequence, instruction))
    return ToolAnswer(single(meta, item))


async def resolve_project(args: ResolveArgs, ctx: CallContext) -> ToolAnswer:
    if not args.cwd or not args.cwd.strip():
        raise bad_request(
            "Missing required argument 'cwd' for memory_manage action=resolve: pass the working directory, "
            'e.g. {"action": "resolve", "cwd": "/path/to/project"}'
        )
    async with ctx.app.db.unit_of_work() as session:
        project = await ProjectService(session).resolve(args.cwd or "")
    item = None if project is None else {"id": str(project.id), "name": project.name, "local_path": project.local_path}
    meta = Meta("resolve", reason=None if project else "no_match")
    return ToolAnswer(single(meta, item))
