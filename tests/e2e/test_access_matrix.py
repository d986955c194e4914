"""Access control over real HTTP: every action of the 11 tools × every kind of caller, and the HTTP guards.

The matrix is built from app.mcp.tools.catalog.ALL_SPECS, so a new action cannot be left out, and checked
against the explicit EXPECTED_ROLE table, so loosening a role (or adding an action without deciding its
role) fails here. Callers: no token, a revoked token, reader, writer, admin, and — for each token-gated
confirm — a second user of the same role holding the first one's preview token.

Also: DNS-rebinding protection (Host → 421, Origin → 403, configured hosts/origins pass, on every route
but /health), the request body limit (413, nothing written), per-token rate limiting (retryable 503, other
tokens unaffected), /metrics (token required, Prometheus text, no thought content, no client-chosen labels)
and /api/health-check/fix (admin only).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp_types import CallToolResult
from sqlalchemy import text

from app.cli import cmd_serve
from app.config import Settings
from app.db.engine import Database
from app.db.models import Base, Role
from app.mcp.tools.catalog import ALL_SPECS
from app.observability import REGISTRY
from app.services.admin.membership import MemberService
from app.services.auth.tokens import AuthService
from app.services.context import AppContext
from tests.conftest import make_user
from tests.support.helpers import ToolCaller
from tests.support.serving import mcp_session, serving
from tests.support.team import LIMITER_STATE

# ---------------------------------------------------------------- the expected table

R, W, A = Role.reader, Role.writer, Role.admin
EXPECTED_ROLE: dict[tuple[str, str], Role] = {
    ("memory_recall", "search"): R,
    ("memory_recall", "get"): R,
    ("memory_recall", "context"): R,
    ("memory_recall", "chain"): R,
    ("memory_recall", "clusters"): R,
    ("memory_recall", "list"): R,
    ("memory_store", "create"): W,
    ("memory_store", "update"): W,
    ("memory_store", "link"): W,
    ("memory_store", "link_batch"): W,
    ("memory_store", "unlink"): W,
    ("memory_store", "unlink_batch"): W,
    ("memory_store", "retype"): W,
    ("memory_store", "bulk_create"): W,
    ("memory_supersede", "archive"): W,
    ("memory_supersede", "archive_batch"): W,
    ("memory_supersede", "merge"): W,
    ("memory_status", "slots"): R,
    ("memory_status", "frontier"): R,
    ("memory_status", "config"): R,
    ("memory_status", "health"): R,
    ("memory_status", "propose"): R,
    ("memory_manage", "list"): R,
    ("memory_manage", "create"): W,
    ("memory_manage", "update"): A,
    ("memory_manage", "delete"): A,
    ("memory_manage", "resolve"): R,
    ("edge_review", "enqueue"): W,
    ("edge_review", "list"): R,
    ("edge_review", "apply"): W,
    ("edge_review", "apply_batch"): W,
    ("edge_review", "rollback"): W,
    ("edge_review", "reject"): W,
    ("retention_review", "list"): R,
    ("retention_review", "protect"): W,
    ("retention_review", "delete"): W,
    ("retention_review", "compact"): W,
    ("memory_crystallize", "graph"): R,
    ("memory_crystallize", "cluster"): W,
    ("memory_crystallize", "auto_cluster"): W,
    ("memory_reflect", "reflect"): W,
    ("memory_reflect", "timeline"): R,
    ("memory_primers", "list"): R,
    ("memory_primers", "delete"): W,
    ("memory_guide", ""): R,
}
# Destructive actions whose confirm needs a preview token (mcp-tools.md, v0.19 migration note 3).
TOKEN_GATED = {
    ("memory_store", "unlink"),
    ("memory_store", "retype"),
    ("memory_supersede", "archive"),
    ("memory_supersede", "archive_batch"),
    ("memory_supersede", "merge"),
    ("memory_manage", "delete"),
    ("edge_review", "apply"),
    ("edge_review", "apply_batch"),
    ("edge_review", "rollback"),
    ("memory_primers", "delete"),
    ("memory_crystallize", "auto_cluster"),
    ("retention_review", "delete"),
}
RANK = {Role.reader: 0, Role.writer: 1, Role.admin: 2}
CATALOG = [(spec.name, action.name, action.role) for spec in ALL_SPECS for action in spec.actions]


def test_the_catalog_roles_are_exactly_the_expected_table() -> None:
    """A loosened role, or a new action nobody decided a role for, fails here."""
    assert {(tool, action): role for tool, action, role in CATALOG} == EXPECTED_ROLE
    gated = {
        (spec.name, action.name)
        for spec in ALL_SPECS
        for action in spec.actions
        if "preview_token" in action.model.model_fields
    }
    assert gated == TOKEN_GATED


# ---------------------------------------------------------------- the server


@dataclass(frozen=True)
class Served:
    base_url: str
    port: int
    database: Database
    context: AppContext  # the server's context on the test's engine: direct set-up and state checks

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}/mcp"

    async def token_for(self, name: str, role: Role) -> str:
        async with self.database.unit_of_work() as session:
            token, _ = await AuthService(session).create_token(name, role, "matrix")
        return token

    async def revoked_token(self, name: str) -> str:
        token = await self.token_for(name, Role.admin)
        async with self.database.unit_of_work() as session:
            auth = AuthService(session)
            [row] = [row for row in await auth.list_tokens() if row.user_name == name]
            await auth.revoke(str(row.id))
        return token


@asynccontextmanager
async def serve(database_url: str, database: Database, data_dir: Path, **overrides: Any) -> AsyncIterator[Served]:
    """`create_http_app` under uvicorn on a free loopback port, with these settings overrides."""
    # No background writes between a refused call and its state check.
    async with serving(database_url, data_dir, jobs={"enabled": False}, **overrides) as (port, context):
        yield Served(f"http://127.0.0.1:{port}", port, database, dataclasses.replace(context, db=database))


MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def rpc(tool: str, arguments: dict[str, Any], request_id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }


def bearer(token: str) -> dict[str, str]:
    return {**MCP_HEADERS, "Authorization": f"Bearer {token}"}


TABLES = [table.name for table in Base.metadata.sorted_tables if table.name not in LIMITER_STATE]
# Authenticating a request records its token's last use (at most once a minute): that bookkeeping is not the
# call's write, so api_token is compared on everything but last_used_at.
_TOKENS_BUT_LAST_USE = (
    "(SELECT count(*) || '/' || coalesce(md5(string_agg(concat_ws(':', id, user_id, token_hash, label, created_at, "
    "revoked_at), ',' ORDER BY id)), '') FROM api_token) AS api_token"
)
STATE_SQL = text(
    "SELECT "
    + ", ".join(
        _TOKENS_BUT_LAST_USE
        if table == "api_token"
        else f"(SELECT count(*) || '/' || coalesce(max(xmin::text::bigint), 0) FROM {table}) AS {table}"
        for table in TABLES
    )
)


async def state(database: Database) -> dict[str, str]:
    """Row count and newest row version of every table: any insert, update or delete changes it."""
    async with database.unit_of_work() as session:
        return dict((await session.execute(STATE_SQL)).mappings().one())


def tool_calls_total() -> float:
    """Every tool call the process has dispatched (the metric `dispatch` keeps)."""
    return sum(
        sample.value
        for metric in REGISTRY.collect()
        if metric.name == "synaptomind_tool_calls"
        for sample in metric.samples
        if sample.name == "synaptomind_tool_calls_total"
    )


def text_of(result: CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


# ---------------------------------------------------------------- fresh targets for every cell

SUBJECT = "The billing service retries failed card payments three times"
NEIGHBOURS = [
    "The billing service retries a failed card payment three times before giving up",
    "Card payments that fail get three retries in the billing service",
]


class Fixtures:
    """Builds, directly through `dispatch` as an admin, what each matrix cell acts on (fresh every time)."""

    def __init__(self, admin: ToolCaller) -> None:
        self.admin = admin
        self.serial = 0

    def unique(self, stem: str) -> str:
        self.serial += 1
        return f"{stem}-{self.serial}-{uuid.uuid4().hex[:6]}"

    async def thought(self, content: str | None = None, cwd: str | None = None, status: str | None = None) -> str:
        arguments: dict[str, Any] = {"action": "create", "content": content or self.unique("matrix thought")}
        if cwd:
            arguments["cwd"] = cwd
        if status:
            arguments["status"] = status
        return str((await self.admin.ok("memory_store", arguments)).item["id"])

    async def edge(self) -> str:
        source, target = await self.thought(), await self.thought()
        answer = await self.admin.ok("memory_store", {"action": "link", "source_id": source, "target_id": target})
        return str(answer.item["id"])

    async def project(self) -> tuple[str, str]:
        name = self.unique("Matrix")
        path = f"/srv/{name.lower()}"
        answer = await self.admin.ok("memory_manage", {"action": "create", "name": name, "local_path": path})
        return str(answer.item["id"]), path

    async def proposals(self) -> list[str]:
        """A project with a subject and two close neighbours: two pending placement proposals."""
        _, path = await self.project()
        for content in NEIGHBOURS:
            await self.thought(content, path)
        subject = await self.thought(SUBJECT, path)
        await self.admin.ok("edge_review", {"action": "enqueue", "thought_id": subject})
        listed = await self.admin.ok("edge_review", {"action": "list", "cwd": path, "status": "pending"})
        ids = [str(row["id"]) for row in listed.items]
        assert ids, "no placement proposals to act on"
        return ids

    async def run_id(self) -> str:
        proposal = (await self.proposals())[0]
        preview = await self.admin.ok("edge_review", {"action": "apply", "proposal_id": proposal})
        token = preview.meta["preview"]["token"]
        applied = await self.admin.ok(
            "edge_review", {"action": "apply", "proposal_id": proposal, "confirm": True, "preview_token": token}
        )
        return str(applied.item["run_id"])

    async def primer(self) -> str:
        thought = await self.thought()
        for _ in range(6):
            await self.admin.ok("memory_recall", {"action": "get", "thought_id": thought})
        primers = await self.admin.ok("memory_primers", {"action": "list"})
        [row] = [row for row in primers.items if str(row.get("thought_id")) == thought]
        return str(row.get("id") or row.get("primer_id"))

    async def arguments(self, tool: str, action: str) -> dict[str, Any]:
        """Arguments with which `tool action` succeeds for a caller holding its role (previews for gated ones)."""
        call: dict[str, Any] = {"action": action} if action else {}
        match (tool, action):
            case ("memory_recall", "search" | "context" | "clusters"):
                call["query"] = "matrix thought"
            case ("memory_recall", "get" | "chain"):
                call["thought_id"] = await self.thought()
            case ("memory_store", "create"):
                call["content"] = self.unique("created by the matrix")
            case ("memory_store", "update"):
                call.update(thought_id=await self.thought(), content=self.unique("updated by the matrix"))
            case ("memory_store", "link"):
                call.update(source_id=await self.thought(), target_id=await self.thought())
            case ("memory_store", "link_batch"):
                call["links"] = [{"source": await self.thought(), "target": await self.thought()}]
            case ("memory_store", "unlink"):
                call["edge_id"] = await self.edge()
            case ("memory_store", "unlink_batch"):
                call["edge_ids"] = [await self.edge()]
            case ("memory_store", "retype"):
                call.update(edge_id=await self.edge(), new_type="supports")
            case ("memory_store", "bulk_create"):
                call["thoughts"] = [{"content": self.unique("bulk by the matrix")}]
            case ("memory_supersede", "archive"):
                call["thought_id"] = await self.thought()
            case ("memory_supersede", "archive_batch"):
                call["thought_ids"] = [await self.thought(), await self.thought()]
            case ("memory_supersede", "merge"):
                call.update(source_id=await self.thought(), target_id=await self.thought())
            case ("memory_status", "propose"):
                call["content"] = "where does a matrix thought go"
            case ("memory_manage", "create"):
                call["name"] = self.unique("Created")
            case ("memory_manage", "update"):
                call.update(project_id=(await self.project())[0], description="updated by the matrix")
            case ("memory_manage", "delete"):
                call["project_id"] = (await self.project())[0]
            case ("memory_manage", "resolve"):
                call["cwd"] = (await self.project())[1] + "/src"
            case ("edge_review", "enqueue"):
                call["thought_id"] = await self.thought()
            case ("edge_review", "apply" | "reject"):
                call["proposal_id"] = (await self.proposals())[0]
            case ("edge_review", "apply_batch"):
                call["proposal_ids"] = await self.proposals()
            case ("edge_review", "rollback"):
                call["run_id"] = await self.run_id()
            case ("retention_review", "protect"):
                call["thought_id"] = await self.thought()
            case ("retention_review", "delete"):  # only draft or archived thoughts can be deleted
                call["thought_id"] = await self.thought(status="draft")
            case ("retention_review", "compact"):
                call.update(source_ids=[await self.thought()], summary={"content": self.unique("summary")})
            case ("memory_crystallize", "cluster"):
                call.update(thought_ids=[await self.thought(), await self.thought()], title=self.unique("Cluster"))
            case ("memory_reflect", "reflect"):
                call["summary"] = self.unique("a session summary")
            case ("memory_primers", "delete"):
                call["primer_id"] = await self.primer()
        return call


# ---------------------------------------------------------------- the matrix


@pytest.fixture
async def served(database_url: str, clean_database: Database, tmp_path: Path) -> AsyncIterator[Served]:
    async with serve(database_url, clean_database, tmp_path) as running:
        yield running


@dataclass
class Cell:
    tool: str
    action: str
    caller: str
    outcome: str  # "ok", "401", "403", "refused: another user's token"


async def test_every_action_for_every_caller(served: Served) -> None:
    admin = ToolCaller(served.context, await make_user(served.context, "setup-admin", Role.admin))
    fixtures = Fixtures(admin)
    tokens = {
        "reader": await served.token_for("rita", Role.reader),
        "writer": await served.token_for("walt", Role.writer),
        "admin": await served.token_for("ada", Role.admin),
        "writer2": await served.token_for("wendy", Role.writer),
        "admin2": await served.token_for("alan", Role.admin),
    }
    revoked = await served.revoked_token("gone")
    cells: list[Cell] = []

    # no token and a revoked token: 401 before any tool runs, for every action
    prepared = [(tool, action, await fixtures.arguments(tool, action)) for tool, action, _ in CATALOG]
    calls_before = tool_calls_total()
    async with httpx2.AsyncClient(base_url=served.base_url, timeout=30) as http:
        for tool, action, arguments in prepared:
            for caller, headers in (("no token", MCP_HEADERS), ("revoked", bearer(revoked))):
                snapshot = await state(served.database)
                answer = await http.post("/mcp", json=rpc(tool, arguments), headers=headers)
                assert answer.status_code == 401, (tool, action, caller, answer.text)
                # RFC 6750 §3.1: a token that was sent and is not valid says so; no credentials, no error code.
                challenge = answer.headers["www-authenticate"]
                assert challenge.startswith('Bearer realm="synaptomind"'), challenge
                assert ('error="invalid_token"' in challenge) == (caller == "revoked"), (caller, challenge)
                assert await state(served.database) == snapshot, (tool, action, caller)
                cells.append(Cell(tool, action, caller, "401"))
    assert tool_calls_total() == calls_before, "a tool ran for an unauthenticated request"

    async with AsyncExitStack() as stack:
        sessions = {
            name: await stack.enter_async_context(mcp_session(served.mcp_url, token)) for name, token in tokens.items()
        }
        for caller, role in (("reader", Role.reader), ("writer", Role.writer), ("admin", Role.admin)):
            user = {"reader": "rita", "writer": "walt", "admin": "ada"}[caller]
            for tool, action, needed in CATALOG:
                arguments = await fixtures.arguments(tool, action)
                snapshot = await state(served.database)
                result = await sessions[caller].call_tool(tool, arguments)
                body = text_of(result)
                if RANK[role] >= RANK[EXPECTED_ROLE[(tool, action)]]:
                    assert not result.is_error, (tool, action, caller, body)
                    assert result.structured_content is not None
                    cells.append(Cell(tool, action, caller, "ok"))
                    continue
                call = f"{tool} action={action}" if action else tool
                message = f"Forbidden: {call} needs the {needed.value} role; user '{user}' is a {role.value}"
                assert result.is_error and body == message, (tool, action, caller, body)
                assert result.structured_content == {
                    "result": {"error": {"message": message, "statusCode": 403, "retryable": False}}
                }
                assert await state(served.database) == snapshot, f"refused {tool} {action} for {caller} wrote"
                cells.append(Cell(tool, action, caller, "403"))

        # another user's preview token (same role as the owner, so only the binding can refuse it)
        for tool, action, needed in CATALOG:
            if (tool, action) not in TOKEN_GATED:
                continue
            owner, intruder = ("admin", "admin2") if needed is Role.admin else ("writer", "writer2")
            arguments = await fixtures.arguments(tool, action)
            preview = await sessions[owner].call_tool(tool, arguments)
            assert not preview.is_error, (tool, action, text_of(preview))
            assert preview.structured_content is not None
            token = preview.structured_content["result"]["meta"]["preview"]["token"]
            assert token, (tool, action)
            snapshot = await state(served.database)
            stolen = await sessions[intruder].call_tool(tool, {**arguments, "confirm": True, "preview_token": token})
            body = text_of(stolen)
            assert stolen.is_error and f"preview_token {token} was issued to another user" in body, (tool, action, body)
            assert stolen.structured_content is not None
            assert stolen.structured_content["result"]["error"]["statusCode"] == 400
            assert await state(served.database) == snapshot, f"a confirm with a stolen token wrote: {tool} {action}"
            cells.append(Cell(tool, action, f"{intruder} with {owner}'s token", "refused: another user's token"))
            # the owner's token was not spent by the refusal
            owned = await sessions[owner].call_tool(tool, {**arguments, "confirm": True, "preview_token": token})
            assert not owned.is_error, (tool, action, text_of(owned))

    actions = len(CATALOG)
    assert len(cells) == actions * 5 + len(TOKEN_GATED), len(cells)
    assert actions == len(EXPECTED_ROLE) == 45


# ---------------------------------------------------------------- the membership dimension

VAULT_WORD = "zanzibar"  # in the content of every thought of a closed project
# Actions that take a cwd and only read or add under it: called with the closed project's path.
WITH_CWD = {
    ("memory_recall", "search"),
    ("memory_recall", "context"),
    ("memory_recall", "clusters"),
    ("memory_recall", "list"),
    ("memory_store", "create"),
    ("memory_store", "bulk_create"),
    ("memory_status", "slots"),
    ("memory_status", "frontier"),
    ("memory_status", "propose"),
    ("edge_review", "enqueue"),
    ("edge_review", "list"),
    ("memory_crystallize", "graph"),
    ("memory_crystallize", "cluster"),
    ("memory_reflect", "reflect"),
    ("memory_reflect", "timeline"),
}
# Writer/admin actions that touch nothing of a closed project for a caller who is only a reader there: creating
# a project (global), auto_cluster (it clusters only what the caller may write).
UNSCOPED_WRITES = {("memory_manage", "create"), ("memory_crystallize", "auto_cluster")}
UUID_PATTERN = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class VaultFixtures(Fixtures):
    """Fresh targets inside closed projects: open to no one but their members — `mia` (admin there), `rex`
    (reader there) and the setup admin who creates them. Every id they hand out is remembered: none may
    reach a non-member."""

    def __init__(self, admin: ToolCaller, members: dict[str, Role]) -> None:
        super().__init__(admin)
        self.members = members
        self.path = ""
        self.secrets: set[str] = set()  # ids and names of everything in the closed projects
        self.projects: list[uuid.UUID] = []

    def unique(self, stem: str) -> str:
        return super().unique(f"{VAULT_WORD} {stem}")

    async def open_vault(self) -> None:
        _, self.path = await self.project()

    async def project(self) -> tuple[str, str]:
        name = self.unique("Vault").replace(" ", "-")
        path = f"/srv/{name.lower()}"
        created = await self.admin.ok("memory_manage", {"action": "create", "name": name, "local_path": path})
        project_id = str(created.item["id"])
        async with self.admin.context.db.unit_of_work() as session:
            members = MemberService(session)
            await members.remove(project_id, None)  # closed: only its members see it
            for user, role in self.members.items():
                await members.add(project_id, user, role)
        self.projects.append(uuid.UUID(project_id))
        self.secrets |= {project_id, name}
        return project_id, path

    async def thought(self, content: str | None = None, cwd: str | None = None, status: str | None = None) -> str:
        thought_id = await super().thought(content or self.unique("thought"), cwd or self.path, status)
        self.secrets.add(thought_id)
        return thought_id

    async def edge(self) -> str:
        edge_id = await super().edge()
        self.secrets.add(edge_id)
        return edge_id

    async def proposals(self) -> list[str]:
        ids = await super().proposals()
        self.secrets |= set(ids)
        return ids

    async def run_id(self) -> str:
        run = await super().run_id()
        self.secrets.add(run)
        return run

    async def primer(self) -> str:
        primer_id = await super().primer()
        self.secrets.add(primer_id)
        return primer_id

    async def arguments(self, tool: str, action: str) -> dict[str, Any]:
        call = await super().arguments(tool, action)
        if (tool, action) in WITH_CWD:
            call["cwd"] = self.path
        if (tool, action) == ("retention_review", "compact"):
            call["confirm"] = True  # compact's preview reads nothing: its confirm is what meets the project
        return call


VAULT_STATE_SQL = text(
    "SELECT "
    + ", ".join(
        f"(SELECT count(*) || '/' || coalesce(max(xmin::text::bigint), 0) FROM {table} "
        f"WHERE {column} = ANY(CAST(:projects AS uuid[]))) AS {table}"
        for table, column in (
            ("project", "id"),
            ("project_member", "project_id"),
            ("thought", "project_id"),
            ("edge", "project_id"),
            ("thought_url_link", "project_id"),
            ("thought_hit", "project_id"),
            ("primer", "project_id"),
            ("slot", "project_id"),
            ("placement_proposal", "project_id"),
        )
    )
)


async def vault_state(database: Database, projects: list[uuid.UUID]) -> dict[str, str]:
    """Row count and newest row version of every closed project's rows."""
    async with database.unit_of_work() as session:
        return dict((await session.execute(VAULT_STATE_SQL, {"projects": projects})).mappings().one())


