"""Curating in a real browser (Debian's Chromium, Playwright, `serve` under uvicorn): create a thought, link it to
another found with the thought picker, edit it, archive it through the preview and unarchive it; and triage the
edge queue from the keyboard — every step by its visible labels, with no JavaScript error on any page. Skips where
Chromium or playwright is missing."""

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
QUEUE = [
    "The billing service retries a failed card payment three times before giving up",
    "Card payments that fail get three retries in the billing service",
    "Failed card payments are retried three times by the billing service",
    "The billing service retries failed card payments three times",
]


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


async def test_keyboard_triage_selects_rejects_and_stays_on_the_queue(
    browser: Any, database_url: str, clean_database: Database, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with serving(database_url, tmp_path) as (port, context):
        async with clean_database.unit_of_work() as session:
            token, principal = await AuthService(session).create_token("grace", Role.writer, "browser test")
        writer = ToolCaller(context, principal)
        for content in QUEUE:
            subject = (await writer.ok("memory_store", {"action": "create", "content": content})).item
        await writer.ok("edge_review", {"action": "enqueue", "thought_id": subject["id"]})
        pending = len((await writer.ok("edge_review", {"action": "list", "status": "pending"})).items)
        assert pending >= 3

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
            await page.goto(f"{base}/ui/review/edges")
            assert "j / k next / previous item" in await page.locator("#triage-keys").inner_text()
            for key in ("j", "x", "j", "x"):  # the first two proposals, selected from the keyboard
                await page.keyboard.press(key)
            assert await page.locator("input[name=proposal_ids]:checked").count() == 2
            await page.get_by_role("button", name="Reject selected…").click()
            await page.get_by_role("heading", name="Reject 2 selected proposal(s)?").wait_for()
            await page.get_by_role("button", name="Yes, reject 2").click()
            await page.get_by_text("Rejected 2 proposal(s).").wait_for()
            assert page.url.startswith(f"{base}/ui/review/edges?")  # back on the queue
            await page.keyboard.press("j")
            await page.keyboard.press("r")  # the next one, rejected in one step
            await page.get_by_text("Rejected 1 proposal(s).").wait_for()
            left = (await writer.ok("edge_review", {"action": "list", "status": "pending"})).items
            assert len(left) == pending - 3
            assert errors == [], f"JavaScript errors in the console: {errors}"
        except BaseException:
            await screenshot(page, tmp_path, request.node.name)
            raise
        finally:
            await page.close()
