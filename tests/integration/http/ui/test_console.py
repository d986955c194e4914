"""The web console (/ui) in-process on a real PostgreSQL: sign-in and its refusals, CSRF, cookie flags, sign-out,
and the memory pages reading through the tools' dispatch."""

from __future__ import annotations

from collections.abc import AsyncIterator
from http.cookies import SimpleCookie
from pathlib import Path

import httpx2
import pytest

from app.config import Settings
from app.db.models import Role
from app.http.ui import ConsoleConfig, SessionCodec, build_console
from app.http.ui.session import SESSION_COOKIE, SIGN_IN_COOKIE
from app.main import create_http_app
from app.services.auth.tokens import AuthService
from app.services.context import AppContext
from tests.support.console import BASE, CSRF_FIELD, set_cookies, sign_in, sign_in_form, token_for
from tests.support.helpers import ToolCaller


@pytest.fixture
async def ui(app_context: AppContext, tmp_path: Path) -> AsyncIterator[httpx2.AsyncClient]:
    settings = Settings(_env_file=None, auth={"mode": "token"}, data_dir=tmp_path, jobs={"enabled": False})
    app = create_http_app(settings, app_context)
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url=BASE, follow_redirects=False) as client:
        yield client


def flags(header: str) -> dict[str, str]:
    cookie = SimpleCookie()
    cookie.load(header)
    morsel = next(iter(cookie.values()))
    return {key: str(morsel[key]) for key in ("httponly", "samesite", "secure", "path", "max-age")}


async def test_pages_need_a_session(ui: httpx2.AsyncClient) -> None:
    response = await ui.get("/ui/search?query=x")
    assert response.status_code == 303
    assert response.headers["location"] == "/ui/sign-in?next=%2Fui%2Fsearch%3Fquery%3Dx"
    assert (await ui.get("/ui")).headers["location"] == "/ui/"


async def test_the_sign_in_form_is_labelled_and_carries_a_csrf_token(ui: httpx2.AsyncClient) -> None:
    page = await ui.get("/ui/sign-in")
    assert '<label for="token">API token</label>' in page.text
    assert 'id="token" name="token" type="password"' in page.text
    cookie = flags(set_cookies(page)[SIGN_IN_COOKIE])
    assert cookie["httponly"] and cookie["samesite"].lower() == "lax" and cookie["path"] == "/ui"
    assert page.headers["cache-control"] == "no-store"


async def test_a_bad_token_gets_the_form_back_naming_the_token_and_no_cookie(ui: httpx2.AsyncClient) -> None:
    response = await sign_in(ui, "smt_not-a-real-token")
    assert response.status_code == 401
    assert "That API token was not accepted" in response.text
    assert 'aria-invalid="true"' in response.text
    assert SESSION_COOKIE not in set_cookies(response)
    assert SESSION_COOKIE not in ui.cookies


async def test_sign_in_without_its_csrf_token_is_refused(ui: httpx2.AsyncClient, app_context: AppContext) -> None:
    token = await token_for(app_context, "ada", Role.writer)
    await sign_in_form(ui)  # the CSRF cookie is set; the form field is missing or wrong
    for data in ({"token": token}, {"token": token, "csrf": "forged"}):
        response = await ui.post("/ui/sign-in", data=data)
        assert response.status_code == 403
        assert "CSRF" in response.text
        assert SESSION_COOKIE not in set_cookies(response)


async def test_sign_in_sets_a_session_cookie_with_safe_flags(ui: httpx2.AsyncClient, app_context: AppContext) -> None:
    token = await token_for(app_context, "ada", Role.writer)
    response = await sign_in(ui, token)
    assert response.status_code == 303
    assert response.headers["location"] == "/ui/search"
    header = set_cookies(response)[SESSION_COOKIE]
    cookie = flags(header)
    assert cookie["httponly"] and cookie["samesite"].lower() == "lax" and cookie["path"] == "/ui"
    assert not cookie["secure"]  # plain http here: a Secure cookie would never come back
    assert token not in header  # the cookie carries no credential that opens /mcp
    page = await ui.get("/ui/search")
    assert page.status_code == 200
    assert "Signed in as <strong>ada</strong> (writer)" in page.text


async def test_over_https_the_session_cookie_is_secure(app_context: AppContext, tmp_path: Path) -> None:
    settings = Settings(_env_file=None, auth={"mode": "token"}, data_dir=tmp_path, jobs={"enabled": False})
    transport = httpx2.ASGITransport(app=create_http_app(settings, app_context))
    token = await token_for(app_context, "ada", Role.writer)
    async with httpx2.AsyncClient(transport=transport, base_url="https://127.0.0.1:8765") as client:
        response = await sign_in(client, token)
    assert response.status_code == 303
    assert flags(set_cookies(response)[SESSION_COOKIE])["secure"]


async def test_an_unsafe_next_is_not_followed(ui: httpx2.AsyncClient, app_context: AppContext) -> None:
    csrf = await sign_in_form(ui)
    token = await token_for(app_context, "ada", Role.writer)
    response = await ui.post("/ui/sign-in", data={"csrf": csrf, "token": token, "next": "//evil.example/"})
    assert response.headers["location"] == "/ui/"


