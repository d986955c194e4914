"""The paths rule (docs/SECURITY.md, "Paths"): no user can change which project another user's cwd resolves to,
or learn that a name or path they cannot see is taken — issue 22, B2, B1 and the `at 'None'` text.

Every call goes over the tool boundary (`dispatch`) as the user of the red team's table (tests/support/team.py):
alice owns `secret` (/srv/alice/secret, carl a reader there) and `vault` (/srv/alice/vault), both closed; bob is a
writer and a member of neither; the admin is an admin globally and a member of neither.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from sqlalchemy import text

from app.db.locks import PROJECT_PATHS_LOCK_KEY
from app.db.models import Role
from app.db.repositories.projects import ProjectRepository
from app.services.admin.membership import MemberService
from app.services.context import AppContext
from tests.support.helpers import Answer, ToolCaller, own_transaction
from tests.support.team import SECRET_PATH, Team, changed_tables, table_digests, team


def overlap_refusal(path: str) -> str:
    """The one refusal of a path at, inside or around a project where the caller is not an admin."""
    return (
        f"Refused: local_path '{path}' is the path of another project, or lies inside or around it, and you are "
        "not an admin of that project: registering it would change which project other users' cwd resolves to. "
        "Choose a path outside other projects' paths (or omit local_path), or ask an admin of that project"
    )


def name_taken(name: str) -> str:
    return (
        f"A project named '{name}' already exists (project names are unique on the server, also among projects "
        "you cannot see): choose another name"
    )


async def project_of(context: AppContext, thought_id: str) -> str:
    async with own_transaction(context) as session:
        sql = text("SELECT p.name FROM thought t JOIN project p ON p.id = t.project_id WHERE t.id = :id")
        return str((await session.execute(sql, {"id": uuid.UUID(thought_id)})).scalar_one())


async def refused_and_unchanged(context: AppContext, caller: ToolCaller, arguments: dict[str, Any]) -> Answer:
    before = await table_digests(context)
    answer = await caller("memory_manage", arguments)
    assert answer.is_error, answer.text
    assert changed_tables(before, await table_digests(context)) == [], arguments
    return answer


async def make_admin_member(context: AppContext, project_id: str, user: str) -> None:
    async with own_transaction(context) as session:
        await MemberService(session).add(project_id, user, Role.admin)


@pytest.fixture
async def cast(app_context: AppContext) -> Team:
    return await team(app_context)


# ---------------------------------------------------------------- B2: capturing another member's cwd


async def test_bob_cannot_register_a_project_inside_alices_closed_project(app_context: AppContext, cast: Team) -> None:
    """The red team's reproduction: bob's `trap` at <secret>/src would receive alice's writes below it and answer
    her reads there. Refused; her write lands in `secret`, and bob's search finds nothing of it."""
    trap = f"{SECRET_PATH}/src"
    answer = await refused_and_unchanged(
        app_context, cast.bob, {"action": "create", "name": "trap", "local_path": trap}
    )
    assert answer.error == {"message": overlap_refusal(trap), "statusCode": 409, "retryable": False}
    stored = await cast.alice.ok(
        "memory_store",
        {"action": "create", "content": "the master key is kept in src/keys.txt", "cwd": f"{SECRET_PATH}/src/app"},
    )
    assert await project_of(app_context, str(stored.item["id"])) == "secret"
    found = await cast.bob("memory_recall", {"action": "search", "query": "master key", "cwd": trap})
    assert found.items == [] and "keys.txt" not in found.text
    recalled = await cast.alice.ok("memory_recall", {"action": "search", "query": "master key", "cwd": trap})
    assert "keys.txt" in recalled.text and recalled.meta["scope"]["project_name"] == "secret"


@pytest.mark.parametrize(
    "path",
    [
        f"{SECRET_PATH}/src",  # inside
        f"{SECRET_PATH}/src/deep/er",  # deeper inside
        SECRET_PATH,  # at
        "/srv/alice",  # around both closed projects
        "/srv",  # around every project of the cast
        "/",  # around everything
    ],
)
async def test_at_inside_or_around_a_hidden_project_is_one_refusal(
    app_context: AppContext, cast: Team, path: str
) -> None:
    """At, inside and around answer the same text and status: none tells which, nor the project's name or id."""
    answer = await refused_and_unchanged(
        app_context, cast.bob, {"action": "create", "name": "probe", "local_path": path}
    )
    assert answer.error == {"message": overlap_refusal(path), "statusCode": 409, "retryable": False}
    beyond_the_path = answer.text.replace(f"'{path}'", "")
    for secret in ("secret", "vault", cast.secret.id, cast.vault.id, "None"):
        assert secret not in beyond_the_path


