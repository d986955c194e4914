"""A team with a hostile member, as the red team tried it (issue 22): one server, and

- alice, writer, owner (admin member) of two projects closed to everyone else, `secret` and `vault`;
- bob, writer, a member of neither;
- rita, reader, a member of neither;
- carl, writer globally, a reader member of `secret`;
- admin, admin globally, a member of neither closed project.

Every user calls the tools through `dispatch`, the MCP server's path, with their own principal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import text

from app.db.models import Base, Role
from app.services.admin.membership import MemberService
from app.services.context import AppContext
from tests.conftest import make_user
from tests.support.helpers import ToolCaller, own_transaction

SECRET_PATH = "/srv/alice/secret"
VAULT_PATH = "/srv/alice/vault"
OPEN_PATH = "/srv/team/open"


@dataclass(frozen=True)
class ClosedProject:
    id: str
    name: str
    path: str
    thought_ids: list[str]


@dataclass(frozen=True)
class Team:
    alice: ToolCaller
    bob: ToolCaller
    rita: ToolCaller
    carl: ToolCaller
    admin: ToolCaller
    secret: ClosedProject
    vault: ClosedProject
    open_project_id: str
    open_thought_ids: list[str]
    global_thought_id: str


async def _closed_project(owner: ToolCaller, name: str, path: str, members: dict[str, Role]) -> ClosedProject:
    """A project of `owner` with three thoughts (the first two linked), closed to all but `members` and the owner."""
    created = await owner.ok("memory_manage", {"action": "create", "name": name, "local_path": path})
    project_id = str(created.item["id"])
    ids = []
    for n in range(3):
        stored = await owner.ok(
            "memory_store", {"action": "create", "content": f"{name} master key note {n}", "cwd": path}
        )
        ids.append(str(stored.item["id"]))
    await owner.ok("memory_store", {"action": "link", "source_id": ids[0], "target_id": ids[1]})
    async with own_transaction(owner.context) as session:
        service = MemberService(session)
        await service.remove(project_id, None)
        await service.add(project_id, owner.principal.name, Role.admin)
        for user, role in members.items():
            await service.add(project_id, user, role)
    return ClosedProject(project_id, name, path, ids)


async def team(context: AppContext) -> Team:
    """The users above, alice's two closed projects, an open project and a global thought."""
    callers = {
        name: ToolCaller(context, await make_user(context, name, role))
        for name, role in (
            ("alice", Role.writer),
            ("bob", Role.writer),
            ("rita", Role.reader),
            ("carl", Role.writer),
            ("admin", Role.admin),
        )
    }
    secret = await _closed_project(callers["alice"], "secret", SECRET_PATH, {"carl": Role.reader})
    vault = await _closed_project(callers["alice"], "vault", VAULT_PATH, {})
    opened = await callers["admin"].ok("memory_manage", {"action": "create", "name": "open", "local_path": OPEN_PATH})
    open_ids = []
    for n in range(2):
        stored = await callers["bob"].ok(
            "memory_store", {"action": "create", "content": f"open note {n}", "cwd": OPEN_PATH}
        )
        open_ids.append(str(stored.item["id"]))
    global_thought = await callers["alice"].ok(
        "memory_store",
        {"action": "create", "content": "a global note everyone reads", "cwd": SECRET_PATH, "is_global": True},
    )
    return Team(
        **callers,
        secret=secret,
        vault=vault,
        open_project_id=str(opened.item["id"]),
        open_thought_ids=open_ids,
        global_thought_id=str(global_thought.item["id"]),
    )


# The rate limit's buckets: every call that passed the role check takes from its token's bucket, refused or not
# (app.services.ratelimit), so they are not data a refused call could have changed.
LIMITER_STATE = frozenset({"rate_bucket"})


async def table_digests(context: AppContext) -> dict[str, str]:
    """Every table's rows, digested: compare before and after a refused call to see that it changed nothing,
    not only that it added no row (an importance bump or a moved row changes no count)."""
    digests: dict[str, str] = {}
    async with own_transaction(context) as session:
        for table in Base.metadata.sorted_tables:
            if table.name in LIMITER_STATE:
                continue
            sql = f"SELECT coalesce(md5(string_agg(t::text, '|' ORDER BY t::text)), '') FROM {table.name} t"
            digests[table.name] = str((await session.execute(text(sql))).scalar_one())
    return digests


def changed_tables(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return [name for name in before if before[name] != after.get(name)]


def arguments(**values: Any) -> dict[str, Any]:
    """Readable call arguments in tests: `arguments(action="create", content="x")`."""
    return dict(values)
