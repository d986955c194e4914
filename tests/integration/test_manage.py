"""memory_manage: projects, their scope rules and the delete preview → confirm flow."""

from __future__ import annotations

from tests.helpers import ToolCaller, snapshot


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
