"""The console's memberships page (/ui/admin/members), in-process on a real PostgreSQL: an admin sees the projects
they see with their members, roles and whether they are open; adds a member, changes a role, removes one, opens and
closes a project through MemberService (each audited); only an admin *in the project* may change its members, the
default project stays open, no change may leave a project with no admin who can reach it, and every refused post
writes nothing."""

from __future__ import annotations

import html
import re

import httpx2
import pytest
from markupsafe import escape

from app.db.models import Role
from app.services.admin.membership import MemberService
from app.services.context import AppContext
from tests.support.console import audit, signed_in, ui  # noqa: F401 (fixture)
from tests.support.helpers import ToolCaller
from tests.support.membership import caller, close, vault
from tests.support.team import changed_tables, table_digests


async def memberships(context: AppContext) -> set[tuple[str, str | None, str]]:
    """Every membership as (project, user or None for everyone, role), read as the operator (no caller)."""
    async with context.db.unit_of_work() as session:
        return {(row.project_name, row.user_name, row.role.value) for row in await MemberService(session).list(None)}


def text_of(page: str) -> str:
    words = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))
    return html.unescape(re.sub(r" ([.:])", r"\1", words))


async def project_id(context: AppContext, name: str) -> str:
    async with context.db.unit_of_work() as session:
        return str((await MemberService(session).project(name)).id)


@pytest.fixture
async def owner(app_context: AppContext) -> ToolCaller:
    """A global admin who creates the projects (their admin member), and the default project through a write."""
    owner = await caller(app_context, "owner")
    await owner.ok("memory_store", {"action": "create", "content": "A thought of the open default project"})
    return owner


async def test_the_page_lists_the_projects_the_admin_sees_with_members_and_roles(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    owner: ToolCaller,
) -> None:
    await vault(owner)
    await vault(owner, "Hidden")
    await caller(app_context, "nora", Role.writer)
    await close(app_context, "Hidden", {"nora": Role.writer})  # closed; ada is no member of it
    await close(app_context, "Vault", {"nora": Role.admin})
    await owner.ok("memory_manage", {"action": "create", "name": "Open", "local_path": "/srv/open"})
    await signed_in(ui, app_context, "ada", Role.admin)
    async with app_context.db.unit_of_work() as session:
        await MemberService(session).add("Vault", "ada", Role.admin)

    page = await ui.get("/ui/admin/members")
    assert page.status_code == 200
    shown = text_of(page.text)
    assert "Hidden" not in shown  # closed, and ada is not a member: it does not exist for her
    assert '<a href="/ui/admin/members">Members</a>' in page.text
    assert "default default Open to everyone as admin." in shown
    assert "Open Open to everyone as admin." in shown
    assert "Vault Closed: only its members see it." in shown
    # Vault's rows: everyone (none), then the members by name — role there, global role, effective role.
    vault_table = shown[shown.index("Members of Vault") :]
    assert "everyone none (closed) each user's none" in vault_table
    assert "ada admin admin admin" in vault_table
    assert "nora admin writer writer" in vault_table  # the global role is the ceiling
    assert "owner admin admin admin" in vault_table
    # Every form field is labelled: selects by aria-label in the rows, by <label for> in the add form.
    assert 'aria-label="Role of nora in Vault"' in page.text
    assert re.search(r'<label for="add-user-\d+">User</label>', page.text)
    assert 'aria-label="Close Vault"' not in page.text and 'aria-label="Open Vault to everyone"' in page.text
    assert 'aria-label="Close default"' not in page.text and "The default project stays open." in page.text


@pytest.fixture
async def ada_on_vault(ui: httpx2.AsyncClient, app_context: AppContext, owner: ToolCaller) -> tuple[str, str]:  # noqa: F811
    """The Vault (open to everyone as admin), nora a writer, ada a signed-in global admin: her CSRF token and the
    Vault's id."""
    await vault(owner)
    await caller(app_context, "nora", Role.writer)
    return await signed_in(ui, app_context, "ada", Role.admin), await project_id(app_context, "Vault")