@pytest.mark.parametrize(
    ("spelled", "normalised"),
    [
        (f"{SECRET_PATH}/src/", f"{SECRET_PATH}/src"),
        ("/srv/alice//secret/src", f"{SECRET_PATH}/src"),
        ("/srv/alice/./secret/src", f"{SECRET_PATH}/src"),
        ("/srv/alice/elsewhere/../secret/src", f"{SECRET_PATH}/src"),
        (f"  {SECRET_PATH}/src  ", f"{SECRET_PATH}/src"),
        (f"//{SECRET_PATH}/src", f"{SECRET_PATH}/src"),
        (f"{SECRET_PATH}/", SECRET_PATH),
        ("/srv/alice/secret/..", "/srv/alice"),
    ],
)
async def test_other_spellings_of_the_same_directory_are_refused_alike(
    app_context: AppContext, cast: Team, spelled: str, normalised: str
) -> None:
    """The check compares the normalised path, as resolution does: every spelling that would capture a cwd below
    the closed project is refused, and the text names the path as it would have been registered."""
    answer = await refused_and_unchanged(
        app_context, cast.bob, {"action": "create", "name": "probe", "local_path": spelled}
    )
    assert answer.text == overlap_refusal(normalised)


async def test_a_path_that_resolution_would_not_match_is_no_capture(app_context: AppContext, cast: Team) -> None:
    """A sibling sharing a string prefix, or another spelling that no cwd below the closed project resolves to,
    is not inside it: registered, and alice's writes below `secret` still land there."""
    for name, path in (("sibling", f"{SECRET_PATH}ive/src"), ("cased", "/SRV/alice/secret/src")):
        await cast.bob.ok("memory_manage", {"action": "create", "name": name, "local_path": path})
    stored = await cast.alice.ok(
        "memory_store", {"action": "create", "content": "still alice's", "cwd": f"{SECRET_PATH}/src/app"}
    )
    assert await project_of(app_context, str(stored.item["id"])) == "secret"


async def test_the_admin_of_neither_and_a_reader_member_are_refused_too(app_context: AppContext, cast: Team) -> None:
    """The role that counts is the effective one in the project the path overlaps: a global admin who is not a
    member, and carl, a reader member of `secret`, are refused like bob; so is alice, an admin member of her own
    projects whose global role is writer (her effective role there is writer)."""
    for caller in (cast.admin, cast.carl, cast.alice):
        path = f"{SECRET_PATH}/tools"
        answer = await refused_and_unchanged(
            app_context, caller, {"action": "create", "name": "nested", "local_path": path}
        )
        assert answer.text == overlap_refusal(path)


async def test_an_admin_of_the_project_may_nest_a_project_inside_it(app_context: AppContext, cast: Team) -> None:
    """With the admin role in `secret` (a global admin made an admin member), a project inside it is registered,
    and cwds below the new path resolve to it: a change that the project's admin chose."""
    await make_admin_member(app_context, cast.secret.id, "admin")
    await cast.admin.ok("memory_manage", {"action": "create", "name": "secret-src", "local_path": f"{SECRET_PATH}/src"})
    stored = await cast.alice.ok(
        "memory_store", {"action": "create", "content": "below the nested one", "cwd": f"{SECRET_PATH}/src/app"}
    )
    assert await project_of(app_context, str(stored.item["id"])) == "secret-src"
    # around `secret` still needs the admin role in `vault`, its sibling below /srv/alice
    answer = await refused_and_unchanged(
        app_context, cast.admin, {"action": "create", "name": "alice-home", "local_path": "/srv/alice"}
    )
    assert answer.text == overlap_refusal("/srv/alice")


async def test_moving_a_project_into_or_around_a_hidden_one_is_refused(app_context: AppContext, cast: Team) -> None:
    """`update` of local_path is a registration too: the admin's own project may not move into, onto or around
    `secret`; it may move to free ground, and keep its path while other fields change."""
    mine = await cast.admin.ok("memory_manage", {"action": "create", "name": "mine", "local_path": "/srv/admin/mine"})
    project_id = str(mine.item["id"])
    for path in (f"{SECRET_PATH}/src", SECRET_PATH, "/srv/alice", "/srv"):
        answer = await refused_and_unchanged(
            app_context, cast.admin, {"action": "update", "project_id": project_id, "local_path": path}
        )
        assert answer.error == {"message": overlap_refusal(path), "statusCode": 409, "retryable": False}
    await cast.admin.ok("memory_manage", {"action": "update", "project_id": project_id, "local_path": "/srv/admin/m2"})
    await cast.admin.ok(
        "memory_manage", {"action": "update", "project_id": project_id, "local_path": "/srv/admin/m2/", "name": "m2"}
    )


