"""memory_store create / update / bulk_create through dispatch on a real PostgreSQL."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy import text

from app.db.repositories.thoughts import ThoughtRepository
from app.db.repositories.url_links import UrlLinkRepository
from app.embedding.profiles import OFFLINE_E5
from app.services.context import AppContext
from app.services.store.thoughts import insert_chunk_sizes
from tests.conftest import MODEL_CACHE
from tests.support.contract import COMPACT_THOUGHT_KEYS as COMPACT_KEYS
from tests.support.contract import FULL_THOUGHT_KEYS as FULL_KEYS
from tests.support.helpers import Answer, ToolCaller, blocked_by_a_lock, count_rows, snapshot
from tests.support.search import degraded_caller

TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
ARCHIVE_HINT = "memory_supersede action=archive"


async def rows(context: AppContext, query: str, **params: Any) -> Sequence[Any]:
    async with context.db.unit_of_work() as session:
        return (await session.execute(text(query), params)).all()


async def create(caller: ToolCaller, content: str, **arguments: Any) -> dict[str, Any]:
    answer = await caller.ok("memory_store", {"action": "create", "content": content, **arguments})
    return dict(answer.item)


async def register(caller: ToolCaller, name: str, path: str) -> dict[str, Any]:
    answer = await caller.ok("memory_manage", {"action": "create", "name": name, "local_path": path})
    return dict(answer.item)


def assert_refused(answer: Answer, status: int, *needles: str) -> None:
    assert answer.is_error
    assert answer.error["statusCode"] == status
    assert answer.error["retryable"] is False
    assert answer.error["message"] == answer.text
    for needle in needles:
        assert needle in answer.text, answer.text


# ---------------------------------------------------------------- create


async def test_create_answers_the_full_shaped_thought(writer: ToolCaller) -> None:
    answer = await writer.ok("memory_store", {"action": "create", "content": "Postgres is the only store"})
    item = answer.item
    assert set(item) == FULL_KEYS
    assert item["content"] == "Postgres is the only store"
    assert item["status"] == "active"
    assert item["tags"] == []
    assert item["project"] == "default"
    assert item["importance"] == 1.0
    for flag in ("is_protected", "is_global", "is_cluster"):
        assert item[flag] is False
    assert item["surface_after"] is None
    assert item["archived_at"] is None
    assert item["created_by"] == str(writer.principal.user_id)
    assert TIMESTAMP.match(item["created_at"]) and TIMESTAMP.match(item["updated_at"])
    uuid.UUID(item["id"])
    [(project_id, is_default)] = await rows(writer.context, "SELECT id, is_default FROM project")
    assert item["project_id"] == str(project_id) and is_default is True
    assert answer.meta == {
        "action": "create",
        "scope": None,
        "counts": {"total": 1, "returned": 1, "filtered_out": 0},
        "degraded": False,
        "warnings": [],
    }


async def test_create_flags_are_booleans_and_status_can_be_draft(writer: ToolCaller) -> None:
    item = await create(writer, "a protected global draft", status="draft", is_protected=True, is_global=True)
    assert item["status"] == "draft"
    assert item["is_protected"] is True and item["is_global"] is True and item["is_cluster"] is False
    [row] = await rows(writer.context, "SELECT status::text, is_protected, is_global FROM thought")
    assert tuple(row) == ("draft", True, True)


async def test_tags_are_trimmed_and_deduplicated_case_insensitively(writer: ToolCaller) -> None:
    item = await create(writer, "tagged thought", tags=["  Infra ", "infra", "DB", "db ", "ops"])
    assert item["tags"] == ["Infra", "DB", "ops"]
    assert all(isinstance(tag, str) for tag in item["tags"])
    [(stored,)] = await rows(writer.context, "SELECT tags FROM thought")
    assert stored == ["Infra", "DB", "ops"]


@pytest.mark.parametrize("bad_tag", ["", "   "])
async def test_an_empty_tag_is_refused_naming_tags(writer: ToolCaller, bad_tag: str) -> None:
    before = await snapshot(writer.context)
    answer = await writer("memory_store", {"action": "create", "content": "x thought", "tags": ["ok", bad_tag]})
    assert_refused(answer, 400, "'tags'")
    assert await snapshot(writer.context) == before


async def test_exact_duplicate_returns_the_existing_thought_with_tags_merged(writer: ToolCaller) -> None:
    first = await create(writer, "duplicate me", tags=["a", "B"])
    second = await create(writer, "duplicate me", tags=["b", "c"])
    assert second["id"] == first["id"]
    assert second["tags"] == ["a", "B", "c"]
    assert await count_rows(writer.context, "thought") == 1
    [(stored,)] = await rows(writer.context, "SELECT tags FROM thought")
    assert stored == ["a", "B", "c"]


async def test_duplicate_content_in_another_project_is_a_new_thought(writer: ToolCaller) -> None:
    await register(writer, "Other", "/work/other")
    first = await create(writer, "same words")
    second = await create(writer, "same words", cwd="/work/other")
    assert second["id"] != first["id"]
    assert second["project"] == "Other"
    assert await count_rows(writer.context, "thought") == 2


async def test_parent_id_creates_a_parent_edge_from_parent_to_child(writer: ToolCaller) -> None:
    parent = await create(writer, "the parent thought")
    child = await create(writer, "the child thought", parent_id=parent["id"])
    edges = await rows(writer.context, "SELECT source_id, target_id, type::text, created_by FROM edge")
    assert [(str(s), str(t), kind) for s, t, kind, _ in edges] == [(parent["id"], child["id"], "parent")]
    assert edges[0].created_by == writer.principal.user_id


async def test_unknown_parent_id_is_a_404_and_writes_nothing(writer: ToolCaller) -> None:
    before = await snapshot(writer.context)
    missing = str(uuid.uuid4())
    answer = await writer("memory_store", {"action": "create", "content": "orphan", "parent_id": missing})
    assert_refused(answer, 404, "parent_id", missing)
    assert await snapshot(writer.context) == before


async def test_malformed_parent_id_is_refused_naming_it(writer: ToolCaller) -> None:
    before = await snapshot(writer.context)
    answer = await writer("memory_store", {"action": "create", "content": "orphan", "parent_id": "nope"})
    assert_refused(answer, 400, "'parent_id'")
    assert await snapshot(writer.context) == before


async def test_url_links_are_stored_in_order(writer: ToolCaller) -> None:
    links = [
        {"text": " ADR ", "url": "https://example.org/adr"},
        {"text": "ticket", "url": "http://tracker.local/T-1"},
    ]
    item = await create(writer, "linked thought", url_links=links)
    stored = await rows(
        writer.context,
        "SELECT thought_id, text, url, label, sort_order FROM thought_url_link ORDER BY sort_order",
    )
    assert [(str(r.thought_id), r.text, r.url, r.label, r.sort_order) for r in stored] == [
        (item["id"], "ADR", "https://example.org/adr", "ADR", 0),
        (item["id"], "ticket", "http://tracker.local/T-1", "ticket", 1),
    ]
    assert "url_links" not in item


@pytest.mark.parametrize(
    "link",
    [
        {"text": "ftp", "url": "ftp://example.org/file"},
        {"text": "js", "url": "javascript:alert(1)"},
        {"text": "bare", "url": "example.org"},
        {"text": "", "url": "https://example.org"},
        {"text": "   ", "url": "https://example.org"},
        {"url": "https://example.org"},
    ],
)
async def test_bad_url_links_are_refused_naming_url_links(writer: ToolCaller, link: dict[str, str]) -> None:
    before = await snapshot(writer.context)
    answer = await writer("memory_store", {"action": "create", "content": "linked", "url_links": [link]})
    assert_refused(answer, 400, "'url_links.0.")
    assert await snapshot(writer.context) == before


async def test_content_of_720_characters_is_accepted(writer: ToolCaller) -> None:
    item = await create(writer, "x" * 720)
    assert len(item["content"]) == 720


async def test_content_of_721_characters_is_refused_and_writes_nothing(writer: ToolCaller) -> None:
    before = await snapshot(writer.context)
    answer = await writer("memory_store", {"action": "create", "content": "x" * 721})
    assert_refused(answer, 400, "'content'", "721", "720")
    assert answer.raw.structured_content == {"result": {"error": answer.error}}
    assert set(answer.error) == {"message", "statusCode", "retryable"}
    assert await snapshot(writer.context) == before


@pytest.mark.parametrize("content", ["", "   \n\t "])
async def test_empty_content_is_refused(writer: ToolCaller, content: str) -> None:
    before = await snapshot(writer.context)
    answer = await writer("memory_store", {"action": "create", "content": content})
    assert_refused(answer, 400, "'content'")
    assert await snapshot(writer.context) == before


async def test_missing_content_is_refused_naming_it(writer: ToolCaller) -> None:
    before = await snapshot(writer.context)
    answer = await writer("memory_store", {"action": "create"})
    assert_refused(answer, 400, "'content'")
    assert await snapshot(writer.context) == before


async def test_create_refuses_status_archived_pointing_at_supersede(writer: ToolCaller) -> None:
    before = await snapshot(writer.context)
    answer = await writer("memory_store", {"action": "create", "content": "gone", "status": "archived"})
    assert_refused(answer, 400, "'status'", ARCHIVE_HINT)
    assert await snapshot(writer.context) == before


async def test_over_the_soft_limit_is_accepted_with_a_warning(writer: ToolCaller) -> None:
    answer = await writer.ok("memory_store", {"action": "create", "content": "y" * 650})
    assert answer.item["content"] == "y" * 650
    assert answer.meta["warnings"] == [
        "1 thought(s) over the 600-character soft limit (longest 650); short thoughts recall better"
    ]
    at_limit = await writer.ok("memory_store", {"action": "create", "content": "z" * 600})
    assert at_limit.meta["warnings"] == []


async def test_the_embedding_is_stored_with_the_offline_model_id(writer: ToolCaller) -> None:
    item = await create(writer, "vectors are stored at write time")
    [row] = await rows(writer.context, "SELECT id, embedding_model, vector_dims(embedding) AS dims FROM thought")
    assert (str(row.id), row.embedding_model, row.dims) == (item["id"], OFFLINE_E5, 384)


async def test_registered_cwd_and_its_subdirectory_land_in_that_project(writer: ToolCaller) -> None:
    project = await register(writer, "Demo", "/work/demo")
    scope = {"project": project["id"], "project_name": "Demo", "global": False}
    for cwd, content in (("/work/demo", "at the root"), ("/work/demo/src/pkg/", "in a sub-directory")):
        answer = await writer.ok("memory_store", {"action": "create", "content": content, "cwd": cwd})
        assert answer.item["project_id"] == project["id"]
        assert answer.item["project"] == "Demo"
        assert answer.meta["scope"] == scope
        assert answer.meta["warnings"] == []
    stored = await rows(writer.context, "SELECT DISTINCT project_id FROM thought")
    assert [str(r.project_id) for r in stored] == [project["id"]]


@pytest.mark.parametrize("cwd", [None, ""])
async def test_absent_cwd_lands_in_the_default_project_without_warning(writer: ToolCaller, cwd: str | None) -> None:
    await register(writer, "Demo", "/work/demo")
    arguments: dict[str, Any] = {"action": "create", "content": "no cwd here"}
    if cwd is not None:
        arguments["cwd"] = cwd
    answer = await writer.ok("memory_store", arguments)
    assert answer.item["project"] == "default"
    assert answer.meta["scope"] is None
    assert answer.meta["warnings"] == []


async def test_unregistered_cwd_lands_in_the_default_project_without_warning(writer: ToolCaller) -> None:
    await register(writer, "Demo", "/work/demo")
    answer = await writer.ok("memory_store", {"action": "create", "content": "lost", "cwd": "/elsewhere"})
    assert answer.item["project"] == "default"
    assert answer.meta["warnings"] == []


async def test_reader_may_not_create(reader: ToolCaller) -> None:
    before = await snapshot(reader.context)
    answer = await reader("memory_store", {"action": "create", "content": "not allowed"})
    assert_refused(answer, 403, "memory_store action=create", "writer")
    assert await snapshot(reader.context) == before


# ---------------------------------------------------------------- update


async def update(caller: ToolCaller, thought_id: str, **changes: Any) -> Answer:
    return await caller("memory_store", {"action": "update", "thought_id": thought_id, **changes})


async def test_update_content_reembeds_and_bumps_updated_at(writer: ToolCaller) -> None:
    item = await create(writer, "the first wording")
    [(before_vector,)] = await rows(writer.context, "SELECT embedding::text FROM thought")
    answer = await update(writer, item["id"], content="a completely different second wording")
    assert not answer.is_error, answer.text
    answer.assert_mirrors_text()
    updated = answer.item
    assert set(updated) == FULL_KEYS
    assert updated["content"] == "a completely different second wording"
    assert updated["id"] == item["id"]
    assert updated["created_at"] == item["created_at"]
    assert updated["updated_at"] > item["updated_at"]
    assert answer.meta == {
        "action": "update",
        "scope": None,
        "counts": {"total": 1, "returned": 1, "filtered_out": 0},
        "degraded": False,
        "warnings": [],
    }
    [row] = await rows(writer.context, "SELECT content, embedding::text AS vec, embedding_model FROM thought")
    assert row.content == "a completely different second wording"
    assert row.embedding_model == OFFLINE_E5
    assert row.vec != before_vector


async def test_update_over_the_soft_limit_warns(writer: ToolCaller) -> None:
    item = await create(writer, "short")
    answer = await update(writer, item["id"], content="w" * 601)
    assert answer.meta["warnings"] == [
        "1 thought(s) over the 600-character soft limit (longest 601); short thoughts recall better"
    ]


async def test_update_refuses_content_over_the_hard_limit(writer: ToolCaller) -> None:
    item = await create(writer, "short")
    before = await snapshot(writer.context)
    answer = await update(writer, item["id"], content="w" * 721)
    assert_refused(answer, 400, "'content'")
    assert await snapshot(writer.context) == before
    [(content,)] = await rows(writer.context, "SELECT content FROM thought")
    assert content == "short"


async def test_update_tags_modes(writer: ToolCaller) -> None:
    item = await create(writer, "tag modes", tags=["a", "b"])
    replaced = (await update(writer, item["id"], tags=[" x ", "X", "y"])).item
    assert replaced["tags"] == ["x", "y"]
    added = (await update(writer, item["id"], tags=["Y", "z"], tags_mode="add")).item
    assert added["tags"] == ["x", "y", "z"]
    removed = (await update(writer, item["id"], tags=["X", "nope"], tags_mode="remove")).item
    assert removed["tags"] == ["y", "z"]
    explicit = (await update(writer, item["id"], tags=["only"], tags_mode="replace")).item
    assert explicit["tags"] == ["only"]
    [(stored,)] = await rows(writer.context, "SELECT tags FROM thought")
    assert stored == ["only"]


async def test_update_refuses_an_empty_tag(writer: ToolCaller) -> None:
    item = await create(writer, "tags stay", tags=["keep"])
    answer = await update(writer, item["id"], tags=["  "], tags_mode="add")
    assert_refused(answer, 400, "'tags'")
    [(stored,)] = await rows(writer.context, "SELECT tags FROM thought")
    assert stored == ["keep"]


async def test_update_status_and_flags(writer: ToolCaller) -> None:
    item = await create(writer, "flags flip")
    changed = (await update(writer, item["id"], status="draft", is_protected=True, is_global=True)).item
    assert (changed["status"], changed["is_protected"], changed["is_global"]) == ("draft", True, True)
    back = (await update(writer, item["id"], status="active", is_protected=False)).item
    assert (back["status"], back["is_protected"], back["is_global"]) == ("active", False, True)
    [row] = await rows(writer.context, "SELECT status::text, is_protected, is_global FROM thought")
    assert tuple(row) == ("active", False, True)


async def test_update_surface_after(writer: ToolCaller) -> None:
    item = await create(writer, "wake me later", status="draft")
    answer = await update(writer, item["id"], surface_after="2030-01-02T03:04:05+02:00")
    assert answer.item["surface_after"] == "2030-01-02T01:04:05.000Z"
    [(stored,)] = await rows(writer.context, "SELECT surface_after FROM thought")
    assert stored.isoformat() == "2030-01-02T01:04:05+00:00"


async def test_update_refuses_a_malformed_surface_after(writer: ToolCaller) -> None:
    item = await create(writer, "wake me later")
    answer = await update(writer, item["id"], surface_after="next tuesday")
    assert_refused(answer, 400, "'surface_after'")


async def test_update_cwd_moves_the_thought(writer: ToolCaller) -> None:
    project = await register(writer, "Demo", "/work/demo")
    item = await create(writer, "wandering thought")
    assert item["project"] == "default"
    answer = await update(writer, item["id"], cwd="/work/demo/sub")
    moved = answer.item
    assert (moved["project"], moved["project_id"]) == ("Demo", project["id"])
    assert answer.meta["scope"] == {"project": project["id"], "project_name": "Demo", "global": False}
    assert answer.meta["warnings"] == []
    [(project_id,)] = await rows(writer.context, "SELECT project_id FROM thought")
    assert str(project_id) == project["id"]


async def test_update_with_an_unregistered_cwd_keeps_the_project(writer: ToolCaller) -> None:
    project = await register(writer, "Demo", "/work/demo")
    item = await create(writer, "staying put", cwd="/work/demo")
    answer = await update(writer, item["id"], cwd="/nowhere/known", is_global=True)
    assert (answer.item["project_id"], answer.item["is_global"]) == (project["id"], True)
    assert answer.meta["scope"] is None
    assert answer.meta["warnings"] == []


async def test_update_with_the_cwd_of_its_own_project_changes_nothing(writer: ToolCaller) -> None:
    """No write at all (a store sharded by project refuses even a same-value write of `project_id`)."""
    project = await register(writer, "Demo", "/work/demo")
    item = await create(writer, "staying home", cwd="/work/demo")
    before = await rows(writer.context, "SELECT project_id, updated_at, xmin::text FROM thought")
    answer = await update(writer, item["id"], cwd="/work/demo/sub")
    assert answer.item["project_id"] == project["id"]
    assert await rows(writer.context, "SELECT project_id, updated_at, xmin::text FROM thought") == before


@pytest.mark.parametrize("name", ["content", "tags", "status", "is_protected", "is_global", "cwd"])
async def test_update_treats_null_as_not_given(writer: ToolCaller, name: str) -> None:
    item = await create(writer, "nulls change nothing", tags=["keep"], status="draft", is_protected=True)
    before = await rows(writer.context, "SELECT content, tags, status::text, is_protected, updated_at FROM thought")
    answer = await update(writer, item["id"], **{name: None})
    assert_refused(answer, 400, "needs at least one field to change")
    assert (
        await rows(writer.context, "SELECT content, tags, status::text, is_protected, updated_at FROM thought")
        == before
    )
    other = "is_protected" if name == "is_global" else "is_global"
    alongside = (await update(writer, item["id"], **{name: None, other: True})).item
    assert (alongside["tags"], alongside["status"], alongside["is_protected"]) == (["keep"], "draft", True)
    assert alongside["content"] == "nulls change nothing"


async def test_update_null_surface_after_clears_it(writer: ToolCaller) -> None:
    item = await create(writer, "wake me", status="draft")
    await update(writer, item["id"], surface_after="2031-05-06T07:08:09Z")
    cleared = (await update(writer, item["id"], surface_after=None)).item
    assert cleared["surface_after"] is None
    [(stored,)] = await rows(writer.context, "SELECT surface_after FROM thought")
    assert stored is None


async def test_update_tags_mode_without_tags_is_nothing_to_change(writer: ToolCaller) -> None:
    item = await create(writer, "mode only", tags=["keep"])
    answer = await update(writer, item["id"], tags_mode="add")
    assert_refused(answer, 400, "needs at least one field to change")


async def test_update_refuses_status_archived_pointing_at_supersede(writer: ToolCaller) -> None:
    item = await create(writer, "not archived this way")
    before = await snapshot(writer.context)
    answer = await update(writer, item["id"], status="archived")
    assert_refused(answer, 400, "'status'", ARCHIVE_HINT)
    assert await snapshot(writer.context) == before
    [(status,)] = await rows(writer.context, "SELECT status::text FROM thought")
    assert status == "active"


async def test_update_of_a_missing_thought_is_a_404(writer: ToolCaller) -> None:
    missing = str(uuid.uuid4())
    before = await snapshot(writer.context)
    answer = await update(writer, missing, content="nobody home")
    assert_refused(answer, 404)
    assert answer.text == f"Thought {missing} not found"
    assert await snapshot(writer.context) == before


async def test_update_with_nothing_to_change_is_a_400(writer: ToolCaller) -> None:
    item = await create(writer, "unchanged")
    answer = await update(writer, item["id"])
    assert_refused(answer, 400, "memory_store action=update needs at least one field to change")


async def test_update_refuses_a_malformed_thought_id(writer: ToolCaller) -> None:
    answer = await update(writer, "not-an-id", content="x")
    assert_refused(answer, 400, "'thought_id'")


async def test_reader_may_not_update(writer: ToolCaller, reader: ToolCaller) -> None:
    item = await create(writer, "readers only look")
    before = await snapshot(writer.context)
    stored = await rows(writer.context, "SELECT content, tags, status::text, updated_at, embedding::text FROM thought")
    answer = await update(reader, item["id"], content="defaced", tags=["x"])
    assert_refused(answer, 403, "memory_store action=update")
    assert await snapshot(writer.context) == before
    assert (
        await rows(writer.context, "SELECT content, tags, status::text, updated_at, embedding::text FROM thought")
        == stored
    )


# ---------------------------------------------------------------- bulk_create


async def bulk(caller: ToolCaller, thoughts: list[Any], **arguments: Any) -> Answer:
    return await caller("memory_store", {"action": "bulk_create", "thoughts": thoughts, **arguments})


async def test_bulk_create_answers_rows_in_input_order(writer: ToolCaller) -> None:
    parent = await create(writer, "bulk parent")
    missing = str(uuid.uuid4())
    answer = await bulk(
        writer,
        [
            {"content": "bulk one", "tags": ["A", "a "]},
            {"content": ""},
            {"content": "bulk three", "status": "archived"},
            {"content": "bulk four", "parent_id": missing},
            {"content": "bulk five", "parent_id": parent["id"], "status": "draft"},
            {"content": "bulk six", "url_links": [{"text": "x", "url": "ftp://x"}]},
            {"content": "bulk seven", "bogus": 1},
            {"content": "v" * 721},
        ],
    )
    assert not answer.is_error, answer.text
    answer.assert_mirrors_text()
    items = answer.items
    assert [(row["index"], row["status"]) for row in items] == [
        (0, "created"),
        (1, "failed"),
        (2, "failed"),
        (3, "failed"),
        (4, "created"),
        (5, "failed"),
        (6, "failed"),
        (7, "failed"),
    ]
    for row in items:
        assert set(row) == (
            {"index", "status", "thought"} if row["status"] == "created" else {"index", "status", "error"}
        )
    assert set(items[0]["thought"]) == COMPACT_KEYS
    assert items[0]["thought"]["tags"] == ["A"]
    assert items[4]["thought"]["status"] == "draft"
    assert "thoughts[1].content" in items[1]["error"]
    assert "thoughts[2].status" in items[2]["error"] and ARCHIVE_HINT in items[2]["error"]
    assert missing in items[3]["error"]
    assert "thoughts[5].url_links" in items[5]["error"]
    assert "thoughts[6].bogus" in items[6]["error"]
    assert "thoughts[7].content" in items[7]["error"]
    assert answer.meta == {
        "action": "bulk_create",
        "scope": None,
        "counts": {"created": 2, "failed": 6, "total": 8, "returned": 8, "filtered_out": 0},
        "degraded": False,
        "warnings": [],
    }
    contents = {r.content for r in await rows(writer.context, "SELECT content FROM thought")}
    assert contents == {"bulk parent", "bulk one", "bulk five"}
    edges = await rows(writer.context, "SELECT source_id, target_id, type::text FROM edge")
    assert [(str(s), str(t), kind) for s, t, kind in edges] == [(parent["id"], items[4]["thought"]["id"], "parent")]


async def test_bulk_create_scopes_to_cwd_and_stores_url_links(writer: ToolCaller) -> None:
    project = await register(writer, "Demo", "/work/demo")
    answer = await bulk(
        writer,
        [
            {"content": "with links", "url_links": [{"text": "doc", "url": "https://d.example/1"}]},
            {"content": "without links"},
        ],
        cwd="/work/demo/deeper",
    )
    assert answer.meta["scope"] == {"project": project["id"], "project_name": "Demo", "global": False}
    assert answer.meta["warnings"] == []
    assert {row["thought"]["project"] for row in answer.items} == {"Demo"}
    links = await rows(writer.context, "SELECT thought_id, text, url, label FROM thought_url_link")
    assert [(str(r.thought_id), r.text, r.url, r.label) for r in links] == [
        (answer.items[0]["thought"]["id"], "doc", "https://d.example/1", "doc")
    ]


async def test_bulk_create_deduplicates_against_stored_thoughts(writer: ToolCaller) -> None:
    existing = await create(writer, "already here", tags=["old"])
    answer = await bulk(writer, [{"content": "already here", "tags": ["new"]}, {"content": "fresh"}])
    first, second = answer.items
    assert first["status"] == "created" and first["thought"]["id"] == existing["id"]
    assert first["thought"]["tags"] == ["old", "new"]
    assert second["status"] == "created"
    assert await count_rows(writer.context, "thought") == 2


async def test_bulk_create_deduplicates_within_the_batch_merging_tags(writer: ToolCaller) -> None:
    answer = await bulk(writer, [{"content": "twice", "tags": ["a"]}, {"content": "twice", "tags": ["b"]}])
    first, second = answer.items
    assert first["thought"]["id"] == second["thought"]["id"]
    assert await count_rows(writer.context, "thought") == 1
    [(stored,)] = await rows(writer.context, "SELECT tags FROM thought")
    assert stored == ["a", "b"]
    assert second["thought"]["tags"] == ["a", "b"]


def embedding_calls(caller: ToolCaller, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the passage batches the caller's embedding runtime is asked for, in order."""
    runtime = caller.context.embedding
    calls: list[int] = []
    original = runtime.embed_passages

    async def counting(texts: Sequence[str]) -> Any:
        calls.append(len(texts))
        return await original(texts)

    monkeypatch.setattr(runtime, "embed_passages", counting)
    return calls