def _strings(value: Any) -> set[str]:
    if isinstance(value, dict):
        return {text for item in value.values() for text in _strings(item)}
    if isinstance(value, list):
        return {text for item in value for text in _strings(item)}
    return {str(value)} if isinstance(value, str) else set()


def _leaks(body: str, secrets: set[str], arguments: dict[str, Any]) -> list[str]:
    """The secrets in an answer that the call did not send itself (an id it asked for may be echoed)."""
    sent = " ".join(_strings(arguments))
    found = [secret for secret in secrets if secret in body and secret not in sent]
    if VAULT_WORD in body and VAULT_WORD not in sent:
        found.append(VAULT_WORD)
    return found


def _twin(arguments: dict[str, Any], secrets: set[str], path: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The same call naming things that do not exist: every secret id and the closed path replaced by new ones."""
    spelled = json.dumps(arguments)
    mapping = {secret: str(uuid.uuid4()) for secret in secrets if UUID_PATTERN.fullmatch(secret) and secret in spelled}
    mapping[path] = f"/srv/nowhere-{uuid.uuid4().hex[:8]}"
    for old, new in mapping.items():
        spelled = spelled.replace(old, new)
    return json.loads(spelled), mapping


def _masked(body: str, keep: set[str]) -> str:
    """Every id but those in `keep` masked (a fresh preview token, a request's own ids)."""
    return UUID_PATTERN.sub(lambda match: match[0] if match[0] in keep else "<id>", body)


def _unmapped(body: str, mapping: dict[str, str], keep: set[str]) -> str:
    """The twin's answer spelled with the original names, every other id masked."""
    for old, new in mapping.items():
        body = body.replace(new, old)
    return _masked(body, keep)


async def test_every_action_as_a_member_a_reader_member_and_a_non_member(served: Served) -> None:
    """Closed projects (their everyone row removed): for every action of the catalog, over HTTP,
    - `mia`, an admin there, is served as before;
    - `rex`, only a reader there, gets the contract's role refusal from every write into them, and nothing is
      written; his reads see them;
    - `nora`, not a member (a global admin, so only membership can refuse her), never sees a byte of them: no id
      she did not send, no name, no content, in any answer; an error she gets is exactly the answer for ids
      that do not exist; nothing of theirs changes, and a refused call writes nothing at all.
    """
    tokens = {name: await served.token_for(name, Role.admin) for name in ("mia", "rex", "nora")}
    admin = ToolCaller(served.context, await make_user(served.context, "setup-admin", Role.admin))
    fixtures = VaultFixtures(admin, {"mia": Role.admin, "rex": Role.reader})
    await fixtures.open_vault()
    # The closed project holds what every read could find: thoughts a search matches, an edge, a cluster.
    seeded = [await fixtures.thought(fixtures.unique("matrix thought seed")) for _ in range(3)]
    linked = await admin.ok("memory_store", {"action": "link", "source_id": seeded[0], "target_id": seeded[1]})
    fixtures.secrets.add(str(linked.item["id"]))
    # Titled: embedded in the call (an untitled cluster would be embedded later by the backfill, a write of its own).
    cluster = {"action": "cluster", "thought_ids": seeded[1:], "cwd": fixtures.path, "title": fixtures.unique("C")}
    fixtures.secrets.add(str((await admin.ok("memory_crystallize", cluster)).item["cluster"]["id"]))
    # Something every caller sees, so that non-members' answers are not empty.
    for content in ("the commons hold the shared build notes", "the commons run the release train"):
        await admin.ok("memory_store", {"action": "create", "content": content})
    cells: list[Cell] = []
    async with AsyncExitStack() as stack:
        sessions = {
            name: await stack.enter_async_context(mcp_session(served.mcp_url, token)) for name, token in tokens.items()
        }
        for tool, action, needed in CATALOG:
            call = f"{tool} action={action}" if action else tool
            for caller in ("mia", "rex", "nora"):
                arguments = await fixtures.arguments(tool, action)
                before, vault_before = (
                    await state(served.database),
                    await vault_state(served.database, fixtures.projects),
                )
                result = await sessions[caller].call_tool(tool, arguments)
                body = text_of(result)
                cell = (tool, action, caller, body[:400])
                if caller == "mia" or (
                    caller == "rex" and (needed is Role.reader or (tool, action) in UNSCOPED_WRITES)
                ):
                    assert not result.is_error, cell
                    cells.append(Cell(tool, action, caller, "ok"))
                elif caller == "rex":
                    message = f"Forbidden: {call} needs the {needed.value} role; user 'rex' is a reader"
                    assert result.is_error and body == message, cell
                    assert await state(served.database) == before, f"refused {call} for rex wrote"
                    cells.append(Cell(tool, action, caller, "403"))
                else:
                    assert not _leaks(body, fixtures.secrets, arguments), (
                        _leaks(body, fixtures.secrets, arguments),
                        cell,
                    )
                    assert await vault_state(served.database, fixtures.projects) == vault_before, (
                        f"{call}: nora changed it"
                    )
                    if result.is_error:
                        assert await state(served.database) == before, f"refused {call} for nora wrote"
                        twin_arguments, mapping = _twin(arguments, fixtures.secrets, fixtures.path)
                        twin = await sessions["nora"].call_tool(tool, twin_arguments)
                        keep = set(UUID_PATTERN.findall(json.dumps(arguments)))
                        assert twin.is_error and _unmapped(text_of(twin), mapping, keep) == _masked(body, keep), (
                            cell,
                            text_of(twin),
                        )
                    cells.append(Cell(tool, action, caller, "error as if absent" if result.is_error else "ok, blind"))
    assert len(cells) == len(CATALOG) * 3
    # Every write a reader member could aim at a closed project was refused, and every action ran for all three.
    refused = {(cell.tool, cell.action) for cell in cells if cell.outcome == "403"}
    assert refused == {
        (tool, action)
        for tool, action, role in CATALOG
        if role is not Role.reader and (tool, action) not in UNSCOPED_WRITES
    }


def path_overlap_refusal(path: str) -> str:
    """The paths rule's one refusal (docs/SECURITY.md, "Paths"): at, inside or around, seen or not, alike."""
    return (
        f"Refused: local_path '{path}' is the path of another project, or lies inside or around it, and you are "
        "not an admin of that project: registering it would change which project other users' cwd resolves to. "
        "Choose a path outside other projects' paths (or omit local_path), or ask an admin of that project"
    )


def name_taken_refusal(name: str) -> str:
    return (
        f"A project named '{name}' already exists (project names are unique on the server, also among projects "
        "you cannot see): choose another name"
    )


async def test_paths_and_names_of_a_closed_project_for_a_member_a_reader_member_and_a_non_member(
    served: Served,
) -> None:
    """The paths rule over HTTP, in the membership dimension (`memory_manage` create and update):
    - `rex`, a reader member, and `nora`, not a member (both global admins: only the project can refuse them),
      registering a path at, inside or around the closed project — by create, or by moving their own project —
      get one refusal, the same bytes for both, naming no project; nothing is written;
    - the closed project's name answers them like the name of an open project (no id, no "None");
    - `mia`, an admin there, registers inside and around it, and is told by name that its own path is taken.
    """
    tokens = {name: await served.token_for(name, Role.admin) for name in ("mia", "rex", "nora")}
    admin = ToolCaller(served.context, await make_user(served.context, "setup-admin", Role.admin))
    fixtures = VaultFixtures(admin, {"mia": Role.admin, "rex": Role.reader})
    vault_id, vault_path = await fixtures.project()
    vault_name = next(secret for secret in fixtures.secrets if secret != vault_id)
    open_name = "matrix-open"  # a project everyone sees, below /srv too
    await admin.ok("memory_manage", {"action": "create", "name": open_name, "local_path": f"/srv/{open_name}"})
    wanted = {"inside": f"{vault_path}/src", "at": vault_path, "around": "/srv"}
    cells: list[Cell] = []
    async with AsyncExitStack() as stack:
        sessions = {
            name: await stack.enter_async_context(mcp_session(served.mcp_url, token)) for name, token in tokens.items()
        }

        async def refused(caller: str, arguments: dict[str, Any], message: str) -> None:
            """Exactly `message` (a 409), nothing written, and nothing of the closed project a non-member did not
            send (the same bytes for rex and nora: the messages name neither caller nor project)."""
            before = await state(served.database)
            result = await sessions[caller].call_tool("memory_manage", arguments)
            body = text_of(result)
            assert result.is_error and body == message, (caller, arguments, body)
            assert result.structured_content is not None
            assert result.structured_content["result"]["error"]["statusCode"] == 409
            assert caller == "mia" or not _leaks(body, fixtures.secrets, arguments), (caller, arguments, body)
            assert await state(served.database) == before, f"refused {arguments} for {caller} wrote"
            cells.append(Cell("memory_manage", str(arguments["action"]), caller, "409"))

        for caller in ("rex", "nora"):
            own = await sessions[caller].call_tool(
                "memory_manage", {"action": "create", "name": f"{caller}-own", "local_path": f"/home/{caller}"}
            )
            own_id = str(json.loads(text_of(own))["item"]["id"])
            for where, path in wanted.items():
                await refused(
                    caller,
                    {"action": "create", "name": f"{caller}-{where}", "local_path": path},
                    path_overlap_refusal(path),
                )
                await refused(
                    caller, {"action": "update", "project_id": own_id, "local_path": path}, path_overlap_refusal(path)
                )
            for name in (vault_name, open_name):
                await refused(caller, {"action": "create", "name": name}, name_taken_refusal(name))
                await refused(
                    caller, {"action": "update", "project_id": own_id, "name": name}, name_taken_refusal(name)
                )
        await refused("mia", {"action": "create", "name": vault_name}, name_taken_refusal(vault_name))
        await refused(
            "mia",
            {"action": "create", "name": "mia-at", "local_path": vault_path},
            f"Project '{vault_name}' is already registered at '{vault_path}'",
        )
        for where in ("inside", "around"):
            result = await sessions["mia"].call_tool(
                "memory_manage", {"action": "create", "name": f"mia-{where}", "local_path": wanted[where]}
            )
            assert not result.is_error, text_of(result)
            cells.append(Cell("memory_manage", "create", "mia", "ok"))
    assert len(cells) == 2 * (3 * 2 + 2 * 2) + 2 + 2


async def test_the_health_check_routes_count_a_callers_projects_only(served: Served) -> None:
    """/api/health-check counts what its caller may see; the fix, which judges every project's rows, is refused
    to an admin who cannot see them all (nothing written) and runs for one who can."""
    owner = await served.token_for("setup-admin", Role.admin)
    nora = await served.token_for("nora", Role.admin)
    admin = ToolCaller(served.context, await make_user(served.context, "setup-admin", Role.admin))
    fixtures = VaultFixtures(admin, {})
    await admin.ok("memory_store", {"action": "create", "content": "an open note"})
    async with httpx2.AsyncClient(base_url=served.base_url, timeout=30) as http:

        async def report(token: str) -> dict[str, Any]:
            answer = await http.get(
                "/api/health-check?include_details=true", headers={"Authorization": f"Bearer {token}"}
            )
            assert answer.status_code == 200, answer.text
            return dict(answer.json())

        await fixtures.open_vault()
        blind = await report(nora)
        for _ in range(3):  # islands, untagged: findings the closed project adds for those who see it
            await fixtures.thought()
        assert await report(nora) == blind
        assert VAULT_WORD not in json.dumps(blind)
        assert blind["summary"]["thoughts"]["active"] == 1
        assert (await report(owner))["summary"]["thoughts"]["active"] == 4
        before = await state(served.database)
        refused = await http.post("/api/health-check/fix", headers={"Authorization": f"Bearer {nora}"})
        assert refused.status_code == 403
        assert refused.json() == {
            "error": "Forbidden: the safe autofixes change every project; user 'nora' is not a member of them all"
        }
        assert await state(served.database) == before
        fixed = await http.post("/api/health-check/fix", headers={"Authorization": f"Bearer {owner}"})
        assert fixed.status_code == 200, fixed.text


# ---------------------------------------------------------------- DNS rebinding

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "matrix", "version": "1"}},
}


