"""The review forms speak to people (issue 25 item 4): a bad value is said next to its field with the form's own
label and the typed values kept (never pydantic's text nor the argument's name), and a preview that would change
nothing offers no Confirm and says why."""

from __future__ import annotations

import httpx2

from app.db.models import Role
from app.services.context import AppContext
from tests.support.console import signed_in, text_of, ui  # noqa: F401 (fixture)
from tests.support.helpers import ToolCaller
from tests.support.team import changed_tables, table_digests


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


async def test_retention_filters_are_never_dropped_in_silence(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
) -> None:
    await signed_in(ui, app_context, "rita", Role.reader)
    page = await ui.get("/ui/review/retention", params={"min_age_days": "abc", "importance_floor": "0.2"})
    assert page.status_code == 400
    assert "Minimum age: enter a number (you typed “abc”)." in page.text and 'value="abc"' in page.text
    assert 'value="0.2"' in page.text and " candidates." not in page.text.replace("list the candidates.", "")
    floor = await ui.get("/ui/review/retention", params={"importance_floor": "5"})
    assert floor.status_code == 400 and "Importance below: enter a number no larger than 1." in floor.text
    fine = await ui.get("/ui/review/retention", params={"min_age_days": "10"})
    assert fine.status_code == 200 and "0 candidates." in fine.text


async def test_previews_that_would_change_nothing_offer_no_confirm(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    csrf = await signed_in(ui, app_context, "wes", Role.writer)
    empty = await ui.post("/ui/review/clusters/auto", data={"csrf": csrf, "min_similarity": "", "min_members": ""})
    assert empty.status_code == 200, empty.text
    assert "Nothing to confirm: No group of similar thoughts was found" in empty.text
    assert "Confirm:" not in empty.text

    made = (await writer.ok("memory_store", {"action": "create", "content": "A thought archived already"})).item
    preview = await writer.ok("memory_supersede", {"action": "archive", "thought_id": made["id"]})
    await writer.ok(
        "memory_supersede",
        {
            "action": "archive",
            "thought_id": made["id"],
            "confirm": True,
            "preview_token": preview.item["preview_token"],
        },
    )
    again = await ui.post(f"/ui/thoughts/{made['id']}/archive", data={"csrf": csrf})
    assert again.status_code == 200 and "Nothing to confirm: The thought is archived already" in again.text
    assert "Confirm:" not in again.text


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
