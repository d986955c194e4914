"""auto_cluster from the console (app/http/ui/clusters.py): its numbers checked with the form's labels next to the
field, typed values kept; a preview with a checkbox per group, where leaving a group out creates only the kept
ones; an empty preview offers no Confirm; a reader is refused and nothing is written."""

from __future__ import annotations

import html
import re

import httpx2

from app.db.models import Role
from app.services.context import AppContext
from tests.support.console import confirm_fields, post, signed_in, text_of, ui  # noqa: F401 (fixture)
from tests.support.helpers import ToolCaller, execute, rows
from tests.support.team import changed_tables, table_digests

BILLING = [
    "The billing service retries failed card payments three times",
    "Failed card payments are retried three times by the billing service",
    "The billing service retries a failed card payment three times before giving up",
]
TERRAFORM = [
    "Terraform state lives in the shared bucket in the ops account",
    "The Terraform state is stored in the shared ops account bucket",
    "Our Terraform state file is kept in the shared bucket of the ops account",
]


async def test_auto_cluster_fields_are_checked_with_their_labels(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
) -> None:
    csrf = await signed_in(ui, app_context, "wes", Role.writer)
    before = await table_digests(app_context)
    for typed, field, message in (
        ({"min_similarity": "3"}, "min_similarity", "Largest cosine distance: enter a number no larger than 2."),
        ({"min_similarity": "0"}, "min_similarity", "Largest cosine distance: enter a number above 0."),
        ({"min_similarity": "abc"}, "min_similarity", "Largest cosine distance: enter a number (you typed “abc”)."),
        ({"min_members": "1"}, "min_members", "Smallest cluster: enter a number of at least 2."),
        ({"min_members": "2.5"}, "min_members", "Smallest cluster: enter a whole number (you typed “2.5”)."),
    ):
        page = await ui.post("/ui/review/clusters/auto", data={"csrf": csrf, "min_members": "", **typed})
        assert page.status_code == 400, (typed, page.text)
        assert f'<p id="{field}-error" class="error" role="alert">{message}</p>' in page.text, typed
        assert f'aria-describedby="{field}-error"' in page.text
        assert f'value="{typed[field]}"' in page.text  # the typed value is kept
        assert "min_similarity ≤" not in page.text and "Input should" not in page.text
    assert changed_tables(before, await table_digests(app_context)) == []


async def test_a_group_left_out_of_the_preview_is_not_created(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    billing = [(await writer.ok("memory_store", {"action": "create", "content": c})).item["id"] for c in BILLING]
    terraform = [(await writer.ok("memory_store", {"action": "create", "content": c})).item["id"] for c in TERRAFORM]
    await execute(writer, "UPDATE thought SET created_at = now() - interval '5 days'")
    csrf = await signed_in(ui, app_context, "wes", Role.writer)
    preview = await ui.post("/ui/review/clusters/auto", data={"csrf": csrf, "min_similarity": "", "min_members": ""})
    assert preview.status_code == 200 and "2 groups of" in preview.text, preview.text
    assert preview.text.count('name="keep"') == 2 and BILLING[0] in preview.text
    fields = confirm_fields_of(preview.text)
    members = {name: [v for n, v in fields if n == name] for name in ("members_0", "members_1")}
    kept = "members_0" if set(members["members_0"]) == set(billing) else "members_1"
    assert {frozenset(v) for v in members.values()} == {frozenset(billing), frozenset(terraform)}
    unticked = await post(ui, "/ui/review/clusters/auto", [(n, v) for n, v in fields if n != "keep"])
    assert "Nothing was created: no group was ticked." in unticked.text
    assert await rows(writer, "SELECT count(*) FROM thought WHERE is_cluster") == [(0,)]
    chosen = [(n, v) for n, v in fields if n != "keep"] + [("keep", kept.removeprefix("members_"))]
    done = await post(ui, "/ui/review/clusters/auto", chosen)
    assert done.status_code == 200 and "Created 1 cluster; left out 1 group." in done.text, done.text
    clustered = await rows(writer, "SELECT target_id::text FROM edge WHERE type = 'cluster'")
    assert sorted(row[0] for row in clustered) == sorted(billing)  # the left-out group has no cluster
    assert await rows(writer, "SELECT tags FROM thought WHERE is_cluster") == [(["cluster", "auto"],)]


async def test_every_group_kept_is_the_tools_own_confirm_and_an_empty_preview_offers_none(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    csrf = await signed_in(ui, app_context, "wes", Role.writer)
    empty = await ui.post("/ui/review/clusters/auto", data={"csrf": csrf, "min_similarity": "", "min_members": ""})
    assert empty.status_code == 200 and "Nothing to confirm: No group of similar thoughts was found" in empty.text
    assert "Confirm:" not in empty.text
    for content in BILLING:
        await writer.ok("memory_store", {"action": "create", "content": content})
    await execute(writer, "UPDATE thought SET created_at = now() - interval '5 days'")
    preview = await ui.post("/ui/review/clusters/auto", data={"csrf": csrf, "min_similarity": "", "min_members": ""})
    fields = confirm_fields_of(preview.text)
    done = await post(ui, "/ui/review/clusters/auto", fields)
    assert done.status_code == 200 and "<strong>" in done.text, done.text  # the tool's executed answer
    assert await rows(writer, "SELECT count(*) FROM thought WHERE is_cluster") == [(1,)]
    assert (await post(ui, "/ui/review/clusters/auto", fields)).status_code == 409  # the token is spent


def confirm_fields_of(page: str) -> list[tuple[str, str]]:
    """The preview form's fields: its hidden ones and the ticked group checkboxes, as a browser sends them."""
    form = page[page.index('<form method="post"', page.index("Preview:")) :]
    form = form[: form.index("</form>")]
    hidden = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form)
    ticked = re.findall(r'<input type="checkbox" name="(keep)" value="([^"]*)" checked>', form)
    return [(n, html.unescape(v)) for n, v in [*hidden, *ticked]]


async def test_a_reader_cannot_run_auto_cluster(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
) -> None:
    csrf = await signed_in(ui, app_context, "rita", Role.reader)
    assert 'action="/ui/review/clusters/auto"' not in (await ui.get("/ui/review/clusters")).text
    before = await table_digests(app_context)
    refused = await ui.post("/ui/review/clusters/auto", data={"csrf": csrf, "min_similarity": "0.3"})
    assert refused.status_code == 403 and "needs the writer role" in text_of(refused.text)
    assert changed_tables(before, await table_digests(app_context)) == []
