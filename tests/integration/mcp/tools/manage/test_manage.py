"""memory_manage: projects, their scope rules and the delete preview → confirm flow."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from sqlalchemy import text

from app.services.admin.projects import ProjectService
from tests.support.helpers import ToolCaller, own_transaction, snapshot


async def test_list_starts_with_the_default_project(writer: ToolCaller) -> None:
    answer = await writer.ok("memory_manage", {"action": "list"})
    assert [project["name"] for project in answer.items] == ["default"]
    assert answer.items[0]["is_default"] is True
    assert answer.meta == {
        "action": "list",
        "scope": None,
        "counts": {"total": 1, "returned": 1, "filtered_out": 0},
        "degraded": False,
        "warnings": [],
    }


async def test_create_answers_the_project(writer: ToolCaller) -> None:
    answer = await writer.ok(
        "memory_manage", {"action": "create", "name": "Demo", "local_path": "/work/demo/", "description": "d"}
    )
    item = answer.item
    assert set(item) == {"id", "name", "local_path", "description", "is_default", "created_at"}
    assert (item["name"], item["local_path"], item["description"], item["is_default"]) == (
        "Demo",
        "/work/demo",
        "d",
        False,
    )
    assert answer.meta["counts"] == {"total": 1, "returned": 1, "filtered_out": 0}


async def test_duplicate_name_is_a_409_and_writes_nothing(writer: ToolCaller) -> None:
    await writer.ok("memory_manage", {"action": "create", "name": "Demo"})
    before = await snapshot(writer.context)
    answer = await writer("memory_manage", {"action": "create", "name": "Demo"})
    assert answer.error["statusCode"] == 409
    assert answer.error["retryable"] is False
    assert await snapshot(writer.context) == before


# ---------------------------------------------------------------- helpers

META_ONE = {"total": 1, "returned": 1, "filtered_out": 0}
PROJECT_KEYS = {"id", "name", "local_path", "description", "is_default", "created_at"}


def meta(action: str, counts: dict[str, int] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "action": action,
        "scope": None,
        "counts": counts or META_ONE,
        "degraded": False,
        "warnings": [],
        **extra,
    }


async def create_project(caller: ToolCaller, name: str, path: str | None = None) -> dict[str, Any]:
    arguments: dict[str, Any] = {"action": "create", "name": name}
    if path is not None:
        arguments["local_path"] = path
    return dict((await caller.ok("memory_manage", arguments)).item)


async def rows(caller: ToolCaller, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    async with caller.context.db.unit_of_work() as session:
        return [tuple(row) for row in (await session.execute(text(sql), params)).all()]


async def default_project_id(caller: ToolCaller) -> str:
    """The default project's id (`list` creates the default project on first use)."""
    await caller.ok("memory_manage", {"action": "list"})
    [(project_id,)] = await rows(caller, "SELECT id FROM project WHERE is_default")
    return str(project_id)


# ---------------------------------------------------------------- list


async def test_list_orders_default_first_then_by_name(writer: ToolCaller) -> None:
    zeta = await create_project(writer, "Zeta", "/srv/zeta")
    alpha = await create_project(writer, "Alpha")
    answer = await writer.ok("memory_manage", {"action": "list"})
    assert [project["name"] for project in answer.items] == ["default", "Alpha", "Zeta"]
    assert all(set(project) == PROJECT_KEYS for project in answer.items)
    assert answer.items[1] == alpha
    assert answer.items[2] == zeta
    assert answer.meta == meta("list", {"total": 3, "returned": 3, "filtered_out": 0})


async def test_list_fields_narrows_each_row(writer: ToolCaller) -> None:
    await create_project(writer, "Alpha", "/srv/alpha")
    answer = await writer.ok("memory_manage", {"action": "list", "fields": ["name", "local_path"]})
    assert answer.items == [
        {"name": "default", "local_path": None},
        {"name": "Alpha", "local_path": "/srv/alpha"},
    ]


# ---------------------------------------------------------------- create


