"""The console's curate forms (app/http/ui/curate.py) in-process on a real PostgreSQL: create, edit, link with the
thought picker, unlink and retype through their previews, merge by picking, unarchive, delete — a reader sees no
write form and a forged or reader's post writes nothing, and each refusal stands next to the field it concerns."""

from __future__ import annotations

import html
import re

import httpx2

from app.db.models import Role
from app.services.context import AppContext
from tests.support.console import confirm_fields, post, signed_in, text_of, ui  # noqa: F401 (fixture)
from tests.support.helpers import ToolCaller, rows
from tests.support.team import changed_tables, table_digests, team

PARENT = "The payments team owns the card retry policy"
OTHER = "Card retries are capped at three attempts per day"
MISSING = "0190e0f1-0000-7000-8000-000000000000"  # an id no thought has


def thought_id_of(response: httpx2.Response) -> str:
    assert response.status_code == 303, response.text
    found = re.fullmatch(r"/ui/thoughts/([0-9a-f-]{36})\?done=\w+", response.headers["location"])
    assert found is not None, response.headers["location"]
    return found[1]


async def two_thoughts(writer: ToolCaller) -> tuple[str, str]:
    """The ids of PARENT and OTHER, created by the writer."""
    created = [await writer.ok("memory_store", {"action": "create", "content": text}) for text in (PARENT, OTHER)]
    return created[0].item["id"], created[1].item["id"]


async def edge_rows(writer: ToolCaller, thought_id: str) -> list[tuple[str, str, str]]:
    found = await rows(
        writer,
        "SELECT source_id::text, target_id::text, type::text FROM edge WHERE source_id = :id OR target_id = :id"
        " ORDER BY type",
        id=thought_id,
    )
    return [(str(a), str(b), str(c)) for a, b, c in found]


