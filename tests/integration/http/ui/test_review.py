"""The console's review and operations pages in-process on a real PostgreSQL: edge_review and retention_review
through their preview screens, archive and merge from a thought page, health and tokens for admins — every
form refused without its CSRF token, the tools' role refusals shown as they come, and a preview token spent once.
"""

from __future__ import annotations

import html
import re
from datetime import timedelta
from typing import Any

import httpx2
import pytest

from app.db.models import Role
from app.http.ui import ConsoleConfig, SessionCodec, build_console
from app.services.auth.tokens import AuthService
from app.services.context import AppContext
from tests.support.console import BASE, CSRF_FIELD, HIDDEN, confirm_fields, post, signed_in, ui  # noqa: F401 (fixture)
from tests.support.helpers import ToolCaller, execute, rows

SUBJECT = "The billing service retries failed card payments three times"
NEIGHBOURS = [
    "The billing service retries a failed card payment three times before giving up",
    "Card payments that fail get three retries in the billing service",
]


async def queue(writer: ToolCaller) -> dict[str, Any]:
    """A subject with two close neighbours and its pending `related` proposals, in project Queue."""
    project = (await writer.ok("memory_manage", {"action": "create", "name": "Queue", "local_path": "/srv/queue"})).item
    for content in NEIGHBOURS:
        await writer.ok("memory_store", {"action": "create", "content": content, "cwd": "/srv/queue"})
    subject = (await writer.ok("memory_store", {"action": "create", "content": SUBJECT, "cwd": "/srv/queue"})).item
    await writer.ok("edge_review", {"action": "enqueue", "thought_id": subject["id"]})
    listed = await writer.ok("edge_review", {"action": "list", "cwd": "/srv/queue", "status": "pending"})
    assert len(listed.items) >= 2, listed.items
    return {"project": project, "subject": subject, "proposals": listed.items}


async def proposal_status(writer: ToolCaller, proposal_id: str) -> str:
    listed = await writer.ok("edge_review", {"action": "list", "limit": 500})
    return str(next(row["status"] for row in listed.items if row["id"] == proposal_id))