async def test_add_change_remove_open_and_close_each_audited(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    ada_on_vault: tuple[str, str],
) -> None:
    csrf, vault_id = ada_on_vault

    async def send(path: str, **fields: str) -> httpx2.Response:
        return await ui.post(
            f"/ui/admin/members/{path}", data={"csrf": csrf, "confirmed": "yes", "project": vault_id, **fields}
        )

    added = await send("add", user="nora", role="writer")
    assert added.status_code == 200 and "'nora' is now a writer of project 'Vault'." in text_of(added.text)
    changed = await send("add", user="nora", role="reader")
    assert "'nora' is now a reader of project 'Vault' (was writer)." in text_of(changed.text)
    same = await send("add", user="nora", role="reader")
    assert "'nora' already is a reader of project 'Vault'." in text_of(same.text)  # nothing to audit
    await send("add", user="ada", role="admin")
    closed = await send("close")
    assert closed.status_code == 200 and "Project 'Vault' is closed: only its members see it." in text_of(closed.text)
    assert ("Vault", None, "admin") not in await memberships(app_context)
    opened = await send("open", role="reader")
    assert "Project 'Vault' is open to everyone as reader." in text_of(opened.text)
    lowered = await send("open", role="writer")
    assert "Project 'Vault' is open to everyone as writer (was reader)." in text_of(lowered.text)
    removed = await send("remove", user="nora")
    assert "'nora' is no longer a member of project 'Vault'." in text_of(removed.text)

    assert {row for row in await memberships(app_context) if row[0] == "Vault"} == {
        ("Vault", None, "writer"),
        ("Vault", "ada", "admin"),
        ("Vault", "owner", "admin"),
    }
    common = {"project_id": vault_id, "project": "Vault"}
    assert await audit(app_context) == [
        ("member_add", {**common, "user": "nora", "from": None, "to": "writer"}),
        ("member_role", {**common, "user": "nora", "from": "writer", "to": "reader"}),
        ("member_add", {**common, "user": "ada", "from": None, "to": "admin"}),
        ("member_close", {**common, "user": None, "from": "admin", "to": None}),
        ("member_open", {**common, "user": None, "from": None, "to": "reader"}),
        ("member_open", {**common, "user": None, "from": "reader", "to": "writer"}),
        ("member_remove", {**common, "user": "nora", "from": "reader", "to": None}),
    ]


async def test_closing_a_project_the_admin_is_no_member_of_says_it_left_the_page(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    owner: ToolCaller,
) -> None:
    await vault(owner)  # open to everyone as admin: ada is an admin there, though no member
    csrf = await signed_in(ui, app_context, "ada", Role.admin)
    closed = await ui.post(
        "/ui/admin/members/close",
        data={"csrf": csrf, "confirmed": "yes", "project": await project_id(app_context, "Vault")},
    )
    shown = text_of(closed.text)
    assert closed.status_code == 200
    assert "Project 'Vault' is closed: only its members see it. You are not a member of it" in shown
    assert "Members of Vault" not in shown


async def test_only_an_admin_in_the_project_changes_its_members_and_a_refusal_writes_nothing(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    owner: ToolCaller,
) -> None:
    await vault(owner)
    await caller(app_context, "nora", Role.writer)
    csrf = await signed_in(ui, app_context, "ada", Role.admin)
    await close(app_context, "Vault", {"ada": Role.writer})  # a global admin, but a writer there
    vault_id = await project_id(app_context, "Vault")
    before = await memberships(app_context)

    page = await ui.get("/ui/admin/members")
    assert "You are not an admin of this project: only its admins change its members." in text_of(page.text)
    assert 'aria-label="Add or change a member of Vault"' not in page.text  # no forms where they would be refused
    refusal = "Forbidden: changing a project's members needs the admin role; user 'ada' is a writer"
    for path, fields in [
        ("add", {"user": "nora", "role": "writer"}),
        ("add", {"user": "ada", "role": "admin"}),  # not even herself
        ("remove", {"user": "owner"}),
        ("open", {"role": "reader"}),
    ]:
        refused = await ui.post(
            f"/ui/admin/members/{path}", data={"csrf": csrf, "confirmed": "yes", "project": vault_id, **fields}
        )
        assert refused.status_code == 403, path
        assert '<p class="error" role="alert">' in refused.text and refusal in text_of(refused.text), path
    assert await memberships(app_context) == before
    assert await audit(app_context) == []


