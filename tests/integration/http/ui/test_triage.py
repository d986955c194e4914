"""Fast triage on the review queues (app/http/ui/triage.py) in-process on a real PostgreSQL: apply / reject the
selected edge proposals and protect / delete the selected retention candidates, each through one preview, back on
the queue with a one-line result; a reader's or a forged post writes nothing."""

from __future__ import annotations

import html
import re

import httpx2

from app.db.models import Role
from app.services.context import AppContext
from tests.support.console import confirm_fields, post, signed_in, text_of, ui  # noqa: F401 (fixture)
from tests.support.helpers import ToolCaller, execute, rows
from tests.support.team import changed_tables, table_digests

SUBJECT = "The billing service retries failed card payments three times"
NEIGHBOURS = [
    "The billing service retries a failed card payment three times before giving up",
    "Card payments that fail get three retries in the billing service",
]


async def pending(writer: ToolCaller) -> list[str]:
    await writer.ok("memory_manage", {"action": "create", "name": "Queue", "local_path": "/srv/queue"})
    for content in NEIGHBOURS:
        await writer.ok("memory_store", {"action": "create", "content": content, "cwd": "/srv/queue"})
    subject = (await writer.ok("memory_store", {"action": "create", "content": SUBJECT, "cwd": "/srv/queue"})).item
    await writer.ok("edge_review", {"action": "enqueue", "thought_id": subject["id"]})
    listed = await writer.ok("edge_review", {"action": "list", "status": "pending"})
    assert len(listed.items) >= 2, listed.items
    return [str(row["id"]) for row in listed.items]


async def statuses(writer: ToolCaller) -> dict[str, str]:
    listed = await writer.ok("edge_review", {"action": "list", "limit": 500})
    return {str(row["id"]): str(row["status"]) for row in listed.items}


async def candidates(writer: ToolCaller, count: int) -> list[str]:
    project = (await writer.ok("memory_manage", {"action": "create", "name": "Old", "local_path": "/srv/old"})).item
    ids = [
        str(
            (await writer.ok("memory_store", {"action": "create", "content": f"Old note {n}", "cwd": "/srv/old"})).item[
                "id"
            ]
        )
        for n in range(count)
    ]
    await execute(
        writer,
        "UPDATE thought SET status = 'draft', importance = 0.05, created_at = now() - interval '90 days' "
        "WHERE project_id = :project",
        project=project["id"],
    )
    return ids


async def test_reject_and_apply_selected_stay_on_the_queue(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    first, *others = await pending(writer)
    csrf = await signed_in(ui, app_context, "wes", Role.writer)
    queue = await ui.get("/ui/review/edges")
    assert "Reject selected…" in queue.text and "<kbd>j</kbd>" in queue.text and "triage.js" in queue.text

    before = await table_digests(app_context)
    asked = await post(ui, "/ui/review/edges/selected", [("csrf", csrf), ("do", "reject"), ("proposal_ids", first)])
    assert asked.status_code == 200 and "Reject 1 selected proposal(s)?" in asked.text
    assert NEIGHBOURS[0][:40] in asked.text or SUBJECT[:40] in asked.text  # the proposals by their thoughts
    assert changed_tables(before, await table_digests(app_context)) == []  # asking writes nothing
    done = await post(ui, "/ui/review/edges/selected", confirm_fields_of(asked.text))
    assert done.status_code == 303 and done.headers["location"].startswith("/ui/review/edges?done=rejected&n=1")
    assert "Rejected 1 proposal(s)." in (await ui.get(done.headers["location"])).text
    assert (await statuses(writer))[first] == "rejected"

    data = [("csrf", csrf), ("do", "apply"), *[("proposal_ids", pid) for pid in others]]
    preview = await post(ui, "/ui/review/edges/selected", data)
    assert preview.status_code == 200 and f"Preview: Apply {len(others)} selected proposal(s)" in preview.text
    assert {(await statuses(writer))[pid] for pid in others} == {"pending"}
    done = await post(ui, "/ui/review/edges/selected", confirm_fields(preview.text))
    assert done.status_code == 303, done.text
    assert f"Applied {len(others)} proposal(s)." in (await ui.get(done.headers["location"])).text
    assert {(await statuses(writer))[pid] for pid in others} == {"accepted"}
    replay = await post(ui, "/ui/review/edges/selected", confirm_fields(preview.text))
    assert replay.status_code == 409 and "was already used" in replay.text

    nothing = await post(ui, "/ui/review/edges/selected", [("csrf", csrf), ("do", "reject")])
    assert nothing.status_code == 303 and "Nothing was selected" in (await ui.get(nothing.headers["location"])).text


def confirm_fields_of(page: str) -> list[tuple[str, str]]:
    """The hidden fields of a triage confirm page's form."""
    form = page[page.index('<form method="post"', page.index("Nothing has changed yet.")) :]
    form = form[: form.index("</form>")]
    return [(n, html.unescape(v)) for n, v in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form)]


