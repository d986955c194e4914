"""The review pages' forms speak to people (issue 25 item 4): a bad retention filter is said next to its field
with the form's own label and the typed values kept, and a preview that would change nothing offers no Confirm
and says why."""

from __future__ import annotations

import httpx2

from app.db.models import Role
from app.services.context import AppContext
from tests.support.console import signed_in, text_of, ui  # noqa: F401 (fixture)
from tests.support.helpers import ToolCaller


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