async def test_a_writer_gets_the_admin_refusal_page(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    owner: ToolCaller,
) -> None:
    await vault(owner)
    csrf = await signed_in(ui, app_context, "wendy", Role.writer)
    page = await ui.get("/ui/admin/members")
    assert page.status_code == 403
    assert "Forbidden: the operations pages need the admin role; user 'wendy' is a writer." in text_of(page.text)
    before = await memberships(app_context)
    vault_id = await project_id(app_context, "Vault")
    refused = await ui.post("/ui/admin/members/close", data={"csrf": csrf, "confirmed": "yes", "project": vault_id})
    assert refused.status_code == 403
    assert await memberships(app_context) == before


async def test_a_form_without_its_csrf_token_is_refused_unread(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    owner: ToolCaller,
) -> None:
    await vault(owner)
    await caller(app_context, "nora", Role.writer)
    await signed_in(ui, app_context, "ada", Role.admin)
    vault_id = await project_id(app_context, "Vault")
    before = await memberships(app_context)
    for path, fields in [
        ("add", {"user": "nora", "role": "writer"}),
        ("remove", {"user": "owner"}),
        ("open", {"role": "reader"}),
        ("close", {}),
    ]:
        for csrf in ("", "forged"):
            refused = await ui.post(
                f"/ui/admin/members/{path}", data={"csrf": csrf, "confirmed": "yes", "project": vault_id, **fields}
            )
            assert refused.status_code == 403 and "CSRF token" in refused.text, path
    assert await memberships(app_context) == before
    assert await audit(app_context) == []


async def test_the_default_project_cannot_be_closed(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    owner: ToolCaller,
) -> None:
    csrf = await signed_in(ui, app_context, "ada", Role.admin)
    before = await memberships(app_context)
    refused = await ui.post(
        "/ui/admin/members/close",
        data={"csrf": csrf, "confirmed": "yes", "project": await project_id(app_context, "default")},
    )
    assert refused.status_code == 400
    assert (
        "The default project stays open to everyone: it receives the writes without a cwd and the thoughts of "
        "deleted projects"
    ) in text_of(refused.text)
    assert await memberships(app_context) == before and await audit(app_context) == []


async def test_no_change_may_leave_a_project_with_no_admin_who_can_reach_it(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    owner: ToolCaller,
) -> None:
    walt = await caller(app_context, "walt", Role.writer)
    await walt.ok("memory_manage", {"action": "create", "name": "Walt's", "local_path": "/srv/walts"})
    csrf = await signed_in(ui, app_context, "ada", Role.admin)
    walts = await project_id(app_context, "Walt's")
    before = await memberships(app_context)
    assert ("Walt's", "walt", "admin") in before  # its creator, an admin there but a writer globally

    async def send(path: str, **fields: str) -> httpx2.Response:
        return await ui.post(
            f"/ui/admin/members/{path}", data={"csrf": csrf, "confirmed": "yes", "project": walts, **fields}
        )

    reason = (
        "would leave it with no admin who can reach it and change its members (a member with the admin role whose "
        "global role is admin, or everyone as admin). Make such a user an admin member first."
    )
    closing = await send("close")
    assert closing.status_code == 409
    assert f'Refused: closing project "Walt\'s" {reason}' in text_of(closing.text)
    lowering = await send("open", role="writer")  # open, but nobody could change its members any more
    assert lowering.status_code == 409
    assert f'Refused: opening project "Walt\'s" to everyone as writer {reason}' in text_of(lowering.text)
    assert await memberships(app_context) == before and await audit(app_context) == []

    # With a global admin as its admin member, it may close; that member is then its last way in.
    assert (await send("add", user="ada", role="admin")).status_code == 200
    assert (await send("close")).status_code == 200
    for path, fields, change in [
        ("remove", {"user": "ada"}, "removing 'ada' from project \"Walt's\""),
        ("add", {"user": "ada", "role": "writer"}, "making 'ada' a writer of project \"Walt's\""),
    ]:
        refused = await send(path, **fields)
        assert refused.status_code == 409 and f"Refused: {change} {reason}" in text_of(refused.text), path
    # The refused role change is about no one field: the page says it, the add form keeps both choices.
    form = add_form(refused.text, "Walt's")
    assert '<option value="ada" selected>' in form and '<option value="writer" selected>' in form
    assert "aria-invalid" not in form
    assert ("Walt's", "ada", "admin") in await memberships(app_context)
    assert [action for action, _ in await audit(app_context)] == ["member_add", "member_close"]