async def test_create_without_optional_fields(writer: ToolCaller) -> None:
    answer = await writer.ok("memory_manage", {"action": "create", "name": "  Bare  "})
    item = answer.item
    assert set(item) == PROJECT_KEYS
    assert (item["name"], item["local_path"], item["description"], item["is_default"]) == (
        "Bare",
        None,
        None,
        False,
    )
    assert item["created_at"].endswith("Z")
    assert answer.meta == meta("create")
    assert await rows(writer, "SELECT name, local_path FROM project WHERE id = :id", id=item["id"]) == [("Bare", None)]


async def test_duplicate_name_texts(writer: ToolCaller) -> None:
    await create_project(writer, "Demo")
    answer = await writer("memory_manage", {"action": "create", "name": "Demo", "local_path": "/elsewhere"})
    message = (  # the same text for a project the caller cannot see: no id (tests/security/test_paths.py)
        "A project named 'Demo' already exists (project names are unique on the server, also among projects "
        "you cannot see): choose another name"
    )
    assert answer.text == message
    assert answer.error == {"message": message, "statusCode": 409, "retryable": False}


async def test_duplicate_path_is_a_409_and_writes_nothing(admin: ToolCaller, writer: ToolCaller) -> None:
    await create_project(admin, "Demo", "/srv/demo")
    before = await snapshot(admin.context)
    answer = await admin("memory_manage", {"action": "create", "name": "Other", "local_path": "/srv/demo/"})
    message = "Project 'Demo' is already registered at '/srv/demo'"  # named: the caller is an admin there
    assert answer.error == {"message": message, "statusCode": 409, "retryable": False}
    # a writer is no admin of it: the paths rule's one text, which names no project (tests/security/test_paths.py)
    refused = await writer("memory_manage", {"action": "create", "name": "Other", "local_path": "/srv/demo/"})
    assert refused.error["statusCode"] == 409
    assert refused.text.startswith("Refused: local_path '/srv/demo' is the path of another project")
    assert await snapshot(admin.context) == before


async def test_create_refuses_a_blank_name(writer: ToolCaller) -> None:
    before = await snapshot(writer.context)
    answer = await writer("memory_manage", {"action": "create", "name": "   "})
    assert answer.error["statusCode"] == 400
    assert answer.text.startswith("Invalid argument 'name' for memory_manage action=create")
    missing = await writer("memory_manage", {"action": "create"})
    assert missing.text == "Missing required argument 'name' for memory_manage action=create"
    assert await snapshot(writer.context) == before


# ---------------------------------------------------------------- update


async def test_update_answers_success_and_changes_the_row(admin: ToolCaller) -> None:
    project = await create_project(admin, "Old", "/srv/old")
    answer = await admin.ok(
        "memory_manage",
        {
            "action": "update",
            "project_id": project["id"],
            "name": "New",
            "local_path": "/srv/new/",
            "description": "renamed",
        },
    )
    assert answer.result == {
        "item": {"success": True, "project_id": project["id"]},
        "meta": meta("update"),
    }
    listed = await admin.ok("memory_manage", {"action": "list"})
    [updated] = [row for row in listed.items if row["id"] == project["id"]]
    assert updated == {**project, "name": "New", "local_path": "/srv/new", "description": "renamed"}


async def test_update_keeps_fields_it_was_not_given(admin: ToolCaller) -> None:
    project = await create_project(admin, "Keep", "/srv/keep")
    await admin.ok("memory_manage", {"action": "update", "project_id": project["id"], "description": "only this"})
    assert await rows(admin, "SELECT name, local_path, description FROM project WHERE id = :id", id=project["id"]) == [
        ("Keep", "/srv/keep", "only this")
    ]


async def test_update_to_its_own_name_is_not_a_conflict(admin: ToolCaller) -> None:
    project = await create_project(admin, "Same", "/srv/same")
    await admin.ok(
        "memory_manage",
        {"action": "update", "project_id": project["id"], "name": "Same", "local_path": "/srv/same"},
    )


