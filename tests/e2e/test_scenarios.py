"""The agent scenarios of docs/SCENARIOS.md, end to end: the real app under uvicorn, the official MCP client over
streamable HTTP, and a writer's bearer token, exactly as a remote agent uses the service.

Time travel (a thought that is days old, a pending item whose wake-up time has come) is the only thing done in SQL.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp_types import CallToolResult
from sqlalchemy import text

from app.db.engine import Database
from app.db.models import Role
from tests.support.contract import COMPACT_THOUGHT_KEYS
from tests.support.http_server import RunningServer, payload, run_server
from tests.support.serving import mcp_session

NO_CWD = "no cwd — the answer spans every project"
NO_SLOT_SCOPE = "no project scope — the project-scoped slot overrides were not applied (pass cwd to read them)"
SUMMARY_LINE = re.compile(r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}\] (.*)$")
SHOP = "/work/shop"


class Agent:
    """One MCP session of a writer agent, plus the test's own SQL handle for time travel."""

    def __init__(self, server: RunningServer, session: ClientSession) -> None:
        self.server = server
        self.session = session

    async def call(self, tool: str, **arguments: Any) -> Any:
        return payload(await self.session.call_tool(tool, arguments))

    async def fail(self, tool: str, **arguments: Any) -> CallToolResult:
        result = await self.session.call_tool(tool, arguments)
        assert result.is_error, result
        return result

    async def sql(self, statement: str, **params: Any) -> list[tuple[Any, ...]]:
        async with self.server.database.unit_of_work() as session:
            result = await session.execute(text(statement), params)
            return [tuple(row) for row in result.all()] if result.returns_rows else []

    async def remember(self, content: str, cwd: str = SHOP, **extra: Any) -> dict[str, Any]:
        return dict((await self.call("memory_store", action="create", content=content, cwd=cwd, **extra))["item"])

    async def confirm(self, tool: str, **arguments: Any) -> Any:
        """The dry-run/confirm pattern: preview, then repeat with confirm=true and the preview's token."""
        preview = await self.call(tool, **arguments)
        token = preview["meta"]["preview"]["token"]
        return await self.call(tool, **arguments, confirm=True, preview_token=token)


@pytest.fixture
async def server(database_url: str, clean_database: Database, tmp_path: Path) -> AsyncIterator[RunningServer]:
    async with run_server(database_url, clean_database, tmp_path) as running:
        yield running


@asynccontextmanager
async def agent_session(server: RunningServer, name: str = "agent") -> AsyncIterator[Agent]:
    token = await server.token_for(name, Role.writer)
    async with mcp_session(server.mcp_url, token) as session:
        yield Agent(server, session)


async def new_shop(agent: Agent) -> dict[str, Any]:
    created = await agent.call("memory_manage", action="create", name="Shop", local_path=SHOP)
    return dict(created["item"])


def shop_scope(project: dict[str, Any]) -> dict[str, Any]:
    return {"project": project["id"], "project_name": "Shop", "global": False}


# ---------------------------------------------------------------- 1. a new project


async def test_scenario_new_project(server: RunningServer) -> None:
    async with agent_session(server) as agent:
        unknown = await agent.call("memory_manage", action="resolve", cwd="/work/shop/api")
        assert unknown["item"] is None and unknown["meta"]["reason"] == "no_match"

        created = await agent.call(
            "memory_manage", action="create", name="Shop", local_path="/work/shop/", description="The web shop"
        )
        project = created["item"]
        assert (project["name"], project["local_path"], project["description"], project["is_default"]) == (
            "Shop",
            "/work/shop",
            "The web shop",
            False,
        )

        resolved = await agent.call("memory_manage", action="resolve", cwd="/work/shop/api/handlers")
        assert resolved["item"] == {"id": project["id"], "name": "Shop", "local_path": "/work/shop"}
        assert "reason" not in resolved["meta"]

        first = await agent.remember("The shop API is written in Python with Starlette", cwd="/work/shop/api")
        assert first["project"] == "Shop" and first["project_id"] == project["id"]

        duplicate = await agent.fail("memory_manage", action="create", name="Shop", local_path="/elsewhere")
        assert duplicate.structured_content is not None
        assert duplicate.structured_content["result"]["error"]["statusCode"] == 409
        missing_cwd = await agent.fail("memory_manage", action="resolve")
        assert "Missing required argument 'cwd'" in missing_cwd.content[0].text  # type: ignore[union-attr]


