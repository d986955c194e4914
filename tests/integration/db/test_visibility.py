"""Per-project membership (docs/SECURITY.md): the visibility rule's details behind the access matrix's
membership dimension (tests/e2e/test_access_matrix.py), the member commands and the statement guard."""

from __future__ import annotations

import argparse
import json
import uuid
from typing import Any

import pytest
from sqlalchemy import select, text

from app import cli
from app.db.models import Role, Thought
from app.db.visibility import (
    RESOLVED_KEY,
    SHADOWED,
    UNSCOPED,
    Caller,
    UnscopedStatement,
    acting_as,
    resolved,
    roles_in,
)
from app.errors import AppError
from app.main import local_principal
from app.services.admin.membership import MemberService, require_role
from app.services.admin.portability import Portability
from app.services.context import AppContext
from tests.conftest import make_user
from tests.support.helpers import ToolCaller, rows
from tests.support.membership import SECRET, caller, close, vault


async def test_a_non_members_answers_do_not_change_when_a_closed_project_does(app_context: AppContext) -> None:
    """Counts, totals, warnings, health, slots, primers, queues: nothing a non-member reads depends on a closed
    project, so every answer is the same before and after it grows."""
    admin = await caller(app_context, "owner")
    nora = await caller(app_context, "nora")
    await admin.ok("memory_store", {"action": "create", "content": "an open note about builds", "tags": ["todo"]})
    project_id, path, _ = await vault(admin)
    await close(app_context, project_id, {})
    reads: list[tuple[str, dict[str, Any]]] = [
        ("memory_recall", {"action": "search", "query": f"{SECRET} note builds"}),
        ("memory_recall", {"action": "list"}),
        ("memory_recall", {"action": "list", "cwd": path}),
        ("memory_recall", {"action": "clusters", "query": "note"}),
        ("memory_status", {"action": "health", "include_details": True}),
        ("memory_status", {"action": "frontier"}),
        ("memory_status", {"action": "slots"}),
        ("memory_manage", {"action": "list"}),
        ("memory_manage", {"action": "resolve", "cwd": path}),
        ("edge_review", {"action": "list"}),
        ("retention_review", {"action": "list", "min_age_days": 0.001, "importance_floor": 1.0}),
        ("memory_crystallize", {"action": "graph"}),
        ("memory_reflect", {"action": "timeline", "status": "all"}),
        ("memory_primers", {"action": "list"}),
    ]
    before = [(await nora.ok(tool, arguments)).text for tool, arguments in reads]
    # The closed project grows: thoughts (a todo, a draft, a duplicate), edges, a cluster, slots, a primer.
    more = [
        str(
            (
                await admin.ok(
                    "memory_store", {"action": "create", "content": f"{SECRET} more {n}", "cwd": path, "tags": ["todo"]}
                )
            ).item["id"]
        )
        for n in range(3)
    ]
    await admin.ok("memory_store", {"action": "create", "content": f"{SECRET} draft", "cwd": path, "status": "draft"})
    await admin.ok("memory_store", {"action": "link", "source_id": more[0], "target_id": more[1]})
    await admin.ok("memory_crystallize", {"action": "cluster", "thought_ids": more[1:], "cwd": path})
    await admin.ok("memory_reflect", {"action": "reflect", "cwd": path, "summary": SECRET, "goals_add": [SECRET]})
    for _ in range(6):
        await admin.ok("memory_recall", {"action": "get", "thought_id": more[2]})
    after = [(await nora.ok(tool, arguments)).text for tool, arguments in reads]
    for (tool, arguments), first, second in zip(reads, before, after, strict=True):
        assert SECRET not in second, (tool, arguments, second[:300])
        assert _stable(first) == _stable(second), (tool, arguments)


def _stable(body: str) -> Any:
    """An answer without what moves by itself between two reads (times, hit counts)."""
    volatile = {"updated_at", "created_at", "last_hit_at", "hit_count", "generated_at", "importance", "age_days"}

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: strip(item) for key, item in value.items() if key not in volatile}
        if isinstance(value, list):
            return [strip(item) for item in value]
        return value

    try:
        return strip(json.loads(body))
    except json.JSONDecodeError:
        return body