async def test_a_path_on_free_ground_is_still_any_writers(app_context: AppContext, cast: Team) -> None:
    """The rule refuses overlaps only: bob registers his own project where no project is registered."""
    created = await cast.bob.ok("memory_manage", {"action": "create", "name": "bobs", "local_path": "/srv/bob/tools"})
    assert created.item["local_path"] == "/srv/bob/tools"


async def test_the_default_project_with_a_path_is_held_to_the_rule(app_context: AppContext, cast: Team) -> None:
    """The default project is no exception: given a path (by an admin, which every admin is there: it stays open
    to everyone), a writer may not register a project below it, an admin may."""
    listed = await cast.admin.ok("memory_manage", {"action": "list"})
    [default] = [row for row in listed.items if row["is_default"]]
    await cast.admin.ok("memory_manage", {"action": "update", "project_id": default["id"], "local_path": "/work"})
    answer = await refused_and_unchanged(
        app_context, cast.bob, {"action": "create", "name": "below-default", "local_path": "/work/bob"}
    )
    assert answer.text == overlap_refusal("/work/bob")
    await cast.admin.ok("memory_manage", {"action": "create", "name": "below-default", "local_path": "/work/team"})


# ---------------------------------------------------------------- B1: names and paths one cannot see


async def test_a_hidden_name_answers_like_a_visible_one(app_context: AppContext, cast: Team) -> None:
    """bob's `create {name: "secret"}` answered `A project named 'secret' or at 'None' already exists`: now the
    same text as for `open`, a project he sees, with no id and no `None`."""
    for name in ("secret", "vault", "open"):
        answer = await refused_and_unchanged(app_context, cast.bob, {"action": "create", "name": name})
        assert answer.error == {"message": name_taken(name), "statusCode": 409, "retryable": False}
    # with a free path too: the name is what is taken, and the path is not echoed
    answer = await refused_and_unchanged(
        app_context, cast.bob, {"action": "create", "name": "secret", "local_path": "/srv/bob/free"}
    )
    assert answer.text == name_taken("secret")


async def test_renaming_to_a_hidden_name_answers_like_a_visible_one(app_context: AppContext, cast: Team) -> None:
    mine = await cast.admin.ok("memory_manage", {"action": "create", "name": "mine"})
    for name in ("vault", "open"):
        answer = await refused_and_unchanged(
            app_context, cast.admin, {"action": "update", "project_id": str(mine.item["id"]), "name": name}
        )
        assert answer.error == {"message": name_taken(name), "statusCode": 409, "retryable": False}


async def test_a_name_taken_meanwhile_names_what_the_call_set_never_none(
    app_context: AppContext, cast: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the check, the unique index decides: the text names what the call asked for, never `at 'None'`."""

    async def nothing_taken(self: ProjectRepository, *args: Any) -> bool:
        return False

    monkeypatch.setattr(ProjectRepository, "name_taken", nothing_taken)
    answer = await refused_and_unchanged(app_context, cast.bob, {"action": "create", "name": "secret"})
    assert answer.error == {
        "message": "Another project took name 'secret' meanwhile; read the projects and retry",
        "statusCode": 409,
        "retryable": False,
    }


# ---------------------------------------------------------------- races


async def test_a_registration_waits_for_one_under_way_and_then_sees_it(app_context: AppContext, cast: Team) -> None:
    """Registrations take turns: while another transaction registers /srv/race (holding the paths lock, not yet
    committed), bob's /srv/race/inner waits instead of passing a check that cannot see it, then is refused."""
    waiting = text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
    async with own_transaction(app_context) as session:
        await session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PROJECT_PATHS_LOCK_KEY})
        await session.execute(
            text("INSERT INTO project (id, name, local_path, is_default) VALUES (:id, 'race', '/srv/race', false)"),
            {"id": uuid.uuid4()},
        )
        call = asyncio.ensure_future(
            cast.bob("memory_manage", {"action": "create", "name": "inner", "local_path": "/srv/race/inner"})
        )
        for _ in range(400):  # until bob's call waits for the lock (or has answered: then the assertion says so)
            async with own_transaction(app_context) as probe:
                if (await probe.execute(waiting)).scalar_one() or call.done():
                    break
            await asyncio.sleep(0.025)
        assert not call.done(), (await call).text
    answer = await call
    assert answer.text == overlap_refusal("/srv/race/inner")
    async with own_transaction(app_context) as session:
        names = (await session.execute(text("SELECT name FROM project WHERE name IN ('race', 'inner')"))).scalars()
        assert sorted(names) == ["race"]
