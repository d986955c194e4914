"""memory_status: slots, frontier, config, health and propose (docs/mcp-tools.md)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text

from app.config import EmbeddingSettings, Settings
from app.db.repositories.projects import ProjectRepository
from app.embedding.profiles import OFFLINE_E5, OFFLINE_MINILM
from app.embedding.runtime import EmbeddingRuntime
from app.main import settings_view
from app.services.context import AppContext
from tests.conftest import MODEL_CACHE
from tests.support.contract import COMPACT_THOUGHT_KEYS, FULL_THOUGHT_KEYS
from tests.support.helpers import ToolCaller, execute, own_transaction, rows, snapshot

NO_CWD = "no cwd — the answer spans every project"
NO_SLOT_SCOPE = "no project scope — the project-scoped slot overrides were not applied (pass cwd to read them)"
UNRESOLVED = {"project": None, "project_name": None, "global": True}
PIN_THOUGHT = (
    "propose is not cross-project: the plan is restricted to the project the addressed thought (thought_id) belongs to"
)
PIN_DRAFT = "propose is not cross-project: the plan is restricted to the default project (draft content)"
SLOT_KEYS = {"name", "scope", "virtual", "content", "truncated", "max_chars", "updated_at"}
BILLING = [
    "The billing service retries failed card payments three times",
    "Failed card payments are retried three times by the billing service",
    "The billing service retries a failed card payment three times before giving up",
    "Card payments that fail get three retries in the billing service",
    "Billing retries each failed card payment three times",
]
DEPLOY = [
    "The deploy pipeline runs database migrations before starting the app",
    "Database migrations run in the deploy pipeline before the app starts",
    "The deploy pipeline applies the database migrations before the application starts",
]


async def project(caller: ToolCaller, name: str) -> dict[str, Any]:
    answer = await caller.ok("memory_manage", {"action": "create", "name": name, "local_path": f"/srv/{name.lower()}"})
    return dict(answer.item)


async def thought(caller: ToolCaller, content: str, cwd: str | None = None, **extra: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {"action": "create", "content": content, **extra}
    if cwd is not None:
        arguments["cwd"] = cwd
    return dict((await caller.ok("memory_store", arguments)).item)


async def link(caller: ToolCaller, source: str, target: str, edge_type: str = "related") -> dict[str, Any]:
    answer = await caller.ok(
        "memory_store", {"action": "link", "source_id": source, "target_id": target, "edge_type": edge_type}
    )
    return dict(answer.item)


def scope_of(project_row: dict[str, Any]) -> dict[str, Any]:
    return {"project": project_row["id"], "project_name": project_row["name"], "global": False}


async def put_slot(caller: ToolCaller, name: str, project_id: str | None, content: str) -> None:
    await execute(
        caller,
        "INSERT INTO slot (id, project_id, name, content) VALUES (gen_random_uuid(), :project, :name, :content)",
        project=project_id,
        name=name,
        content=content,
    )


def unloaded_caller(caller: ToolCaller) -> ToolCaller:
    """The same user on a service whose embedder never loaded."""
    runtime = EmbeddingRuntime(EmbeddingSettings(model=OFFLINE_MINILM, cache_dir=MODEL_CACHE))
    return ToolCaller(AppContext(caller.context.db, runtime, caller.context.settings), caller.principal)


# ---------------------------------------------------------------- slots


async def test_slots_answer_the_four_slots_in_order_without_cwd(reader: ToolCaller) -> None:
    answer = await reader.ok("memory_status", {"action": "slots"})
    assert [item["name"] for item in answer.items] == [
        "pending_items",
        "architecture_decisions",
        "project_context",
        "active_goals",
    ]
    assert all(set(item) == SLOT_KEYS for item in answer.items)
    assert [(item["virtual"], item["scope"]) for item in answer.items] == [
        (True, "global"),
        (True, "global"),
        (False, "global"),
        (False, "global"),
    ]
    assert all(
        (item["content"], item["truncated"], item["max_chars"], item["updated_at"]) == ("", False, 2000, None)
        for item in answer.items
    )
    assert answer.meta == {
        "action": "slots",
        "scope": None,
        "counts": {"total": 4, "returned": 4, "filtered_out": 0},
        "degraded": False,
        "warnings": [NO_CWD, NO_SLOT_SCOPE],
    }


async def test_slots_project_row_wins_over_the_global_one(writer: ToolCaller) -> None:
    shop = await project(writer, "Shop")
    await put_slot(writer, "project_context", None, "global context")
    await put_slot(writer, "project_context", shop["id"], "shop context")
    await put_slot(writer, "active_goals", None, "global goal")
    before = await snapshot(writer.context)

    scoped = await writer.ok("memory_status", {"action": "slots", "cwd": "/srv/shop/web"})
    by_name = {item["name"]: item for item in scoped.items}
    assert (by_name["project_context"]["scope"], by_name["project_context"]["content"]) == ("project", "shop context")
    assert (by_name["active_goals"]["scope"], by_name["active_goals"]["content"]) == ("global", "global goal")
    assert by_name["pending_items"]["scope"] == "project" and by_name["pending_items"]["virtual"] is True
    assert by_name["project_context"]["updated_at"].endswith("Z")
    assert scoped.meta["scope"] == scope_of(shop) and scoped.meta["warnings"] == []

    unscoped = await writer.ok("memory_status", {"action": "slots"})
    by_name = {item["name"]: item for item in unscoped.items}
    assert (by_name["project_context"]["scope"], by_name["project_context"]["content"]) == ("global", "global context")
    assert unscoped.meta["warnings"] == [NO_CWD, NO_SLOT_SCOPE]

    # a present-but-unknown cwd keeps the answer global without the second warning
    unknown = await writer.ok("memory_status", {"action": "slots", "cwd": "/srv/nowhere"})
    assert unknown.meta["scope"] == UNRESOLVED
    assert unknown.meta["warnings"] == [
        'cwd "/srv/nowhere" matches no known project (check it with memory_manage action=resolve) — '
        "the answer spans every project"
    ]
    assert {item["name"]: item["content"] for item in unknown.items}["project_context"] == "global context"
    empty = await writer.ok("memory_status", {"action": "slots", "cwd": ""})
    assert empty.meta["warnings"] == [NO_CWD, NO_SLOT_SCOPE]
    assert await snapshot(writer.context) == before  # slots never write


async def test_slots_truncate_at_max_chars(writer: ToolCaller) -> None:
    long = "x" * 1990 + "0123456789" + "tail beyond the cut"
    await put_slot(writer, "active_goals", None, long)
    await put_slot(writer, "project_context", None, "y" * 2000)
    answer = await writer.ok("memory_status", {"action": "slots"})
    by_name = {item["name"]: item for item in answer.items}
    assert by_name["active_goals"]["content"] == long[:2000]
    assert by_name["active_goals"]["truncated"] is True
    assert (len(by_name["project_context"]["content"]), by_name["project_context"]["truncated"]) == (2000, False)


async def test_slots_page_pending_items_and_derive_decisions_from_primers(writer: ToolCaller) -> None:
    await project(writer, "Shop")
    pending = [await thought(writer, f"Pending task number {n}", "/srv/shop", tags=["pending"]) for n in range(4)]
    await thought(writer, "Not pending at all", "/srv/shop", tags=["todo"])
    later = await thought(writer, "Pending but asleep", "/srv/shop", tags=["pending"])
    await execute(writer, "UPDATE thought SET surface_after = now() + interval '2 days' WHERE id = :id", id=later["id"])
    lines = [f"- {t['content']} ({t['id']})" for t in sorted(pending, key=lambda t: t["id"])]

    everything = await writer.ok("memory_status", {"action": "slots", "cwd": "/srv/shop"})
    assert everything.items[0]["content"] == "\n".join(lines)
    page = await writer.ok("memory_status", {"action": "slots", "cwd": "/srv/shop", "slots_limit": 2, "offset": 1})
    assert page.items[0]["content"] == "\n".join(lines[1:3])
    tail = await writer.ok("memory_status", {"action": "slots", "cwd": "/srv/shop", "slots_limit": 2, "offset": 3})
    assert tail.items[0]["content"] == lines[3]

    decision = await thought(writer, "We use PostgreSQL for everything", "/srv/shop", tags=["decision"])
    other = await thought(writer, "Queues are served by the database", "/srv/shop")
    for thought_id, hits in ((decision["id"], 3), (other["id"], 7)):
        await execute(
            writer,
            "INSERT INTO thought_hit (thought_id, project_id, hit_count) "
            "SELECT id, project_id, :hits FROM thought WHERE id = :id",
            id=thought_id,
            hits=hits,
        )
        await execute(
            writer,
            "INSERT INTO primer (id, thought_id, project_id) SELECT gen_random_uuid(), id, project_id "
            "FROM thought WHERE id = :id",
            id=thought_id,
        )
    slots = await writer.ok("memory_status", {"action": "slots", "cwd": "/srv/shop"})
    assert slots.items[1]["content"] == "- Queues are served by the database\n- We use PostgreSQL for everything"
    # archiving the underlying thought takes it out of the virtual slot
    await execute(writer, "UPDATE thought SET status = 'archived', archived_at = now() WHERE id = :id", id=other["id"])
    slots = await writer.ok("memory_status", {"action": "slots", "cwd": "/srv/shop"})
    assert slots.items[1]["content"] == "- We use PostgreSQL for everything"

    bad = await writer("memory_status", {"action": "slots", "slots_limit": 0})
    assert bad.error["statusCode"] == 400 and "'slots_limit'" in bad.text


# ---------------------------------------------------------------- frontier


def priority(importance: float, blocked: bool, age_days: float) -> float:
    bonus = 0.1 if age_days <= 7 else 0.05 if age_days <= 30 else 0.0
    return round(min(1.0, 0.5 * importance + (0.0 if blocked else 0.15) + bonus), 4)


async def test_frontier_priority_blocking_order_and_exclusions(writer: ToolCaller, reader: ToolCaller) -> None:
    work = await project(writer, "Work")
    await project(writer, "Elsewhere")
    cwd = "/srv/work"
    directive = await thought(writer, "Write the migration guide for version two", cwd, tags=["directive"])
    blocked = await thought(writer, "Fix the flaky login test", cwd, tags=["todo"])
    older = await thought(writer, "Rotate the signing keys", cwd, tags=["todo"])
    oldest = await thought(writer, "Archive the legacy dashboards", cwd, tags=["todo"])
    pending = await thought(writer, "Ask about the quota increase", cwd, tags=["pending"], status="draft")
    helper = await thought(writer, "An untagged note the login fix depends on", cwd)
    asleep = await thought(writer, "Pending and asleep until next week", cwd, tags=["pending"], status="draft")
    woken = await thought(writer, "Pending and due again", cwd, tags=["pending"], status="draft")
    old_plan = await thought(writer, "Old plan: ship on Monday", cwd, tags=["todo"])
    new_plan = await thought(writer, "New plan: ship on Tuesday", cwd)
    kept = await thought(writer, "Still relevant plan", cwd, tags=["todo"])
    dead_replacer = await thought(writer, "A replacement that was itself archived", cwd)
    clustered = await thought(writer, "A todo that is a cluster thought", cwd, tags=["todo"])
    archived = await thought(writer, "An archived todo", cwd, tags=["todo"])
    await thought(writer, "A todo in another project", "/srv/elsewhere", tags=["todo"])
    await link(writer, blocked["id"], directive["id"], "depends_on")
    await link(writer, older["id"], helper["id"], "depends_on")  # helper is not on the frontier: no block
    await link(writer, new_plan["id"], old_plan["id"], "replaces")
    await link(writer, dead_replacer["id"], kept["id"], "replaces")
    statements = [
        ("UPDATE thought SET created_at = now() - interval '10 days', importance = 0.6 WHERE id = :id", older),
        ("UPDATE thought SET created_at = now() - interval '40 days', importance = 0.2 WHERE id = :id", oldest),
        ("UPDATE thought SET surface_after = now() + interval '7 days' WHERE id = :id", asleep),
        ("UPDATE thought SET surface_after = now() - interval '1 hour' WHERE id = :id", woken),
        ("UPDATE thought SET status = 'archived', archived_at = now() WHERE id = :id", dead_replacer),
        ("UPDATE thought SET is_cluster = true WHERE id = :id", clustered),
        ("UPDATE thought SET status = 'archived', archived_at = now() WHERE id = :id", archived),
    ]
    for statement, row in statements:
        await execute(writer, statement, id=row["id"])

    before = await snapshot(writer.context)
    answer = await reader.ok("memory_status", {"action": "frontier", "cwd": cwd, "limit": 50})
    assert await snapshot(writer.context) == before  # read-only
    expected = [
        (directive, "directive", priority(1.0, False, 0), []),
        (blocked, "directive", priority(1.0, True, 0), [directive["id"]]),
        (older, "directive", priority(0.6, False, 10), []),
        (oldest, "directive", priority(0.2, False, 40), []),
        (pending, "pending", priority(1.0, False, 0), []),
        (woken, "pending", priority(1.0, False, 0), []),
        (kept, "directive", priority(1.0, False, 0), []),
    ]
    expected.sort(key=lambda entry: (-entry[2], entry[0]["id"]))
    assert [(item["thought"]["id"], item["reason"], item["priority"], item["blocked_by"]) for item in answer.items] == [
        (row["id"], reason, value, blockers) for row, reason, value, blockers in expected
    ]
    assert [item["priority"] for item in answer.items][:2] == [0.75, 0.75]
    assert all(set(item) == {"thought", "content_short", "reason", "priority", "blocked_by"} for item in answer.items)
    assert all(set(item["thought"]) == FULL_THOUGHT_KEYS for item in answer.items)
    assert answer.meta == {
        "action": "frontier",
        "scope": scope_of(work),
        "counts": {"total": 7, "returned": 7, "filtered_out": 0},
        "degraded": False,
        "warnings": [],
    }

    page = await reader.ok("memory_status", {"action": "frontier", "cwd": cwd, "limit": 2, "compact": True})
    assert [item["thought"]["id"] for item in page.items] == [row["id"] for row, *_ in expected[:2]]
    assert all(set(item["thought"]) == COMPACT_THOUGHT_KEYS for item in page.items)
    assert page.meta["counts"] == {"total": 7, "returned": 2, "filtered_out": 5}

    everywhere = await reader.ok("memory_status", {"action": "frontier"})
    assert everywhere.meta["scope"] is None and everywhere.meta["warnings"] == [NO_CWD]
    assert everywhere.meta["counts"]["total"] == 8
    assert len(everywhere.items) == 8  # the default limit is 10


async def test_frontier_content_short_and_the_limit_range(writer: ToolCaller) -> None:
    content = "Refactor   the\n\nscheduler " + "so that every job " * 12
    created = await thought(writer, content, tags=["directive"])
    [entry] = (await writer.ok("memory_status", {"action": "frontier"})).items
    collapsed = " ".join(content.split())
    assert len(collapsed) > 120
    assert entry["content_short"] == collapsed[:120] + "…"
    assert entry["thought"]["id"] == created["id"]
    short = await thought(writer, "  Short\ttodo  ", tags=["todo"])
    entries = (await writer.ok("memory_status", {"action": "frontier"})).items
    assert next(e for e in entries if e["thought"]["id"] == short["id"])["content_short"] == "Short todo"
    for limit in (0, 51):
        refused = await writer("memory_status", {"action": "frontier", "limit": limit})
        assert refused.error["statusCode"] == 400
        assert refused.text.startswith("Invalid argument 'limit' for memory_status action=frontier")
    retired = await writer("memory_status", {"action": "frontier", "k": 5})
    assert retired.text == "k was removed; use limit"


# ---------------------------------------------------------------- config


async def test_config_is_raw_text_mirrored_in_item_text_with_the_password_masked(writer: ToolCaller) -> None:
    url = "postgresql+asyncpg://synapto:s3cret-pass@db.internal:5432/memory"
    settings = Settings(_env_file=None, database_url=url)
    context = AppContext(writer.context.db, writer.context.embedding, settings, settings_view(settings, url))
    answer = await ToolCaller(context, writer.principal)("memory_status", {"action": "config"})
    assert not answer.is_error
    raw = answer.raw.content[0].text  # type: ignore[union-attr]
    assert raw == answer.result["item"]["text"]
    assert not raw.startswith("{")
    assert "database_url = postgresql+asyncpg://synapto:****@db.internal:5432/memory" in raw.splitlines()
    assert "s3cret-pass" not in raw and "s3cret-pass" not in str(answer.result)
    assert "slots.default_max_chars = 2000" in raw.splitlines()
    assert "embedder.state = ready" in raw.splitlines()
    assert f"embedder.active_model = {OFFLINE_E5}" in raw.splitlines()
    assert answer.result["meta"] == {
        "action": "config",
        "scope": None,
        "counts": {"total": 1, "returned": 1, "filtered_out": 0},
        "degraded": False,
        "warnings": [],
    }
    embedded = settings_view(Settings(_env_file=None), "postgresql+asyncpg://u:p@localhost/x")
    assert str(embedded["database_url"]).startswith("embedded (")


# ---------------------------------------------------------------- health

CHECKS = {
    "structural_integrity": {
        "orphan_edges": "critical",
        "self_loop_edges": "critical",
        "duplicate_edges": "critical",
        "cluster_constraint_violations": "critical",
    },
    "cluster_health": {
        "empty_clusters": "warning",
        "singleton_clusters": "warning",
        "orphaned_cluster_members": "warning",
        "clusterless_dense_thoughts": "warning",
    },
    "connectivity": {"island_thoughts": "info", "overlinked_thoughts": "warning"},
    "content_quality": {
        "duplicate_content": "info",
        "too_short_content": "info",
        "stale_drafts": "info",
        "untagged_thoughts": "info",
    },
    "semantic_consistency": {
        "circular_chains": "warning",
        "broken_parent_chains": "warning",
        "replaces_chains": "warning",
        "contradiction_in_cluster": "warning",
        "supports_self_conflict": "critical",
    },
    "data_drift": {
        "missing_embeddings": "info",
        "lexical_statistics_drift": "warning",
        "dead_primers": "info",
        "importance_outliers": "info",
    },
}


def score_of(report: dict[str, Any]) -> float:
    """docs/mcp-tools.md, action=health: clamp(100 − 40 × critical categories − 15 × warning categories
    − min(10, 0.25 × info findings))."""
    critical = warning = 0
    info = 0
    for checks in report["categories"].values():
        severities = {entry["severity"] for entry in checks.values() if entry["count"]}
        critical += "critical" in severities
        warning += "warning" in severities
        info += sum(entry["count"] for entry in checks.values() if entry["severity"] == "info")
    return round(min(100.0, max(0.0, 100 - 40 * critical - 15 * warning - min(10.0, 0.25 * info))), 2)


async def test_health_reports_every_check_of_the_design(reader: ToolCaller) -> None:
    answer = await reader.ok("memory_status", {"action": "health"})
    report = answer.item
    assert report == {
        "health_score": 100.0,
        "summary": {
            "thoughts": {"draft": 0, "active": 0, "archived": 0},
            "findings": {"critical": 0, "warning": 0, "info": 0},
        },
        "categories": {
            category: {name: {"severity": severity, "count": 0} for name, severity in checks.items()}
            for category, checks in CHECKS.items()
        },
    }
    assert answer.meta == {
        "action": "health",
        "scope": None,
        "counts": {"total": 1, "returned": 1, "filtered_out": 0},
        "degraded": False,
        "warnings": [],
    }
    detailed = (await reader.ok("memory_status", {"action": "health", "include_details": True})).item
    assert all(entry["details"] == [] for checks in detailed["categories"].values() for entry in checks.values())
    refused = await reader("memory_status", {"action": "health", "cwd": "/srv/x"})
    assert refused.error["statusCode"] == 400 and refused.text.startswith("Unknown argument 'cwd'")


async def _contradiction_in_cluster(writer: ToolCaller) -> dict[str, Any]:
    a = await thought(writer, "Deployments happen on Fridays after the review", tags=["ops"])
    b = await thought(writer, "Deployments never happen on Fridays after the review", tags=["ops"])
    cluster = (
        await writer.ok(
            "memory_crystallize", {"action": "cluster", "thought_ids": [a["id"], b["id"]], "title": "Deploy days"}
        )
    ).item["cluster"]
    edge = await link(writer, a["id"], b["id"], "contradicts")
    return {"a": a, "b": b, "cluster": cluster, "edge": edge}


async def test_health_finds_a_contradiction_inside_a_cluster(writer: ToolCaller) -> None:
    world = await _contradiction_in_cluster(writer)
    answer = await writer.ok("memory_status", {"action": "health", "include_details": True})
    report = answer.item
    finding = report["categories"]["semantic_consistency"]["contradiction_in_cluster"]
    assert finding == {
        "severity": "warning",
        "count": 1,
        "details": [
            {
                "cluster_id": world["cluster"]["id"],
                "member_a": world["a"]["id"],
                "member_b": world["b"]["id"],
                "contradicts_edge_id": world["edge"]["id"],
            }
        ],
    }
    assert report["summary"] == {
        "thoughts": {"draft": 0, "active": 3, "archived": 0},
        "findings": {"critical": 0, "warning": 1, "info": 0},
    }
    assert report["health_score"] == 85.0 == score_of(report)

    # severity filter: only checks at or above it, the summary and score unchanged
    warnings = (await writer.ok("memory_status", {"action": "health", "severity": "warning"})).item
    assert set(warnings["categories"]) == {
        "structural_integrity",
        "cluster_health",
        "connectivity",
        "semantic_consistency",
        "data_drift",
    }
    assert set(warnings["categories"]["connectivity"]) == {"overlinked_thoughts"}
    assert set(warnings["categories"]["data_drift"]) == {"lexical_statistics_drift"}
    assert all("details" not in entry for checks in warnings["categories"].values() for entry in checks.values())
    assert warnings["health_score"] == 85.0 and warnings["summary"] == report["summary"]
    critical = (await writer.ok("memory_status", {"action": "health", "severity": "critical"})).item
    assert critical["categories"] == {
        "structural_integrity": {name: {"severity": "critical", "count": 0} for name in CHECKS["structural_integrity"]},
        "semantic_consistency": {"supports_self_conflict": {"severity": "critical", "count": 0}},
    }

    # remediation 1 of the contract: unlink the contradicts edge (preview, then confirm) and re-run
    token = (await writer.ok("memory_store", {"action": "unlink", "edge_id": world["edge"]["id"]})).item[
        "preview_token"
    ]
    await writer.ok(
        "memory_store", {"action": "unlink", "edge_id": world["edge"]["id"], "confirm": True, "preview_token": token}
    )
    healed = (await writer.ok("memory_status", {"action": "health"})).item
    assert healed["categories"]["semantic_consistency"]["contradiction_in_cluster"] == {
        "severity": "warning",
        "count": 0,
    }
    assert healed["health_score"] == 100.0


async def test_health_counts_findings_and_the_score_follows_the_formula(writer: ToolCaller) -> None:
    tags = {"tags": ["t"]}
    members = [await thought(writer, f"Cluster member number {n} with text", **tags) for n in range(2)]
    single = await thought(writer, "Lonely cluster member with text", **tags)
    cluster = (
        await writer.ok("memory_crystallize", {"action": "cluster", "thought_ids": [m["id"] for m in members]})
    ).item
    await writer.ok(
        "memory_crystallize", {"action": "cluster", "thought_ids": [single["id"]], "title": "Singleton cluster"}
    )
    await execute(
        writer,
        "UPDATE thought SET status = 'archived', archived_at = now() WHERE id = :id",
        id=cluster["cluster"]["id"],
    )
    hub = await thought(writer, "A hub thought linked to many others", **tags)
    spokes = [await thought(writer, f"Spoke thought number {n} of the hub", **tags) for n in range(11)]
    for spoke in spokes:
        await link(writer, hub["id"], spoke["id"])
    ring = [await thought(writer, f"Ring thought number {n} in a cycle", **tags) for n in range(3)]
    for n in range(3):
        await link(writer, ring[n]["id"], ring[(n + 1) % 3]["id"], "develops")
    newest, middle, oldest = [await thought(writer, f"Version {n} of the plan text", **tags) for n in (3, 2, 1)]
    await link(writer, newest["id"], middle["id"], "replaces")
    await link(writer, middle["id"], oldest["id"], "replaces")
    parent = await thought(writer, "A parent that gets archived", **tags)
    child = await thought(writer, "A child that stays active", **tags)
    await link(writer, parent["id"], child["id"], "parent")
    x, y, z = [await thought(writer, f"Support chain thought {n} text", **tags) for n in "xyz"]
    await link(writer, x["id"], y["id"], "supports")
    await link(writer, y["id"], z["id"], "supports")
    await link(writer, z["id"], x["id"], "contradicts")
    short = await thought(writer, "tiny", **tags)
    stale = await thought(writer, "A draft nobody finished", status="draft", **tags)
    faint = await thought(writer, "An unimportant thought with text", **tags)
    unembedded = await thought(writer, "A thought whose vector is pending", **tags)
    untagged = await thought(writer, "A thought without tags at all")
    primed = await thought(writer, "A primer whose thought is archived", **tags)
    demoted = str(uuid.uuid4())
    for statement, thought_id in (
        ("UPDATE thought SET status = 'archived', archived_at = now() WHERE id = :id", parent["id"]),
        ("UPDATE thought SET created_at = now() - interval '40 days' WHERE id = :id", stale["id"]),
        ("UPDATE thought SET importance = 0.01 WHERE id = :id", faint["id"]),
        ("UPDATE thought SET embedding = NULL, embedding_model = NULL WHERE id = :id", unembedded["id"]),
        (
            "INSERT INTO primer (id, thought_id, project_id) SELECT gen_random_uuid(), id, project_id "
            "FROM thought WHERE id = :id",
            primed["id"],
        ),
        ("UPDATE thought SET status = 'archived', archived_at = now() WHERE id = :id", primed["id"]),
        (
            "INSERT INTO thought (id, project_id, content, tags, importance, embedding, embedding_model) "
            "SELECT gen_random_uuid(), project_id, content, tags, importance, embedding, embedding_model "
            "FROM thought WHERE id = :id",
            faint["id"],
        ),
        (
            "INSERT INTO thought (id, project_id, content, tags, is_cluster) "
            "SELECT gen_random_uuid(), project_id, 'An empty cluster', '{cluster}', true FROM thought WHERE id = :id",
            short["id"],
        ),
        (
            "INSERT INTO thought (id, project_id, content, tags, is_cluster) "
            "SELECT :other, project_id, 'A cluster that gets demoted', '{cluster}', true FROM thought WHERE id = :id",
            short["id"],
        ),
        (
            "INSERT INTO edge (id, project_id, source_id, target_id, type) "
            "SELECT gen_random_uuid(), project_id, :other, id, 'cluster' FROM thought WHERE id = :id",
            untagged["id"],
        ),
        ("UPDATE thought SET is_cluster = false WHERE id = :other", short["id"]),
    ):
        await execute(writer, statement, id=thought_id, other=demoted)

    report = (await writer.ok("memory_status", {"action": "health", "include_details": True})).item
    counts = {name: entry["count"] for checks in report["categories"].values() for name, entry in checks.items()}
    assert {
        "cluster_constraint_violations": 1,
        "empty_clusters": 1,
        "singleton_clusters": 1,
        "orphaned_cluster_members": 2,
        "clusterless_dense_thoughts": 1,
        "overlinked_thoughts": 1,
        "duplicate_content": 1,
        "too_short_content": 1,
        "stale_drafts": 1,
        "circular_chains": 3,
        "broken_parent_chains": 1,
        "replaces_chains": 1,
        "contradiction_in_cluster": 0,
        "supports_self_conflict": 1,
        "dead_primers": 1,
        "importance_outliers": 2,  # the faint thought and its copy
        "missing_embeddings": 3,  # the cleared vector and the two SQL-made clusters
    }.items() <= counts.items()
    assert counts["untagged_thoughts"] == 1 and counts["island_thoughts"] >= 4
    violation = report["categories"]["structural_integrity"]["cluster_constraint_violations"]["details"]
    assert [set(row) for row in violation] == [{"edge_id", "source_id"}]
    assert report["categories"]["connectivity"]["overlinked_thoughts"]["details"] == [
        {"thought_id": hub["id"], "edges": 11}
    ]
    assert report["categories"]["semantic_consistency"]["replaces_chains"]["details"] == [
        {"newest_id": newest["id"], "middle_id": middle["id"], "oldest_id": oldest["id"]}
    ]
    assert report["categories"]["semantic_consistency"]["supports_self_conflict"]["details"] == [
        {"thought_a": x["id"], "thought_b": y["id"], "thought_c": z["id"]}
    ]
    assert report["categories"]["content_quality"]["too_short_content"]["details"] == [
        {"thought_id": short["id"], "content": "tiny"}
    ]
    [stale_detail] = report["categories"]["content_quality"]["stale_drafts"]["details"]
    assert stale_detail["thought_id"] == stale["id"]
    assert datetime.fromisoformat(stale_detail["created_at"]) < datetime.now(UTC) - timedelta(days=39)
    assert stale_detail["created_at"].endswith("Z")  # the wire's time format, like every other timestamp
    findings = report["summary"]["findings"]
    for severity in ("critical", "warning", "info"):
        assert findings[severity] == sum(
            entry["count"]
            for checks in report["categories"].values()
            for entry in checks.values()
            if entry["severity"] == severity
        )
    assert report["health_score"] == score_of(report)
    # two critical categories (structural, semantic) and three warning ones (cluster, connectivity, semantic)
    assert report["health_score"] == max(0.0, round(100 - 80 - 45 - min(10.0, 0.25 * findings["info"]), 2))


# ---------------------------------------------------------------- propose


async def test_propose_is_slim_by_default_and_full_on_request(writer: ToolCaller, reader: ToolCaller) -> None:
    place = await project(writer, "Place")
    subject, *others = [await thought(writer, content, "/srv/place") for content in BILLING]
    await thought(writer, "Cats like to sleep in warm sunny windows", "/srv/place")
    before = await snapshot(writer.context)
    slim = await reader.ok("memory_status", {"action": "propose", "thought_id": subject["id"], "cwd": "/srv/place"})
    plan = slim.item
    assert set(plan) == {"project_id", "placement", "edges", "lifecycle", "degraded"}
    assert plan["project_id"] == place["id"] and plan["degraded"] is False
    assert len(plan["edges"]) == 3
    assert all(set(edge) == {"target_id", "type", "confidence", "rationale"} for edge in plan["edges"])
    assert {edge["target_id"] for edge in plan["edges"]} <= {o["id"] for o in others}
    confidences = [edge["confidence"] for edge in plan["edges"]]
    assert confidences == sorted(confidences, reverse=True)
    assert plan["placement"] == {"kind": "none", "rationale": "no clustered or chained neighbour"}
    assert plan["lifecycle"]["action"] == "merge"
    assert slim.meta == {
        "action": "propose",
        "scope": scope_of(place),
        "counts": {"total": 4, "returned": 1, "filtered_out": 0},
        "degraded": False,
        "warnings": [],
    }
    for extra in ({"compact": False}, {"include_signals": True}):
        full = await reader.ok(
            "memory_status", {"action": "propose", "thought_id": subject["id"], "cwd": "/srv/place", **extra}
        )
        assert len(full.item["edges"]) == 4, extra
        assert full.meta["counts"]["total"] == 4
        for edge in full.item["edges"]:
            assert set(edge) == {"target_id", "type", "confidence", "rationale", "target_content", "signals"}
            assert set(edge["signals"]) == {"similarity", "overlap", "cues"}
            assert edge["target_content"] in BILLING
    capped = await reader.ok(
        "memory_status",
        {"action": "propose", "thought_id": subject["id"], "cwd": "/srv/place", "max_edges": 1, "compact": False},
    )
    assert len(capped.item["edges"]) == 1 and capped.meta["counts"]["total"] == 4
    one = await reader.ok("memory_status", {"action": "propose", "thought_id": subject["id"], "max_edges": 1})
    assert len(one.item["edges"]) == 1 and set(one.item["edges"][0]) == {"target_id", "type", "confidence", "rationale"}
    assert await snapshot(writer.context) == before  # propose never writes


async def test_propose_pinning_warnings_word_for_word(writer: ToolCaller) -> None:
    unknown = 'cwd "/srv/unknown" matches no known project (check it with memory_manage action=resolve)'
    await project(writer, "Place")
    subject = await thought(writer, BILLING[0], "/srv/place")
    await thought(writer, BILLING[1], "/srv/place")
    await thought(writer, BILLING[2])  # the default project
    cases = [
        ({"thought_id": subject["id"]}, None, [f"no cwd — {PIN_THOUGHT}"]),
        ({"content": BILLING[3]}, None, [f"no cwd — {PIN_DRAFT}"]),
        (
            {"thought_id": subject["id"], "cwd": "/srv/unknown"},
            UNRESOLVED,
            [f"{unknown} — {PIN_THOUGHT}"],
        ),
        (
            {"content": BILLING[3], "cwd": "/srv/unknown"},
            UNRESOLVED,
            [f"{unknown} — {PIN_DRAFT}"],
        ),
    ]
    default_id = (await rows(writer, "SELECT id::text FROM project WHERE is_default"))[0][0]
    place_id = (await rows(writer, "SELECT id::text FROM project WHERE name = 'Place'"))[0][0]
    for arguments, scope, warnings in cases:
        answer = await writer.ok("memory_status", {"action": "propose", **arguments})
        assert answer.meta["scope"] == scope, arguments
        assert answer.meta["warnings"] == warnings, arguments
        assert not any("spans every project" in warning for warning in answer.meta["warnings"])
        pinned = place_id if "thought_id" in arguments else default_id
        assert answer.item["project_id"] == pinned
        contents = {edge["target_id"] for edge in answer.item["edges"]}
        in_project = await rows(writer, "SELECT id::text FROM thought WHERE project_id = :p", p=pinned)
        assert contents <= {row[0] for row in in_project}
        assert answer.meta["counts"]["total"] == 1


async def test_propose_edge_rules_placement_and_lifecycle(writer: ToolCaller) -> None:
    cases = [
        (
            "Replace",
            "The API gateway uses Redis for rate limiting",
            "The API gateway now uses Redis for rate limiting",
            "replaces",
            "newer restatement with an evolution cue",
            "replaces+archive",
        ),
        (
            "Contra",
            "Deployments happen on Fridays after the review",
            "Deployments never happen on Fridays after the review",
            "contradicts",
            "close meaning, one side negated",
            "merge",
        ),
        (
            "Support",
            "The search index is rebuilt nightly",
            "The search index is rebuilt nightly because benchmarks show stale results",
            "supports",
            "evidential cue",
            "link",
        ),
        (
            "Depend",
            "The search index is rebuilt nightly",
            "The release job requires the search index to be rebuilt nightly",
            "depends_on",
            "dependency cue",
            "link",
        ),
        (
            "Relate",
            "The search index is rebuilt nightly",
            "Our search index gets rebuilt every night",
            "related",
            "semantically close",
            "link",
        ),
    ]
    for name, existing, draft, edge_type, rationale, lifecycle in cases:
        await project(writer, name)
        target = await thought(writer, existing, f"/srv/{name.lower()}")
        plan = (
            await writer.ok(
                "memory_status",
                {"action": "propose", "content": draft, "cwd": f"/srv/{name.lower()}", "include_signals": True},
            )
        ).item
        [edge] = plan["edges"]
        assert (edge["target_id"], edge["type"], edge["rationale"]) == (target["id"], edge_type, rationale), name
        similarity = edge["signals"]["similarity"]
        expected = round(similarity, 4) if edge_type == "related" else round(min(1.0, similarity + 0.1), 4)
        assert edge["confidence"] == expected, name
        assert plan["lifecycle"]["action"] == lifecycle, name
        if lifecycle == "merge":
            assert plan["lifecycle"] == {
                "action": "merge",
                "target_id": target["id"],
                "rationale": "near-identical content",
            }
        if lifecycle == "replaces+archive":
            assert plan["lifecycle"] == {
                "action": "replaces+archive",
                "target_id": target["id"],
                "rationale": "the older thought is superseded",
            }

    await project(writer, "Clustered")
    members = [await thought(writer, content, "/srv/clustered") for content in BILLING[:3]]
    cluster = (
        await writer.ok(
            "memory_crystallize", {"action": "cluster", "thought_ids": [m["id"] for m in members], "title": "Retries"}
        )
    ).item["cluster"]
    plan = (
        await writer.ok("memory_status", {"action": "propose", "content": BILLING[3], "cwd": "/srv/clustered"})
    ).item
    assert plan["placement"] == {
        "kind": "cluster",
        "cluster_id": cluster["id"],
        "rationale": "3 clustered neighbour(s) share it",
    }

    await project(writer, "Chained")
    first, second = [await thought(writer, content, "/srv/chained") for content in DEPLOY[:2]]
    await link(writer, first["id"], second["id"], "parent")
    plan = (
        await writer.ok(
            "memory_status", {"action": "propose", "content": DEPLOY[2], "cwd": "/srv/chained", "compact": False}
        )
    ).item
    nearest = max(plan["edges"], key=lambda edge: edge["signals"]["similarity"])
    assert plan["placement"]["kind"] == "parent" and plan["placement"]["parent_id"] == nearest["target_id"]

    await project(writer, "Empty")
    nothing = (
        await writer.ok("memory_status", {"action": "propose", "content": "Anything at all", "cwd": "/srv/empty"})
    ).item
    assert nothing["edges"] == []
    assert nothing["placement"] == {"kind": "none", "rationale": "no close neighbour"}
    assert nothing["lifecycle"] == {"action": "keep", "rationale": "nothing close"}


async def test_propose_skips_linked_neighbours_and_refuses_bad_input(writer: ToolCaller) -> None:
    await project(writer, "Place")
    subject, linked, free = [await thought(writer, content, "/srv/place") for content in BILLING[:3]]
    await link(writer, subject["id"], linked["id"])
    plan = (await writer.ok("memory_status", {"action": "propose", "thought_id": subject["id"]})).item
    assert [edge["target_id"] for edge in plan["edges"]] == [free["id"]]

    before = await snapshot(writer.context)
    both = await writer("memory_status", {"action": "propose", "thought_id": subject["id"], "content": "x"})
    neither = await writer("memory_status", {"action": "propose"})
    blank = await writer("memory_status", {"action": "propose", "content": "   "})
    for answer in (both, neither, blank):
        assert answer.text == "memory_status action=propose needs exactly one of 'thought_id' or 'content'"
        assert answer.error["statusCode"] == 400
    missing = str(uuid.uuid4())
    gone = await writer("memory_status", {"action": "propose", "thought_id": missing})
    assert gone.error == {"message": f"Thought {missing} not found", "statusCode": 404, "retryable": False}
    dry = await writer("memory_status", {"action": "propose", "content": "x", "dry_run": True})
    assert dry.text == "dry_run was removed; use confirm"
    assert await snapshot(writer.context) == before


async def test_propose_is_degraded_without_an_embedder(writer: ToolCaller) -> None:
    await project(writer, "Place")
    subject = await thought(writer, BILLING[0], "/srv/place")
    await thought(writer, BILLING[1], "/srv/place")
    offline = unloaded_caller(writer)
    for arguments in ({"thought_id": subject["id"]}, {"content": BILLING[2]}):
        answer = await offline.ok("memory_status", {"action": "propose", "cwd": "/srv/place", **arguments})
        assert answer.item["degraded"] is True and answer.meta["degraded"] is True
        assert answer.item["edges"] == [] and answer.meta["counts"]["total"] == 0
        assert answer.item["lifecycle"] == {"action": "keep", "rationale": "nothing close"}


@pytest.mark.parametrize("action", ["slots", "frontier", "health", "propose"])
async def test_status_actions_reject_project_id(reader: ToolCaller, action: str) -> None:
    answer = await reader("memory_status", {"action": action, "project_id": str(uuid.uuid4())})
    assert answer.text == "project_id was removed; use cwd"
    assert answer.error["statusCode"] == 400


async def test_propose_for_a_thought_whose_project_was_deleted_meanwhile_plans_in_the_default_project(
    writer: ToolCaller, reader: ToolCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thought is read, then its project is deleted (its thoughts moved to the default) before propose
    reads the project: plan in the default project instead of failing."""
    place = await project(writer, "Place")
    subject = await thought(writer, BILLING[0], "/srv/place")
    find_for_path = ProjectRepository.find_for_path

    async def then_deleted(self: ProjectRepository, *args: Any) -> Any:
        found = await find_for_path(self, *args)
        async with own_transaction(writer.context) as session:
            default = (await ProjectRepository(session).ensure_default()).id
            await session.execute(
                text("UPDATE thought SET project_id = :d WHERE project_id = :p"),
                {"d": default, "p": uuid.UUID(place["id"])},
            )
            await session.execute(text("DELETE FROM project WHERE id = :p"), {"p": uuid.UUID(place["id"])})
        return found

    monkeypatch.setattr(ProjectRepository, "find_for_path", then_deleted)
    answer = await reader.ok("memory_status", {"action": "propose", "thought_id": subject["id"], "cwd": "/elsewhere"})
    default_id = (await rows(writer, "SELECT id::text FROM project WHERE is_default"))[0][0]
    assert answer.item["project_id"] == default_id