async def test_update_to_a_taken_name_or_path_is_a_409(admin: ToolCaller) -> None:
    await create_project(admin, "Taken", "/srv/taken")
    project = await create_project(admin, "Mine", "/srv/mine")
    before = await snapshot(admin.context)
    by_name = await admin("memory_manage", {"action": "update", "project_id": project["id"], "name": "Taken"})
    by_path = await admin(
        "memory_manage", {"action": "update", "project_id": project["id"], "local_path": "/srv/taken"}
    )
    assert by_name.error["statusCode"] == 409 and by_path.error["statusCode"] == 409
    assert by_name.text.startswith("A project named 'Taken' already exists")
    assert by_path.text == "Project 'Taken' is already registered at '/srv/taken'"
    assert await snapshot(admin.context) == before
    assert await rows(admin, "SELECT name, local_path FROM project WHERE id = :id", id=project["id"]) == [
        ("Mine", "/srv/mine")
    ]


async def test_update_unknown_project_is_a_404(admin: ToolCaller) -> None:
    unknown = str(uuid.uuid4())
    answer = await admin("memory_manage", {"action": "update", "project_id": unknown, "name": "X"})
    message = f"Project {unknown} not found (list them with memory_manage action=list)"
    assert answer.error == {"message": message, "statusCode": 404, "retryable": False}


async def test_update_refuses_a_malformed_id_naming_it(admin: ToolCaller) -> None:
    answer = await admin("memory_manage", {"action": "update", "project_id": "nope", "name": "X"})
    assert answer.error == {
        "message": "Invalid 'project_id': 'nope' is not a valid id (a UUID)",
        "statusCode": 400,
        "retryable": False,
    }
    missing = await admin("memory_manage", {"action": "update", "name": "X"})
    assert missing.text == "Missing required argument 'project_id' for memory_manage action=update"


# ---------------------------------------------------------------- delete


async def test_delete_preview_shape_and_writes_only_its_token(admin: ToolCaller) -> None:
    project = await create_project(admin, "Doomed", "/srv/doomed")
    await default_project_id(admin)
    await admin.ok("memory_store", {"action": "create", "content": "doomed thought one", "cwd": "/srv/doomed"})
    await admin.ok("memory_store", {"action": "create", "content": "doomed thought two", "cwd": "/srv/doomed"})
    before = await snapshot(admin.context)
    answer = await admin.ok("memory_manage", {"action": "delete", "project_id": project["id"]})
    item = answer.item
    token = item["preview_token"]
    assert uuid.UUID(token)
    consequence = (
        "Deletes project 'Doomed' and moves its 2 thought(s) to the default project 'default'; its slots are dropped."
    )
    instruction = (
        f"Call memory_manage again with action=delete, project_id={project['id']}, confirm=true, "
        f"preview_token={token} to proceed."
    )
    assert item == {
        "status": "preview",
        "action": "preview",
        "project": project,
        "thought_count": 2,
        "consequence": consequence,
        "instruction": instruction,
        "preview_token": token,
    }
    assert answer.meta == meta(
        "delete",
        preview={"token": token, "destructive": True, "consequence": consequence, "instruction": instruction},
    )
    assert await snapshot(admin.context) == {**before, "preview_token": before["preview_token"] + 1}
    assert await rows(admin, "SELECT name FROM project WHERE id = :id", id=project["id"]) == [("Doomed",)]