# ---------------------------------------------------------------- 2. session start with slots


async def test_scenario_session_start_with_slots(server: RunningServer) -> None:
    async with agent_session(server) as agent:
        project = await new_shop(agent)
        # what an earlier session left behind
        await agent.call(
            "memory_reflect",
            action="reflect",
            cwd=SHOP,
            summary="Set up the checkout service",
            goals_add=["Ship the checkout", "Add card payments"],
            pending=["Ask the payment provider about refunds"],
            wake_days=3,
        )
        decision = await agent.remember("We deploy with blue-green switches", tags=["decision"])
        for _ in range(5):  # recalled often enough to become a primer
            await agent.call("memory_recall", action="get", thought_id=decision["id"])

        # the new session starts by reading its slots
        slots = await agent.call("memory_status", action="slots", cwd=f"{SHOP}/web")
        by_name = {item["name"]: item for item in slots["items"]}
        assert list(by_name) == ["pending_items", "architecture_decisions", "project_context", "active_goals"]
        assert by_name["pending_items"]["content"] == ""  # asleep for three days
        assert by_name["architecture_decisions"]["content"] == "- We deploy with blue-green switches"
        [line] = by_name["project_context"]["content"].split("\n")
        assert SUMMARY_LINE.match(line).group(1) == "Set up the checkout service"  # type: ignore[union-attr]
        assert by_name["active_goals"]["content"] == "Ship the checkout\nAdd card payments"
        assert (by_name["project_context"]["scope"], by_name["project_context"]["virtual"]) == ("project", False)
        assert slots["meta"]["scope"] == shop_scope(project) and slots["meta"]["warnings"] == []

        # without cwd only the global rows are read, and the answer says so
        unscoped = await agent.call("memory_status", action="slots")
        assert unscoped["meta"]["warnings"] == [NO_CWD, NO_SLOT_SCOPE]
        assert {item["name"]: item["content"] for item in unscoped["items"]}["project_context"] == ""


# ---------------------------------------------------------------- 3. working on a task


async def test_scenario_working_on_a_task(server: RunningServer) -> None:
    async with agent_session(server) as agent:
        project = await new_shop(agent)
        task = await agent.remember("Add card payments to the checkout", tags=["todo"])
        finding = await agent.remember(
            "The payment provider SDK needs a webhook secret for card payments", tags=["payments"]
        )
        note = await agent.remember("Card payment webhooks must be verified with the webhook secret")
        await agent.remember("The product catalogue is cached for ten minutes")
        linked = await agent.call(
            "memory_store", action="link", source_id=task["id"], target_id=finding["id"], edge_type="depends_on"
        )
        assert linked["item"]["type"] == "depends_on"
        await agent.call(
            "memory_store", action="link", source_id=note["id"], target_id=finding["id"], edge_type="supports"
        )

        # "webhook secret for card payments" alone ranks the note first with e5 (both carry all three words);
        # the provider SDK is the finding's own.
        query = "what does the payment provider SDK need for card payments"
        found = await agent.call("memory_recall", action="search", query=query, cwd=SHOP)
        hits = [item["thought"] for item in found["items"]]
        assert hits[0]["id"] == finding["id"]
        assert set(hits[0]) == COMPACT_THOUGHT_KEYS  # compact by default
        assert "The product catalogue is cached for ten minutes" not in [hit["content"] for hit in hits]
        assert found["meta"]["counts"]["filtered_out"] >= 1  # the unrelated note is gated out
        assert found["meta"]["scope"] == shop_scope(project)

        context = await agent.call("memory_recall", action="context", thought_id=finding["id"])
        item = context["item"]
        assert item["thought"]["id"] == finding["id"]
        upstream = {step["thought"]["id"] for step in item["chain"]["upstream"]}
        assert upstream == {task["id"], note["id"]}  # both edges point at the finding

        by_query = await agent.call("memory_recall", action="context", query="verify card payment webhooks", cwd=SHOP)
        assert by_query["item"]["thought"]["id"] == note["id"]


# ---------------------------------------------------------------- 4. deferred pending items


