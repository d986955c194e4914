"""Debian's Chromium driven by Playwright for the console's browser tests: the `browser` fixture (skips, with its
reason, where /usr/bin/chromium or playwright is missing) and `screenshot`, the page as it was when a test failed."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_INSTALLED = CHROMIUM.exists()  # at import: no blocking file check inside the event loop
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    if not CHROMIUM_INSTALLED:
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium): console browser tests skipped")
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        pytest.skip("the playwright package is not installed (pip install playwright): console browser tests skipped")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


async def screenshot(page: Any, tmp_path: Path, name: str) -> None:
    """The page as it was when the test failed: in the test's tmp_path, and copied to test-artifacts/."""
    shot = tmp_path / f"{name}.png"
    try:
        await page.screenshot(path=str(shot), full_page=True)
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy(shot, ARTIFACTS / shot.name)
        print(f"screenshot of the failure: {shot} (and {ARTIFACTS / shot.name})")
    except Exception as error:  # the screenshot must not hide the failure itself
        print(f"no screenshot: {error}")
