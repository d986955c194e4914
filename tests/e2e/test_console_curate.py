"""Curating in a real browser (Debian's Chromium, Playwright, `serve` under uvicorn): create a thought, link it to
another found with the thought picker, edit it, archive it through the preview and unarchive it — every step by
its visible labels, with no JavaScript error on any page. Skips where Chromium or playwright is missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.db.engine import Database
from app.db.models import Role
from app.services.auth.tokens import AuthService
from tests.support.browser import screenshot
from tests.support.helpers import ToolCaller
from tests.support.serving import serving

OTHER = "Webhook retries back off exponentially up to an hour"


async def test_create_link_with_the_picker_edit_archive_and_unarchive(
    browser: Any, database_url: str, clean_database: Database, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with serving(database_url, tmp_path) as (port, context):
        async with clean_database.unit_of_work() as session:
            token, principal = await AuthService(session).create_token("grace", Role.writer, "browser test")
        writer = ToolCaller(context, principal)
        other_id = (await writer.ok("memory_store", {"action": "create", "content": OTHER})).item["id"]

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

            await page.get_by_role("link", name="New thought").click()
            await page.wait_for_url(f"{base}/ui/thoughts/new")
            await page.get_by_label("Content", exact=True).fill("The billing service retries webhooks for 72 hours")
            await page.get_by_label("Tags (comma-separated, optional)").fill("billing, webhooks")
            await page.get_by_role("button", name="Create thought").click()
            await page.get_by_text("Thought created.").wait_for()
            thought_url = page.url.split("?")[0]
            thought_id = thought_url.rsplit("/", 1)[1]
            assert "webhooks" in await page.locator(".facts").inner_text()

            await page.get_by_role("link", name="Link to another thought…").click()
            await page.get_by_label("Find the other thought by its content").fill("webhook back off")
            await page.get_by_role("button", name="Find").click()
            await page.get_by_label(OTHER).check()  # the picker offers the thought by its content
            await page.get_by_label("Edge type").select_option("supports")
            await page.get_by_role("button", name="Link", exact=True).click()
            await page.get_by_text("Edge created.").wait_for()
            out = page.locator("section[aria-labelledby=out-heading]")
            assert "supports" in await out.inner_text() and OTHER in await out.inner_text()

            await page.get_by_role("link", name="Edit content and tags").click()
            await page.get_by_label("Content", exact=True).fill("The billing service retries webhooks for 48 hours")
            await page.get_by_role("button", name="Save").click()
            await page.get_by_text("Content and tags saved.").wait_for()
            assert "48 hours" in await page.locator(".content").inner_text()

            await page.get_by_role("button", name="Archive…").click()
            await page.get_by_role("heading", name="Preview: Archive a thought").wait_for()
            await page.get_by_role("button", name="Confirm: archive a thought").click()
            await page.get_by_role("link", name="Back").click()
            await page.wait_for_url(thought_url)
            assert "archived" in await page.locator(".facts").inner_text()

            await page.get_by_role("button", name="Unarchive").click()
            await page.get_by_text("Thought unarchived: it is active again.").wait_for()
            assert "active" in await page.locator(".facts").inner_text()
            assert await writer.ok("memory_recall", {"action": "get", "thought_id": thought_id})
            assert errors == [], f"JavaScript errors in the console: {errors}"
            assert other_id
        except BaseException:
            await screenshot(page, tmp_path, request.node.name)
            raise
        finally:
            await page.close()