async def test_scenario_deferred_pending_items(server: RunningServer) -> None:
    async with agent_session(server) as agent:
        await new_shop(agent)
        deferred = await agent.call(
            "memory_reflect",
            action="reflect",
            cwd=SHOP,
            pending=["Re-check the nightly import once the vendor fixes the feed"],
            wake_days=2,
        )
        assert deferred["item"]["pending_created"] == 1

        frontier = await agent.call("memory_status", action="frontier", cwd=SHOP)
        assert frontier["items"] == [] and frontier["meta"]["counts"]["total"] == 0
        slots = await agent.call("memory_status", action="slots", cwd=SHOP)
        assert slots["items"][0]["content"] == ""

        # two days later (moved in SQL): the item wakes up
        await agent.sql("UPDATE thought SET surface_after = now() - interval '1 minute' WHERE 'pending' = ANY(tags)")
        frontier = await agent.call("memory_status", action="frontier", cwd=SHOP)
        [entry] = frontier["items"]
        assert entry["reason"] == "pending"
        assert entry["content_short"] == "Re-check the nightly import once the vendor fixes the feed"
        assert entry["thought"]["status"] == "draft" and entry["thought"]["tags"] == ["pending", "reflect"]
        assert entry["priority"] == 0.75 and entry["blocked_by"] == []
        slots = await agent.call("memory_status", action="slots", cwd=SHOP)
        assert slots["items"][0]["content"] == f"- {entry['thought']['content']} ({entry['thought']['id']})"


# ---------------------------------------------------------------- 5. task completion with reflect


async def test_scenario_task_completion_with_reflect(server: RunningServer) -> None:
    async with agent_session(server) as agent:
        project = await new_shop(agent)
        await agent.call("memory_reflect", action="reflect", cwd=SHOP, goals_add=["Add card payments", "Write docs"])
        done = await agent.call(
            "memory_reflect",
            action="reflect",
            cwd=SHOP,
            summary="Card payments work end to end; webhooks are verified",
            goals_remove=["card payments"],
            goals_add=["Add refunds"],
            decisions=["Webhooks are verified with the provider's signing secret", "Payments are retried three times"],
        )
        assert done["item"] == {
            "summary_appended": True,
            "goals_added": 1,
            "goals_removed": 1,
            "decisions_created": 2,
            "pending_created": 0,
        }
        assert done["meta"]["scope"] == shop_scope(project) and done["meta"]["warnings"] == []

        slots = {item["name"]: item for item in (await agent.call("memory_status", action="slots", cwd=SHOP))["items"]}
        assert slots["active_goals"]["content"] == "Write docs\nAdd refunds"
        assert SUMMARY_LINE.match(slots["project_context"]["content"]).group(1) == (  # type: ignore[union-attr]
            "Card payments work end to end; webhooks are verified"
        )
        decisions = await agent.call("memory_recall", action="list", cwd=SHOP, tag="decision")
        assert sorted(item["content"] for item in decisions["items"]) == [
            "Payments are retried three times",
            "Webhooks are verified with the provider's signing secret",
        ]
        assert all(item["tags"] == ["decision", "reflect"] for item in decisions["items"])

        again = await agent.call(
            "memory_reflect", action="reflect", cwd=SHOP, decisions=["Payments are retried three times!"]
        )
        assert again["item"]["decisions_created"] == 0  # the same decision in other words is not repeated
        nothing = await agent.fail("memory_reflect", action="reflect", cwd=SHOP)
        assert nothing.structured_content is not None
        assert nothing.structured_content["result"]["error"]["statusCode"] == 400


# ---------------------------------------------------------------- 6. the frontier


async def test_scenario_frontier(server: RunningServer) -> None:
    async with agent_session(server) as agent:
        await new_shop(agent)
        schema = await agent.remember("Design the refunds table", tags=["todo"])
        api = await agent.remember("Build the refunds API", tags=["todo"])
        rule = await agent.remember("Every refund needs an audit entry", tags=["directive"])
        await agent.remember("Refunds are rare", tags=["note"])
        await agent.call(
            "memory_store", action="link", source_id=api["id"], target_id=schema["id"], edge_type="depends_on"
        )

        frontier = await agent.call("memory_status", action="frontier", cwd=SHOP)
        entries = [(e["thought"]["id"], e["reason"], e["priority"], e["blocked_by"]) for e in frontier["items"]]
        top = sorted([schema["id"], rule["id"]])
        assert entries == [
            (top[0], "directive", 0.75, []),
            (top[1], "directive", 0.75, []),
            (api["id"], "directive", 0.6, [schema["id"]]),
        ]
        assert frontier["meta"]["counts"] == {"total": 3, "returned": 3, "filtered_out": 0}

        # the schema is done: archiving it unblocks the API task
        await agent.confirm("memory_supersede", action="archive", thought_id=schema["id"])
        frontier = await agent.call("memory_status", action="frontier", cwd=SHOP, limit=1)
        assert [e["thought"]["id"] for e in frontier["items"]] == [min(api["id"], rule["id"])]
        assert frontier["meta"]["counts"] == {"total": 2, "returned": 1, "filtered_out": 1}
        frontier = await agent.call("memory_status", action="frontier", cwd=SHOP)
        assert {e["thought"]["id"]: e["blocked_by"] for e in frontier["items"]} == {api["id"]: [], rule["id"]: []}


