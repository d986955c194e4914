"""The console in-process for tests: a client on the app, sign-in by token, the session's CSRF fields, posting forms."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlencode

import httpx2
import pytest
from sqlalchemy import text

from app.config import Settings
from app.db.models import Role
from app.main import create_http_app
from app.services.auth.tokens import AuthService
from app.services.context import AppContext

BASE = "http://127.0.0.1:8765"

HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')


CSRF_FIELD = re.compile(r'name="csrf" value="([^"]*)"')


async def token_for(context: AppContext, name: str, role: Role) -> str:
    async with context.db.unit_of_work() as session:
        token, _ = await AuthService(session).create_token(name, role, "console test")
    return token


def set_cookies(response: httpx2.Response) -> dict[str, str]:
    """Each Set-Cookie header by cookie name, verbatim (flags included)."""
    found: dict[str, str] = {}
    for header in response.headers.get_list("set-cookie"):
        name = header.split("=", 1)[0]
        found[name] = header
    return found


async def sign_in_form(ui: httpx2.AsyncClient) -> str:
    page = await ui.get("/ui/sign-in")
    assert page.status_code == 200
    found = CSRF_FIELD.search(page.text)
    assert found is not None
    return found[1]


async def sign_in(ui: httpx2.AsyncClient, token: str) -> httpx2.Response:
    csrf = await sign_in_form(ui)
    return await ui.post("/ui/sign-in", data={"csrf": csrf, "token": token, "next": "/ui/search"})


@pytest.fixture
async def ui(app_context: AppContext, tmp_path: Path) -> AsyncIterator[httpx2.AsyncClient]:
    settings = Settings(_env_file=None, auth={"mode": "token"}, data_dir=tmp_path, jobs={"enabled": False})
    transport = httpx2.ASGITransport(app=create_http_app(settings, app_context))
    async with httpx2.AsyncClient(transport=transport, base_url=BASE, follow_redirects=False) as client:
        yield client


async def signed_in(ui: httpx2.AsyncClient, context: AppContext, name: str, role: Role) -> str:
    """Signs `name` in; answers the session's CSRF token (from a page's form)."""
    await sign_in(ui, await token_for(context, name, role))
    page = await ui.get("/ui/search")
    found = CSRF_FIELD.search(page.text)
    assert page.status_code == 200 and found is not None
    return found[1]


async def post(ui: httpx2.AsyncClient, path: str, fields: list[tuple[str, str]]) -> httpx2.Response:
    """A form post with repeated names (a batch's ids), in order, as a browser sends it."""
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    return await ui.post(path, content=urlencode(fields), headers=headers)


def confirm_fields(page: str) -> list[tuple[str, str]]:
    """The hidden fields of the preview screen's confirm form (csrf, the call's fields, confirm, token)."""
    form = page[page.index('<form method="post"', page.index("What confirming does")) :]
    form = form[: form.index("</form>")]
    return [(name, html.unescape(value)) for name, value in HIDDEN.findall(form)]


async def audit(context: AppContext) -> list[tuple[str, dict[str, object]]]:
    async with context.db.unit_of_work() as session:
        found = await session.execute(
            text("SELECT action, details FROM audit_event WHERE tool = 'console' ORDER BY created_at, id")
        )
        return [(row.action, row.details) for row in found]


def text_of(page: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))