async def test_dns_rebinding_protection_with_configured_hosts_and_origins(
    database_url: str, clean_database: Database, tmp_path: Path
) -> None:
    overrides = {
        "http": {"allowed_hosts": ["memory.example:8765"], "allowed_origins": ["https://memory.example"]},
    }
    async with serve(database_url, clean_database, tmp_path, **overrides) as running:
        token = await running.token_for("ada", Role.admin)
        auth = {"Authorization": f"Bearer {token}"}
        port = running.port
        async with httpx2.AsyncClient(base_url=running.base_url, timeout=10) as http:
            for host in ("evil.example", f"evil.example:{port}", "memory.example", "memory.example:80"):
                refused = await http.post("/mcp", json=INITIALIZE, headers={**bearer(token), "Host": host})
                assert (refused.status_code, refused.text) == (421, "Invalid Host header"), host
            for origin in ("http://evil.example", "https://memory.example.evil", "null"):
                refused = await http.post("/mcp", json=INITIALIZE, headers={**bearer(token), "Origin": origin})
                assert (refused.status_code, refused.text) == (403, "Invalid Origin header"), origin
            for headers in (
                {"Host": "memory.example:8765"},
                {"Origin": "https://memory.example"},
                {"Host": "memory.example:8765", "Origin": "https://memory.example"},
                {"Host": f"localhost:{port}", "Origin": f"http://127.0.0.1:{port}"},
            ):
                allowed = await http.post("/mcp", json=INITIALIZE, headers={**bearer(token), **headers})
                assert allowed.status_code == 200, (headers, allowed.text)
                assert allowed.json()["result"]["serverInfo"]["name"] == "synaptomind"
            # the operational routes are behind the same check (a rebinding page must not read or fix them)
            for method, path in (("GET", "/api/health-check"), ("POST", "/api/health-check/fix"), ("GET", "/metrics")):
                evil_host = await http.request(method, path, headers={**auth, "Host": f"evil.example:{port}"})
                assert evil_host.status_code == 421, (method, path, evil_host.text)
                evil_origin = await http.request(method, path, headers={**auth, "Origin": "http://evil.example"})
                assert evil_origin.status_code == 403, (method, path, evil_origin.text)
            good = await http.get("/api/health-check", headers={**auth, "Host": "memory.example:8765"})
            assert good.status_code == 200, good.text
            # /health stays open to any Host: load balancers and container probes address it by IP
            probe = await http.get("/health", headers={"Host": "10.0.0.7:8765"})
            assert probe.status_code == 200
    async with clean_database.unit_of_work() as session:
        assert (await session.execute(text("SELECT count(*) FROM audit_event"))).scalar_one() == 0


