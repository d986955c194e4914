"""Conflicting graph writes run concurrently against a real PostgreSQL.

Several independent AppContexts (each with its own engine and connection pool, as separate app replicas
would have) call the tools at once through dispatch; every call opens its own transaction. After each
scenario the graph invariants are checked in SQL: no pair with two edges in either direction, no
self-loop, no edge to a missing thought, no cluster edge from a non-cluster thought — and no call may
fail with an internal (unclassified) error.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from sqlalchemy import text

from app.db.engine import Database, build_engine
from app.db.repositories.thoughts import ThoughtRepository
from app.embedding.runtime import EmbeddingRuntime
from app.services.context import AppContext
from tests.support.helpers import Answer, ToolCaller, execute

REPLICAS = 4
EDGE_TYPES = ("related", "parent", "develops", "replaces", "references", "depends_on", "contradicts", "supports")


@pytest.fixture
async def replicas(
    database_url: str, embedding_runtime: EmbeddingRuntime, writer: ToolCaller
) -> AsyncIterator[list[ToolCaller]]:
    """The writer as seen through REPLICAS independent app contexts (own engine and pool each)."""
    databases = [Database(build_engine(database_url, pool_size=4)) for _ in range(REPLICAS)]
    try:
        yield [
            ToolCaller(AppContext(db, embedding_runtime, writer.context.settings), writer.principal) for db in databases
        ]
    finally:
        for db in databases:
            await db.dispose()


async def rows(context: AppContext, query: str, **params: Any) -> Sequence[Any]:
    async with context.db.unit_of_work() as session:
        return (await session.execute(text(query), params)).all()


INVARIANTS = {
    "pairs with two edges": (
        "SELECT count(*) FROM (SELECT 1 FROM edge GROUP BY LEAST(source_id, target_id), "
        "GREATEST(source_id, target_id) HAVING count(*) > 1) AS twice"
    ),
    "self-loops": "SELECT count(*) FROM edge WHERE source_id = target_id",
    "edges to a missing thought": (
        "SELECT count(*) FROM edge e LEFT JOIN thought s ON s.id = e.source_id "
        "LEFT JOIN thought t ON t.id = e.target_id WHERE s.id IS NULL OR t.id IS NULL"
    ),
    "cluster edges from a non-cluster": (
        "SELECT count(*) FROM edge e JOIN thought s ON s.id = e.source_id WHERE e.type = 'cluster' AND NOT s.is_cluster"
    ),
}


async def assert_invariants(context: AppContext) -> None:
    broken = {name: (await rows(context, query))[0][0] for name, query in INVARIANTS.items()}
    assert broken == dict.fromkeys(INVARIANTS, 0)


def assert_classified(answers: Sequence[Answer], *allowed: int) -> None:
    """Every answer succeeded or failed with one of the `allowed` status codes (never an internal error)."""
    for answer in answers:
        if answer.is_error:
            assert answer.raw.structured_content is not None, f"unclassified failure: {answer.text}"
            assert answer.error["statusCode"] in allowed, answer.text


async def thoughts(caller: ToolCaller, count: int) -> list[str]:
    contents = [{"content": f"concurrency thought {index}: {uuid.uuid4().hex[:8]}"} for index in range(count)]
    answer = await caller.ok("memory_store", {"action": "bulk_create", "thoughts": contents})
    return [row["thought"]["id"] for row in answer.items]


async def link(caller: ToolCaller, source: str, target: str, edge_type: str) -> str:
    arguments = {"action": "link", "source_id": source, "target_id": target, "edge_type": edge_type}
    return str((await caller.ok("memory_store", arguments)).item["id"])


async def token_of(caller: ToolCaller, tool: str, arguments: dict[str, Any]) -> str:
    answer = await caller.ok(tool, arguments)
    return str(answer.meta["preview"]["token"])


def confirmed(arguments: dict[str, Any], token: str) -> dict[str, Any]:
    return {**arguments, "confirm": True, "preview_token": token}


async def pair_edges(context: AppContext, a: str, b: str) -> list[tuple[str, str, str, str]]:
    found = await rows(
        context,
        "SELECT id::text, source_id::text, target_id::text, type::text FROM edge "
        "WHERE LEAST(source_id, target_id) = LEAST(CAST(:a AS uuid), CAST(:b AS uuid)) "
        "AND GREATEST(source_id, target_id) = GREATEST(CAST(:a AS uuid), CAST(:b AS uuid))",
        a=a,
        b=b,
    )
    return [(row[0], row[1], row[2], row[3]) for row in found]


# ---------------------------------------------------------------- link


async def test_concurrent_links_on_one_pair_leave_exactly_one_edge(replicas: list[ToolCaller]) -> None:
    ids = await thoughts(replicas[0], 10)
    pairs = [(ids[i], ids[i + 1]) for i in range(0, 10, 2)]
    calls = []
    for a, b in pairs:
        for n, edge_type in enumerate(("related", "related", "supports", "supports", "contradicts", "depends_on")):
            source, target = (a, b) if n % 2 == 0 else (b, a)
            calls.append((a, b, {"action": "link", "source_id": source, "target_id": target, "edge_type": edge_type}))
    random.Random(7).shuffle(calls)
    answers = await asyncio.gather(
        *(replicas[n % REPLICAS]("memory_store", arguments) for n, (_, _, arguments) in enumerate(calls))
    )
    assert_classified(answers, 409)
    for a, b in pairs:
        [(edge_id, _, _, final_type)] = await pair_edges(replicas[0].context, a, b)
        accepted = [
            answer.item
            for (x, y, _), answer in zip(calls, answers, strict=True)
            if (x, y) == (a, b) and not answer.is_error
        ]
        assert accepted, "the first link of a pair always succeeds"
        assert {item["id"] for item in accepted} == {edge_id}  # one edge, upgraded in place at most
        assert final_type in {item["type"] for item in accepted}
    await assert_invariants(replicas[0].context)


async def test_concurrent_link_batches_over_overlapping_pairs(replicas: list[ToolCaller]) -> None:
    ids = await thoughts(replicas[0], 7)
    pairs = [(ids[i], ids[j]) for i in range(7) for j in range(i + 1, 7)][:16]
    batches = []
    for seed in range(REPLICAS * 2):
        rng = random.Random(seed)
        links = []
        for a, b in rng.sample(pairs, len(pairs)):
            source, target = (a, b) if rng.random() < 0.5 else (b, a)
            links.append({"source": source, "target": target, "type": rng.choice(EDGE_TYPES)})
        batches.append(links)
    answers = await asyncio.gather(
        *(
            replicas[n % REPLICAS]("memory_store", {"action": "link_batch", "links": links})
            for n, links in enumerate(batches)
        )
    )
    assert_classified(answers)  # a batch never fails as a whole
    creators: dict[tuple[str, str], int] = {}
    for links, answer in zip(batches, answers, strict=True):
        items = answer.items
        assert [row["index"] for row in items] == list(range(len(links)))
        failed = [row for row in items if row["status"] == "failed"]
        assert all("error" in row and "type" not in row for row in failed)
        assert answer.meta["counts"]["failed"] == len(failed)
        assert answer.meta["counts"]["linked"] == len(items) - len(failed)
        for row in items:
            if row["status"] == "linked":
                key = (min(row["source"], row["target"]), max(row["source"], row["target"]))
                creators[key] = creators.get(key, 0) + 1
    for a, b in pairs:
        assert len(await pair_edges(replicas[0].context, a, b)) == 1
        assert creators.get((min(a, b), max(a, b)), 0) >= 1
    await assert_invariants(replicas[0].context)


# ---------------------------------------------------------------- retype vs unlink


async def test_concurrent_retype_and_unlink_of_one_edge(replicas: list[ToolCaller]) -> None:
    ids = await thoughts(replicas[0], 12)
    pairs = [(ids[i], ids[i + 1]) for i in range(0, 12, 2)]
    calls = []
    for a, b in pairs:
        edge_id = await link(replicas[0], a, b, "supports")
        retype = {"action": "retype", "edge_id": edge_id, "new_type": "depends_on"}
        unlink = {"action": "unlink", "edge_id": edge_id}
        calls.append(confirmed(retype, await token_of(replicas[0], "memory_store", retype)))
        calls.append(confirmed(unlink, await token_of(replicas[0], "memory_store", unlink)))
    answers = await asyncio.gather(
        *(replicas[n % REPLICAS]("memory_store", arguments) for n, arguments in enumerate(calls))
    )
    assert_classified(answers, 404)
    for n, (a, b) in enumerate(pairs):
        retyped, unlinked = answers[2 * n], answers[2 * n + 1]
        final = await pair_edges(replicas[0].context, a, b)
        if retyped.is_error:  # the unlink won: the retype found no edge and wrote nothing
            assert retyped.error["message"].startswith("Edge not found")
            assert unlinked.item["status"] == "deleted"
            assert final == []
        else:  # the retype won: the unlink found the old id gone
            assert unlinked.item["status"] == "not_found"
            assert final == [(retyped.item["new_edge_id"], a, b, "depends_on")]
    await assert_invariants(replicas[0].context)


async def wait_until_blocked(context: AppContext, count: int = 1) -> None:
    """Until `count` sessions of this database wait on a lock (a held transaction blocks them)."""
    for _ in range(200):
        waiting = (await rows(context, "SELECT count(*) FROM pg_locks WHERE NOT granted"))[0][0]
        if waiting >= count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the call never blocked")


async def test_a_retype_blocked_behind_an_unlink_does_not_resurrect_the_edge(replicas: list[ToolCaller]) -> None:
    """Deterministic interleaving: the unlink's delete is in flight when the retype re-reads the edge."""
    a, b = await thoughts(replicas[0], 2)
    edge_id = await link(replicas[0], a, b, "supports")
    retype = {"action": "retype", "edge_id": edge_id, "new_type": "depends_on"}
    token = await token_of(replicas[0], "memory_store", retype)
    async with replicas[1].context.db.unit_of_work() as session:  # an unlink, not yet committed
        await session.execute(text("DELETE FROM edge WHERE id = :id"), {"id": edge_id})
        pending = asyncio.create_task(replicas[2]("memory_store", confirmed(retype, token)))
        await wait_until_blocked(replicas[0].context)
    answer = await pending
    assert answer.error["statusCode"] == 404, answer.text
    assert answer.text.startswith("Edge not found")
    assert await pair_edges(replicas[0].context, a, b) == []
    assert (await rows(replicas[0].context, "SELECT count(*) FROM audit_event"))[0][0] == 0
    await assert_invariants(replicas[0].context)