async def test_create_with_a_project_tags_and_a_picked_parent(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    project = (await writer.ok("memory_manage", {"action": "create", "name": "Pay", "local_path": "/srv/pay"})).item
    parent = (await writer.ok("memory_store", {"action": "create", "content": PARENT, "cwd": "/srv/pay"})).item
    csrf = await signed_in(ui, app_context, "wes", Role.writer)
    form = await ui.get("/ui/thoughts/new")
    assert form.status_code == 200 and 'name="content"' in form.text and "Pay (/srv/pay)" in form.text

    typed = {"csrf": csrf, "project": project["id"], "content": "Retries back off", "tags": "payments, retry"}
    before = await table_digests(app_context)
    found = await ui.post("/ui/thoughts/new", data={**typed, "parent_query": "card retry policy", "find": "parent"})
    assert found.status_code == 200
    assert f'name="parent_id" value="{parent["id"]}"' in found.text  # picked by its content, never pasted
    assert "Retries back off" in found.text and 'value="payments, retry"' in found.text  # typed values kept
    assert changed_tables(before, await table_digests(app_context)) == []  # finding writes nothing

    created = await ui.post("/ui/thoughts/new", data={**typed, "parent_id": parent["id"]})
    new_id = thought_id_of(created)
    page = await ui.get(created.headers["location"])
    assert "Thought created." in page.text and "Retries back off" in page.text
    stored = await rows(writer, "SELECT tags, project_id::text FROM thought WHERE id = :id", id=new_id)
    assert stored == [(["payments", "retry"], project["id"])]
    assert await edge_rows(writer, new_id) == [(parent["id"], new_id, "parent")]


async def test_create_refusals_stand_by_their_field_with_the_values_kept(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
) -> None:
    csrf = await signed_in(ui, app_context, "wes", Role.writer)
    before = await table_digests(app_context)
    empty = await ui.post("/ui/thoughts/new", data={"csrf": csrf, "content": "  ", "tags": "kept-tag"})
    assert empty.status_code == 400
    assert '<p id="content-error" class="error" role="alert">Write the thought&#39;s text.</p>' in empty.text
    assert 'aria-describedby="content-error"' in empty.text and 'value="kept-tag"' in empty.text
    too_many = ",".join(f"t{n}" for n in range(60))
    refused = await ui.post("/ui/thoughts/new", data={"csrf": csrf, "content": "Kept content", "tags": too_many})
    assert refused.status_code == 400
    assert 'id="tags-error"' in refused.text and "Kept content" in refused.text
    assert "List should" not in refused.text and "Invalid argument" not in refused.text
    assert '<p id="tags-error" class="error" role="alert">Pick at most 50.</p>' in refused.text  # pydantic's type
    long_tag = await ui.post("/ui/thoughts/new", data={"csrf": csrf, "content": "Kept content", "tags": "t" * 101})
    assert long_tag.status_code == 400  # refused at loc ("tags", 0): the tags field, said with the error's bound
    assert '<p id="tags-error" class="error" role="alert">Write at most 100 characters.</p>' in long_tag.text
    assert changed_tables(before, await table_digests(app_context)) == []


async def test_a_refusal_stands_by_the_field_of_the_argument_it_carries_not_of_a_name_in_its_text(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    """The operations' refusals (an id, a missing parent, the content limit) carry their argument as data: each stands
    by its field in words — even when the refused value names another argument — with what was typed kept."""
    csrf = await signed_in(ui, app_context, "wes", Role.writer)
    typed = {"csrf": csrf, "content": "Kept content", "tags": "kept, tags"}
    before = await table_digests(app_context)
    named = "see argument 'content'"  # a value naming another argument: the refusal is still parent_id's
    refused = await ui.post("/ui/thoughts/new", data={**typed, "parent_id": named})
    assert refused.status_code == 400
    assert 'id="parent_id-error"' in refused.text and 'id="content-error"' not in refused.text
    assert "\"see argument 'content'\" is not a valid id (a UUID)" in html.unescape(refused.text)
    assert "Invalid &#39;parent_id&#39;" not in refused.text  # in words, not by the argument's name
    assert ">Kept content</textarea>" in refused.text and 'value="kept, tags"' in refused.text

    gone = await ui.post("/ui/thoughts/new", data={**typed, "parent_id": MISSING})
    assert gone.status_code == 404 and 'id="parent_id-error"' in gone.text
    assert "No thought of this id was found" in gone.text and 'value="kept, tags"' in gone.text

    long = await ui.post("/ui/thoughts/new", data={**typed, "content": "x" * 800})
    assert long.status_code == 400 and 'id="content-error"' in long.text and 'id="parent_id-error"' not in long.text
    assert "800 characters is over the 720-character limit" in long.text and 'value="kept, tags"' in long.text
    assert changed_tables(before, await table_digests(app_context)) == []

    subject = (await writer.ok("memory_store", {"action": "create", "content": PARENT})).item["id"]
    edited = await ui.post(f"/ui/thoughts/{subject}/edit", data={**typed, "content": "y" * 800})
    assert edited.status_code == 400 and 'id="content-error"' in edited.text and "y" * 800 in edited.text
    assert "720-character limit" in edited.text and 'value="kept, tags"' in edited.text
    assert await rows(writer, "SELECT content FROM thought WHERE id = :id", id=subject) == [(PARENT,)]

    # Over MCP the same refusals keep the contract's texts, byte for byte.
    answer = await writer("memory_store", {"action": "create", "content": "Kept content", "parent_id": named})
    assert answer.text == "Invalid 'parent_id': \"see argument 'content'\" is not a valid id (a UUID)"
    answer = await writer("memory_store", {"action": "create", "content": "Kept content", "parent_id": MISSING})
    assert answer.text == f"parent_id {MISSING} not found"


async def test_a_refused_link_names_the_picked_thought_and_keeps_what_was_chosen(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    subject, other = await two_thoughts(writer)
    await writer.ok(
        "memory_store", {"action": "link", "source_id": subject, "target_id": other, "edge_type": "supports"}
    )
    csrf = await signed_in(ui, app_context, "wes", Role.writer)
    link = f"/ui/thoughts/{subject}/link"
    # No query: the picked thought is offered again all the same, still chosen, with the type and the direction.
    twice = await ui.post(link, data={"csrf": csrf, "other_id": other, "edge_type": "depends_on", "direction": "in"})
    assert twice.status_code == 409 and "The pair already carries a &#39;supports&#39; edge" in twice.text
    assert f'name="other_id" value="{other}" required checked' in twice.text
    assert '<option value="depends_on" selected>' in twice.text and 'name="direction" value="in" checked' in twice.text
    assert 'id="other_id-error"' not in twice.text  # about the pair, not one field: the form's message

    for direction in ("out", "in"):  # the picked thought is the target, then the source: its field either way
        data = {"csrf": csrf, "other_id": MISSING, "edge_type": "supports", "direction": direction}
        gone = await ui.post(link, data=data)
        assert gone.status_code == 404 and 'id="other_id-error"' in gone.text, direction
        assert "No such thought" in gone.text and f'name="direction" value="{direction}" checked' in gone.text
    assert await edge_rows(writer, subject) == [(subject, other, "supports")]
    answer = await writer("memory_store", {"action": "link", "source_id": MISSING, "target_id": subject})
    assert answer.text == f"Thought {MISSING} not found (source_id)"


async def test_a_reader_sees_no_write_form_and_is_refused(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    subject, other = await two_thoughts(writer)
    linked = await writer.ok("memory_store", {"action": "link", "source_id": subject, "target_id": other})
    edge_id = linked.item["id"]
    csrf = await signed_in(ui, app_context, "rita", Role.reader)
    page = await ui.get(f"/ui/thoughts/{subject}")
    for form in ("/edit", "/pick?for=link", "/unlink", "/retype", "/delete", "/archive", "New thought"):
        assert form not in page.text, form
    assert 'name="content"' not in (await ui.get("/ui/thoughts/new")).text
    assert 'name="content"' not in (await ui.get(f"/ui/thoughts/{subject}/edit")).text
    assert 'type="radio"' not in (await ui.get(f"/ui/thoughts/{subject}/pick", params={"query": "card"})).text

    before = await table_digests(app_context)
    for path, data in (
        ("/ui/thoughts/new", {"content": "A reader's thought"}),
        (f"/ui/thoughts/{subject}/edit", {"content": "Changed by a reader", "tags": ""}),
        (f"/ui/thoughts/{subject}/link", {"other_id": other, "edge_type": "supports"}),
        (f"/ui/thoughts/{subject}/unlink", {"edge_id": edge_id}),
        (f"/ui/thoughts/{subject}/retype", {"edge_id": edge_id, "new_type": "supports"}),
        (f"/ui/thoughts/{subject}/unarchive", {}),
        (f"/ui/thoughts/{subject}/delete", {}),
    ):
        refused = await ui.post(path, data={"csrf": csrf, **data})
        assert refused.status_code == 403, (path, refused.text)
        assert "needs the writer role" in text_of(refused.text), path
        forged = await ui.post(path, data={"csrf": "forged", **data})
        assert forged.status_code == 403 and "CSRF" in forged.text, path
    assert changed_tables(before, await table_digests(app_context)) == []


async def test_edit_link_retype_unlink_merge_unarchive_and_delete(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    writer: ToolCaller,
) -> None:
    subject = (await writer.ok("memory_store", {"action": "create", "content": PARENT, "tags": ["old"]})).item["id"]
    other = (await writer.ok("memory_store", {"action": "create", "content": OTHER})).item["id"]
    csrf = await signed_in(ui, app_context, "wes", Role.writer)

    unchanged = await ui.post(f"/ui/thoughts/{subject}/edit", data={"csrf": csrf, "content": PARENT, "tags": "old"})
    assert unchanged.status_code == 400 and "Nothing changed" in unchanged.text
    edited = await ui.post(
        f"/ui/thoughts/{subject}/edit", data={"csrf": csrf, "content": PARENT + " now.", "tags": "new, policy"}
    )
    assert edited.status_code == 303 and edited.headers["location"].endswith("?done=updated")
    assert "Content and tags saved." in (await ui.get(edited.headers["location"])).text
    assert await rows(writer, "SELECT content, tags FROM thought WHERE id = :id", id=subject) == [
        (PARENT + " now.", ["new", "policy"])
    ]

    picker = await ui.get(f"/ui/thoughts/{subject}/pick", params={"for": "link", "query": "three attempts per day"})
    assert picker.status_code == 200 and f'name="other_id" value="{other}"' in picker.text
    assert f'name="other_id" value="{subject}"' not in picker.text  # the thought itself is not offered
    unpicked = await ui.post(f"/ui/thoughts/{subject}/link", data={"csrf": csrf, "query": "three attempts"})
    assert unpicked.status_code == 400 and 'id="other_id-error"' in unpicked.text
    linked = await ui.post(
        f"/ui/thoughts/{subject}/link", data={"csrf": csrf, "other_id": other, "edge_type": "supports"}
    )
    assert linked.status_code == 303 and "Edge created." in (await ui.get(linked.headers["location"])).text
    assert await edge_rows(writer, subject) == [(subject, other, "supports")]
    twice = await ui.post(
        f"/ui/thoughts/{subject}/link",
        data={"csrf": csrf, "other_id": other, "edge_type": "depends_on", "query": "three attempts per day"},
    )
    assert twice.status_code in (400, 409), twice.text  # one edge per pair: the tool's refusal, on the picker
    assert 'class="error" role="alert"' in twice.text and f'name="other_id" value="{other}"' in twice.text
    assert await edge_rows(writer, subject) == [(subject, other, "supports")]

    [(edge_id,)] = await rows(writer, "SELECT id::text FROM edge WHERE source_id = :id", id=subject)
    preview = await ui.post(
        f"/ui/thoughts/{subject}/retype", data={"csrf": csrf, "edge_id": edge_id, "new_type": "references"}
    )
    assert preview.status_code == 200 and "Preview: Change an edge&#39;s type to references" in preview.text
    assert OTHER in preview.text  # the preview names the thoughts by their content
    assert await edge_rows(writer, subject) == [(subject, other, "supports")]
    done = await post(ui, f"/ui/thoughts/{subject}/retype", confirm_fields(preview.text))
    assert done.status_code == 200, done.text
    assert await edge_rows(writer, subject) == [(subject, other, "references")]

    [(edge_id,)] = await rows(writer, "SELECT id::text FROM edge WHERE source_id = :id", id=subject)
    preview = await ui.post(f"/ui/thoughts/{subject}/unlink", data={"csrf": csrf, "edge_id": edge_id})
    assert preview.status_code == 200 and "Preview: Remove an edge" in preview.text
    done = await post(ui, f"/ui/thoughts/{subject}/unlink", confirm_fields(preview.text))
    assert done.status_code == 200 and await edge_rows(writer, subject) == []
    assert await rows(writer, "SELECT count(*) FROM audit_event WHERE action = 'unlink'") == [(1,)]

    merge_picker = await ui.get(f"/ui/thoughts/{other}/pick", params={"for": "merge", "query": "payments team"})
    assert f'name="target_id" value="{subject}"' in merge_picker.text
    preview = await ui.post(f"/ui/thoughts/{other}/merge", data={"csrf": csrf, "target_id": subject})
    done = await post(ui, f"/ui/thoughts/{other}/merge", confirm_fields(preview.text))
    assert done.status_code == 200
    assert await rows(writer, "SELECT status::text FROM thought WHERE id = :id", id=other) == [("archived",)]

    archived_page = await ui.get(f"/ui/thoughts/{other}")
    assert "Unarchive" in archived_page.text and "Archive…" not in archived_page.text
    delete = await ui.post(f"/ui/thoughts/{other}/delete", data={"csrf": csrf})
    assert delete.status_code == 200 and "Preview: Delete a thought for good" in delete.text
    assert "hard-delete it and its" in delete.text  # the tool's own preview (retention_review action=delete)
    assert await rows(writer, "SELECT count(*) FROM thought WHERE id = :id", id=other) == [(1,)]
    back = await ui.post(f"/ui/thoughts/{other}/unarchive", data={"csrf": csrf})
    assert back.status_code == 303 and "Thought unarchived" in (await ui.get(back.headers["location"])).text
    assert await rows(writer, "SELECT status::text FROM thought WHERE id = :id", id=other) == [("active",)]


async def test_a_closed_projects_thoughts_are_neither_shown_nor_curated_by_a_non_member(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
) -> None:
    cast = await team(app_context)
    secret_id = cast.secret.thought_ids[0]
    own = cast.open_thought_ids[0]
    csrf = await signed_in(ui, app_context, "bob", Role.writer)  # a writer, no member of alice's `secret`
    before = await table_digests(app_context)
    for path in (
        f"/ui/thoughts/{secret_id}",
        f"/ui/thoughts/{secret_id}/edit",
        f"/ui/thoughts/{secret_id}/pick?query=master",
    ):
        page = await ui.get(path)
        assert page.status_code == 404 and "master key" not in page.text, path
    picker = await ui.get(f"/ui/thoughts/{own}/pick", params={"query": "secret master key note"})
    assert picker.status_code == 200 and "secret master key note 0" not in picker.text  # only what bob sees
    assert not any(f'value="{thought_id}"' in picker.text for thought_id in cast.secret.thought_ids)
    for path, data in (
        (f"/ui/thoughts/{secret_id}/edit", {"content": "bob was here", "tags": ""}),
        (f"/ui/thoughts/{own}/link", {"other_id": secret_id, "edge_type": "supports"}),
        (f"/ui/thoughts/{secret_id}/unarchive", {}),
        (f"/ui/thoughts/{secret_id}/delete", {}),
    ):
        refused = await ui.post(path, data={"csrf": csrf, **data})
        # refused, or (delete's preview, as over MCP) answered `not_found`: the thought is not bob's to see
        assert refused.status_code in (403, 404) or "not_found" in refused.text, (path, refused.status_code)
        assert "master key" not in refused.text, path
    assert changed_tables(before, await table_digests(app_context)) == []