async def test_auth_mode_none_still_refuses_a_rebinding_host(
    database_url: str, clean_database: Database, tmp_path: Path
) -> None:
    """Without tokens (loopback only) the Host/Origin check is the only guard against a rebinding web page."""
    async with serve(database_url, clean_database, tmp_path, auth={"mode": "none"}) as running:
        port = running.port
        async with httpx2.AsyncClient(base_url=running.base_url, timeout=10) as http:
            evil = {"Host": f"evil.example:{port}"}
            assert (await http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **evil})).status_code == 421
            assert (await http.post("/api/health-check/fix", headers=evil)).status_code == 421
            assert (await http.get("/api/health-check", headers=evil)).status_code == 421
            assert (await http.get("/metrics", headers={"Origin": "http://evil.example"})).status_code == 403
            assert (await http.get("/api/health-check")).status_code == 200
    async with clean_database.unit_of_work() as session:
        assert (await session.execute(text("SELECT count(*) FROM audit_event"))).scalar_one() == 0


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "memory.example"])
def test_auth_mode_none_is_refused_off_loopback(host: str, tmp_path: Path) -> None:
    """`serve` refuses to run without tokens unless it binds to loopback (before opening any database)."""
    settings = Settings(_env_file=None, auth={"mode": "none"}, data_dir=tmp_path / "never-created")
    with pytest.raises(SystemExit, match="SYNAPTO_AUTH__MODE=none is refused unless the server binds to loopback"):
        cmd_serve(argparse.Namespace(host=host, port=None), settings)
    assert not (tmp_path / "never-created").exists()


