"""The console's chrome in-process on a real PostgreSQL: the security headers of every /ui response, the styled
error page of unknown paths and refusals, static assets cached by version and compressed, the confirm step of
the destructive admin buttons (nothing written before it), and a health score that info findings cannot sink."""

from __future__ import annotations

import gzip
import html
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest

from app.config import Settings
from app.db.models import Role
from app.http.ui import browse
from app.main import create_http_app
from app.services.auth.tokens import AuthService
from app.services.context import AppContext
from tests.support.console import BASE, HIDDEN, signed_in
from tests.support.helpers import ToolCaller
from tests.support.team import changed_tables, table_digests

STRICT_CSP = "script-src 'self'"


@pytest.fixture
async def ui(app_context: AppContext, tmp_path: Path) -> AsyncIterator[httpx2.AsyncClient]:
    settings = Settings(_env_file=None, auth={"mode": "token"}, data_dir=tmp_path, jobs={"enabled": False})
    transport = httpx2.ASGITransport(app=create_http_app(settings, app_context))
    async with httpx2.AsyncClient(transport=transport, base_url=BASE, follow_redirects=False) as client:
        yield client


def assert_secured(response: httpx2.Response) -> None:
    headers = response.headers
    assert STRICT_CSP in headers["content-security-policy"], response.url
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff", response.url
    assert headers["x-frame-options"] == "DENY" and headers["referrer-policy"] == "same-origin"


async def test_every_ui_response_carries_the_security_headers(ui: httpx2.AsyncClient, app_context: AppContext) -> None:
    anonymous = [
        await ui.get("/ui"),  # the redirect to /ui/
        await ui.get("/ui/search"),  # the redirect to sign-in
        await ui.get("/ui/sign-in"),
        await ui.get("/ui/static/console.css"),
        await ui.get("/ui/no-such-page"),
        await ui.post("/ui/sign-in", data={"token": "x"}),  # the CSRF refusal
        await ui.get("/ui/search", headers={"Host": "evil.example"}),  # the Host check's refusal
    ]
    assert [response.status_code for response in anonymous] == [308, 303, 200, 200, 404, 403, 421]
    await signed_in(ui, app_context, "ada", Role.admin)
    signed = [await ui.get(path) for path in ("/ui/search", "/ui/admin/tokens", "/ui/thoughts/nope", "/ui/x/y")]
    for response in [*anonymous, *signed]:
        assert_secured(response)
    assert (await ui.get("/mcp")).headers.get("x-frame-options") is None  # /ui's headers, not the service's


async def test_unknown_paths_and_refusals_get_the_styled_page(ui: httpx2.AsyncClient, app_context: AppContext) -> None:
    missing = await ui.get("/ui/no-such-page")
    assert missing.status_code == 404 and missing.headers["content-type"].startswith("text/html")
    assert "<h1>Page not found</h1>" in missing.text and "There is no console page at /ui/no-such-page" in missing.text
    assert 'href="/ui/sign-in"' in missing.text and "console.css" in missing.text  # the chrome, signed out

    csrf = await signed_in(ui, app_context, "ada", Role.writer)
    chrome = await ui.get("/ui/admin/nothing-here")
    assert chrome.status_code == 404 and "Signed in as <strong>ada</strong> (writer)" in chrome.text
    assert '<nav aria-label="Console">' in chrome.text
    refused = await ui.post("/ui/review/edges/reject", data={"proposal_id": "x"})
    assert refused.status_code == 403 and "<h1>Not allowed</h1>" in refused.text
    assert "the form&#39;s CSRF token is missing or stale" in refused.text
    wrong_method = await ui.post("/ui/search", data={"csrf": csrf})
    assert wrong_method.status_code == 405 and "Signed in as <strong>ada</strong>" in wrong_method.text
    assert (await ui.get("/ui/static/nothing.css")).status_code == 404


async def test_static_assets_are_versioned_cached_and_compressed(ui: httpx2.AsyncClient) -> None:
    page = await ui.get("/ui/sign-in")
    found = re.search(r'href="(/ui/static/console\.css\?v=(\w+))"', page.text)
    assert found is not None, "the stylesheet's URL carries its version"
    versioned = await ui.get(found[1])
    assert versioned.status_code == 200 and versioned.headers["cache-control"] == "public, max-age=31536000, immutable"
    plain = await ui.get("/ui/static/console.css")
    assert plain.headers["cache-control"] == "no-cache" and plain.headers["etag"]
    stale = await ui.get("/ui/static/console.css?v=0000")
    assert stale.headers["cache-control"] == "no-cache"  # an old version's URL is revalidated, not pinned
    unchanged = await ui.get("/ui/static/console.css", headers={"If-None-Match": plain.headers["etag"]})
    assert unchanged.status_code == 304

    raw = await ui.get("/ui/static/vendor/cytoscape.min.js", headers={"Accept-Encoding": "identity"})
    assert raw.headers.get("content-encoding") is None
    request = ui.build_request("GET", "/ui/static/vendor/cytoscape.min.js", headers={"Accept-Encoding": "gzip"})
    zipped = await ui.send(request, stream=True)
    body = await zipped.aread()  # decoded by the client; the header says what was sent
    assert zipped.headers["content-encoding"] == "gzip" and "accept-encoding" in zipped.headers["vary"].lower()
    assert body == raw.content and len(gzip.compress(raw.content)) < len(raw.content) // 2
    assert zipped.headers["cache-control"] == "no-cache"