async def test_delete_moves_thoughts_edges_links_and_hits_to_the_default_project(admin: ToolCaller) -> None:
    project = await create_project(admin, "Doomed", "/srv/doomed")
    default_id = await default_project_id(admin)
    parent = (
        await admin.ok(
            "memory_store",
            {
                "action": "create",
                "content": "the parent thought",
                "cwd": "/srv/doomed",
                "url_links": [{"text": "docs", "url": "https://example.org/docs"}],
            },
        )
    ).item
    child = (
        await admin.ok(
            "memory_store",
            {
                "action": "create",
                "content": "the child thought",
                "cwd": "/srv/doomed",
                "parent_id": parent["id"],
            },
        )
    ).item
    outsider = (await admin.ok("memory_store", {"action": "create", "content": "stays where it is"})).item
    await admin.ok("memory_recall", {"action": "get", "thought_id": parent["id"]})  # one recorded hit
    await rows(
        admin,
        "INSERT INTO slot (id, project_id, name, content) VALUES (:id, :project, 'project_context', 'ctx') "
        "RETURNING id",
        id=uuid.uuid4(),
        project=project["id"],
    )
    [(edge_id,)] = await rows(admin, "SELECT id FROM edge")
    preview = await admin.ok("memory_manage", {"action": "delete", "project_id": project["id"]})
    token = preview.item["preview_token"]

    answer = await admin.ok(
        "memory_manage",
        {"action": "delete", "project_id": project["id"], "confirm": True, "preview_token": token},
    )
    assert answer.result == {
        "item": {"action": "deleted", "project": project, "thoughts_moved": 2, "moved_to": default_id},
        "meta": meta("delete"),
    }
    assert "preview" not in answer.meta
    assert await rows(admin, "SELECT count(*) FROM project WHERE id = :id", id=project["id"]) == [(0,)]
    moved = await rows(
        admin,
        "SELECT id::text, project_id::text FROM thought WHERE id IN (:a, :b) ORDER BY content",
        a=parent["id"],
        b=child["id"],
    )
    assert moved == [(child["id"], default_id), (parent["id"], default_id)]
    assert await rows(admin, "SELECT project_id::text FROM thought WHERE id = :id", id=outsider["id"]) == [
        (default_id,)
    ]
    assert await rows(admin, "SELECT id, source_id::text, target_id::text, type::text, project_id::text FROM edge") == [
        (edge_id, parent["id"], child["id"], "parent", default_id)
    ]
    assert await rows(admin, "SELECT project_id::text FROM thought_url_link") == [(default_id,)]
    assert await rows(admin, "SELECT project_id::text, hit_count FROM thought_hit") == [(default_id, 1)]
    assert await rows(admin, "SELECT count(*) FROM slot") == [(0,)]

    got = await admin.ok("memory_recall", {"action": "get", "thought_id": child["id"], "include_edges": True})
    assert got.item["project"] == "default"
    assert [(entry["edge"]["id"], entry["thought"]["id"]) for entry in got.item["upstream"]] == [
        (str(edge_id), parent["id"])
    ]


async def test_deleting_the_default_project_is_refused(admin: ToolCaller) -> None:
    default_id = await default_project_id(admin)
    before = await snapshot(admin.context)
    answer = await admin("memory_manage", {"action": "delete", "project_id": default_id})
    message = "The default project cannot be deleted (it receives the thoughts of deleted projects)"
    assert answer.error == {"message": message, "statusCode": 400, "retryable": False}
    token = str(uuid.uuid4())  # no preview could have issued one
    confirmed = await admin(
        "memory_manage",
        {"action": "delete", "project_id": default_id, "confirm": True, "preview_token": token},
    )
    assert confirmed.error["statusCode"] == 400
    assert confirmed.text.startswith(f"preview_token {token} is unknown")
    assert await snapshot(admin.context) == before


async def test_delete_unknown_project_is_a_404_and_issues_no_token(admin: ToolCaller) -> None:
    unknown = str(uuid.uuid4())
    before = await snapshot(admin.context)
    answer = await admin("memory_manage", {"action": "delete", "project_id": unknown})
    message = f"Project {unknown} not found (list them with memory_manage action=list)"
    assert answer.error == {"message": message, "statusCode": 404, "retryable": False}
    assert await snapshot(admin.context) == before


# ---------------------------------------------------------------- resolve


