"""The console read by a person, in Chromium (as tests/e2e/test_console.py drives it): legible graph labels with
their full text on focus, a keyboard walk through the nodes, the project graph from the navigation, the styled
404 page, thoughts named by their content with dates, and a phone (390×844) without page-wide horizontal scroll.

Each test leaves screenshots of the pages it checks in its tmp_path; with CONSOLE_DOCS_SCREENSHOTS=1 it also
writes them to docs/ (the screenshots docs/CONSOLE.md shows), so a normal run never rewrites the docs.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.db.engine import Database
from app.db.models import Role
from app.services.auth.tokens import AuthService
from tests.support.browser import screenshot
from tests.support.helpers import ToolCaller
from tests.support.serving import serving

DOCS = Path(__file__).resolve().parents[2] / "docs"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}
HUB = "Card payments that fail are retried three times by the billing service before the order is cancelled"
TOPICS = [
    "Webhook deliveries back off exponentially up to an hour",
    "The ledger closes each day at midnight UTC and reconciles",
    "Refunds over 500 euros need a second approver in finance",
    "Stripe is the only card processor we use in production",
    "Chargebacks open a ticket in the disputes queue automatically",
    "Invoices are numbered per country and never reused",
    "The retry worker runs every five minutes on two replicas",
    "Failed payments email the customer after the second attempt",
    "Dunning stops after thirty days and suspends the account",
    "Payment method updates retry the last failed charge at once",
    "Currency conversion uses the rate fixed at checkout time",
    "The billing database is backed up every hour to cold storage",
    "Tax rates come from the tax service, cached for one day",
    "Only finance admins can issue credit notes by hand",
    "Card numbers never reach our servers: the processor tokenises",
    "The order service listens for payment events on the bus",
    "A cancelled order releases its stock reservation within a minute",
    "Payment retries are idempotent by the order's payment key",
]
EDGE_TYPES = ["related", "supports", "depends_on", "references"]


@pytest.fixture
async def world(database_url: str, clean_database: Database, tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """`serve` with project Billing: a hub thought linked to 18 others (19 nodes, four edge types), an admin."""
    async with serving(database_url, tmp_path) as (port, context):
        async with clean_database.unit_of_work() as session:
            token, principal = await AuthService(session).create_token("ada", Role.admin, "browser test")
            for name, role in (("bob", Role.writer), ("rita", Role.reader)):
                await AuthService(session).create_token(name, role, f"{name}'s laptop")
        admin = ToolCaller(context, principal)
        project = await admin.ok("memory_manage", {"action": "create", "name": "Billing", "local_path": "/srv/bill"})

        async def store(content: str, tags: list[str]) -> str:
            arguments = {"action": "create", "content": content, "cwd": "/srv/bill", "tags": tags}
            stored = await admin.ok("memory_store", arguments)
            return str(stored.item["id"])

        hub = await store(HUB, ["billing", "retries"])
        others = [await store(content, ["billing"]) for content in TOPICS]
        for number, other in enumerate(others):
            link = {"action": "link", "source_id": hub, "target_id": other, "edge_type": EDGE_TYPES[number % 4]}
            await admin.ok("memory_store", link)
        await admin.ok("memory_store", {"action": "link", "source_id": others[0], "target_id": others[1]})
        yield {"port": port, "token": token, "hub": hub, "others": others, "project": project.item["id"]}


async def opened(chromium: Any, world: dict[str, Any], viewport: dict[str, int]) -> tuple[Any, list[str], str]:
    page = await chromium.new_page(viewport=viewport)
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    base = f"http://127.0.0.1:{world['port']}"
    await page.goto(f"{base}/ui/sign-in")
    await page.get_by_label("API token").fill(world["token"])
    await page.get_by_role("button", name="Sign in with token").click()
    await page.wait_for_url(f"{base}/ui/")
    return page, errors, base


async def shoot(page: Any, tmp_path: Path, name: str, at: str | None = None) -> None:
    """A screenshot of the viewport, scrolled to `at` (a selector) first."""
    if at:
        await page.locator(at).first.evaluate("element => element.scrollIntoView({block: 'start'})")
    shot = tmp_path / f"console-{name}.png"
    await page.screenshot(path=str(shot))
    if os.environ.get("CONSOLE_DOCS_SCREENSHOTS") == "1":
        shutil.copy(shot, DOCS / shot.name)


async def labels_px(page: Any) -> list[float]:
    return list(await page.evaluate("window.synaptoGraph.cy.nodes().map(n => window.synaptoGraph.labelPx(n.id()))"))


async def test_graphs_read_by_mouse_and_keyboard_and_thoughts_named_by_their_content(
    browser: Any,
    world: dict[str, Any],
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    page, errors, base = await opened(browser, world, DESKTOP)
    try:
        await page.get_by_label("Query").fill("card payment retries")
        await page.get_by_label("Project", exact=True).select_option(label="Billing")
        await page.get_by_role("button", name="Search").click()
        hit = page.locator(".result").first
        await hit.wait_for()
        assert await hit.locator(".hit-meta time[datetime]").count() == 1  # each hit dated
        await shoot(page, tmp_path, "search")

        await page.goto(f"{base}/ui/thoughts/{world['hub']}")
        assert await page.title() == "Card payments that fail are retried three times… · SynaptoMind console"
        assert (await page.locator("h1").inner_text()).startswith("Card payments that fail are retried")
        assert await page.get_by_label("Thought id (select to copy)").input_value() == world["hub"]
        created = page.locator("dd time[datetime]").first
        assert (await created.get_attribute("datetime")).endswith("Z") and "UTC" in await created.inner_text()
        assert "Protected\nNo" in await page.locator(".facts").first.inner_text()  # Yes/No, never True/False

        await page.locator("#graph[data-ready=true]").wait_for()
        assert await page.evaluate("window.synaptoGraph.cy.nodes().length") == 19
        assert min(await labels_px(page)) >= 12  # legible at the default size, 19 nodes
        legend = await page.locator(".legend").inner_text()
        assert "supports (dotted green line)" in legend and "depends_on (solid brown line)" in legend
        # the keyboard walk: the drawing takes focus, arrows move through the nodes, the tip shows the full text
        await page.locator("#graph").focus()
        await page.keyboard.press("ArrowRight")
        assert await page.evaluate("window.synaptoGraph.focused()") == world["hub"]
        assert HUB in await page.locator("#graph-tip").inner_text()
        assert "1 of 19" in await page.locator("#graph-status").inner_text()
        await page.keyboard.press("ArrowRight")
        second = await page.evaluate("window.synaptoGraph.focused()")
        assert second in world["others"] and await page.locator("#graph-tip").is_visible()
        await shoot(page, tmp_path, "thought", "h1")
        await page.keyboard.press("Enter")
        await page.wait_for_url(f"{base}/ui/thoughts/{second}")

        await page.get_by_role("link", name="Graph", exact=True).click()
        await page.get_by_label("Project", exact=True).select_option(label="Billing")
        await page.get_by_role("button", name="Show its graph").click()
        await page.locator("#graph[data-ready=true]").wait_for()
        assert await page.evaluate("window.synaptoGraph.cy.nodes().length") == 19
        assert min(await labels_px(page)) >= 12
        first = page.locator(".graph-nodes a").first
        assert await first.get_attribute("href") == f"/ui/thoughts/{world['hub']}"  # the most connected first
        await first.hover()
        assert HUB in await page.locator("#graph-tip").inner_text()
        await page.mouse.move(0, 0)
        await shoot(page, tmp_path, "project-graph", "h1")

        await page.goto(f"{base}/ui/admin/health")
        assert "/ 100 —" in await page.locator(".score").inner_text()  # the score and, in words, its worst severity
        await shoot(page, tmp_path, "health")
        missing = await page.goto(f"{base}/ui/no/such/page")
        assert missing is not None and missing.status == 404
        assert await page.get_by_role("heading", name="Page not found").is_visible()
        assert await page.get_by_role("navigation", name="Console").is_visible()  # the console's chrome
        assert errors == [] or all("404" in error for error in errors), errors
    except BaseException:
        await screenshot(page, tmp_path, request.node.name)
        raise
    finally:
        await page.close()


async def test_a_tag_opens_its_browse_view_and_the_filters_narrow_it(
    browser: Any,
    world: dict[str, Any],
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    page, errors, base = await opened(browser, world, DESKTOP)
    try:
        await page.goto(f"{base}/ui/thoughts/{world['hub']}")
        await page.get_by_role("link", name="retries", exact=True).click()
        await page.wait_for_url(f"{base}/ui/browse?**")
        assert await page.locator("h2#browse-heading").inner_text() == "1 thought tagged retries, newest first"
        assert await page.locator(".result").count() == 1
        await page.get_by_role("textbox", name="Tag").fill("billing")
        await page.get_by_role("combobox", name="Edge type").select_option("supports")
        await page.get_by_role("button", name="Browse").click()
        await page.wait_for_url("**edge=supports**")
        heading = await page.locator("h2#browse-heading").inner_text()
        assert heading == "6 thoughts tagged billing, with a supports edge, newest first"  # the hub and its 5
        await shoot(page, tmp_path, "browse")
        await page.get_by_role("combobox", name="Standing").select_option("protected")
        await page.get_by_role("button", name="Browse").click()
        await page.wait_for_url("**standing=protected**")
        empty = page.locator("p.empty")
        assert "No thoughts tagged billing, with a supports edge, protected in Billing" in await empty.inner_text()
        await empty.get_by_role("link", name="clear every filter").click()
        await page.wait_for_url(f"{base}/ui/browse?project=*")
        assert await page.locator(".result").count() == 19
        assert errors == [], f"JavaScript errors in the console: {errors}"
    except BaseException:
        await screenshot(page, tmp_path, request.node.name)
        raise
    finally:
        await page.close()


async def test_a_phone_never_scrolls_the_whole_page_sideways(
    browser: Any,
    world: dict[str, Any],
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    page, errors, base = await opened(browser, world, PHONE)
    try:
        pages = {
            "search": f"/ui/search?query=card+payment+retries&project={world['project']}",
            "thought": f"/ui/thoughts/{world['hub']}",
            "graph": f"/ui/graph?project={world['project']}",
            "timeline": f"/ui/projects/{world['project']}/timeline",
            "browse": f"/ui/browse?project={world['project']}&tag=billing",
            "users": "/ui/admin/users",
            "tokens": "/ui/admin/tokens",
            "members": "/ui/admin/members",
            "health": "/ui/admin/health",
            "operations": "/ui/admin/operations",
            "edges": "/ui/review/edges",
        }
        for name, path in pages.items():
            await page.goto(base + path)
            if name in ("thought", "graph"):
                await page.locator("#graph[data-ready=true]").wait_for()
                assert min(await labels_px(page)) >= 12, name
            width = await page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            assert width[0] <= width[1], f"{name}: the page is {width[0]} px wide on a {width[1]} px screen"
            if name == "search":
                height = await page.locator(".result").first.evaluate("hit => hit.getBoundingClientRect().height")
                assert height < 150, f"a search hit takes {height} px"
            if name in ("search", "thought", "users"):
                at = {"search": "#results-heading", "thought": "h1", "users": "table"}[name]
                await shoot(page, tmp_path, f"phone-{name}", at)
        await page.goto(base + pages["users"])
        box = page.locator(".table-scroll").first
        assert await box.evaluate("box => box.scrollWidth > box.clientWidth")  # the table scrolls in its own box
        assert errors == [], f"JavaScript errors in the console: {errors}"
    except BaseException:
        await screenshot(page, tmp_path, request.node.name)
        raise
    finally:
        await page.close()