# ---------------------------------------------------------------- request size limit


async def test_a_body_above_the_limit_is_refused_with_413_and_nothing_is_written(
    database_url: str, clean_database: Database, tmp_path: Path
) -> None:
    limit = 4096
    async with serve(database_url, clean_database, tmp_path, http={"max_body_bytes": limit}) as running:
        token = await running.token_for("walt", Role.writer)
        before = await state(running.database)
        big = rpc("memory_store", {"action": "bulk_create", "thoughts": [{"content": "x" * 500}] * 20})
        assert len(json.dumps(big)) > limit
        async with httpx2.AsyncClient(base_url=running.base_url, timeout=10) as http:
            declared = await http.post("/mcp", json=big, headers=bearer(token))
            assert (declared.status_code, declared.text) == (413, "Request body too large")

            async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the limit counts streamed bytes
                data = json.dumps(big).encode()
                for start in range(0, len(data), 1000):
                    yield data[start : start + 1000]

            streamed = await http.post("/mcp", content=chunks(), headers=bearer(token))
            assert (streamed.status_code, streamed.text) == (413, "Request body too large")
            assert await state(running.database) == before
            small = await http.post(
                "/mcp", json=rpc("memory_store", {"action": "create", "content": "fits"}), headers=bearer(token)
            )
            assert small.status_code == 200, small.text
            assert small.json()["result"]["isError"] is False
        async with running.database.unit_of_work() as session:
            assert (await session.execute(text("SELECT count(*) FROM thought"))).scalar_one() == 1