def confirm_form(page: str) -> list[tuple[str, str]]:
    form = page[page.index('<form method="post"', page.index('id="confirm-what"')) :]
    return [(name, html.unescape(value)) for name, value in HIDDEN.findall(form[: form.index("</form>")])]


async def test_destructive_admin_buttons_ask_first_and_write_nothing_until_confirmed(
    ui: httpx2.AsyncClient, app_context: AppContext
) -> None:
    csrf = await signed_in(ui, app_context, "ada", Role.admin)
    async with app_context.db.unit_of_work() as session:
        await AuthService(session).create_token("bob", Role.writer, "laptop")
        [token] = [row for row in await AuthService(session).list_tokens() if row.user_name == "bob"]
    before = await table_digests(app_context)
    asked = await ui.post("/ui/admin/tokens/revoke", data={"csrf": csrf, "token_id": str(token.id)})
    assert asked.status_code == 200 and "<h1>Revoke this token?</h1>" in asked.text
    assert f"Revoke bob&#39;s writer token labelled “laptop” ({token.id})?" in asked.text
    assert 'href="/ui/admin/tokens">Cancel</a>' in asked.text
    fields = confirm_form(asked.text)
    assert fields == [("csrf", csrf), ("token_id", str(token.id)), ("confirmed", "yes")]
    for path, data, heading in (
        ("/ui/admin/tokens/rotate", {"token_id": str(token.id)}, "Rotate this token?"),
        ("/ui/admin/users/password/clear", {"name": "bob"}, "Clear this password?"),
        ("/ui/admin/users/sign-out", {"name": "bob"}, "End these sessions?"),
        ("/ui/admin/members/remove", {"project": "x", "user": "bob"}, "Remove this member?"),
        ("/ui/admin/members/close", {"project": "x"}, "Close this project?"),
    ):
        page = await ui.post(path, data={"csrf": csrf, **data})
        assert page.status_code == 200 and f"<h1>{heading}</h1>" in page.text, path
        assert 'name="confirmed" value="yes"' in page.text
    assert changed_tables(before, await table_digests(app_context)) == []

    # the confirm step is a form like any other: refused without its CSRF token, to a writer, and acting once
    assert (await ui.post("/ui/admin/tokens/revoke", data=dict(fields[1:]))).status_code == 403
    assert changed_tables(before, await table_digests(app_context)) == []
    done = await ui.post("/ui/admin/tokens/revoke", data=dict(fields))
    assert done.status_code == 200 and f"Token {token.id} revoked." in done.text
    async with app_context.db.unit_of_work() as session:
        [row] = [row for row in await AuthService(session).list_tokens() if row.id == token.id]
    assert row.revoked_at is not None


async def test_a_writer_gets_no_confirm_page_for_an_admin_button(
    ui: httpx2.AsyncClient, app_context: AppContext
) -> None:
    csrf = await signed_in(ui, app_context, "wendy", Role.writer)
    refused = await ui.post("/ui/admin/users/password/clear", data={"csrf": csrf, "name": "wendy"})
    assert refused.status_code == 403 and "Clear this password?" not in refused.text


async def test_info_findings_alone_cannot_sink_the_health_score(
    ui: httpx2.AsyncClient, app_context: AppContext, writer: ToolCaller
) -> None:
    # 45 untagged island thoughts: 90 info findings, which read 77.5 before (and 0 at 400 findings)
    for number in range(45):
        await writer.ok("memory_store", {"action": "create", "content": f"An untagged note number {number} here"})
    report = (await writer.ok("memory_status", {"action": "health"})).item
    assert report["summary"]["findings"] == {"critical": 0, "warning": 0, "info": 90}
    assert report["health_score"] == 90.0
    await signed_in(ui, app_context, "ada", Role.admin)
    page = await ui.get("/ui/admin/health")
    assert "Health score <strong>90.0</strong> / 100" in page.text
    assert "Info findings only: nothing needs doing now." in page.text


async def test_a_failing_page_answers_the_styled_500_page(
    app_context: AppContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def failing(*_: object) -> None:
        raise RuntimeError("a bug in a page handler")

    monkeypatch.setattr(browse, "timeline", failing)  # a page that fails, whatever the data
    settings = Settings(_env_file=None, auth={"mode": "token"}, data_dir=tmp_path, jobs={"enabled": False})
    transport = httpx2.ASGITransport(app=create_http_app(settings, app_context), raise_app_exceptions=False)
    async with httpx2.AsyncClient(transport=transport, base_url=BASE, follow_redirects=False) as client:
        await signed_in(client, app_context, "ada", Role.reader)
        failed = await client.get("/ui/projects/anything/timeline")
    assert failed.status_code == 500 and "<h1>Something went wrong</h1>" in failed.text
    assert "a bug in a page handler" not in failed.text  # logged, never shown
    assert "Signed in as <strong>ada</strong> (reader)" in failed.text
    assert_secured(failed)
