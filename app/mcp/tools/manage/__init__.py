"""memory_manage: projects (list, create, update, delete, resolve)."""

from __future__ import annotations

from app.db.models import Role
from app.mcp.registry import Action, ToolSpec
from app.mcp.tools.common import COMMON_FIELD_DOCS, DESTRUCTIVE
from app.mcp.tools.manage import handlers
from app.mcp.tools.manage.args import TOOL, CreateArgs, DeleteArgs, ListArgs, ResolveArgs, UpdateArgs

SPEC = ToolSpec(
    name=TOOL,
    description=(
        "Projects. list; create {name, local_path?, description?}; update {project_id, name?, local_path?, "
        "description?} (admin); delete {project_id} previews, then confirm=true+preview_token moves its "
        "thoughts to the default project (admin); resolve {cwd} → the project a path belongs to."
    ),
    actions=(
        Action("list", ListArgs, handlers.list_projects),
        Action("create", CreateArgs, handlers.create_project, Role.writer),
        Action("update", UpdateArgs, handlers.update_project, Role.admin),
        Action("delete", DeleteArgs, handlers.delete_project, Role.admin),
        Action("resolve", ResolveArgs, handlers.resolve_project),
    ),
    annotations=DESTRUCTIVE,
    field_docs={
        **COMMON_FIELD_DOCS,
        "cwd": "path to resolve (required for resolve)",
        "fields": "only these project fields",
    },
)
