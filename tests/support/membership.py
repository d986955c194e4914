"""Closed projects for membership tests: a project with named members, a caller by name, the Vault and its secret
thoughts."""

from __future__ import annotations

from app.db.models import Role
from app.services.admin.membership import MemberService
from app.services.context import AppContext
from tests.conftest import make_user
from tests.support.helpers import ToolCaller

SECRET = "zanzibar"


async def close(context: AppContext, project: str, members: dict[str, Role]) -> None:
    """Remove the project's everyone row (if it has one) and make these users members."""
    async with context.db.unit_of_work() as session:
        service = MemberService(session)
        if any(row.user_id is None for row in await service.list(project)):
            await service.remove(project, None)
        for user, role in members.items():
            await service.add(project, user, role)


async def caller(context: AppContext, name: str, role: Role = Role.admin) -> ToolCaller:
    return ToolCaller(context, await make_user(context, name, role))


async def vault(admin: ToolCaller, name: str = "Vault") -> tuple[str, str, list[str]]:
    """A project with three thoughts that mention the secret word, the first two linked: (id, path, ids)."""
    path = f"/srv/{name.lower()}"
    project = await admin.ok("memory_manage", {"action": "create", "name": name, "local_path": path})
    ids = [
        str(
            (await admin.ok("memory_store", {"action": "create", "content": f"{SECRET} note {n}", "cwd": path})).item[
                "id"
            ]
        )
        for n in range(3)
    ]
    await admin.ok("memory_store", {"action": "link", "source_id": ids[0], "target_id": ids[1]})
    return str(project.item["id"]), path, ids