# ---------------------------------------------------------------- merge vs archive


async def merge_round(replicas: list[ToolCaller], archive: str) -> None:
    target, source, x, y = await thoughts(replicas[0], 4)  # source created after target: a higher id
    await link(replicas[0], source, x, "supports")
    await link(replicas[0], y, source, "depends_on")
    await link(replicas[0], target, source, "related")
    merge = {"action": "merge", "source_id": source, "target_id": target}
    others: dict[str, dict[str, Any]] = {
        "source": {"action": "archive", "thought_id": source},
        "target": {"action": "archive", "thought_id": target},
        "both": {"action": "archive_batch", "thought_ids": [source, target]},
    }
    other = others[archive]
    merge_call = confirmed(merge, await token_of(replicas[0], "memory_supersede", merge))
    other_call = confirmed(other, await token_of(replicas[0], "memory_supersede", other))
    merged, archived = await asyncio.gather(
        replicas[1]("memory_supersede", merge_call), replicas[2]("memory_supersede", other_call)
    )
    assert_classified([merged, archived], 409)
    assert not archived.is_error, archived.text  # archiving always succeeds (idempotent)
    context = replicas[0].context
    replaces = await rows(
        context,
        "SELECT count(*) FROM edge WHERE source_id = :t AND target_id = :s AND type = 'replaces'",
        t=target,
        s=source,
    )
    statuses = dict(
        await rows(context, "SELECT id::text, status::text FROM thought WHERE id IN (:s, :t)", s=source, t=target)
    )
    if merged.is_error:
        assert merged.error["message"] in (
            "Merge refused: the source is archived",
            "Merge refused: the target is archived",
        )
        assert replaces == [(0,)]
        assert {(e[1], e[2]) for e in await pair_edges(context, source, x)} == {(source, x)}
        assert {(e[1], e[2]) for e in await pair_edges(context, y, source)} == {(y, source)}
        assert len(await pair_edges(context, target, source)) == 1
    else:
        assert merged.item["result"]["edges_transferred"] == 2
        assert replaces == [(1,)]
        assert statuses[source] == "archived"
        assert await pair_edges(context, source, x) == [] and await pair_edges(context, y, source) == []
        assert [(e[1], e[2]) for e in await pair_edges(context, target, x)] == [(target, x)]
        assert [(e[1], e[2]) for e in await pair_edges(context, y, target)] == [(y, target)]
    if archive in ("source", "both"):
        assert statuses[source] == "archived"
    if archive in ("target", "both"):
        assert statuses[target] == "archived"
    await assert_invariants(context)


