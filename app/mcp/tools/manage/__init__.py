"""memory_manage: projects (list, create, update, delete, resolve)."""

from __future__ import annotations

from app.mcp.registry import Action, ToolSpec
from app.mcp.tools.common import DESTRUCTIVE
from app.mcp.tools.manage import handlers
from app.mcp.tools.manage.args import TOOL, CreateArgs, DeleteArgs, ListArgs, ResolveArgs, UpdateArgs
from app.services.values import Role

SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Projects. list; create {name}; update {project_id} (admin); delete {project_id} (admin, previewed first) "
        "moves its thoughts to the default project; resolve {cwd}."
    ),
    actions=(
        Action("list", ListArgs, handlers.list_projects),
        Action("create", CreateArgs, handlers.create_project, Role.writer),
        Action("update", UpdateArgs, handlers.update_project, Role.admin),
        Action("delete", DeleteArgs, handlers.delete_project, Role.admin),
        Action("resolve", ResolveArgs, handlers.resolve_project),
    ),
    annotations=DESTRUCTIVE,
)