async def test_protect_and_delete_selected(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    kept, dropped, also_dropped = await candidates(writer, 3)
    csrf = await signed_in(ui, app_context, "wes", Role.writer)
    page = await ui.get("/ui/review/retention")
    assert "Protect selected…" in page.text and "Delete selected…" in page.text

    asked = await post(ui, "/ui/review/retention/selected", [("csrf", csrf), ("do", "protect"), ("source_ids", kept)])
    assert asked.status_code == 200 and "Old note 0" in asked.text
    done = await post(ui, "/ui/review/retention/selected", confirm_fields_of(asked.text))
    assert done.status_code == 303 and "Protected 1 thought(s)." in (await ui.get(done.headers["location"])).text
    assert await rows(writer, "SELECT is_protected FROM thought WHERE id = :id", id=kept) == [(True,)]

    before = await table_digests(app_context)
    data = [
        ("csrf", csrf),
        ("do", "delete"),
        ("source_ids", dropped),
        ("source_ids", also_dropped),
        ("source_ids", kept),
    ]
    preview = await post(ui, "/ui/review/retention/selected", data)
    assert preview.status_code == 200 and "Delete 2 of 3 selected thought(s) for good?" in preview.text
    assert "not deleted" in preview.text  # the protected one is no candidate: its preview says so
    after = await table_digests(app_context)
    assert changed_tables(before, after) == ["preview_token"]  # a preview writes its token, nothing else
    done = await post(ui, "/ui/review/retention/selected", confirm_fields(preview.text))
    assert done.status_code == 303 and "Deleted 2 thought(s) for good." in (await ui.get(done.headers["location"])).text
    assert await rows(
        writer, "SELECT id::text FROM thought WHERE id IN (:a, :b, :c)", a=kept, b=dropped, c=also_dropped
    ) == [(kept,)]


async def test_a_reader_and_a_forgery_are_refused_and_write_nothing(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    proposals = await pending(writer)
    [old] = await candidates(writer, 1)
    csrf = await signed_in(ui, app_context, "rita", Role.reader)
    assert "Reject selected…" not in (await ui.get("/ui/review/edges")).text
    assert "Delete selected…" not in (await ui.get("/ui/review/retention")).text
    before = await table_digests(app_context)
    for path, data in (
        ("/ui/review/edges/selected", [("do", "reject"), ("confirmed", "yes"), ("proposal_ids", proposals[0])]),
        ("/ui/review/edges/selected", [("do", "apply"), ("proposal_ids", proposals[0])]),
        ("/ui/review/retention/selected", [("do", "protect"), ("confirmed", "yes"), ("source_ids", old)]),
        ("/ui/review/retention/selected", [("do", "delete"), ("source_ids", old)]),
    ):
        refused = await post(ui, path, [("csrf", csrf), *data])
        assert refused.status_code == 403 and "needs the writer role" in text_of(refused.text), (path, data)
        forged = await post(ui, path, [("csrf", "forged"), *data])
        assert forged.status_code == 403 and "CSRF" in forged.text
    assert changed_tables(before, await table_digests(app_context)) == []