async def test_a_tampered_or_revoked_session_is_signed_out(ui: httpx2.AsyncClient, app_context: AppContext) -> None:
    token = await token_for(app_context, "ada", Role.writer)
    await sign_in(ui, token)
    good = ui.cookies[SESSION_COOKIE]
    ui.cookies.clear()
    ui.cookies.set(SESSION_COOKIE, good[:-2] + ("AA" if not good.endswith("AA") else "BB"))
    assert (await ui.get("/ui/search")).status_code == 303
    ui.cookies.clear()
    ui.cookies.set(SESSION_COOKIE, good)
    assert (await ui.get("/ui/search")).status_code == 200
    async with app_context.db.unit_of_work() as session:
        service = AuthService(session)
        [row] = [row for row in await service.list_tokens() if row.user_name == "ada"]
        await service.revoke(str(row.id))
    assert (await ui.get("/ui/search")).status_code == 303


async def test_sign_out_needs_the_session_csrf_token(ui: httpx2.AsyncClient, app_context: AppContext) -> None:
    await sign_in(ui, await token_for(app_context, "ada", Role.writer))
    page = await ui.get("/ui/search")
    csrf = CSRF_FIELD.search(page.text)
    assert csrf is not None
    refused = await ui.post("/ui/sign-out", data={"csrf": "forged"})
    assert refused.status_code == 403
    assert (await ui.get("/ui/search")).status_code == 200  # nothing done: still signed in
    response = await ui.post("/ui/sign-out", data={"csrf": csrf[1]})
    assert response.status_code == 303 and response.headers["location"] == "/ui/sign-in"
    assert flags(set_cookies(response)[SESSION_COOKIE])["max-age"] == "0"
    assert (await ui.get("/ui/search")).status_code == 303


async def test_a_cross_site_post_is_refused_by_origin(ui: httpx2.AsyncClient) -> None:
    response = await ui.post("/ui/sign-in", data={"token": "x"}, headers={"Origin": "https://evil.example"})
    assert response.status_code == 403


async def test_search_thought_page_and_timeline_read_through_the_tools(
    ui: httpx2.AsyncClient, app_context: AppContext, writer: ToolCaller
) -> None:
    project = (await writer.ok("memory_manage", {"action": "create", "name": "atlas", "local_path": "/srv/atlas"})).item
    base = {"action": "create", "cwd": "/srv/atlas"}
    old = (await writer.ok("memory_store", {**base, "content": "Deploys run from the blue pipeline"})).item
    new = (
        await writer.ok(
            "memory_store",
            {**base, "content": "Deploys run from the green pipeline since March", "tags": ["deploy"]},
        )
    ).item
    await writer.ok(
        "memory_store", {"action": "link", "source_id": new["id"], "target_id": old["id"], "edge_type": "replaces"}
    )
    await sign_in(ui, await token_for(app_context, "rita", Role.reader))

    page = await ui.get("/ui/search", params={"query": "green pipeline", "project": project["id"], "tag": "deploy"})
    assert page.status_code == 200, page.text
    assert "Deploys run from the green pipeline since March" in page.text
    assert f'href="/ui/thoughts/{new["id"]}"' in page.text
    assert "<dt>match</dt>" in page.text and "bm25_score" in page.text
    assert '<option value="' + project["id"] + '" selected>' in page.text
    assert float(page.headers["server-timing"].split("dur=")[1]) > 0

    thought = await ui.get(f"/ui/thoughts/{new['id']}")
    assert thought.status_code == 200
    assert "Deploys run from the green pipeline since March" in thought.text
    assert "replaces:" in thought.text and "Deploys run from the blue pipeline" in thought.text
    assert "Edges out (1)" in thought.text
    superseded = await ui.get(f"/ui/thoughts/{old['id']}")
    assert "replaced by:" in superseded.text and "Edges in (1)" in superseded.text

    timeline = await ui.get(f"/ui/projects/{project['id']}/timeline")
    assert timeline.status_code == 200
    assert "2 thoughts, newest first." in timeline.text
    assert timeline.text.index("green pipeline") < timeline.text.index("blue pipeline")


async def test_tool_refusals_show_as_errors(ui: httpx2.AsyncClient, app_context: AppContext) -> None:
    await sign_in(ui, await token_for(app_context, "rita", Role.reader))
    missing = await ui.get("/ui/thoughts/00000000-0000-0000-0000-000000000000")
    assert missing.status_code == 404
    assert "not found" in missing.text
    assert (await ui.get("/ui/projects/nope/timeline")).status_code == 404
    bad = await ui.get("/ui/search", params={"query": "x" * 2001})
    assert bad.status_code == 400 and "Invalid argument &#39;query&#39;" in bad.text


async def test_an_oversized_form_is_refused_unread(ui: httpx2.AsyncClient) -> None:
    csrf = await sign_in_form(ui)
    response = await ui.post("/ui/sign-in", data={"csrf": csrf, "token": "x" * 20_000})
    assert response.status_code == 413
    assert SESSION_COOKIE not in set_cookies(response)


async def test_auth_mode_none_needs_no_sign_in(app_context: AppContext, writer: ToolCaller) -> None:
    config = ConsoleConfig(SessionCodec(b"k" * 32, 3600), lambda: writer.principal)
    app = build_console(app_context, config)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE) as client:
        page = await client.get("/ui/search")
        assert page.status_code == 200
        assert "Signed in as <strong>writer</strong>" in page.text
        assert "Sign out" not in page.text  # nothing to end: every caller is the local user
        assert (await client.get("/ui/sign-in")).headers["location"] == "/ui/"