async def test_resolve_the_registered_path_and_a_subdirectory(reader: ToolCaller, admin: ToolCaller) -> None:
    project = await create_project(admin, "Demo", "/srv/demo")
    await create_project(admin, "Nested", "/srv/demo/vendor/lib")  # inside Demo: its admin's to register
    expected = {"id": project["id"], "name": "Demo", "local_path": "/srv/demo"}
    for cwd in ("/srv/demo", "/srv/demo/", "/srv/demo/src/app", "/srv/demo/vendor"):
        answer = await reader.ok("memory_manage", {"action": "resolve", "cwd": cwd})
        assert answer.result == {"item": expected, "meta": meta("resolve")}, cwd
    nested = await reader.ok("memory_manage", {"action": "resolve", "cwd": "/srv/demo/vendor/lib/x"})
    assert nested.item["name"] == "Nested"


async def test_resolve_of_an_unknown_path_answers_null(reader: ToolCaller, writer: ToolCaller) -> None:
    await create_project(writer, "Demo", "/srv/demo")
    for cwd in ("/srv/other", "/srv/demo-sibling", "/srv"):
        answer = await reader.ok("memory_manage", {"action": "resolve", "cwd": cwd})
        assert answer.result == {
            "item": None,
            "meta": meta("resolve", {"total": 0, "returned": 0, "filtered_out": 0}, reason="no_match"),
        }, cwd


async def test_resolve_without_cwd_is_an_error_naming_cwd(reader: ToolCaller) -> None:
    for arguments in (
        {"action": "resolve"},
        {"action": "resolve", "cwd": ""},
        {"action": "resolve", "cwd": "  "},
    ):
        answer = await reader("memory_manage", arguments)
        assert answer.is_error, arguments
        assert answer.text.startswith("Missing required argument 'cwd' for memory_manage action=resolve")
        assert answer.error == {"message": answer.text, "statusCode": 400, "retryable": False}


# ---------------------------------------------------------------- roles


async def test_writer_may_create_but_not_update_or_delete(writer: ToolCaller, admin: ToolCaller) -> None:
    project = await create_project(writer, "Team", "/srv/team")
    before = await snapshot(writer.context)
    for action, extra in (("update", {"name": "Hijacked"}), ("delete", {}), ("delete", {"confirm": True})):
        answer = await writer("memory_manage", {"action": action, "project_id": project["id"], **extra})
        message = f"Forbidden: memory_manage action={action} needs the admin role; user 'writer' is a writer"
        assert answer.text == message
        assert answer.error == {"message": message, "statusCode": 403, "retryable": False}
    assert await snapshot(writer.context) == before
    assert await rows(writer, "SELECT name FROM project WHERE id = :id", id=project["id"]) == [("Team",)]
    await admin.ok("memory_manage", {"action": "update", "project_id": project["id"], "description": "ok"})


async def test_reader_may_list_and_resolve_but_not_create(reader: ToolCaller, writer: ToolCaller) -> None:
    await create_project(writer, "Team", "/srv/team")
    listed = await reader.ok("memory_manage", {"action": "list"})
    assert [row["name"] for row in listed.items] == ["default", "Team"]
    assert (await reader.ok("memory_manage", {"action": "resolve", "cwd": "/srv/team/x"})).item["name"] == "Team"
    before = await snapshot(reader.context)
    answer = await reader("memory_manage", {"action": "create", "name": "Mine"})
    message = "Forbidden: memory_manage action=create needs the writer role; user 'reader' is a reader"
    assert answer.error == {"message": message, "statusCode": 403, "retryable": False}
    assert await snapshot(reader.context) == before


# ---------------------------------------------------------------- argument edge cases


async def test_a_blank_local_path_registers_no_path(writer: ToolCaller) -> None:
    first = await writer.ok("memory_manage", {"action": "create", "name": "One", "local_path": "   "})
    second = await writer.ok("memory_manage", {"action": "create", "name": "Two", "local_path": ""})
    assert (first.item["local_path"], second.item["local_path"]) == (None, None)
    assert await rows(writer, "SELECT count(*) FROM project WHERE local_path IS NOT NULL") == [(0,)]