# ---------------------------------------------------------------- 7. clustering

BILLING = [
    "The billing service retries failed card payments three times",
    "Failed card payments are retried three times by the billing service",
    "The billing service retries a failed card payment three times before giving up",
]
DEPLOY = [
    "The deploy pipeline runs database migrations before starting the app",
    "Database migrations run in the deploy pipeline before the app starts",
    "The deploy pipeline applies the database migrations before the application starts",
]


async def test_scenario_clustering(server: RunningServer) -> None:
    async with agent_session(server) as agent:
        await new_shop(agent)
        billing = [await agent.remember(content) for content in BILLING]
        deploy = [await agent.remember(content) for content in DEPLOY]

        made = await agent.call(
            "memory_crystallize",
            action="cluster",
            thought_ids=[t["id"] for t in deploy],
            title="Deploy pipeline",
            cwd=SHOP,
        )
        cluster = made["item"]["cluster"]
        assert (cluster["is_cluster"], cluster["tags"], cluster["project"]) == (True, ["cluster"], "Shop")
        assert made["meta"]["counts"] == {"members": 3, "edges": 3, "total": 1, "returned": 1, "filtered_out": 0}

        graph = await agent.call("memory_crystallize", action="graph", cwd=SHOP)
        assert graph["meta"]["counts"] == {"edges": 3, "total": 7, "returned": 7, "filtered_out": 0}
        nodes = {node["id"]: node for node in graph["items"]}
        assert nodes[cluster["id"]]["category"] == "cluster"
        assert {(e["source"], e["type"]) for e in graph["edges"]} == {(cluster["id"], "cluster")}

        # days later (moved in SQL) the billing notes are old enough for auto_cluster
        await agent.sql("UPDATE thought SET created_at = now() - interval '5 days' WHERE NOT is_cluster")
        preview = await agent.call("memory_crystallize", action="auto_cluster")
        [group] = preview["items"]
        assert {m["id"] for m in group["members"]} == {t["id"] for t in billing}  # deploy notes are clustered already
        assert group["cluster_id"] is None
        assert preview["meta"]["counts"] == {
            "candidates": 3,
            "clusters": 1,
            "total": 1,
            "returned": 1,
            "filtered_out": 0,
        }
        assert preview["meta"]["preview"]["consequence"] == (
            "Creates 1 cluster thought(s) with a cluster edge to each member."
        )
        token = preview["meta"]["preview"]["token"]
        done = await agent.call("memory_crystallize", action="auto_cluster", confirm=True, preview_token=token)
        assert "preview" not in done["meta"] and done["items"][0]["cluster_id"] is not None

        graph = await agent.call("memory_crystallize", action="graph", cwd=SHOP)
        clusters = [node for node in graph["items"] if node["is_cluster"]]
        assert len(clusters) == 2 and graph["meta"]["counts"]["edges"] == 6
        auto = next(node for node in clusters if node["id"] == done["items"][0]["cluster_id"])
        assert auto["tags"] == ["cluster", "auto"]
        retired = await agent.fail("memory_crystallize", action="auto_cluster", dry_run=True)
        assert retired.content[0].text == "dry_run was removed; use confirm"  # type: ignore[union-attr]


# ---------------------------------------------------------------- 8. the review queue