@pytest.mark.parametrize("archive", ["source", "target", "both"])
async def test_concurrent_merge_and_archive_of_the_same_thoughts(replicas: list[ToolCaller], archive: str) -> None:
    for _ in range(4):
        await merge_round(replicas, archive)


async def test_concurrent_merge_and_links_onto_the_merged_thoughts(replicas: list[ToolCaller]) -> None:
    for _ in range(3):
        target, source, *others = await thoughts(replicas[0], 6)
        for other in others:
            await link(replicas[0], source, other, "references")
        merge = {"action": "merge", "source_id": source, "target_id": target}
        merge_call = confirmed(merge, await token_of(replicas[0], "memory_supersede", merge))
        links = [
            {"action": "link", "source_id": end, "target_id": other, "edge_type": "supports"}
            for other in others
            for end in (target, source)
        ]
        answers = await asyncio.gather(
            replicas[0]("memory_supersede", merge_call),
            *(replicas[1 + n % (REPLICAS - 1)]("memory_store", arguments) for n, arguments in enumerate(links)),
        )
        assert_classified(answers, 409)
        assert not answers[0].is_error, answers[0].text
        for other in others:
            assert len(await pair_edges(replicas[0].context, target, other)) == 1
        await assert_invariants(replicas[0].context)


# ---------------------------------------------------------------- one token, many confirms


