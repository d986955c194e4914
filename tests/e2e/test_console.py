"""The web console in a real browser: Debian's Chromium, driven by Playwright, against `serve` under uvicorn.

Skips (with its reason) where /usr/bin/chromium or the playwright package is missing, so `make test` stays green
on such machines; CI installs Chromium (.ci/run). Any JavaScript error in the page fails the test, and a failing
test leaves a screenshot in its tmp_path (and in test-artifacts/ at the repository root).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.db.engine import Database
from app.db.models import Role
from app.db.repositories.projects import ProjectRepository
from app.services.admin.membership import MemberService
from app.services.admin.users import UserService
from app.services.auth.tokens import AuthService
from tests.support.browser import screenshot
from tests.support.helpers import ToolCaller
from tests.support.serving import serving


async def test_sign_in_search_thought_page_and_sign_out(
    browser: Any, database_url: str, clean_database: Database, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with serving(database_url, tmp_path) as (port, context):
        async with clean_database.unit_of_work() as session:
            token, principal = await AuthService(session).create_token("grace", Role.writer, "browser test")
        writer = ToolCaller(context, principal)
        stored = await writer.ok(
            "memory_store", {"action": "create", "content": "The billing service retries webhooks for 72 hours"}
        )
        thought_id = stored.item["id"]
        neighbour = await writer.ok(
            "memory_store", {"action": "create", "content": "Webhook retries back off exponentially up to an hour"}
        )
        neighbour_id = neighbour.item["id"]
        link = {"action": "link", "source_id": thought_id, "target_id": neighbour_id, "edge_type": "related"}
        await writer.ok("memory_store", link)

        page = await browser.new_page()
        errors: list[str] = []
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        base = f"http://127.0.0.1:{port}"
        try:
            await page.goto(f"{base}/ui/")
            assert page.url.startswith(f"{base}/ui/sign-in")
            await page.get_by_label("API token").fill("smt_wrong")
            await page.get_by_role("button", name="Sign in with token").click()
            assert "was not accepted" in await page.get_by_role("alert").inner_text()
            # The refusal answers 401, which Chromium logs as a failed load: expected here, and nothing else.
            assert all("401" in error for error in errors), errors
            errors.clear()

            await page.get_by_label("API token").fill(token)
            await page.keyboard.press("Enter")  # the form works from the keyboard
            await page.wait_for_url(f"{base}/ui/")
            assert "Signed in as grace (writer)" in await page.locator("header").inner_text()

            await page.get_by_label("Query").fill("billing webhooks retries")
            await page.get_by_role("button", name="Search").click()
            link = page.get_by_role("link", name="The billing service retries webhooks for 72 hours")
            await link.wait_for()
            assert "embedding" in await page.locator(".hit-meta").first.inner_text()  # the match, at a glance
            await page.get_by_text("Scores", exact=True).first.click()  # every score one click away
            assert "match" in await page.locator(".scores").first.inner_text()

            await link.click()
            await page.wait_for_url(f"{base}/ui/thoughts/{thought_id}")
            assert "The billing service retries webhooks for 72 hours" in await page.locator(".content").inner_text()
            assert await page.get_by_role("heading", name="Supersession history").is_visible()

            # The neighbourhood graph: Cytoscape.js draws on canvases; a click on a node walks to that thought.
            await page.locator("#graph[data-ready=true]").wait_for()
            assert await page.locator("#graph canvas").count() > 0
            assert await page.evaluate("window.synaptoGraph.cy.nodes().length") == 2
            assert "related (solid blue line)" in await page.locator(".legend").inner_text()
            point = await page.evaluate(f"window.synaptoGraph.position({neighbour_id!r})")
            await page.mouse.click(point["x"], point["y"])
            await page.wait_for_url(f"{base}/ui/thoughts/{neighbour_id}")
            assert "back off exponentially" in await page.locator(".content").inner_text()
            # The list the graph mirrors is the keyboard path: the link back, reached by Tab, opened by Enter.
            back = page.locator(f'.graph-nodes a[data-node="{thought_id}"]')
            await back.focus()
            assert await page.evaluate(
                f"window.synaptoGraph.cy.getElementById({thought_id!r}).hasClass('focused')"
            )  # the graph marks the focused link's node
            await page.keyboard.press("Enter")
            await page.wait_for_url(f"{base}/ui/thoughts/{thought_id}")
            await page.locator("#graph[data-ready=true]").wait_for()

            await page.get_by_role("button", name="Sign out").click()
            await page.wait_for_url(f"{base}/ui/sign-in")
            await page.goto(f"{base}/ui/search")
            assert page.url.startswith(f"{base}/ui/sign-in")  # the session is gone
            assert errors == [], f"JavaScript errors in the console: {errors}"
        except BaseException:
            await screenshot(page, tmp_path, request.node.name)
            raise
        finally:
            await page.close()


async def test_apply_an_edge_proposal_through_its_preview_and_create_and_revoke_a_token(
    browser: Any, database_url: str, clean_database: Database, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with serving(database_url, tmp_path) as (port, context):
        async with clean_database.unit_of_work() as session:
            token, principal = await AuthService(session).create_token("ada", Role.admin, "browser test")
        admin = ToolCaller(context, principal)
        await admin.ok("memory_manage", {"action": "create", "name": "Queue", "local_path": "/srv/queue"})
        for content in (
            "The billing service retries a failed card payment three times before giving up",
            "Card payments that fail get three retries in the billing service",
            "The billing service retries failed card payments three times",
        ):
            stored = await admin.ok("memory_store", {"action": "create", "content": content, "cwd": "/srv/queue"})
        await admin.ok("edge_review", {"action": "enqueue", "thought_id": stored.item["id"]})
        pending = (await admin.ok("edge_review", {"action": "list", "status": "pending"})).items
        proposal_id = pending[0]["id"]

        page = await browser.new_page()
        errors: list[str] = []
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        base = f"http://127.0.0.1:{port}"
        try:
            await page.goto(f"{base}/ui/sign-in")
            await page.get_by_label("API token").fill(token)
            await page.get_by_role("button", name="Sign in with token").click()
            await page.wait_for_url(f"{base}/ui/")

            await page.get_by_role("link", name="Edge review").click()
            await page.wait_for_url(f"{base}/ui/review/edges")
            assert "The billing service retries" in await page.locator(".proposals").inner_text()
            await page.get_by_role("button", name=f"Apply proposal {proposal_id} (preview first)").click()
            await page.get_by_role("heading", name="Preview: Apply an edge proposal").wait_for()
            assert "-[" in await page.locator(".consequence").first.inner_text()  # the preview's `would`
            listed = (await admin.ok("edge_review", {"action": "list", "status": "pending"})).items
            assert proposal_id in [row["id"] for row in listed]  # previewing wrote nothing
            await page.get_by_role("button", name="Confirm: apply an edge proposal").click()
            # back on the queue with its one-line result, as the selected actions come back (issue 25 item 5)
            await page.wait_for_url(f"{base}/ui/review/edges?done=applied&n=1&failed=0")
            assert "Applied 1 proposal(s)." in await page.get_by_role("status").inner_text()
            accepted = (await admin.ok("edge_review", {"action": "list", "status": "accepted"})).items
            assert [row["id"] for row in accepted] == [proposal_id]

            await page.get_by_role("link", name="Tokens").click()
            await page.wait_for_url(f"{base}/ui/admin/tokens")
            await page.get_by_label("User").fill("bob")
            await page.get_by_label("Role").select_option("reader")
            await page.get_by_label("Label").fill("e2e laptop")
            await page.get_by_role("button", name="Create token").click()
            created = await page.get_by_label("New token").input_value()
            assert created.startswith("smt_")
            async with clean_database.unit_of_work() as session:
                assert await AuthService(session).verify(created) is not None
            row = page.get_by_role("row").filter(has_text="e2e laptop")
            await row.get_by_role("button", name="Revoke").click()
            await page.get_by_role("heading", name="Revoke this token?").wait_for()  # asked first, nothing done
            async with clean_database.unit_of_work() as session:
                assert await AuthService(session).verify(created) is not None
            await page.get_by_role("button", name="Yes, revoke it").click()
            await page.get_by_role("status").wait_for()
            assert "revoked" in await page.get_by_role("row").filter(has_text="e2e laptop").inner_text()
            assert created not in await page.content()  # shown once only
            async with clean_database.unit_of_work() as session:
                assert await AuthService(session).verify(created) is None
            assert errors == [], f"JavaScript errors in the console: {errors}"
        except BaseException:
            await screenshot(page, tmp_path, request.node.name)
            raise
        finally:
            await page.close()


async def test_an_admin_changes_a_role_and_memberships_and_the_user_signs_in_with_a_password(
    browser: Any, database_url: str, clean_database: Database, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with serving(database_url, tmp_path) as (port, _context):
        async with clean_database.unit_of_work() as session:
            token, _ = await AuthService(session).create_token("ada", Role.admin, "browser test")
            await ProjectRepository(session).insert("Atlas", "/srv/atlas", None)  # open to everyone, no member
        page = await browser.new_page()
        errors: list[str] = []
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        base = f"http://127.0.0.1:{port}"
        try:
            await page.goto(f"{base}/ui/sign-in")
            await page.get_by_label("API token").fill(token)
            await page.get_by_role("button", name="Sign in with token").click()
            await page.wait_for_url(f"{base}/ui/")

            await page.get_by_role("link", name="Users").click()
            await page.wait_for_url(f"{base}/ui/admin/users")
            await page.get_by_label("New user").fill("pat")
            await page.get_by_label("Role", exact=True).select_option("reader")
            await page.get_by_role("button", name="Create user").click()
            assert "User pat created (reader)." in await page.get_by_role("status").inner_text()

            await page.get_by_label("Role of pat", exact=True).select_option("writer")
            await page.get_by_role("button", name="Change the role of pat").click()
            assert "pat now has the writer role (was reader)." in await page.get_by_role("status").inner_text()
            await page.get_by_label("New password for pat").fill("correct horse battery staple")
            await page.keyboard.press("Enter")  # the row's form submits from the keyboard
            await page.get_by_role("status").filter(has_text="The password of pat is set").wait_for()
            row = page.get_by_role("row").filter(has=page.get_by_role("rowheader", name="pat", exact=True))
            assert (await row.get_by_role("cell").all_inner_texts())[:2] == ["writer", "set"]
            async with clean_database.unit_of_work() as session:
                users = {user.name: user for user in await UserService(session).list_users()}
            assert users["pat"].role is Role.writer and users["pat"].has_password

            # The memberships page: pat a reader of Atlas, ada its admin, then Atlas closed to all but them.
            await page.get_by_role("link", name="Members").click()
            await page.wait_for_url(f"{base}/ui/admin/members")
            atlas = page.get_by_role("region", name="Atlas")
            for user, role in (("pat", "reader"), ("ada", "admin")):
                await atlas.get_by_label("User", exact=True).select_option(user)
                await atlas.get_by_label("Role in Atlas").select_option(role)
                await atlas.get_by_role("button", name="Add or change a member of Atlas").click()
                added = f"'{user}' is now a {role} of project 'Atlas'."
                await page.get_by_role("status").filter(has_text=added).wait_for()
            await atlas.get_by_role("button", name="Close Atlas").click()
            await page.get_by_role("button", name="Yes, close it").click()  # after the confirm page
            closed = "Project 'Atlas' is closed: only its members see it."
            await page.get_by_role("status").filter(has_text=closed).wait_for()
            async with clean_database.unit_of_work() as session:
                rows = await MemberService(session).list("Atlas")
            assert {(row.user_name, row.role) for row in rows} == {("ada", Role.admin), ("pat", Role.reader)}
            # Lowering ada, Atlas's last admin, is refused: the reason on the page, ada and writer still chosen.
            await atlas.get_by_label("User", exact=True).select_option("ada")
            await atlas.get_by_label("Role in Atlas").select_option("writer")
            await atlas.get_by_role("button", name="Add or change a member of Atlas").click()
            refused = "Refused: making 'ada' a writer of project 'Atlas' would leave it with no admin"
            await page.get_by_role("alert").filter(has_text=refused).wait_for()
            assert all("409" in error for error in errors), errors  # Chromium logs the refusal's 409 load
            errors.clear()
            assert await atlas.get_by_label("User", exact=True).input_value() == "ada"
            assert await atlas.get_by_label("Role in Atlas").input_value() == "writer"
            async with clean_database.unit_of_work() as session:
                rows = await MemberService(session).list("Atlas")
            assert {(row.user_name, row.role) for row in rows} == {("ada", Role.admin), ("pat", Role.reader)}

            await page.get_by_role("button", name="Sign out").click()
            await page.wait_for_url(f"{base}/ui/sign-in")
            await page.get_by_label("User name").fill("pat")
            await page.get_by_label("Password", exact=True).fill("not pat's password")
            await page.get_by_role("button", name="Sign in with password").click()
            assert "were not accepted" in await page.get_by_role("alert").inner_text()
            assert all("401" in error for error in errors), errors  # Chromium logs the refusal's 401 load
            errors.clear()
            assert await page.get_by_label("User name").input_value() == "pat"  # kept for the next try
            await page.get_by_label("Password", exact=True).fill("correct horse battery staple")
            await page.get_by_role("button", name="Sign in with password").click()
            await page.wait_for_url(f"{base}/ui/")
            assert "Signed in as pat (writer)" in await page.locator("header").inner_text()
            assert await page.get_by_role("link", name="Users").count() == 0  # a writer sees no admin pages
            assert errors == [], f"JavaScript errors in the console: {errors}"
        except BaseException:
            await screenshot(page, tmp_path, request.node.name)
            raise
        finally:
            await page.close()
