"""Curating where you read: create a thought, edit its content and tags, link / unlink / retype its edges with a
thought picker that searches, merge into a picked thought, archive, unarchive and delete — from the thought page.

Every write passes the tool's own checks (tool_calls.py, app.mcp.dispatch), so the roles, validation, refusals,
previews and audit are exactly MCP's. `memory_store` create / update / link (single steps, as in the contract) run
their store operation behind the action's checks (`checked`), with the arguments' rules both doors share
(app.services.store.operations); unlink and retype go through their previews, `memory_supersede` archive / merge
(review.py) and `retention_review action=delete` (the contract's one delete of a thought: a retention candidate)
through theirs (`two_step`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.exceptions import HTTPException
from starlette.responses import RedirectResponse, Response

from app.errors import AppError
from app.http.ui import forms
from app.http.ui.forms import FieldErrors, Form
from app.http.ui.page import Page
from app.http.ui.tool_calls import Answer, Refusal, checked, outcome, two_step
from app.mcp.calls import CallContext
from app.mcp.shaping import ThoughtShaper
from app.mcp.tools.store.args import CreateArgs, LinkArgs, UpdateArgs
from app.services.kinds import MAX_QUERY
from app.services.recall import operations as recall_operations
from app.services.recall.requests import SearchRequest
from app.services.store import operations as store_operations
from app.services.store.operations import Written
from app.services.values import EdgeRecord, EdgeType

EDGE_TYPES = tuple(edge_type.value for edge_type in EdgeType)
PICKER_HITS = 10
# The one-line result a page shows after a redirect (`?done=<code>`): fixed texts, so a link cannot put words on it.
DONE = {
    "created": "Thought created.",
    "updated": "Content and tags saved.",
    "linked": "Edge created.",
    "unarchived": "Thought unarchived: it is active again.",
}
# memory_store's arguments → the fields of the create and edit forms.
STORE_FIELDS = {"content": "content", "tags": "tags", "parent_id": "parent_id", "cwd": "project", "status": "status"}


def done_message(code: str | None) -> str | None:
    return DONE.get(code or "")


def _thought_page(thought_id: str, done: str | None = None) -> str:
    return f"/ui/thoughts/{thought_id}" + (f"?{urlencode({'done': done})}" if done else "")


async def _picked(page: Page, query: str, exclude: str | None) -> Picked | None:
    """The picker's choices: the thoughts whose content matches the query, found by the search of
    `memory_recall action=search` (app.services.recall.operations) as the signed-in user sees them, without
    counting a hit — choosing a thought to link or merge is not recalling it. The thought itself is left out."""
    if not query:
        return None
    request = SearchRequest(query=query[:MAX_QUERY], cwd=None, status="all", limit=PICKER_HITS)
    try:
        found = await recall_operations.search(page.context, request, count_hits=False)
    except AppError as error:
        return Picked([], error.message)
    shape = ThoughtShaper(compact=True)
    return Picked([shape(hit.thought) for hit in found.outcome.hits if str(hit.thought.id) != exclude])


@dataclass(frozen=True)
class Picked:
    """The thoughts a picker offers (shaped as a compact recall answer), or why it has none."""

    items: list[dict[str, Any]]
    error: str | None = None

    @property
    def page_status(self) -> int:
        return 400 if self.error else 200


# The single-step memory_store writes, each the operation its action's handler calls on the validated arguments
# (the arguments' rules live there: app.services.store.operations), run behind the tool's checks (`checked`).


async def _create(args: Any, ctx: CallContext) -> Written:
    assert isinstance(args, CreateArgs)
    return await store_operations.create_given(ctx.app, ctx.principal, args, args.cwd)


async def _update(args: Any, ctx: CallContext) -> Written:
    assert isinstance(args, UpdateArgs)
    return await store_operations.update_given(ctx.app, ctx.principal, args.thought_id, args.given())


async def _link(args: Any, ctx: CallContext) -> EdgeRecord:
    assert isinstance(args, LinkArgs)
    return await store_operations.link(ctx.app, ctx.principal, args.source_id, args.target_id, args.edge_type)


# ---------------------------------------------------------------- create


async def new_thought(page: Page) -> Response:
    params = page.params
    values = {"project": params.get("project", ""), "parent_id": params.get("parent", "")}
    return await _create_form(page, values, FieldErrors())


async def _create_form(
    page: Page,
    typed: dict[str, str],
    errors: FieldErrors,
    status: int = 200,
    picked: Picked | None = None,
) -> Response:
    projects = await page.projects()
    parent = None
    if typed.get("parent_id"):
        parent = (await page.thoughts([typed["parent_id"]])).get(typed["parent_id"])
    values = page.values(
        projects=projects,
        typed=typed,
        errors=errors,
        parent=parent,
        picked=picked,
    )
    return page.render("curate_new.html", values, status)


async def create_thought(page: Page, form: Form) -> Response:
    """`memory_store action=create`; the **Find** button only searches for a parent (nothing written)."""
    typed = form.typed("project", "content", "tags", "status", "parent_id", "parent_query")
    typed["is_protected"] = "true" if form.get("is_protected") == "true" else ""
    if form.get("find") == "parent":
        picked = await _picked(page, typed["parent_query"].strip(), None)
        return await _create_form(page, typed, FieldErrors(), picked=picked)
    errors = FieldErrors()
    content = typed["content"].strip()
    if not content:
        errors.add("content", "Write the thought's text.")
    project = await page.project(typed["project"])
    if typed["project"] and (project is None or not project.local_path):
        errors.add("project", "Pick one of the listed projects.")
    if errors:
        return await _create_form(page, typed, errors, 400)
    arguments: dict[str, Any] = {"action": "create", "content": content}
    if forms.tags(typed["tags"]):
        arguments["tags"] = forms.tags(typed["tags"])
    if typed["status"] in ("active", "draft"):
        arguments["status"] = typed["status"]
    if typed["is_protected"]:
        arguments["is_protected"] = True
    if typed["parent_id"].strip():
        arguments["parent_id"] = typed["parent_id"].strip()
    if project is not None:
        arguments["cwd"] = project.local_path
    written = await checked(page, "memory_store", arguments, _create)
    if isinstance(written, Refusal):
        errors.refused(written.error, written.cause, STORE_FIELDS)
        return await _create_form(page, typed, errors, written.status)
    return RedirectResponse(_thought_page(str(written.thought.id), "created"), status_code=303)


# ---------------------------------------------------------------- edit content and tags


async def edit_thought(page: Page) -> Response:
    thought_id = page.path_param("thought_id")
    item = await _thought(page, thought_id)
    typed = {"content": str(item.get("content") or ""), "tags": ", ".join(item.get("tags") or [])}
    return _edit_form(page, item, typed, FieldErrors())


def _edit_form(
    page: Page,
    thought: dict[str, Any],
    typed: dict[str, str],
    errors: FieldErrors,
    status: int = 200,
) -> Response:
    values = page.values(thought=thought, typed=typed, errors=errors)
    return page.render("curate_edit.html", values, status)


async def update_thought(page: Page, form: Form) -> Response:
    """`memory_store action=update` with the fields that changed (tags replaced as typed)."""
    thought_id = page.path_param("thought_id")
    item = await _thought(page, thought_id)
    typed = {"content": form.get("content"), "tags": form.get("tags")}
    errors = FieldErrors()
    arguments: dict[str, Any] = {"action": "update", "thought_id": thought_id}
    content = typed["content"].strip()
    if not content:
        errors.add("content", "Write the thought's text (archive it to retire it).")
    elif content != item.get("content"):
        arguments["content"] = content
    tags = forms.tags(typed["tags"])
    if tags != list(item.get("tags") or []):
        arguments.update(tags=tags, tags_mode="replace")
    if not errors and len(arguments) == 2:
        errors.general = "Nothing changed: edit the content or the tags, or go back to the thought."
    if errors:
        return _edit_form(page, item, typed, errors, 400)
    written = await checked(page, "memory_store", arguments, _update)
    if isinstance(written, Refusal):
        errors.refused(written.error, written.cause, STORE_FIELDS)
        return _edit_form(page, item, typed, errors, written.status)
    return RedirectResponse(_thought_page(thought_id, "updated"), status_code=303)


# ---------------------------------------------------------------- link (the picker), unlink, retype, merge


async def pick(page: Page) -> Response:
    """The thought picker: a query box listing matching thoughts by content, each with a radio to choose it, for
    a link (with its edge type and direction) or a merge (with optional new content)."""
    thought_id = page.path_param("thought_id")
    purpose = "merge" if page.params.get("for") == "merge" else "link"
    query = page.params.get("query", "").strip()
    thought = await _thought(page, thought_id)
    picked = await _picked(page, query, thought_id)
    values = page.values(
        thought=thought,
        purpose=purpose,
        query=query,
        picked=picked,
        edge_types=EDGE_TYPES,
        errors=FieldErrors(),
    )
    return page.render("curate_pick.html", values, picked.page_status if picked else 200)


async def link(page: Page, form: Form) -> Response:
    """`memory_store action=link` to the picked thought (a single step in the contract: no preview)."""
    thought_id = page.path_param("thought_id")
    other = form.get("other_id").strip()
    edge_type = form.get("edge_type") or "related"
    if not other:
        errors = FieldErrors({"other_id": "Pick the thought to link to (search for it above)."})
        return await _pick_again(page, form, errors, 400)
    inward = form.get("direction") == "in"
    source, target = (other, thought_id) if inward else (thought_id, other)
    arguments = {"action": "link", "source_id": source, "target_id": target, "edge_type": edge_type}
    linked = await checked(page, "memory_store", arguments, _link)
    if isinstance(linked, Refusal) and linked.status == 403:  # a role refusal: the refusal page, as every form's
        return outcome(page, linked.answer, "Link two thoughts", _thought_page(thought_id))
    if isinstance(linked, Refusal):  # e.g. the pair already carries another type: said by the picker, values kept
        errors = FieldErrors()
        # Only the picked end is the form's field: a refusal of this thought's own id is the form's general message.
        errors.refused(
            linked.error, linked.cause, {"edge_type": "edge_type", ("source_id" if inward else "target_id"): "other_id"}
        )
        return await _pick_again(page, form, errors, linked.status)
    return RedirectResponse(_thought_page(thought_id, "linked"), status_code=303)


async def _pick_again(
    page: Page,
    form: Form,
    errors: FieldErrors,
    status: int,
) -> Response:
    """The link picker again, with its query's hits, the error beside the field it concerns and what was chosen
    (the picked thought, the edge type, the direction) still chosen."""
    thought_id = page.path_param("thought_id")
    thought = await _thought(page, thought_id)
    query = form.get("query")
    picked = await _picked(page, query.strip(), thought_id)
    typed = {name: form.get(name).strip() for name in ("other_id", "edge_type", "direction")}
    hits = picked.items if picked is not None else []
    if typed["other_id"] and all(hit.get("id") != typed["other_id"] for hit in hits):
        chosen = (await page.thoughts([typed["other_id"]]))[typed["other_id"]]
        if "error" not in chosen:  # picked from an earlier query's hits: still offered, still chosen
            picked = Picked([chosen, *hits], picked.error if picked is not None else None)
    values = page.values(
        thought=thought,
        purpose="link",
        query=query,
        picked=picked,
        edge_types=EDGE_TYPES,
        errors=errors,
        typed=typed,
    )
    return page.render("curate_pick.html", values, status)


async def unlink(page: Page, form: Form) -> Response:
    thought_id = page.path_param("thought_id")
    edge_id = form.get("edge_id")
    arguments = {"action": "unlink", "edge_id": edge_id}
    return await two_step(
        page,
        form,
        "memory_store",
        arguments,
        "Remove an edge",
        [("edge_id", edge_id)],
        _thought_page(thought_id),
        _edge_ends,
    )


async def retype(page: Page, form: Form) -> Response:
    thought_id = page.path_param("thought_id")
    edge_id, new_type = form.get("edge_id"), form.get("new_type")
    arguments = {"action": "retype", "edge_id": edge_id, "new_type": new_type}
    return await two_step(
        page,
        form,
        "memory_store",
        arguments,
        f"Change an edge's type to {new_type}",
        [("edge_id", edge_id), ("new_type", new_type)],
        _thought_page(thought_id),
        _edge_ends,
    )


# ---------------------------------------------------------------- unarchive, delete


async def unarchive(page: Page, form: Form) -> Response:
    """`memory_store action=update status=active`: the contract's way back from archived (a single step)."""
    thought_id = page.path_param("thought_id")
    arguments = {"action": "update", "thought_id": thought_id, "status": "active"}
    written = await checked(page, "memory_store", arguments, _update)
    if isinstance(written, Refusal):
        return outcome(page, written.answer, "Unarchive a thought", _thought_page(thought_id))
    return RedirectResponse(_thought_page(thought_id, "unarchived"), status_code=303)


async def delete(page: Page, form: Form) -> Response:
    """`retention_review action=delete`: the contract deletes a thought only as a retention candidate; its
    preview says whether this one is (and what depends on it)."""
    thought_id = page.path_param("thought_id")
    arguments = {"action": "delete", "thought_id": thought_id}
    return await two_step(
        page,
        form,
        "retention_review",
        arguments,
        "Delete a thought for good",
        [],
        _thought_page(thought_id),
        lambda answer: [thought_id],
    )


# ---------------------------------------------------------------- helpers


async def _thought(page: Page, thought_id: str) -> dict[str, Any]:
    """The thought a form acts on, in one read that counts no hit (opening a form is not recalling it);
    a missing one answers the 404 page."""
    found = (await page.thoughts([thought_id]))[thought_id]
    if "error" in found:
        raise HTTPException(404, f"{found['error']}. Search for it, or pick a page from the navigation.")
    return found


def _edge_ends(answer: Answer) -> list[str]:
    """The two thoughts of an unlink or retype preview."""
    item = answer.item or {}
    nested = item.get("edge")
    edge: dict[str, Any] = nested if isinstance(nested, dict) else item
    return [str(end) for end in (edge.get("source_id"), edge.get("target_id")) if end]