async def race_confirms(replicas: list[ToolCaller], tool: str, arguments: dict[str, Any]) -> list[Answer]:
    token = await token_of(replicas[0], tool, arguments)
    audits = (await rows(replicas[0].context, "SELECT count(*) FROM audit_event"))[0][0]
    answers = await asyncio.gather(*(caller(tool, confirmed(arguments, token)) for caller in replicas))
    winners = [answer for answer in answers if not answer.is_error]
    assert len(winners) == 1, [answer.text for answer in answers]
    used = f"preview_token {token} was already used"
    for answer in answers:
        if answer.is_error:
            assert answer.text.startswith(used) or answer.text.startswith("Edge not found"), answer.text
    assert (await rows(replicas[0].context, "SELECT count(*) FROM audit_event"))[0][0] == audits + 1
    await assert_invariants(replicas[0].context)
    return answers


async def test_concurrent_confirms_of_one_unlink_token_execute_once(replicas: list[ToolCaller]) -> None:
    a, b = await thoughts(replicas[0], 2)
    edge_id = await link(replicas[0], a, b, "supports")
    await race_confirms(replicas, "memory_store", {"action": "unlink", "edge_id": edge_id})
    assert await pair_edges(replicas[0].context, a, b) == []


async def test_concurrent_confirms_of_one_retype_token_execute_once(replicas: list[ToolCaller]) -> None:
    a, b = await thoughts(replicas[0], 2)
    edge_id = await link(replicas[0], a, b, "supports")
    await race_confirms(replicas, "memory_store", {"action": "retype", "edge_id": edge_id, "new_type": "parent"})
    [(_, _, _, edge_type)] = await pair_edges(replicas[0].context, a, b)
    assert edge_type == "parent"


