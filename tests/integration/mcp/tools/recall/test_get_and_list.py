"""memory_recall get / list: output shaping, url links, edges, hits and primers, paging and scope."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy import text

from app.db.repositories.edges import EdgeRepository
from app.services.context import AppContext
from tests.support.contract import COMPACT_THOUGHT_KEYS as COMPACT_KEYS
from tests.support.contract import FULL_THOUGHT_KEYS as FULL_KEYS
from tests.support.helpers import Answer, ToolCaller, count_rows, own_transaction, snapshot

EDGE_KEYS = {"id", "source_id", "target_id", "type", "created_at"}
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
NO_CWD = "no cwd — the answer spans every project"
LINKS = [
    {"text": "adr", "url": "https://example.org/adr/1"},
    {"text": "runbook", "url": "http://wiki.local/runbook"},
    {"text": "ticket", "url": "https://tracker.example/T-9"},
]


async def rows(context: AppContext, query: str, **params: Any) -> Sequence[Any]:
    async with context.db.unit_of_work() as session:
        return (await session.execute(text(query), params)).all()


async def execute(context: AppContext, query: str, **params: Any) -> None:
    async with own_transaction(context) as session:  # also from inside a call (a monkeypatched step)
        await session.execute(text(query), params)


async def create(caller: ToolCaller, content: str, **arguments: Any) -> dict[str, Any]:
    answer = await caller.ok("memory_store", {"action": "create", "content": content, **arguments})
    return dict(answer.item)


async def register(caller: ToolCaller, name: str, path: str) -> dict[str, Any]:
    answer = await caller.ok("memory_manage", {"action": "create", "name": name, "local_path": path})
    return dict(answer.item)


async def get(caller: ToolCaller, thought_id: str, **arguments: Any) -> Answer:
    return await caller.ok("memory_recall", {"action": "get", "thought_id": thought_id, **arguments})


async def listing(caller: ToolCaller, **arguments: Any) -> Answer:
    return await caller.ok("memory_recall", {"action": "list", **arguments})


def single_meta(action: str) -> dict[str, Any]:
    return {
        "action": action,
        "scope": None,
        "counts": {"total": 1, "returned": 1, "filtered_out": 0},
        "degraded": False,
        "warnings": [],
    }


# ---------------------------------------------------------------- get: shaping


async def test_get_is_compact_by_default(writer: ToolCaller, reader: ToolCaller) -> None:
    stored = await create(writer, "compact by default", tags=["Ops", "db"])
    answer = await get(reader, stored["id"])
    assert answer.item == {
        "id": stored["id"],
        "content": "compact by default",
        "status": "active",
        "tags": ["Ops", "db"],
        "project": "default",
    }
    assert answer.meta == single_meta("get")


async def test_get_compact_false_is_the_full_thought(writer: ToolCaller, reader: ToolCaller) -> None:
    stored = await create(writer, "all the columns", is_protected=True)
    item = (await get(reader, stored["id"], compact=False)).item
    assert set(item) == FULL_KEYS
    assert item == stored
    assert item["is_protected"] is True and item["is_global"] is False and item["is_cluster"] is False
    assert TIMESTAMP.match(item["created_at"])


async def test_fields_select_a_subset_and_win_over_compact(writer: ToolCaller, reader: ToolCaller) -> None:
    stored = await create(writer, "pick some fields", tags=["x"])
    assert (await get(reader, stored["id"], fields=["id", "tags"])).item == {
        "id": stored["id"],
        "tags": ["x"],
    }
    over_compact = (await get(reader, stored["id"], compact=True, fields=["id", "created_at"])).item
    assert over_compact == {"id": stored["id"], "created_at": stored["created_at"]}
    over_full = (await get(reader, stored["id"], compact=False, fields=["importance"])).item
    assert over_full == {"importance": 1.0}
    unknown = (await get(reader, stored["id"], fields=["id", "no_such_column"])).item
    assert unknown == {"id": stored["id"]}


# ---------------------------------------------------------------- get: url links


async def test_url_links_are_absent_unless_asked(writer: ToolCaller, reader: ToolCaller) -> None:
    stored = await create(writer, "has links", url_links=LINKS)
    assert "url_links" not in (await get(reader, stored["id"])).item
    assert "url_links" not in (await get(reader, stored["id"], include_url_links=False)).item
    assert "url_links" not in (await get(reader, stored["id"], compact=False)).item


async def test_url_links_are_empty_when_asked_and_none(writer: ToolCaller, reader: ToolCaller) -> None:
    stored = await create(writer, "no links at all")
    assert (await get(reader, stored["id"], include_url_links=True)).item["url_links"] == []


async def test_url_links_in_order_with_label_equal_to_text(writer: ToolCaller, reader: ToolCaller) -> None:
    stored = await create(writer, "three links", url_links=LINKS)
    item = (await get(reader, stored["id"], include_url_links=True)).item
    assert item["url_links"] == [{**link, "label": link["text"]} for link in LINKS]
    assert set(item) == COMPACT_KEYS | {"url_links"}


async def test_url_links_survive_fields(writer: ToolCaller, reader: ToolCaller) -> None:
    stored = await create(writer, "links and one field", url_links=LINKS[:1])
    item = (await get(reader, stored["id"], include_url_links=True, fields=["id"])).item
    assert item == {
        "id": stored["id"],
        "url_links": [{"text": "adr", "url": LINKS[0]["url"], "label": "adr"}],
    }


# ---------------------------------------------------------------- get: edges


async def chain_of_three(writer: ToolCaller) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """top → middle → bottom, by parent edges (the parent is the source)."""
    top = await create(writer, "top of the chain", url_links=LINKS[:1])
    middle = await create(writer, "middle of the chain", parent_id=top["id"])
    bottom = await create(writer, "bottom of the chain", parent_id=middle["id"], url_links=LINKS[1:])
    return top, middle, bottom


async def edge_between(context: AppContext, source: str, target: str) -> dict[str, Any]:
    [row] = await rows(
        context,
        "SELECT id, created_at FROM edge WHERE source_id = :s AND target_id = :t",
        s=uuid.UUID(source),
        t=uuid.UUID(target),
    )
    return {"id": str(row.id), "created_at": row.created_at}


async def test_include_edges_answers_upstream_and_downstream(writer: ToolCaller, reader: ToolCaller) -> None:
    top, middle, bottom = await chain_of_three(writer)
    answer = await get(reader, middle["id"], include_edges=True)
    item = answer.item
    assert set(item) == COMPACT_KEYS | {"upstream", "downstream"}
    [up] = item["upstream"]
    [down] = item["downstream"]
    assert set(up) == {"edge", "thought"} and set(up["edge"]) == EDGE_KEYS
    into = await edge_between(reader.context, top["id"], middle["id"])
    out_of = await edge_between(reader.context, middle["id"], bottom["id"])
    assert {k: v for k, v in up["edge"].items() if k != "created_at"} == {
        "id": into["id"],
        "source_id": top["id"],
        "target_id": middle["id"],
        "type": "parent",
    }
    assert {k: v for k, v in down["edge"].items() if k != "created_at"} == {
        "id": out_of["id"],
        "source_id": middle["id"],
        "target_id": bottom["id"],
        "type": "parent",
    }
    assert TIMESTAMP.match(up["edge"]["created_at"]) and TIMESTAMP.match(down["edge"]["created_at"])
    assert up["thought"] == {k: top[k] for k in COMPACT_KEYS}
    assert down["thought"] == {k: bottom[k] for k in COMPACT_KEYS}
    assert answer.meta == single_meta("get")


async def test_include_edges_lists_are_empty_for_an_island(writer: ToolCaller, reader: ToolCaller) -> None:
    island = await create(writer, "an island")
    item = (await get(reader, island["id"], include_edges=True)).item
    assert (item["upstream"], item["downstream"]) == ([], [])
    assert "upstream" not in (await get(reader, island["id"])).item


async def test_edges_are_kept_while_fields_shape_their_thoughts(writer: ToolCaller, reader: ToolCaller) -> None:
    top, middle, bottom = await chain_of_three(writer)
    item = (await get(reader, middle["id"], include_edges=True, fields=["id"])).item
    assert set(item) == {"id", "upstream", "downstream"}
    assert item["upstream"][0]["thought"] == {"id": top["id"]}
    assert item["downstream"][0]["thought"] == {"id": bottom["id"]}
    full = (await get(reader, middle["id"], include_edges=True, compact=False)).item
    assert set(full["upstream"][0]["thought"]) == FULL_KEYS


async def test_url_links_ride_on_the_neighbours_too(writer: ToolCaller, reader: ToolCaller) -> None:
    top, middle, bottom = await chain_of_three(writer)
    item = (await get(reader, middle["id"], include_edges=True, include_url_links=True, fields=["id"])).item
    assert item["url_links"] == []
    assert item["upstream"][0]["thought"] == {
        "id": top["id"],
        "url_links": [{**LINKS[0], "label": LINKS[0]["text"]}],
    }
    assert item["downstream"][0]["thought"] == {
        "id": bottom["id"],
        "url_links": [{**link, "label": link["text"]} for link in LINKS[1:]],
    }
    plain = (await get(reader, middle["id"], include_edges=True)).item
    assert "url_links" not in plain["upstream"][0]["thought"]


# ---------------------------------------------------------------- get: missing, bad input


async def test_get_of_a_missing_id_is_a_404_envelope(writer: ToolCaller, reader: ToolCaller) -> None:
    await create(writer, "someone else")
    missing = str(uuid.uuid4())
    before = await snapshot(reader.context)
    answer = await reader("memory_recall", {"action": "get", "thought_id": missing})
    message = f"Thought {missing} not found"
    assert answer.raw.is_error is True
    assert [(block.type, block.text) for block in answer.raw.content] == [("text", message)]  # type: ignore[union-attr]
    assert answer.raw.structured_content == {
        "result": {"error": {"message": message, "statusCode": 404, "retryable": False}}
    }
    assert await snapshot(reader.context) == before


async def test_get_refuses_a_malformed_id_naming_it(reader: ToolCaller) -> None:
    answer = await reader("memory_recall", {"action": "get", "thought_id": "xyz"})
    assert answer.error["statusCode"] == 400
    assert "'thought_id'" in answer.text


async def test_get_requires_thought_id(reader: ToolCaller) -> None:
    answer = await reader("memory_recall", {"action": "get"})
    assert answer.error == {
        "message": "Missing required argument 'thought_id' for memory_recall action=get",
        "statusCode": 400,
        "retryable": False,
    }


async def test_get_accepts_an_id_in_any_case_and_hyphenation(writer: ToolCaller, reader: ToolCaller) -> None:
    stored = await create(writer, "id spelling")
    spelled = stored["id"].replace("-", "").upper()
    assert (await get(reader, spelled)).item["id"] == stored["id"]


# ---------------------------------------------------------------- get: hits and primers


async def hit_count(context: AppContext, thought_id: str) -> int | None:
    found = await rows(context, "SELECT hit_count FROM thought_hit WHERE thought_id = :id", id=uuid.UUID(thought_id))
    return found[0].hit_count if found else None


async def importance(context: AppContext, thought_id: str) -> float:
    [(value,)] = await rows(context, "SELECT importance FROM thought WHERE id = :id", id=uuid.UUID(thought_id))
    return float(value)


async def test_get_counts_a_hit(writer: ToolCaller, reader: ToolCaller) -> None:
    stored = await create(writer, "count me")
    other = await create(writer, "not me")
    assert await hit_count(reader.context, stored["id"]) is None
    await get(reader, stored["id"])
    assert await hit_count(reader.context, stored["id"]) == 1
    await get(reader, stored["id"], fields=["id"])
    assert await hit_count(reader.context, stored["id"]) == 2
    assert await hit_count(reader.context, other["id"]) is None
    [row] = await rows(reader.context, "SELECT project_id FROM thought_hit")
    assert str(row.project_id) == stored["project_id"]


async def test_a_second_hit_stamps_the_count_anew(writer: ToolCaller, reader: ToolCaller) -> None:
    """The upsert's update takes `last_hit_at` from the inserted row (its default, the transaction's time)."""
    stored = await create(writer, "hit twice")
    await get(reader, stored["id"])
    await execute(reader.context, "UPDATE thought_hit SET last_hit_at = '2020-01-01T00:00:00Z'")
    await get(reader, stored["id"])
    [(count, recent)] = await rows(
        reader.context, "SELECT hit_count, last_hit_at > now() - interval '1 hour' FROM thought_hit"
    )
    assert (count, recent) == (2, True)


async def test_a_read_across_projects_counts_each_hit_in_its_thoughts_project(
    writer: ToolCaller, reader: ToolCaller
) -> None:
    """Hits are counted project by project (one statement each, the form a store sharded by project routes): a
    thought and its neighbour in another project each count one, under their own project."""
    await register(writer, "far", "/srv/far")
    here = await create(writer, "the thought read")
    there = await create(writer, "its neighbour elsewhere", cwd="/srv/far")
    await writer.ok(
        "memory_store", {"action": "link", "source_id": here["id"], "target_id": there["id"], "edge_type": "supports"}
    )
    await get(reader, here["id"], include_edges=True)
    counted = await rows(reader.context, "SELECT thought_id::text, project_id::text, hit_count FROM thought_hit")
    assert sorted(tuple(row) for row in counted) == sorted(
        [(here["id"], here["project_id"], 1), (there["id"], there["project_id"], 1)]
    )
    assert here["project_id"] != there["project_id"]


async def test_the_fifth_hit_promotes_a_primer(writer: ToolCaller, reader: ToolCaller) -> None:
    stored = await create(writer, "hit me five times")
    await execute(reader.context, "UPDATE thought SET importance = 0.5 WHERE id = :id", id=uuid.UUID(stored["id"]))
    for _ in range(4):
        await get(reader, stored["id"])
    assert await count_rows(reader.context, "primer") == 0
    assert await importance(reader.context, stored["id"]) == 0.5
    await get(reader, stored["id"])
    [primer] = await rows(reader.context, "SELECT thought_id, project_id FROM primer")
    assert (str(primer.thought_id), str(primer.project_id)) == (stored["id"], stored["project_id"])
    assert await importance(reader.context, stored["id"]) == pytest.approx(0.65)
    await get(reader, stored["id"])
    assert await count_rows(reader.context, "primer") == 1
    assert await importance(reader.context, stored["id"]) == pytest.approx(0.65)
    assert await hit_count(reader.context, stored["id"]) == 6


async def test_promotion_caps_importance_at_one(writer: ToolCaller, reader: ToolCaller) -> None:
    stored = await create(writer, "already important")
    await execute(reader.context, "UPDATE thought SET importance = 0.9 WHERE id = :id", id=uuid.UUID(stored["id"]))
    for _ in range(5):
        await get(reader, stored["id"])
    assert await count_rows(reader.context, "primer") == 1
    assert await importance(reader.context, stored["id"]) == 1.0
    assert (await get(reader, stored["id"], fields=["importance"])).item == {"importance": 1.0}


async def test_list_counts_no_hit(writer: ToolCaller, reader: ToolCaller) -> None:
    await create(writer, "listed, not read")
    before = await snapshot(reader.context)
    await listing(reader)
    assert await snapshot(reader.context) == before


# ---------------------------------------------------------------- list


async def five_thoughts(writer: ToolCaller) -> list[dict[str, Any]]:
    """Newest first, the order list answers in."""
    made = [await create(writer, f"inventory thought {n}") for n in range(5)]
    return list(reversed(made))


async def test_list_pages_with_limit_and_offset(writer: ToolCaller, reader: ToolCaller) -> None:
    made = await five_thoughts(writer)
    first = await listing(reader, limit=2)
    assert [item["id"] for item in first.items] == [made[0]["id"], made[1]["id"]]
    assert first.meta["counts"] == {"limit": 2, "offset": 0, "total": 5, "returned": 2, "filtered_out": 3}
    second = await listing(reader, limit=2, offset=2)
    assert [item["id"] for item in second.items] == [made[2]["id"], made[3]["id"]]
    assert second.meta["counts"] == {"limit": 2, "offset": 2, "total": 5, "returned": 2, "filtered_out": 3}
    last = await listing(reader, limit=2, offset=4)
    assert [item["id"] for item in last.items] == [made[4]["id"]]
    assert last.meta["counts"] == {"limit": 2, "offset": 4, "total": 5, "returned": 1, "filtered_out": 4}
    beyond = await listing(reader, limit=2, offset=9)
    assert beyond.items == []
    assert beyond.meta["counts"] == {"limit": 2, "offset": 9, "total": 5, "returned": 0, "filtered_out": 5}


async def test_list_defaults_and_exact_meta(writer: ToolCaller, reader: ToolCaller) -> None:
    made = await five_thoughts(writer)
    answer = await listing(reader)
    assert answer.items == [{k: thought[k] for k in COMPACT_KEYS} for thought in made]
    assert answer.meta == {
        "action": "list",
        "scope": None,
        "counts": {"limit": 50, "offset": 0, "total": 5, "returned": 5, "filtered_out": 0},
        "degraded": False,
        "warnings": [NO_CWD],
    }


async def test_list_shaping_controls(writer: ToolCaller, reader: ToolCaller) -> None:
    stored = await create(writer, "shaped in a list", url_links=LINKS[:2])
    assert (await listing(reader, compact=False)).items == [stored]
    assert (await listing(reader, fields=["id", "status"], compact=False)).items == [
        {"id": stored["id"], "status": "active"}
    ]
    with_links = (await listing(reader, include_url_links=True, fields=["id"])).items
    assert with_links == [{"id": stored["id"], "url_links": [{**link, "label": link["text"]} for link in LINKS[:2]]}]
    assert "url_links" not in (await listing(reader)).items[0]


async def test_list_status_filter_defaults_to_all(writer: ToolCaller, reader: ToolCaller) -> None:
    active = await create(writer, "an active one")
    draft = await create(writer, "a draft one", status="draft")
    archived = await create(writer, "an archived one")
    await execute(
        reader.context,
        "UPDATE thought SET status = 'archived', archived_at = now() WHERE id = :id",
        id=uuid.UUID(archived["id"]),
    )

    async def ids(**arguments: Any) -> set[str]:
        return {item["id"] for item in (await listing(reader, **arguments)).items}

    assert await ids() == {active["id"], draft["id"], archived["id"]}
    assert await ids(status="all") == {active["id"], draft["id"], archived["id"]}
    assert await ids(status="active") == {active["id"]}
    assert await ids(status="draft") == {draft["id"]}
    assert await ids(status="archived") == {archived["id"]}
    counted = await listing(reader, status="draft")
    assert counted.meta["counts"] == {"limit": 50, "offset": 0, "total": 1, "returned": 1, "filtered_out": 0}
    refused = await reader("memory_recall", {"action": "list", "status": "deleted"})
    assert refused.error["statusCode"] == 400 and "'status'" in refused.text


async def test_list_tag_and_is_cluster_filters(writer: ToolCaller, reader: ToolCaller) -> None:
    tagged = await create(writer, "tagged ops", tags=["ops", "db"])
    plain = await create(writer, "no tags")
    cluster = await create(writer, "a cluster thought", tags=["ops"])
    await execute(reader.context, "UPDATE thought SET is_cluster = true WHERE id = :id", id=uuid.UUID(cluster["id"]))

    async def ids(**arguments: Any) -> set[str]:
        return {item["id"] for item in (await listing(reader, **arguments)).items}

    assert await ids(tag="ops") == {tagged["id"], cluster["id"]}
    assert await ids(tag="db") == {tagged["id"]}
    assert await ids(tag="none-such") == set()
    assert await ids(is_cluster=True) == {cluster["id"]}
    assert await ids(is_cluster=False) == {tagged["id"], plain["id"]}
    assert await ids(tag="ops", is_cluster=False) == {tagged["id"]}
    answer = await listing(reader, tag="ops", limit=1)
    assert answer.meta["counts"] == {"limit": 1, "offset": 0, "total": 2, "returned": 1, "filtered_out": 1}
    full = (await listing(reader, is_cluster=True, compact=False)).items
    assert full[0]["is_cluster"] is True


@pytest.mark.parametrize("cwd", [None, ""])
async def test_list_without_cwd_spans_every_project(writer: ToolCaller, reader: ToolCaller, cwd: str | None) -> None:
    await register(writer, "Demo", "/work/demo")
    here = await create(writer, "in demo", cwd="/work/demo")
    there = await create(writer, "in default")
    arguments = {} if cwd is None else {"cwd": cwd}
    answer = await listing(reader, **arguments)
    assert {item["id"] for item in answer.items} == {here["id"], there["id"]}
    assert answer.meta["scope"] is None
    assert answer.meta["warnings"] == [NO_CWD]


async def test_list_with_an_unregistered_cwd_spans_every_project(writer: ToolCaller, reader: ToolCaller) -> None:
    await register(writer, "Demo", "/work/demo")
    here = await create(writer, "in demo", cwd="/work/demo")
    there = await create(writer, "in default")
    answer = await listing(reader, cwd="/not/registered")
    assert {item["id"] for item in answer.items} == {here["id"], there["id"]}
    assert answer.meta["scope"] == {"project": None, "project_name": None, "global": True}
    assert answer.meta["warnings"] == [
        'cwd "/not/registered" matches no known project (check it with memory_manage action=resolve) '
        "— the answer spans every project"
    ]


@pytest.mark.parametrize("cwd", ["/work/demo", "/work/demo/", "/work/demo/src/deep"])
async def test_list_with_a_registered_cwd_is_scoped(writer: ToolCaller, reader: ToolCaller, cwd: str) -> None:
    demo = await register(writer, "Demo", "/work/demo")
    await register(writer, "Sibling", "/work/demo-two")
    here = await create(writer, "in demo", cwd="/work/demo")
    await create(writer, "in the sibling", cwd="/work/demo-two")
    await create(writer, "in default")
    answer = await listing(reader, cwd=cwd)
    assert [item["id"] for item in answer.items] == [here["id"]]
    assert answer.items[0]["project"] == "Demo"
    assert answer.meta["scope"] == {"project": demo["id"], "project_name": "Demo", "global": False}
    assert answer.meta["warnings"] == []
    assert answer.meta["counts"] == {"limit": 50, "offset": 0, "total": 1, "returned": 1, "filtered_out": 0}


@pytest.mark.parametrize("limit", [0, 501, -1])
async def test_list_refuses_a_limit_out_of_range(reader: ToolCaller, limit: int) -> None:
    answer = await reader("memory_recall", {"action": "list", "limit": limit})
    assert answer.error["statusCode"] == 400
    assert answer.error["retryable"] is False
    assert answer.text.startswith("Invalid argument 'limit' for memory_recall action=list")


async def test_list_accepts_the_limit_bounds(writer: ToolCaller, reader: ToolCaller) -> None:
    await create(writer, "bounds")
    assert (await listing(reader, limit=1)).meta["counts"]["limit"] == 1
    assert (await listing(reader, limit=500)).meta["counts"]["limit"] == 500


async def test_list_refuses_a_negative_offset(reader: ToolCaller) -> None:
    answer = await reader("memory_recall", {"action": "list", "offset": -1})
    assert answer.error["statusCode"] == 400
    assert answer.text.startswith("Invalid argument 'offset' for memory_recall action=list")


async def test_a_neighbour_deleted_after_the_edges_were_read_is_left_out(
    writer: ToolCaller, reader: ToolCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """READ COMMITTED: the neighbours' read sees a delete that committed after the edges' read."""
    top, middle, bottom = await chain_of_three(writer)
    incident = EdgeRepository.incident

    async def then_delete(self: EdgeRepository, *args: Any, **kwargs: Any) -> Any:
        edges = await incident(self, *args, **kwargs)
        await execute(writer.context, "DELETE FROM thought WHERE id = :id", id=uuid.UUID(bottom["id"]))
        return edges

    monkeypatch.setattr(EdgeRepository, "incident", then_delete)
    item = (await get(reader, middle["id"], include_edges=True)).item
    assert [up["thought"]["id"] for up in item["upstream"]] == [top["id"]]
    assert item["downstream"] == []