# ---------------------------------------------------------------- per-token rate limiting


async def test_the_rate_limit_is_per_token_and_answers_a_retryable_503(
    database_url: str, clean_database: Database, tmp_path: Path
) -> None:
    async with serve(database_url, clean_database, tmp_path, rate_limit={"per_minute": 5}) as running:
        first = await running.token_for("walt", Role.writer)
        second = await running.token_for("wendy", Role.writer)
        async with mcp_session(running.mcp_url, first) as session:
            answers = [await session.call_tool("memory_manage", {"action": "list"}) for _ in range(5)]
            assert not any(answer.is_error for answer in answers), [text_of(answer) for answer in answers]
            before = await state(running.database)
            limited = await session.call_tool("memory_store", {"action": "create", "content": "over the limit"})
            assert await state(running.database) == before
        assert limited.is_error is True
        assert limited.structured_content is not None
        error = limited.structured_content["result"]["error"]
        assert (error["statusCode"], error["retryable"]) == (503, True)
        assert text_of(limited) == error["message"]
        assert error["message"].startswith("Rate limit exceeded for this token (5 calls/minute); retry in ")
        async with mcp_session(running.mcp_url, second) as other:
            unaffected = await other.call_tool("memory_store", {"action": "create", "content": "another token"})
        assert not unaffected.is_error, text_of(unaffected)