async def test_concurrent_confirms_of_one_archive_token_execute_once(replicas: list[ToolCaller]) -> None:
    ids = await thoughts(replicas[0], 3)
    await race_confirms(replicas, "memory_supersede", {"action": "archive", "thought_id": ids[0]})
    await race_confirms(replicas, "memory_supersede", {"action": "archive_batch", "thought_ids": ids[1:]})


async def test_concurrent_confirms_of_one_merge_token_execute_once(replicas: list[ToolCaller]) -> None:
    source, target, x = await thoughts(replicas[0], 3)
    await link(replicas[0], source, x, "supports")
    await race_confirms(replicas, "memory_supersede", {"action": "merge", "source_id": source, "target_id": target})
    assert (await rows(replicas[0].context, "SELECT count(*) FROM edge WHERE type = 'replaces'"))[0][0] == 1


async def test_concurrent_confirms_of_one_primer_token_execute_once(replicas: list[ToolCaller]) -> None:
    [thought_id] = await thoughts(replicas[0], 1)
    for _ in range(5):
        await replicas[0].ok("memory_recall", {"action": "get", "thought_id": thought_id})
    [primer] = (await replicas[0].ok("memory_primers", {"action": "list"})).items
    await race_confirms(replicas, "memory_primers", {"action": "delete", "primer_id": primer["id"]})
    assert (await rows(replicas[0].context, "SELECT count(*) FROM primer"))[0][0] == 0


# ---------------------------------------------------------------- bulk_create merging into one duplicate