async def test_a_global_thought_of_a_closed_project_is_read_only_to_non_members(app_context: AppContext) -> None:
    admin = await caller(app_context, "owner")
    nora = await caller(app_context, "nora", Role.writer)
    mia = await caller(app_context, "mia", Role.writer)
    project_id, path, _ = await vault(admin)
    shared = await admin.ok(
        "memory_store", {"action": "create", "content": "a published house rule", "cwd": path, "is_global": True}
    )
    shared_id = str(shared.item["id"])
    await close(app_context, project_id, {"mia": Role.writer})

    got = await nora.ok("memory_recall", {"action": "get", "thought_id": shared_id})
    assert got.item["project"] == "Vault"  # marking a thought global publishes it, its project's name included
    found = await nora.ok("memory_recall", {"action": "search", "query": "published house rule"})
    assert [row["thought"]["id"] for row in found.items] == [shared_id]
    refused = await nora("memory_store", {"action": "update", "thought_id": shared_id, "content": "rewritten"})
    assert refused.error["message"] == (
        "Forbidden: memory_store action=update needs the writer role; user 'nora' is a reader"
    )
    assert await rows(nora, "SELECT content FROM thought WHERE id = :id", id=uuid.UUID(shared_id)) == [
        ("a published house rule",)
    ]
    archived = await nora("memory_supersede", {"action": "archive", "thought_id": shared_id})
    assert archived.error["statusCode"] == 403
    await mia.ok("memory_store", {"action": "update", "thought_id": shared_id, "content": "rewritten by a member"})


async def test_the_creator_of_a_project_is_its_admin_and_the_global_role_stays_the_ceiling(
    app_context: AppContext,
) -> None:
    walt = await caller(app_context, "walt", Role.writer)
    created = await walt.ok("memory_manage", {"action": "create", "name": "Walt's", "local_path": "/srv/walts"})
    project_id = str(created.item["id"])
    async with app_context.db.unit_of_work() as session:
        members = [(row.user_name, row.role) for row in await MemberService(session).list(project_id)]
    assert members == [(None, Role.admin), ("walt", Role.admin)]  # everyone first: open until an admin closes it
    await close(app_context, project_id, {})
    # An admin of the project, but a writer everywhere: the lower role counts.
    refused = await walt("memory_manage", {"action": "update", "project_id": project_id, "description": "x"})
    assert (
        refused.error["message"]
        == "Forbidden: memory_manage action=update needs the admin role; user 'walt' is a writer"
    )
    await walt.ok("memory_store", {"action": "create", "content": "mine", "cwd": "/srv/walts"})
    # A global admin who is only a writer there may write but not administer it.
    ada = await caller(app_context, "ada")
    await close(app_context, project_id, {"ada": Role.writer})
    await ada.ok("memory_store", {"action": "create", "content": "hers", "cwd": "/srv/walts"})
    refused = await ada("memory_manage", {"action": "update", "project_id": project_id, "description": "x"})
    assert (
        refused.error["message"]
        == "Forbidden: memory_manage action=update needs the admin role; user 'ada' is a writer"
    )
    # A global reader made admin of the project is still a reader.
    rita = await caller(app_context, "rita", Role.reader)
    await close(app_context, project_id, {"rita": Role.admin})
    listed = await rita.ok("memory_recall", {"action": "list", "cwd": "/srv/walts"})
    assert {row["content"] for row in listed.items} == {"mine", "hers"}
    refused = await rita("memory_store", {"action": "create", "content": "no", "cwd": "/srv/walts"})
    assert (
        refused.error["message"]
        == "Forbidden: memory_store action=create needs the writer role; user 'rita' is a reader"
    )


async def test_a_project_created_in_a_call_is_visible_to_that_call(app_context: AppContext) -> None:
    """Visibility is read when a unit of work begins: a project (or the default one) created inside it joins."""
    admin = await caller(app_context, "owner")
    project_id, _, _ = await vault(admin)
    await close(app_context, project_id, {})
    async with app_context.db.unit_of_work() as session:
        await session.execute(text("DELETE FROM project WHERE is_default"))
    nora = await caller(app_context, "nora", Role.writer)
    created = await nora.ok("memory_manage", {"action": "create", "name": "Fresh", "local_path": "/srv/fresh"})
    assert created.item["name"] == "Fresh"
    stored = await nora.ok("memory_store", {"action": "create", "content": "lands in a new default project"})
    assert stored.item["project"] == "default"