async def test_a_project_the_admin_cannot_see_is_not_found(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    owner: ToolCaller,
) -> None:
    await vault(owner)
    await caller(app_context, "nora", Role.writer)
    await close(app_context, "Vault", {})
    csrf = await signed_in(ui, app_context, "ada", Role.admin)
    vault_id = await project_id(app_context, "Vault")
    before = await memberships(app_context)
    page = await ui.get("/ui/admin/members")
    assert "Vault" not in text_of(page.text) and vault_id not in page.text
    for reference in (vault_id, "Vault"):
        refused = await ui.post(
            "/ui/admin/members/add", data={"csrf": csrf, "project": reference, "user": "ada", "role": "admin"}
        )
        assert refused.status_code == 404
        assert f"No project {reference!r} (by id or name; see memory_manage action=list)" in text_of(refused.text)
    assert await memberships(app_context) == before and await audit(app_context) == []


def add_form(page: str, project: str) -> str:
    """The project's add form, as the page renders it."""
    start = page.index(f'aria-label="Add a member to {escape(project)}"')
    return page[start : page.index("</form>", start)]


async def test_a_refused_add_keeps_what_was_chosen_with_the_refusal_beside_its_field(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    ada_on_vault: tuple[str, str],
) -> None:
    csrf, vault_id = ada_on_vault
    before = await table_digests(app_context)

    # (user, role) posted → status, the field refused and its words, what stays chosen, the page's message (the
    # refusal's own text, as before). A role no option offers leaves the form's default, writer.
    cases = [
        (("nora", "owner"), 400, "role", "Choose one of admin, writer, reader", ("nora", "writer")),
        (("zed", "reader"), 404, "user", "No user &#39;zed&#39;", ("", "reader")),
        (("", "admin"), 400, "user", "Choose a user", ("", "admin")),
    ]
    messages = [
        "role: one of admin, writer, reader (not 'owner')",
        "No user 'zed' (by id or name): create one with `synaptomind token create --user NAME --role …`",
        "Choose a user.",
    ]
    for ((user, role), status, field, words, (kept_user, kept_role)), message in zip(cases, messages, strict=True):
        refused = await ui.post(
            "/ui/admin/members/add", data={"csrf": csrf, "project": vault_id, "user": user, "role": role}
        )
        assert refused.status_code == status, user
        assert message in text_of(refused.text), user
        form = add_form(refused.text, "Vault")
        assert f'<p id="{field}-error" class="error" role="alert">{words}</p>' in form, user
        assert f'aria-invalid="true" aria-describedby="{field}-error"' in form, user
        other_field = "user" if field == "role" else "role"
        assert f"{other_field}-error" not in form, user
        assert (f'<option value="{kept_user}" selected>' in form) is bool(kept_user), user
        assert f'<option value="{kept_role}" selected>' in form, user

    # Only the posted project's form is refilled: the default project's keeps its defaults, with no error.
    other = add_form(refused.text, "default")
    assert '<option value="writer" selected>' in other and "selected>" not in other.replace(
        '<option value="writer" selected>', ""
    )
    assert "error" not in other
    assert changed_tables(before, await table_digests(app_context)) == []  # no member row, no audit event