async def test_the_edge_queue_lists_proposals_with_both_thoughts(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    world = await queue(writer)
    await signed_in(ui, app_context, "rita", Role.reader)
    page = await ui.get("/ui/review/edges", params={"project": world["project"]["id"]})
    assert page.status_code == 200, page.text
    assert f"{len(world['proposals'])} pending proposals." in page.text
    assert SUBJECT in page.text and NEIGHBOURS[0] in page.text
    first = world["proposals"][0]
    assert first["rationale"] and html.escape(first["rationale"]) in page.text
    assert "confidence " in page.text and 'class="edge edge-related"' in page.text
    assert "Apply…" not in page.text  # a reader sees no write forms (and the tools would refuse them)
    # Both thoughts of every proposal in one read that counts no hit: looking at a queue is not recalling.
    assert await rows(writer, "SELECT count(*) FROM thought_hit") == [(0,)]


async def test_the_edge_queue_of_a_project_without_a_path_is_that_projects_own(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    await queue(writer)  # proposals in Queue (a path) only
    projects = (await writer.ok("memory_manage", {"action": "list"})).items
    default = next(project for project in projects if project["is_default"])
    await signed_in(ui, app_context, "rita", Role.reader)
    own = await ui.get("/ui/review/edges", params={"project": default["id"]})
    assert own.status_code == 200, own.text
    assert SUBJECT not in own.text and "spans every project" not in own.text
    everyone = await ui.get("/ui/review/edges")
    assert SUBJECT in everyone.text


async def test_apply_goes_through_its_preview_and_a_token_is_spent_once(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    world = await queue(writer)
    proposal_id = world["proposals"][0]["id"]
    csrf = await signed_in(ui, app_context, "wes", Role.writer)

    refused = await ui.post("/ui/review/edges/apply", data={"proposal_id": proposal_id})
    assert refused.status_code == 403 and "CSRF" in refused.text
    forged = await ui.post("/ui/review/edges/apply", data={"proposal_id": proposal_id, "csrf": "forged"})
    assert forged.status_code == 403
    assert await rows(writer, "SELECT 1 FROM preview_token") == []  # nothing was even previewed

    preview = await ui.post("/ui/review/edges/apply", data={"proposal_id": proposal_id, "csrf": csrf})
    assert preview.status_code == 200, preview.text
    assert "Preview: Apply an edge proposal" in preview.text
    assert f"link {world['subject']['id']} -[related]->" in html.unescape(
        preview.text
    )  # the preview's `would`, as it comes
    fields = dict(confirm_fields(preview.text))
    assert "Thoughts involved" in preview.text and SUBJECT in preview.text  # both thoughts of the proposal
    assert fields["confirm"] == "true" and fields["proposal_id"] == proposal_id and fields["csrf"] == csrf
    assert await proposal_status(writer, proposal_id) == "pending"  # a preview writes nothing

    no_csrf = {key: value for key, value in fields.items() if key != "csrf"}
    assert (await ui.post("/ui/review/edges/apply", data=no_csrf)).status_code == 403
    assert await proposal_status(writer, proposal_id) == "pending"

    done = await ui.post("/ui/review/edges/apply", data=fields)
    # a single apply from the queue stays on the queue, as the selected actions do (issue 25 item 5)
    assert done.status_code == 303 and done.headers["location"] == "/ui/review/edges?done=applied&n=1&failed=0"
    assert "Applied 1 proposal(s)." in (await ui.get(done.headers["location"])).text
    assert await proposal_status(writer, proposal_id) == "accepted"
    applied = await rows(writer, "SELECT count(*) AS n FROM audit_event WHERE tool = 'edge_review'")
    assert applied[0][0] == 1

    replay = await ui.post("/ui/review/edges/apply", data=fields)
    assert replay.status_code == 409
    assert f"preview_token {fields['preview_token']} was already used" in html.unescape(replay.text)
    applied = await rows(writer, "SELECT count(*) AS n FROM audit_event WHERE tool = 'edge_review'")
    assert applied[0][0] == 1  # applied exactly once


async def test_a_single_apply_comes_back_to_the_queue_of_its_project(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    world = await queue(writer)
    project_id = world["project"]["id"]
    proposal_id, other_id = world["proposals"][0]["id"], world["proposals"][1]["id"]
    csrf = await signed_in(ui, app_context, "wes", Role.writer)
    listed = await ui.get("/ui/review/edges", params={"project": project_id})
    assert f'<input type="hidden" name="project" value="{project_id}">' in listed.text

    preview = await ui.post(
        "/ui/review/edges/apply", data={"proposal_id": proposal_id, "project": project_id, "csrf": csrf}
    )
    fields = dict(confirm_fields(preview.text))
    assert fields["project"] == project_id and fields["confirm"] == "true"
    done = await ui.post("/ui/review/edges/apply", data=fields)
    assert done.status_code == 303
    assert done.headers["location"] == f"/ui/review/edges?done=applied&n=1&failed=0&project={project_id}"
    back = await ui.get(done.headers["location"])
    assert "Applied 1 proposal(s)." in back.text
    assert f'name="proposal_id" value="{other_id}"' in back.text  # the rest of that project's queue, as it was
    assert await proposal_status(writer, proposal_id) == "accepted"


async def test_a_reader_is_refused_with_the_tools_text(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    world = await queue(writer)
    thought_id = world["subject"]["id"]
    csrf = await signed_in(ui, app_context, "rita", Role.reader)
    posts = [
        ("/ui/review/edges/apply", {"proposal_id": world["proposals"][0]["id"]}, "edge_review action=apply"),
        ("/ui/review/edges/reject", {"proposal_id": world["proposals"][0]["id"]}, "edge_review action=reject"),
        ("/ui/review/retention/protect", {"thought_id": thought_id}, "retention_review action=protect"),
        ("/ui/review/retention/delete", {"thought_id": thought_id}, "retention_review action=delete"),
        (f"/ui/thoughts/{thought_id}/archive", {}, "memory_supersede action=archive"),
    ]
    for path, data, call in posts:
        response = await ui.post(path, data={**data, "csrf": csrf})
        assert response.status_code == 403, (path, response.text)
        assert f"Forbidden: {call} needs the writer role; user &#39;rita&#39; is a reader" in response.text
    assert await proposal_status(writer, world["proposals"][0]["id"]) == "pending"


async def test_reject_batch_apply_and_rollback(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    world = await queue(writer)
    first, *others = [proposal["id"] for proposal in world["proposals"]]
    csrf = await signed_in(ui, app_context, "wes", Role.writer)

    rejected = await ui.post("/ui/review/edges/reject", data={"proposal_id": first, "csrf": csrf})
    assert rejected.status_code == 200 and "<strong>rejected</strong>" in rejected.text
    assert await proposal_status(writer, first) == "rejected"

    data = [("csrf", csrf), *[("proposal_ids", proposal_id) for proposal_id in others]]
    preview = await post(ui, "/ui/review/edges/apply-batch", data)
    assert preview.status_code == 200, preview.text
    assert "Preview: Apply the selected proposals" in preview.text and "dry_run" in preview.text
    fields = confirm_fields(preview.text)
    assert [value for name, value in fields if name == "proposal_ids"] == others
    done = await post(ui, "/ui/review/edges/apply-batch", fields)
    assert done.status_code == 200, done.text
    assert "accepted " + str(len(others)) in done.text
    assert {await proposal_status(writer, proposal_id) for proposal_id in others} == {"accepted"}

    accepted = await ui.get("/ui/review/edges", params={"status": "accepted"})
    run_id = re.search(r'name="run_id" value="([^"]+)"', accepted.text)
    assert run_id is not None
    preview = await ui.post("/ui/review/edges/rollback", data={"run_id": run_id[1], "csrf": csrf})
    assert preview.status_code == 200 and "would_revert" in preview.text
    done = await post(ui, "/ui/review/edges/rollback", confirm_fields(preview.text))
    assert done.status_code == 200 and "reverted " + str(len(others)) in done.text
    assert {await proposal_status(writer, proposal_id) for proposal_id in others} == {"rolled_back"}


async def retention_candidates(writer: ToolCaller, *contents: str) -> list[str]:
    project = (await writer.ok("memory_manage", {"action": "create", "name": "Old", "local_path": "/srv/old"})).item
    ids = []
    for content in contents:
        made = await writer.ok("memory_store", {"action": "create", "content": content, "cwd": "/srv/old"})
        ids.append(made.item["id"])
    await execute(
        writer,
        "UPDATE thought SET status = 'draft', importance = 0.05, created_at = now() - interval '90 days' "
        "WHERE project_id = :project",
        project=project["id"],
    )
    return ids


async def test_retention_list_protect_delete_and_compact(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    long = "An old draft with a long tail " + "x" * 300
    kept, deleted, first, second, _ = await retention_candidates(
        writer, "An old draft to keep", "An old draft to drop", "Old note one", "Old note two", long
    )
    csrf = await signed_in(ui, app_context, "wes", Role.writer)
    page = await ui.get("/ui/review/retention")
    assert page.status_code == 200 and "5 candidates." in page.text and "An old draft to drop" in page.text
    assert f">{long[:200]}</a>" in page.text and long[:201] not in page.text  # cut as the tool cuts it
    assert "<dt>project</dt><dd>Old</dd>" in page.text

    protected = await ui.post("/ui/review/retention/protect", data={"thought_id": kept, "csrf": csrf})
    assert protected.status_code == 200 and "Unprotect it" in protected.text
    assert "An old draft to keep" not in (await ui.get("/ui/review/retention")).text
    undone = await ui.post(
        "/ui/review/retention/protect", data={"thought_id": kept, "protected": "false", "csrf": csrf}
    )
    assert undone.status_code == 200 and "An old draft to keep" in (await ui.get("/ui/review/retention")).text
    assert (await ui.post("/ui/review/retention/protect", data={"thought_id": kept})).status_code == 403

    preview = await ui.post("/ui/review/retention/delete", data={"thought_id": deleted, "csrf": csrf})
    assert preview.status_code == 200 and "hard-delete it and its 0 edge(s)" in preview.text
    fields = confirm_fields(preview.text)
    assert await rows(writer, "SELECT 1 FROM thought WHERE id = :id", id=deleted)
    done = await post(ui, "/ui/review/retention/delete", fields)
    assert done.status_code == 303 and done.headers["location"] == "/ui/review/retention?done=deleted&n=1&failed=0"
    assert "Deleted 1 thought(s) for good." in (await ui.get(done.headers["location"])).text
    assert await rows(writer, "SELECT 1 FROM thought WHERE id = :id", id=deleted) == []
    assert (await post(ui, "/ui/review/retention/delete", fields)).status_code == 409

    data = [("csrf", csrf), ("source_ids", first), ("source_ids", second), ("summary_content", "Two old notes")]
    preview = await post(ui, "/ui/review/retention/compact", data)
    assert preview.status_code == 200 and "This action confirms without a token." in preview.text
    assert "the same source_ids and summary" in preview.text  # the contract's instruction, as it comes
    done = await post(ui, "/ui/review/retention/compact", confirm_fields(preview.text))
    assert done.status_code == 200 and "<strong>compacted</strong>" in done.text
    statuses = await rows(writer, "SELECT status::text AS s FROM thought WHERE id IN (:a, :b)", a=first, b=second)
    assert {row[0] for row in statuses} == {"archived"}


async def test_archive_and_merge_from_a_thought_page(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    made = [
        (await writer.ok("memory_store", {"action": "create", "content": content})).item["id"]
        for content in ("Staging deploys on Fridays", "Staging deploys happen on Fridays", "A thought to archive")
    ]
    source, target, archived = made
    csrf = await signed_in(ui, app_context, "wes", Role.writer)
    page = await ui.get(f"/ui/thoughts/{archived}")
    assert "Archive…" in page.text and f'href="/ui/thoughts/{archived}/pick?for=merge"' in page.text

    preview = await ui.post(f"/ui/thoughts/{archived}/archive", data={"csrf": csrf})
    assert preview.status_code == 200 and "would_archive" in preview.text
    fields = confirm_fields(preview.text)
    done = await post(ui, f"/ui/thoughts/{archived}/archive", fields)
    assert done.status_code == 200 and "<strong>executed</strong>" in done.text
    assert "Archive…" not in (await ui.get(f"/ui/thoughts/{archived}")).text
    replay = await post(ui, f"/ui/thoughts/{archived}/archive", fields)
    assert replay.status_code == 409 and "was already used" in replay.text

    preview = await ui.post(f"/ui/thoughts/{source}/merge", data={"csrf": csrf, "target_id": target})
    assert preview.status_code == 200 and "Preview: Merge this thought into another" in preview.text
    assert "source_archived" in preview.text
    done = await post(ui, f"/ui/thoughts/{source}/merge", confirm_fields(preview.text))
    assert done.status_code == 200 and "edges_transferred" in done.text
    status = await rows(writer, "SELECT status::text AS s FROM thought WHERE id = :id", id=source)
    assert status[0][0] == "archived"


async def test_operations_are_for_admins_only(ui: httpx2.AsyncClient, app_context: AppContext) -> None:  # noqa: F811
    csrf = await signed_in(ui, app_context, "wes", Role.writer)
    assert "/ui/admin/tokens" not in (await ui.get("/ui/search")).text
    for path in ("/ui/admin/health", "/ui/admin/tokens"):
        page = await ui.get(path)
        assert page.status_code == 403 and "need the admin role; user &#39;wes&#39; is a writer" in page.text
    for path in ("/ui/admin/health/fix", "/ui/admin/tokens/create"):
        response = await ui.post(path, data={"csrf": csrf, "user": "mallory", "role": "admin"})
        assert response.status_code == 403
    async with app_context.db.unit_of_work() as session:
        assert [row.user_name for row in await AuthService(session).list_tokens()] == ["wes"]


async def test_health_page_and_its_safe_fix(ui: httpx2.AsyncClient, app_context: AppContext, admin: ToolCaller) -> None:  # noqa: F811
    thought = (await admin.ok("memory_store", {"action": "create", "content": "A cluster left without members"})).item
    await execute(admin, "UPDATE thought SET is_cluster = true WHERE id = :id", id=thought["id"])
    csrf = await signed_in(ui, app_context, "ada", Role.admin)
    page = await ui.get("/ui/admin/health")
    assert page.status_code == 200 and "Health score <strong>" in page.text
    assert "<td>empty clusters</td><td>warning</td><td>1</td>" in page.text
    assert (await ui.post("/ui/admin/health/fix", data={})).status_code == 403  # no CSRF token
    fixed = await ui.post("/ui/admin/health/fix", data={"csrf": csrf})
    assert fixed.status_code == 200 and "Safe fixes applied" in fixed.text
    assert "<dt>empty clusters archived</dt><dd>1</dd>" in fixed.text
    audit = await rows(admin, "SELECT tool, action FROM audit_event WHERE action = 'health_fix'")
    assert [tuple(row) for row in audit] == [("api", "health_fix")]


async def test_tokens_create_once_revoke_and_rotate(ui: httpx2.AsyncClient, app_context: AppContext) -> None:  # noqa: F811
    csrf = await signed_in(ui, app_context, "ada", Role.admin)
    assert (await ui.post("/ui/admin/tokens/create", data={"user": "bob"})).status_code == 403

    created = await ui.post(
        "/ui/admin/tokens/create", data={"csrf": csrf, "user": "bob", "role": "reader", "label": "laptop"}
    )
    assert created.status_code == 200, created.text
    token = re.search(r'id="new-token" class="token" readonly value="(smt_[^"]+)"', created.text)
    assert token is not None
    assert created.headers["cache-control"] == "no-store"
    listing = await ui.get("/ui/admin/tokens")
    assert token[1] not in listing.text and "laptop" in listing.text  # shown once, never again
    async with app_context.db.unit_of_work() as session:
        principal = await AuthService(session).verify(token[1])
    assert principal is not None and principal.name == "bob" and principal.role is Role.reader

    bad = await ui.post(
        "/ui/admin/tokens/create",
        data={"csrf": csrf, "user": "bob", "role": "reader", "label": "desk", "expires": "yesterday"},
    )
    assert bad.status_code == 400 and "--expires" in html.unescape(bad.text)
    for kept in ('name="user" required autocomplete="off" value="bob"', '<option value="reader" selected>'):
        assert kept in bad.text, kept  # the form again with what was typed
    assert 'name="label" value="desk"' in bad.text and 'value="yesterday"' in bad.text

    async with app_context.db.unit_of_work() as session:
        [row] = [row for row in await AuthService(session).list_tokens() if row.user_name == "bob"]
    rotated = await ui.post("/ui/admin/tokens/rotate", data={"csrf": csrf, "confirmed": "yes", "token_id": str(row.id)})
    assert rotated.status_code == 200 and f"token {row.id} is revoked" in rotated.text
    successor = re.search(r'readonly value="(smt_[^"]+)"', rotated.text)
    assert successor is not None
    async with app_context.db.unit_of_work() as session:
        assert await AuthService(session).verify(token[1]) is None
        assert await AuthService(session).verify(successor[1]) is not None
        [new] = [r for r in await AuthService(session).list_tokens() if r.user_name == "bob" and not r.revoked_at]

    revoked = await ui.post("/ui/admin/tokens/revoke", data={"csrf": csrf, "confirmed": "yes", "token_id": str(new.id)})
    assert revoked.status_code == 200 and f"Token {new.id} revoked." in revoked.text
    again = await ui.post("/ui/admin/tokens/revoke", data={"csrf": csrf, "confirmed": "yes", "token_id": str(new.id)})
    assert again.status_code == 404 and "No active token" in again.text
    async with app_context.db.unit_of_work() as session:
        assert await AuthService(session).verify(successor[1]) is None
    audit = await rows(ToolCaller(app_context, principal), "SELECT action FROM audit_event WHERE tool = 'console'")
    assert sorted(row[0] for row in audit) == ["token_create", "token_revoke", "token_rotate"]


@pytest.mark.parametrize("settings", [{"auth": {"token_lifetime_days": 7}}], indirect=True)
async def test_created_and_rotated_tokens_last_the_configured_lifetime(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
) -> None:
    csrf = await signed_in(ui, app_context, "ada", Role.admin)
    created = await ui.post("/ui/admin/tokens/create", data={"csrf": csrf, "user": "bob", "role": "reader"})
    assert created.status_code == 200, created.text
    async with app_context.db.unit_of_work() as session:
        [row] = [row for row in await AuthService(session).list_tokens() if row.user_name == "bob"]
    rotated = await ui.post("/ui/admin/tokens/rotate", data={"csrf": csrf, "confirmed": "yes", "token_id": str(row.id)})
    assert rotated.status_code == 200, rotated.text
    async with app_context.db.unit_of_work() as session:
        bobs = [row for row in await AuthService(session).list_tokens() if row.user_name == "bob"]
    assert len(bobs) == 2
    for token in bobs:  # auth.token_lifetime_days from the settings, not a copy of its default (90)
        assert token.expires_at is not None
        assert abs(token.expires_at - token.created_at - timedelta(days=7)) < timedelta(minutes=1)


async def test_auth_mode_none_forms_carry_a_csrf_token_too(app_context: AppContext, writer: ToolCaller) -> None:
    thought = (await writer.ok("memory_store", {"action": "create", "content": "A local thought"})).item
    config = ConsoleConfig(SessionCodec(b"k" * 32, 3600), lambda: writer.principal)
    app = build_console(app_context, config)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE) as client:
        page = await client.get(f"/ui/thoughts/{thought['id']}")
        csrf = CSRF_FIELD.search(page.text)
        assert csrf is not None and csrf[1]
        path = f"/ui/thoughts/{thought['id']}/archive"
        assert (await client.post(path, data={"csrf": "forged"})).status_code == 403
        preview = await client.post(path, data={"csrf": csrf[1]})
        assert preview.status_code == 200 and "would_archive" in preview.text
        done = await post(client, path, confirm_fields(preview.text))
        assert done.status_code == 200 and "<strong>executed</strong>" in done.text