async def test_a_writes_role_check_reads_the_roles_of_its_projects_only(app_context: AppContext) -> None:
    """require_role reads the caller's roles in the projects it is given, never every project's (one row per
    project for each write call: ~12 ms of CPU for a 1-row bulk_create at 1,000 projects, docs/BENCHMARKS.md),
    and answers as the full read does: the lower of the two roles, a reader where the project is not visible."""
    admin = await caller(app_context, "owner")
    open_id, _, _ = await vault(admin, "Open")
    hidden_id, _, _ = await vault(admin, "Hidden")
    member_id, _, _ = await vault(admin, "Member")
    nora = await make_user(app_context, "nora", Role.writer)
    await close(app_context, hidden_id, {})
    await close(app_context, member_id, {"nora": Role.admin})
    opened, hidden, member = uuid.UUID(open_id), uuid.UUID(hidden_id), uuid.UUID(member_id)
    with acting_as(Caller(nora, "memory_store action=create", Role.writer)):
        async with app_context.db.unit_of_work() as session:
            found = await roles_in(session, [opened, hidden, member])
            assert found is not None
            assert found[1] == {opened: Role.writer, hidden: None, member: Role.writer}
            await require_role(session, [opened, member])
            with pytest.raises(AppError) as refused:
                await require_role(session, [member, hidden])
            assert refused.value.message == (
                "Forbidden: memory_store action=create needs the writer role; user 'nora' is a reader"
            )
            assert session.info.get(RESOLVED_KEY) is None  # no read of every project's roles
            full = await resolved(session)
            assert full is not None and dict(full.roles) == {opened: Role.writer, member: Role.writer}


async def test_member_commands(app_context: AppContext) -> None:
    admin = await caller(app_context, "owner")
    await caller(app_context, "mia", Role.writer)
    project_id, _, _ = await vault(admin)
    async with app_context.db.unit_of_work() as session:
        members = MemberService(session)
        added = await members.add("Vault", "mia", Role.reader)
        assert (added.project.id, added.user_name, added.role) == (uuid.UUID(project_id), "mia", Role.reader)
        await members.add(project_id, "mia", Role.writer)  # by id; a second add changes the role
        removed = await members.remove("Vault", None)
        assert (removed.user_name, removed.role) == (None, Role.admin)
        listed = [(row.project_name, row.user_name, row.role) for row in await members.list("Vault")]
        assert listed == [("Vault", "mia", Role.writer), ("Vault", "owner", Role.admin)]
    refusals = {
        ("Nowhere", "mia"): "No project 'Nowhere' (by id or name; see memory_manage action=list)",
        (
            "Vault",
            "ghost",
        ): "No user 'ghost' (by id or name): create one with `synaptomind token create --user NAME --role …`",
    }
    for (project, user), message in refusals.items():
        async with app_context.db.unit_of_work() as session:
            with pytest.raises(AppError) as refused:
                await MemberService(session).add(project, user, Role.reader)
        assert refused.value.message == message
    async with app_context.db.unit_of_work() as session:
        with pytest.raises(AppError) as missing:
            await MemberService(session).remove("Vault", None)
    assert missing.value.message == "Project 'Vault' has no membership for everyone (see `synaptomind member list`)"
    await admin.ok("memory_store", {"action": "create", "content": "makes the default project"})
    async with app_context.db.unit_of_work() as session:
        with pytest.raises(AppError) as default:
            await MemberService(session).remove("default", None)
    assert default.value.message.startswith("The default project stays open to everyone")


def test_the_member_parser_takes_a_user_or_everyone() -> None:
    parser = cli._parser()
    add = parser.parse_args(["member", "add", "Vault", "mia", "--role", "writer"])
    assert (add.handler, add.project, add.user, add.everyone, add.role) == (
        cli.cmd_member_add,
        "Vault",
        "mia",
        False,
        "writer",
    )
    closing = parser.parse_args(["member", "remove", "Vault", "--everyone"])
    assert (closing.handler, closing.user, closing.everyone) == (cli.cmd_member_remove, None, True)
    assert parser.parse_args(["member", "list"]).project is None
    for both_or_neither in (
        argparse.Namespace(user="mia", everyone=True),
        argparse.Namespace(user=None, everyone=False),
    ):
        with pytest.raises(SystemExit, match="name a USER or pass --everyone"):
            cli._member_target(both_or_neither)