async def test_update_cannot_clear_the_name(admin: ToolCaller) -> None:
    project = await create_project(admin, "Named", "/srv/named")
    before = await snapshot(admin.context)
    answer = await admin("memory_manage", {"action": "update", "project_id": project["id"], "name": None})
    message = (
        "Invalid argument 'name' for memory_manage action=update: a project always has a name (omit 'name' to keep it)"
    )
    assert answer.error == {"message": message, "statusCode": 400, "retryable": False}
    assert await snapshot(admin.context) == before


async def test_update_with_null_path_and_description_clears_them(admin: ToolCaller) -> None:
    project = await create_project(admin, "Clear", "/srv/clear")
    await admin.ok(
        "memory_manage",
        {"action": "update", "project_id": project["id"], "local_path": None, "description": None},
    )
    assert await rows(admin, "SELECT local_path, description FROM project WHERE id = :id", id=project["id"]) == [
        (None, None)
    ]
    assert (await admin.ok("memory_manage", {"action": "resolve", "cwd": "/srv/clear"})).item is None


async def test_delete_confirm_follows_the_instruction_for_any_id_spelling(admin: ToolCaller) -> None:
    project = await create_project(admin, "Spelled", "/srv/spelled")
    spelled = project["id"].replace("-", "").upper()
    preview = await admin.ok("memory_manage", {"action": "delete", "project_id": spelled})
    token = preview.item["preview_token"]
    assert f"project_id={project['id']}, confirm=true, preview_token={token}" in preview.item["instruction"]
    answer = await admin.ok(
        "memory_manage",
        {"action": "delete", "project_id": project["id"], "confirm": True, "preview_token": token},
    )
    assert answer.item["action"] == "deleted"


async def test_delete_waits_for_a_write_into_the_project_and_moves_its_thought_too(admin: ToolCaller) -> None:
    """A thought inserted (not yet committed) into the project when the delete executes: the delete locks the
    project row, so it waits for that insert (whose foreign key holds a share lock) and then moves it as well."""
    project = await create_project(admin, "Doomed", "/srv/doomed")
    await admin.ok("memory_store", {"action": "create", "content": "already there", "cwd": "/srv/doomed"})
    token = (await admin.ok("memory_manage", {"action": "delete", "project_id": project["id"]})).item["preview_token"]
    late = uuid.uuid4()
    async with admin.context.db.unit_of_work() as session:  # the in-flight write
        await session.execute(
            text("INSERT INTO thought (id, project_id, content) VALUES (:id, :project, 'written meanwhile')"),
            {"id": late, "project": uuid.UUID(project["id"])},
        )
        arguments = {"action": "delete", "project_id": project["id"], "confirm": True, "preview_token": token}
        deleting = asyncio.ensure_future(admin("memory_manage", arguments))
        await asyncio.sleep(0.3)
        assert not deleting.done()  # waiting for this transaction
    answer = await deleting
    assert not answer.is_error, answer.text
    assert answer.item["thoughts_moved"] == 2
    assert await rows(admin, "SELECT project_id::text FROM thought WHERE id = :id", id=late) == [
        (await default_project_id(admin),)
    ]


async def test_an_update_racing_a_create_for_the_same_name_is_a_409(
    admin: ToolCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The duplicate check passes, then another call takes the name before the update writes it."""
    project = await create_project(admin, "Mine", "/srv/mine")
    refuse = ProjectService._refuse_taken

    async def then_taken(self: ProjectService, *args: Any) -> None:
        await refuse(self, *args)
        async with own_transaction(admin.context) as session:  # the other call, committed meanwhile
            await session.execute(
                text("INSERT INTO project (id, name, is_default) VALUES (:id, 'Wanted', false)"), {"id": uuid.uuid4()}
            )

    monkeypatch.setattr(ProjectService, "_refuse_taken", then_taken)
    answer = await admin("memory_manage", {"action": "update", "project_id": project["id"], "name": "Wanted"})
    assert answer.error["statusCode"] == 409
    assert answer.text == "Another project took name 'Wanted' meanwhile; read the projects and retry"
    assert await rows(admin, "SELECT name FROM project WHERE id = :id", id=project["id"]) == [("Mine",)]