async def test_concurrent_merges_into_one_duplicate_keep_every_tag(
    replicas: list[ToolCaller], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two calls merge tags into the same existing thought; each read is held open so both overlap."""
    content = f"The nightly export runs at 02:00 UTC ({uuid.uuid4().hex[:6]})"
    await replicas[0].ok("memory_manage", {"action": "create", "name": "Exports", "local_path": "/srv/exports"})
    where = {"cwd": "/srv/exports"}
    await replicas[0].ok("memory_store", {"action": "create", "content": content, "tags": ["base"], **where})
    get_many = ThoughtRepository.get_many

    async def slow_read(self: ThoughtRepository, *args: Any, **kwargs: Any) -> Any:
        found = await get_many(self, *args, **kwargs)
        await asyncio.sleep(0.3)  # the other call reads meanwhile
        return found

    monkeypatch.setattr(ThoughtRepository, "get_many", slow_read)
    answers = await asyncio.gather(
        *(
            caller(
                "memory_store", {"action": "bulk_create", "thoughts": [{"content": content, "tags": [tag]}], **where}
            )
            for caller, tag in zip(replicas, ("red", "blue"), strict=False)
        )
    )
    assert all(not answer.is_error for answer in answers), [answer.text for answer in answers]
    [(tags,)] = await rows(replicas[0].context, "SELECT tags FROM thought WHERE content = :c", c=content)
    assert sorted(tags) == ["base", "blue", "red"]


# ---------------------------------------------------------------- two creates of one new content


@pytest.mark.parametrize("second", ["create", "bulk_create"])
async def test_concurrent_creates_of_one_new_content_store_it_once(
    replicas: list[ToolCaller], monkeypatch: pytest.MonkeyPatch, second: str
) -> None:
    """Both calls look for a live duplicate before either inserts: neither finds one. The content claim makes
    the second wait for the first to commit and then merge into its thought (docs/mcp-tools.md, action=create)."""
    content = f"Staging deploys freeze on Fridays after 15:00 ({uuid.uuid4().hex[:6]})"
    await replicas[0].ok("memory_manage", {"action": "create", "name": "Deploys", "local_path": "/srv/deploys"})
    where = {"cwd": "/srv/deploys"}
    find = ThoughtRepository.find_live_by_content
    looked = asyncio.Barrier(2)
    first_looks = [0]

    async def both_look_first(self: ThoughtRepository, *args: Any, **kwargs: Any) -> Any:
        found = await find(self, *args, **kwargs)
        first_looks[0] += 1
        if first_looks[0] <= 2:  # each call's first look waits for the other's: neither has inserted yet
            await asyncio.wait_for(looked.wait(), 5)
        return found

    monkeypatch.setattr(ThoughtRepository, "find_live_by_content", both_look_first)
    calls = {
        "create": {"action": "create", "content": content, "tags": ["red"], **where},
        "bulk_create": {"action": "bulk_create", "thoughts": [{"content": content, "tags": ["blue"]}], **where},
    }
    answers = await asyncio.gather(
        replicas[0]("memory_store", calls["create"]), replicas[1]("memory_store", calls[second])
    )
    assert all(not answer.is_error for answer in answers), [answer.text for answer in answers]
    stored = await rows(replicas[0].context, "SELECT id::text, tags FROM thought WHERE content = :c", c=content)
    assert len(stored) == 1, stored
    [(thought_id, tags)] = stored
    assert sorted(tags) == (["blue", "red"] if second == "bulk_create" else ["red"])
    created, other = answers
    answered = [created.item["id"], other.item["id"] if second == "create" else other.items[0]["thought"]["id"]]
    assert answered == [thought_id, thought_id]


async def test_a_claim_whose_thought_was_archived_passes_to_the_new_thought(replicas: list[ToolCaller]) -> None:
    content = f"The CDN purge needs the ops token ({uuid.uuid4().hex[:6]})"
    first = await replicas[0].ok("memory_store", {"action": "create", "content": content})
    await execute(
        replicas[0], "UPDATE thought SET status = 'archived', archived_at = now() WHERE id = :id", id=first.item["id"]
    )
    second = await replicas[1].ok("memory_store", {"action": "create", "content": content})
    third = await replicas[0].ok("memory_store", {"action": "create", "content": content, "tags": ["again"]})
    assert second.item["id"] != first.item["id"]
    assert third.item["id"] == second.item["id"] and third.item["tags"] == ["again"]
    claims = await rows(
        replicas[0].context, "SELECT thought_id::text FROM thought_content_claim WHERE content_md5 = md5(:c)", c=content
    )
    assert claims == [(second.item["id"],)]


async def test_a_bulk_takes_over_every_claim_whose_thought_is_gone(replicas: list[ToolCaller]) -> None:
    contents = [f"Runbook step {n}: drain the queue workers ({uuid.uuid4().hex[:6]})" for n in range(3)]
    batch = {"action": "bulk_create", "thoughts": [{"content": content} for content in contents]}
    first = [item["thought"]["id"] for item in (await replicas[0].ok("memory_store", batch)).items]
    archive = "UPDATE thought SET status = 'archived', archived_at = now() WHERE id = :id"
    await execute(replicas[0], archive, id=first[0])
    await execute(replicas[0], "DELETE FROM thought WHERE id = :id", id=first[1])
    again = [item["thought"]["id"] for item in (await replicas[1].ok("memory_store", batch)).items]
    assert again[2] == first[2]  # still live: a duplicate, answered
    assert again[0] not in first and again[1] not in first
    claims = await rows(
        replicas[0].context,
        "SELECT thought_id::text FROM thought_content_claim WHERE content_md5 = ANY(:m) ORDER BY thought_id",
        m=[hashlib.md5(content.encode()).hexdigest() for content in contents],
    )
    assert sorted(row[0] for row in claims) == sorted([again[0], again[1], first[2]])