async def test_a_statement_without_the_rule_is_refused_in_a_restricted_call(app_context: AppContext) -> None:
    """The guard behind 'enforced in one place': Core or text() SQL on project data that does not go through
    the visibility rule fails loudly instead of answering a member's view with everything."""
    admin = await caller(app_context, "owner")
    project_id, _, ids = await vault(admin)
    await close(app_context, project_id, {})
    nora = await make_user(app_context, "nora", Role.admin)
    with acting_as(Caller(nora, "test")):
        async with app_context.db.unit_of_work() as session:
            with pytest.raises(UnscopedStatement):
                await session.execute(select(Thought.__table__.c.id))
        async with app_context.db.unit_of_work() as session:
            with pytest.raises(UnscopedStatement):
                await session.execute(text("SELECT id FROM thought"))
        async with app_context.db.unit_of_work() as session:
            assert (await session.execute(select(Thought.id).where(Thought.id == uuid.UUID(ids[0])))).all() == []
            shadowed = text("SELECT count(*) FROM thought WHERE content LIKE :word").execution_options(**SHADOWED)
            assert (await session.execute(shadowed, {"word": f"{SECRET}%"})).scalar_one() == 0
            unscoped = text("SELECT count(*) FROM thought WHERE content LIKE :word").execution_options(**UNSCOPED)
            assert (await session.execute(unscoped, {"word": f"{SECRET}%"})).scalar_one() == 3
    # The local user (stdio, auth mode none) sees every project.
    local = Caller(await make_user(app_context, "local", Role.admin))
    with acting_as(Caller(local.principal.__class__(**{**local.principal.__dict__, "sees_everything": True}))):
        async with app_context.db.unit_of_work() as session:
            assert len((await session.execute(select(Thought.id))).all()) == 3


async def test_an_export_for_a_user_holds_only_what_they_may_read(app_context: AppContext) -> None:
    admin = await caller(app_context, "owner")
    project_id, _, _ = await vault(admin)
    shared = await admin.ok(
        "memory_store", {"action": "create", "content": "a published rule", "cwd": "/srv/vault", "is_global": True}
    )
    await admin.ok("memory_store", {"action": "create", "content": "an open note"})
    await close(app_context, project_id, {})
    nora = await make_user(app_context, "nora", Role.reader)
    with acting_as(Caller(nora, "export")):
        async with app_context.db.unit_of_work() as session:
            lines = [line async for line in Portability(session).export(None)]
            total = await Portability(session).count(None)
    exported = [json.loads(line) for line in lines]
    assert total == len(lines)
    assert SECRET not in "".join(lines)
    # The closed project's id travels only with its global thought (marking a thought global publishes it).
    assert [row["kind"] for row in exported if project_id in json.dumps(row)] == ["thought"]
    assert {(row["kind"], row.get("content")) for row in exported if row["kind"] == "thought"} == {
        ("thought", "an open note"),
        ("thought", "a published rule"),
    }
    assert shared.item["id"] in {row["id"] for row in exported}


async def test_the_local_user_of_stdio_sees_every_project(app_context: AppContext) -> None:
    """stdio and auth mode none act as the local user, as before membership: closed projects included."""
    admin = await caller(app_context, "owner")
    project_id, path, ids = await vault(admin)
    await close(app_context, project_id, {})
    local = ToolCaller(app_context, await local_principal(app_context, "me"))
    listed = await local.ok("memory_recall", {"action": "list", "cwd": path})
    assert sorted(row["id"] for row in listed.items) == sorted(ids)
    await local.ok("memory_store", {"action": "update", "thought_id": ids[0], "content": "edited locally"})


async def test_deleting_a_project_moves_the_rows_its_admin_cannot_read_too(app_context: AppContext) -> None:
    """An edge from the deleted project to a closed project's thought is moved with the rest, not cascaded away."""
    owner = await caller(app_context, "owner")
    vault_id, _, vault_ids = await vault(owner)
    team = await owner.ok("memory_manage", {"action": "create", "name": "Team", "local_path": "/srv/team"})
    mine = await owner.ok("memory_store", {"action": "create", "content": "team note", "cwd": "/srv/team"})
    edge = await owner.ok("memory_store", {"action": "link", "source_id": mine.item["id"], "target_id": vault_ids[0]})
    await close(app_context, vault_id, {})
    ada = await caller(app_context, "ada")
    arguments = {"action": "delete", "project_id": team.item["id"]}
    preview = await ada.ok("memory_manage", arguments)
    assert preview.item["thought_count"] == 1
    await ada.ok("memory_manage", {**arguments, "confirm": True, "preview_token": preview.meta["preview"]["token"]})
    moved = await rows(
        ada,
        "SELECT p.is_default FROM edge e JOIN project p ON p.id = e.project_id WHERE e.id = :id",
        id=uuid.UUID(edge.item["id"]),
    )
    assert moved == [(True,)]