async def test_bulk_create_stores_every_vector_in_one_batched_call(
    writer: ToolCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = embedding_calls(writer, monkeypatch)
    thoughts = [{"content": f"bulk thought number {n}"} for n in range(100)]
    answer = await bulk(writer, [*thoughts, {"content": ""}])
    assert answer.meta["counts"]["created"] == 100
    assert calls == [100]
    [row] = await rows(
        writer.context,
        "SELECT count(*) AS n, count(embedding) AS vectors, "
        "count(*) FILTER (WHERE embedding_model = :model) AS model FROM thought",
        model=OFFLINE_E5,
    )
    assert tuple(row) == (100, 100, 100)


async def test_a_large_bulk_create_embeds_in_chunks_inside_its_transaction(
    writer: ToolCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past one chunk the rows to insert embed chunk by chunk (the halving tail), duplicates only once."""
    calls = embedding_calls(writer, monkeypatch)
    thoughts = [{"content": f"pipelined thought number {n}", "tags": [f"t{n % 3}"]} for n in range(600)]
    answer = await bulk(writer, [*thoughts, {"content": "pipelined thought number 7", "tags": ["again"]}])
    assert answer.meta["counts"] == {"created": 601, "failed": 0, "total": 601, "returned": 601, "filtered_out": 0}
    assert calls == insert_chunk_sizes(600) == [250, 175, 88, 44, 22, 21]
    assert [item["index"] for item in answer.items] == list(range(601))
    assert answer.items[600]["thought"]["id"] == answer.items[7]["thought"]["id"]
    assert answer.items[600]["thought"]["tags"] == ["t1", "again"]
    [row] = await rows(
        writer.context,
        "SELECT count(*), count(*) FILTER (WHERE embedding_model = :model), "
        "count(*) FILTER (WHERE content = 'pipelined thought number 42' AND tags = ARRAY['t0']) FROM thought",
        model=OFFLINE_E5,
    )
    assert tuple(row) == (600, 600, 1)


async def test_a_large_bulk_create_without_an_embedder_leaves_vectors_pending(writer: ToolCaller) -> None:
    answer = await bulk(degraded_caller(writer, MODEL_CACHE), [{"content": f"pending thought {n}"} for n in range(300)])
    assert answer.meta["counts"]["created"] == 300
    [row] = await rows(writer.context, "SELECT count(*), count(embedding) FROM thought")
    assert tuple(row) == (300, 0)


async def test_bulk_create_soft_limit_warning(writer: ToolCaller) -> None:
    answer = await bulk(writer, [{"content": "s" * 610}, {"content": "t" * 700}, {"content": "short"}])
    assert answer.meta["warnings"] == [
        "2 thought(s) over the 600-character soft limit (longest 700); short thoughts recall better"
    ]


async def test_bulk_create_refuses_an_empty_array_before_anything_runs(writer: ToolCaller) -> None:
    before = await snapshot(writer.context)
    answer = await bulk(writer, [])
    assert_refused(answer, 400, "'thoughts'")
    assert await snapshot(writer.context) == before


async def test_bulk_create_refuses_10001_rows_before_anything_runs(writer: ToolCaller) -> None:
    before = await snapshot(writer.context)
    answer = await bulk(writer, [{"content": f"row {n}"} for n in range(10_001)])
    assert_refused(answer, 400, "'thoughts'")
    assert await snapshot(writer.context) == before


@pytest.mark.parametrize("count", [2, 300])  # embedded before the transaction / chunk by chunk inside it
async def test_bulk_create_is_one_transaction(writer: ToolCaller, monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    """A failure after the thoughts were inserted rolls every row back."""

    async def explode(self: UrlLinkRepository, rows: Sequence[dict[str, Any]]) -> None:
        raise RuntimeError("boom after the thought inserts")

    monkeypatch.setattr(UrlLinkRepository, "insert_many", explode)
    before = await snapshot(writer.context)
    answer = await bulk(writer, [{"content": f"row {n}"} for n in range(count)])
    assert answer.is_error
    assert answer.raw.structured_content is None
    assert await snapshot(writer.context) == before


async def test_reader_may_not_bulk_create(reader: ToolCaller) -> None:
    before = await snapshot(reader.context)
    answer = await bulk(reader, [{"content": "nope"}])
    assert_refused(answer, 403, "memory_store action=bulk_create")
    assert await snapshot(reader.context) == before


@pytest.mark.parametrize(
    "gone",
    [
        "DELETE FROM thought WHERE id = :id",
        "UPDATE thought SET status = 'archived', archived_at = now() WHERE id = :id",
    ],
    ids=["deleted", "archived"],
)
async def test_a_duplicate_being_removed_when_bulk_create_reads_it_is_created_anew(
    writer: ToolCaller, gone: str
) -> None:
    """The live duplicate is being deleted or archived by a transaction still open when the call looks it up:
    the call waits for it, sees the duplicate gone and stores the row anew (no merge into a dead thought)."""
    draft = await create(writer, "The cache is warmed at deploy time", status="draft")
    arguments = {"action": "bulk_create", "thoughts": [{"content": "The cache is warmed at deploy time"}]}
    async with writer.context.db.unit_of_work() as session:  # the removal, in flight
        await session.execute(text(gone), {"id": uuid.UUID(draft["id"])})
        storing = asyncio.ensure_future(writer("memory_store", arguments))
        await asyncio.sleep(0.3)
        assert not storing.done()  # waiting for the removal's row lock
    answer = await storing
    assert not answer.is_error, answer.text
    [row] = answer.items
    assert row["status"] == "created" and row["thought"]["id"] != draft["id"]
    live = await rows(writer.context, "SELECT id::text FROM thought WHERE status <> 'archived'")
    assert [r.id for r in live] == [row["thought"]["id"]]


async def test_bulk_create_keeps_its_parents_and_duplicates_from_being_deleted(
    writer: ToolCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parents are locked FOR KEY SHARE (a delete waits, an update does not); the duplicate whose tags the call
    merges FOR NO KEY UPDATE (a delete and an update wait)."""
    parent = await create(writer, "The parent decision", status="draft")
    duplicate = await create(writer, "An existing draft", status="draft")
    outcomes: dict[tuple[str, str], str] = {}
    find = ThoughtRepository.find_live_by_content

    async def try_writes(self: ThoughtRepository, *args: Any, **kwargs: Any) -> Any:
        found = await find(self, *args, **kwargs)  # after the parents' check: both are locked now
        for name, thought in (("parent", parent), ("duplicate", duplicate)):
            for statement in (
                "UPDATE thought SET importance = importance WHERE id = :id",
                "DELETE FROM thought WHERE id = :id",
            ):
                blocked = await blocked_by_a_lock(writer.context, statement, id=uuid.UUID(thought["id"]))
                outcomes[(name, statement.split()[0])] = "waited" if blocked else "ran"
                if not blocked and statement.startswith("DELETE"):
                    raise AssertionError(f"the {name} was deleted under the call")
        return found

    monkeypatch.setattr(ThoughtRepository, "find_live_by_content", try_writes)
    answer = await writer.ok(
        "memory_store",
        {
            "action": "bulk_create",
            "thoughts": [{"content": "A child", "parent_id": parent["id"]}, {"content": "An existing draft"}],
        },
    )
    assert [row["status"] for row in answer.items] == ["created", "created"]
    assert answer.items[1]["thought"]["id"] == duplicate["id"]  # merged into the existing draft
    assert outcomes == {
        ("parent", "UPDATE"): "ran",
        ("parent", "DELETE"): "waited",
        ("duplicate", "UPDATE"): "waited",
        ("duplicate", "DELETE"): "waited",
    }
