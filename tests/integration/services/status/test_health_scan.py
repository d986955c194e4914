"""The health report's one pass over `thought` (app/services/status/health.py SCAN) answers what each check's own query
answers: the same count for every check, detail rows that are the check's own rows, the thoughts by status and the
BM25 drift of LEXICAL_DRIFT — on a data set with findings of every row check, archived rows that must not count,
more findings than the detail limit, and rows written with the triggers and foreign keys off."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import pytest
from sqlalchemy import text

from app.db.models import CONTENT_FACTS_STALE
from app.formats import iso
from app.services.context import AppContext
from app.services.status.health import CHECKS, DETAIL_LIMIT, LEXICAL_CHECK, LEXICAL_DRIFT, HealthService

ROWS = (
    "INSERT INTO thought (id, project_id, content, tags, status, archived_at, importance, is_cluster, created_at) "
    "SELECT gen_random_uuid(), :project, :content || n, CAST(:tags AS text[]), CAST(:status AS thought_status), "
    "CASE WHEN :status = 'archived' THEN now() END, :importance, :is_cluster, now() - make_interval(days => :age) "
    "FROM generate_series(1, :n) AS n"
)


async def _run(context: AppContext, sql: str, **params: Any) -> None:
    async with context.db.unit_of_work() as session:
        await session.execute(text(sql), params)


async def _thoughts(
    context: AppContext,
    project: uuid.UUID,
    content: str,
    n: int = 1,
    *,
    tags: tuple[str, ...] = ("t",),
    status: str = "active",
    importance: float = 0.5,
    is_cluster: bool = False,
    age: int = 0,
) -> None:
    """n thoughts `content1` … `contentN` (an empty `content` makes them `1` … `N`)."""
    await _run(
        context,
        ROWS,
        project=project,
        content=content,
        tags=list(tags),
        status=status,
        importance=importance,
        is_cluster=is_cluster,
        age=age,
        n=n,
    )


async def _own_rows(context: AppContext, sql: str) -> list[dict[str, Any]]:
    async with context.db.unit_of_work() as session:
        found = (await session.execute(text(sql))).all()
    return [{key: _plain(value) for key, value in row._mapping.items()} for row in found]


def _plain(value: Any) -> Any:
    """A value as the report's details carry it: numbers as they are, times in the wire's format, ids as text."""
    if value is None or isinstance(value, int | float | bool):
        return value
    return iso(value) if isinstance(value, datetime) else str(value)


async def _world(context: AppContext) -> dict[str, uuid.UUID]:
    main, other, empty = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    for project_id, name in ((main, "main"), (other, "other"), (empty, "empty")):
        await _run(context, "INSERT INTO project (id, name) VALUES (:id, :name)", id=project_id, name=name)
    await _thoughts(context, main, "An island thought without any edge, number ", 60)  # more than DETAIL_LIMIT
    await _thoughts(context, main, "An archived island thought, number ", 3, status="archived")
    await _thoughts(context, main, "A draft island thought, number ", 2, status="draft")
    await _thoughts(context, main, "An untagged thought, number ", 4, tags=())
    await _thoughts(context, main, "An archived untagged thought, number ", 2, tags=(), status="archived")
    await _thoughts(context, main, "tiny", 2)  # tiny1, tiny2
    await _thoughts(context, main, "   ab      ", 1)  # 12 characters, 3 once trimmed
    await _thoughts(context, main, "old", 1, status="archived")
    await _thoughts(context, main, "A faint thought, number ", 3, importance=0.01)
    await _thoughts(context, main, "An archived faint thought, number ", 2, importance=0.01, status="archived")
    await _thoughts(context, main, "An empty cluster, number ", 2, is_cluster=True)
    await _thoughts(context, main, "An archived empty cluster, number ", 1, is_cluster=True, status="archived")
    await _thoughts(context, main, "A stale draft, number ", 55, status="draft", age=40)  # its own query, > 50
    # A cluster with a member and a linked pair: neither empty nor islands.
    await _thoughts(context, main, "A cluster with a member, number ", 1, is_cluster=True)
    await _thoughts(context, main, "A member of the cluster, number ", 1)
    await _thoughts(context, main, "A linked thought, number ", 2)
    await _run(
        context,
        "INSERT INTO edge (id, project_id, source_id, target_id, type) "
        "SELECT gen_random_uuid(), :p, c.id, m.id, 'cluster' FROM thought c, thought m "
        "WHERE c.content = 'A cluster with a member, number 1' AND m.content = 'A member of the cluster, number 1'",
        p=main,
    )
    await _run(
        context,
        "INSERT INTO edge (id, project_id, source_id, target_id, type) "
        "SELECT gen_random_uuid(), :p, a.id, b.id, 'related' FROM thought a, thought b "
        "WHERE a.content = 'A linked thought, number 1' AND b.content = 'A linked thought, number 2'",
        p=main,
    )
    # Edge degrees (SCAN counts them from one read of `edge`, LINKED): a hub with 11 edges is overlinked and dense,
    # a thought with 5 is dense; one with 6 of which one from a cluster is neither, nor is an archived one with 12.
    await _thoughts(context, main, "A spoke, number ", 12)
    for name, edges, status in (
        ("A hub, number 1", 11, "active"),
        ("A dense thought, number 1", 5, "active"),
        ("A dense cluster member, number 1", 5, "active"),
        ("A dense archived thought, number 1", 12, "archived"),
    ):
        await _thoughts(context, main, name[:-1], 1, status=status)
        await _run(
            context,
            "INSERT INTO edge (id, project_id, source_id, target_id, type) "
            "SELECT gen_random_uuid(), :p, a.id, b.id, 'related' FROM thought a, thought b "
            "WHERE a.content = :name AND b.content = ANY(:spokes)",
            p=main,
            name=name,
            spokes=[f"A spoke, number {n}" for n in range(1, edges + 1)],
        )
    await _run(
        context,
        "INSERT INTO edge (id, project_id, source_id, target_id, type) "
        "SELECT gen_random_uuid(), :p, c.id, m.id, 'cluster' FROM thought c, thought m "
        "WHERE c.content = 'A cluster with a member, number 1' AND m.content = 'A dense cluster member, number 1'",
        p=main,
    )
    # Duplicates: one content live twice in `main` (plus an archived copy), once in `other` (not a duplicate).
    for project_id, status in ((main, "active"), (main, "draft"), (main, "archived"), (other, "active")):
        await _thoughts(context, project_id, "The same content in two places ", 1, status=status)
    # Rows written with the triggers and foreign keys off: `other`'s statistics drift, and a thought whose
    # project row does not exist (counted by the row checks, not by the drift check, as LEXICAL_DRIFT does).
    async with context.db.unit_of_work() as session:
        await session.execute(text("SET LOCAL session_replication_role = replica"))
        for project_id in (other, uuid.uuid4()):
            await session.execute(
                text("INSERT INTO thought (id, project_id, content) VALUES (gen_random_uuid(), :p, 'quorade x')"),
                {"p": project_id},
            )
    # `empty` has no thoughts, but its statistics say it has one.
    await _run(context, "INSERT INTO lexical_corpus (project_id, thoughts, tokens) VALUES (:p, 1, 2)", p=empty)
    return {"main": main, "other": other, "empty": empty}


async def test_the_one_pass_answers_what_each_checks_own_query_answers(app_context: AppContext) -> None:
    projects = await _world(app_context)
    async with app_context.db.unit_of_work() as session:
        service = HealthService(session)
        detailed = await service.report(include_details=True)
        counted = await service.report(include_details=False)
    entries = {name: entry for checks in detailed["categories"].values() for name, entry in checks.items()}
    assert {name: entry["count"] for name, entry in entries.items()} == {
        name: entry["count"] for checks in counted["categories"].values() for name, entry in checks.items()
    }
    assert detailed["summary"] == counted["summary"] and detailed["health_score"] == counted["health_score"]
    for check in CHECKS:
        own = await _own_rows(app_context, check.sql)
        entry = entries[check.name]
        assert entry["count"] == len(own), check.name
        assert len(entry["details"]) == min(len(own), DETAIL_LIMIT), check.name
        assert all(detail in own for detail in entry["details"]), check.name
    assert entries["island_thoughts"]["count"] > DETAIL_LIMIT
    expected = {
        "untagged_thoughts": 4 + 2,  # the two replica-mode rows have no tags either
        "too_short_content": 3 + 2,  # and 'quorade x' is 9 characters
        "importance_outliers": 3,
        "empty_clusters": 2,
        "duplicate_content": 1,
        "stale_drafts": 55,
        "overlinked_thoughts": 1,
        "clusterless_dense_thoughts": 2,
        LEXICAL_CHECK: 2,
    }
    assert {name: entries[name]["count"] for name in expected} == expected
    drifted = {detail["project_id"] for detail in entries[LEXICAL_CHECK]["details"]}
    assert drifted == {str(projects["other"]), str(projects["empty"])}
    assert entries[LEXICAL_CHECK]["details"] == sorted(
        await _own_rows(app_context, LEXICAL_DRIFT), key=lambda row: str(row["project_id"])
    )
    async with app_context.db.unit_of_work() as session:
        statuses = dict((await session.execute(text("SELECT status::text, count(*) FROM thought GROUP BY 1"))).all())
    assert detailed["summary"]["thoughts"] == {
        status: statuses.get(status, 0) for status in ("draft", "active", "archived")
    }
    assert list(detailed["summary"]["thoughts"]) == ["draft", "active", "archived"]


# ---------------------------------------------------------------- the content facts (migration 0024)

BACKFILL = "UPDATE thought SET lexemes = length(tsv), content_md5 = md5(content)::uuid"
# Facts that lie, each as a write around the repository leaves them: a copy of the duplicated content hashed as
# something else, two different contents hashed alike, lexemes too many, too few or missing.
STALE = (
    "UPDATE thought SET content_md5 = gen_random_uuid() WHERE content = 'The same content in two places 1' "
    "AND status = 'draft'",
    "UPDATE thought SET content_md5 = (SELECT content_md5 FROM thought WHERE content = 'A faint thought, number 1') "
    "WHERE content = 'A faint thought, number 2'",
    "UPDATE thought SET lexemes = lexemes + 5 WHERE content LIKE 'A linked thought%'",
    "UPDATE thought SET lexemes = 0 WHERE content = 'quorade x'",
    "UPDATE thought SET lexemes = NULL, content_md5 = NULL WHERE content LIKE 'An untagged thought%'",
)


@pytest.mark.parametrize("facts", ["backfilled", "stale"])
async def test_the_report_reads_the_content_facts_and_corrects_the_stale_ones(
    app_context: AppContext, facts: str
) -> None:
    """The report's counts come from the stored facts where they hold and from the content where they do not (the
    rows of ix_thought_content_facts_stale): either way what each check's own query answers."""
    projects = await _world(app_context)
    await _run(app_context, BACKFILL)
    for statement in STALE if facts == "stale" else ():
        await _run(app_context, statement)
    stale = await _own_rows(app_context, f"SELECT content FROM thought WHERE {CONTENT_FACTS_STALE}")
    assert len(stale) == (0 if facts == "backfilled" else 1 + 1 + 2 + 2 + 4)
    async with app_context.db.unit_of_work() as session:
        report = await HealthService(session).report(include_details=True)
    entries = {name: entry for checks in report["categories"].values() for name, entry in checks.items()}
    for check in CHECKS:
        own = await _own_rows(app_context, check.sql)
        assert entries[check.name]["count"] == len(own), check.name
        assert len(entries[check.name]["details"]) == min(len(own), DETAIL_LIMIT), check.name
        assert all(detail in own for detail in entries[check.name]["details"]), check.name
    assert entries["duplicate_content"]["count"] == 1 and entries[LEXICAL_CHECK]["count"] == 2
    drifted = {detail["project_id"] for detail in entries[LEXICAL_CHECK]["details"]}
    assert drifted == {str(projects["other"]), str(projects["empty"])}
    assert entries[LEXICAL_CHECK]["details"] == sorted(
        await _own_rows(app_context, LEXICAL_DRIFT), key=lambda row: str(row["project_id"])
    )