# ---------------------------------------------------------------- /metrics and /api/health-check/fix


async def test_metrics_need_a_token_and_carry_no_thought_content(served: Served) -> None:
    writer = await served.token_for("walt", Role.writer)
    reader = await served.token_for("rita", Role.reader)
    secret = f"secret-thought-{uuid.uuid4().hex}"
    async with mcp_session(served.mcp_url, writer) as session:
        created = await session.call_tool(
            "memory_store", {"action": "create", "content": secret, "tags": [secret[:40]]}
        )
        assert not created.is_error, text_of(created)
        await session.call_tool("memory_recall", {"action": "search", "query": secret})
        # a client-chosen action name must not become a metric label (no content, no unbounded label set)
        unknown = await session.call_tool("memory_recall", {"action": secret})
        assert unknown.is_error
    async with httpx2.AsyncClient(base_url=served.base_url, timeout=10) as http:
        assert (await http.get("/metrics")).status_code == 401
        assert (await http.get("/metrics", headers={"Authorization": "Bearer smt_wrong"})).status_code == 401
        answer = await http.get("/metrics", headers={"Authorization": f"Bearer {reader}"})
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    body = answer.text
    assert "# TYPE synaptomind_tool_calls_total counter" in body
    assert 'synaptomind_tool_calls_total{action="create",outcome="ok",tool="memory_store"}' in body
    assert "synaptomind_tool_latency_seconds_bucket" in body
    assert secret not in body and secret[:20] not in body
    assert 'synaptomind_tool_calls_total{action="unknown",outcome="400",tool="memory_recall"}' in body


async def test_the_health_check_fix_is_admin_only(served: Served) -> None:
    tokens = {role: await served.token_for(f"user-{role.value}", role) for role in Role}
    async with httpx2.AsyncClient(base_url=served.base_url, timeout=30) as http:
        assert (await http.post("/api/health-check/fix")).status_code == 401
        for role in (Role.reader, Role.writer):
            before = await state(served.database)
            refused = await http.post("/api/health-check/fix", headers={"Authorization": f"Bearer {tokens[role]}"})
            assert refused.status_code == 403, (role, refused.text)
            assert refused.json() == {"error": "Forbidden: the safe autofixes need the admin role"}
            assert await state(served.database) == before
            report = await http.get("/api/health-check", headers={"Authorization": f"Bearer {tokens[role]}"})
            assert report.status_code == 200, report.text
        fixed = await http.post("/api/health-check/fix", headers={"Authorization": f"Bearer {tokens[Role.admin]}"})
    assert fixed.status_code == 200, fixed.text
    assert "fixed" in fixed.json()
    async with served.database.unit_of_work() as session:
        events = (await session.execute(text("SELECT tool, action FROM audit_event"))).all()
    assert [tuple(event) for event in events] == [("api", "health_fix")]