async def test_scenario_review_queue(server: RunningServer) -> None:
    async with agent_session(server) as agent:
        await new_shop(agent)
        old = await agent.remember("The API gateway uses Redis for rate limiting")
        new = await agent.remember("The API gateway now uses Redis for rate limiting")

        plan = await agent.call("memory_status", action="propose", thought_id=new["id"], cwd=SHOP)
        [edge] = plan["item"]["edges"]
        assert (edge["target_id"], edge["type"]) == (old["id"], "replaces")
        assert plan["item"]["lifecycle"]["action"] == "replaces+archive"
        assert plan["meta"]["counts"]["total"] == 1

        queued = await agent.call("edge_review", action="enqueue", thought_id=new["id"])
        assert queued["meta"]["counts"] == {"proposals": 2, "skipped": 0, "total": 1, "returned": 1, "filtered_out": 0}
        listed = await agent.call("edge_review", action="list", cwd=SHOP, status="pending")
        proposals = {p["kind"]: p for p in listed["items"]}
        assert set(proposals) == {"edge", "lifecycle"}
        assert listed["meta"]["counts"]["retired_count"] == 0

        applied = await agent.confirm("edge_review", action="apply", proposal_id=proposals["edge"]["id"])
        assert applied["item"]["status"] == "accepted"
        run_id = applied["item"]["run_id"]
        edges = await agent.call("memory_recall", action="get", thought_id=new["id"], include_edges=True)
        assert [(n["edge"]["type"], n["thought"]["id"]) for n in edges["item"]["downstream"]] == [
            ("replaces", old["id"])
        ]

        rollback = await agent.confirm("edge_review", action="rollback", run_id=run_id)
        assert [row["status"] for row in rollback["items"]] == ["reverted"]
        assert rollback["meta"]["counts"] == {
            "reverted": 1,
            "skipped": 0,
            "refused": 0,
            "total": 1,
            "returned": 1,
            "filtered_out": 0,
        }
        edges = await agent.call("memory_recall", action="get", thought_id=new["id"], include_edges=True)
        assert edges["item"]["downstream"] == []
        rejected = await agent.call("edge_review", action="reject", proposal_id=proposals["lifecycle"]["id"])
        assert rejected["item"] == {"proposal_id": proposals["lifecycle"]["id"], "status": "rejected", "changed": True}


# ---------------------------------------------------------------- 9. retention clean-up


async def test_scenario_retention_cleanup(server: RunningServer) -> None:
    async with agent_session(server) as agent:
        await new_shop(agent)
        drafts = [
            await agent.remember(content, status="draft")
            for content in (
                "Draft: maybe use a message queue for emails",
                "Draft: emails could be sent by a cron job",
                "Draft: the legal text for the footer",
                "Draft: an idea about dark mode",
            )
        ]
        live = await agent.remember("Emails are sent by the notification service")
        await agent.call(
            "memory_store", action="link", source_id=drafts[3]["id"], target_id=live["id"], edge_type="related"
        )
        # months later (moved in SQL): old, unimportant, never recalled
        await agent.sql(
            "UPDATE thought SET created_at = now() - interval '90 days', importance = 0.1 WHERE status = 'draft'"
        )

        listed = await agent.call("retention_review", action="list")
        assert [item["id"] for item in listed["items"]] == [d["id"] for d in drafts]
        assert listed["meta"]["counts"] == {"limit": 20, "offset": 0, "total": 4, "returned": 4, "filtered_out": 0}

        protected = await agent.call("retention_review", action="protect", thought_id=drafts[2]["id"])
        assert protected["item"]["is_protected"] is True

        preview = await agent.call("retention_review", action="delete", thought_id=drafts[3]["id"])
        assert [(d["thought_id"], d["direction"]) for d in preview["item"]["dependents"]] == [(live["id"], "outgoing")]
        deleted = await agent.call(
            "retention_review",
            action="delete",
            thought_id=drafts[3]["id"],
            confirm=True,
            preview_token=preview["item"]["preview_token"],
        )
        assert deleted["item"]["deleted"] is True and deleted["item"]["edges_removed"] == 1

        sources = [drafts[0]["id"], drafts[1]["id"]]
        summary = {"content": "Emails: a queue and a cron job were considered", "tags": ["emails"]}
        compact_preview = await agent.call("retention_review", action="compact", source_ids=sources, summary=summary)
        assert compact_preview["meta"]["preview"]["token"] is None
        compacted = await agent.call(
            "retention_review", action="compact", source_ids=sources, summary=summary, confirm=True
        )
        made = compacted["item"]["summary"]
        assert (made["status"], made["is_protected"], made["project"]) == ("active", True, "Shop")
        assert compacted["meta"]["counts"]["sources"] == 2

        assert (await agent.call("retention_review", action="list"))["items"] == []
        archived = await agent.call("memory_recall", action="list", cwd=SHOP, status="archived")
        assert sorted(item["id"] for item in archived["items"]) == sorted(sources)  # archived, never deleted
