"""Fast triage of the review queues: act on the selected items of a queue through one preview, then back on the
queue with a one-line result (`?done=<code>&n=<count>&failed=<count>`, fixed texts: a link cannot put words on
the page).

- Edge proposals: **apply selected** is `edge_review action=apply_batch` through its preview (one token for the
  batch); **reject selected** is one `reject` per proposal (a single step in the contract) after a confirm page
  listing the proposals with both thoughts — a single Reject button sends `confirmed=yes` and skips it.
- Retention candidates: **delete selected** previews `retention_review action=delete` for each thought (the
  tool's own preview and token per thought, shown on one page with their dependents) and confirms each with its
  token; **protect selected** is one `protect` per thought after a confirm page (a single Protect skips it).

Every call passes the tool's checks, through tool_calls.py (app.mcp.dispatch): roles, audit and tokens are MCP's.
The previews and confirms are the tool's own calls; each reject and protect of a selection runs its operation
(app.services.review.operations.reject, app.services.retention.operations.protect_thought) behind the action's
checks (`checked`): the triage only counts what succeeded.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.exceptions import HTTPException
from starlette.responses import Response

from app.http.ui.forms import Form
from app.http.ui.page import Page
from app.http.ui.review import EDGES, RETENTION, back_to_queue, protect_one, reject_one
from app.http.ui.tool_calls import Answer, Refusal, call, checked, outcome, two_step
from app.mcp.tools.edge_review.handlers import shape_proposal
from app.services.review import operations as review_operations

# the most items one triage post acts on: a page of a queue (review.py pages by 25), with room to spare
MAX_SELECTED = 50
RESULTS = {
    "applied": "Applied {n} proposal(s).",
    "rejected": "Rejected {n} proposal(s).",
    "protected": "Protected {n} thought(s).",
    "deleted": "Deleted {n} thought(s) for good.",
}
NONE_SELECTED = "Nothing was selected: tick the items first (x selects the one in focus)."


def triage_result(params: Any) -> str | None:
    """The queue's one-line result after a triage post, from its fixed codes and counts."""
    text = RESULTS.get(str(params.get("done") or ""))
    if params.get("done") == "none":
        return NONE_SELECTED
    if text is None:
        return None
    line = text.format(n=_count(params.get("n")))
    failed = _count(params.get("failed"))
    return line + (f" {failed} could not be: open them to see why." if failed else "")


def _count(value: Any) -> int:
    try:
        return max(int(str(value or "0")), 0)
    except ValueError:
        return 0


def _selected(form: Form, name: str) -> list[str]:
    chosen = list(dict.fromkeys(form.all(name)))
    if len(chosen) > MAX_SELECTED:
        raise HTTPException(400, f"Select at most {MAX_SELECTED} items at a time (you sent {len(chosen)}).")
    return chosen


# ---------------------------------------------------------------- edge proposals


async def edges_selected(page: Page, form: Form) -> Response:
    ids = _selected(form, "proposal_ids")
    keep = urlencode({"project": form.get("project")}) if form.get("project") else ""
    if not ids:
        return back_to_queue(EDGES, "none", keep=keep)
    if form.get("do") == "reject":
        return await _reject(page, form, ids, keep)
    fields = [("do", "apply"), ("project", form.get("project")), *(("proposal_ids", pid) for pid in ids)]
    arguments: dict[str, Any] = {"action": "apply_batch", "proposal_ids": ids}
    if form.get("confirm") != "true":
        title = f"Apply {len(ids)} selected proposal(s)"
        return await two_step(page, form, "edge_review", arguments, title, fields, EDGES)
    answer = await call(page, "edge_review", {**arguments, "confirm": True, "preview_token": form.get("preview_token")})
    if answer.error is not None:
        return outcome(page, answer, "Refused", EDGES)
    accepted = sum(1 for row in answer.items if row.get("status") == "accepted")
    return back_to_queue(EDGES, "applied", accepted, len(answer.items) - accepted, keep)


async def _reject(
    page: Page,
    form: Form,
    ids: list[str],
    keep: str,
) -> Response:
    if form.get("confirmed") != "yes":
        # the pending queue as the edge queue page reads it (app/http/ui/review.py), every project the user sees
        listed = await review_operations.queue_page(page.context, page.principal, None, "pending", None, False, 100, 0)
        chosen = [shape_proposal(row) for row in listed.rows if str(row.id) in ids]
        ends = [str(end) for row in chosen for end in (row.get("source_id"), row.get("target_id")) if end]
        values = page.values(
            title=f"Reject {len(ids)} selected proposal(s)?",
            what="proposals",
            chosen=chosen,
            missing=len(ids) - len(chosen),
            thoughts=await page.thoughts(ends),
            hidden=[("do", "reject"), ("project", form.get("project")), *(("proposal_ids", pid) for pid in ids)],
            action=page.path,
            button=f"Yes, reject {len(ids)}",
            back=EDGES + (f"?{keep}" if keep else ""),
        )
        return page.render("triage_confirm.html", values)
    done = failed = 0
    for proposal_id in ids:
        arguments = {"action": "reject", "proposal_id": proposal_id}
        rejected = await checked(page, "edge_review", arguments, reject_one)
        # a role refusal is the same for every item: say it once, as the tool does
        if isinstance(rejected, Refusal) and rejected.status == 403:
            return outcome(page, rejected.answer, "Refused", EDGES)
        done, failed = (done, failed + 1) if isinstance(rejected, Refusal) else (done + 1, failed)
    return back_to_queue(EDGES, "rejected", done, failed, keep)


# ---------------------------------------------------------------- retention candidates


async def retention_selected(page: Page, form: Form) -> Response:
    ids = _selected(form, "source_ids")
    if not ids:
        return back_to_queue(RETENTION, "none")
    if form.get("do") == "delete":
        return await _delete(page, form, ids)
    if form.get("confirmed") != "yes":
        values = page.values(
            title=f"Protect {len(ids)} selected thought(s)?",
            what="thoughts",
            chosen=[],
            missing=0,
            thoughts=await page.thoughts(ids),
            hidden=[("do", "protect"), *(("source_ids", thought_id) for thought_id in ids)],
            action=page.path,
            button=f"Yes, protect {len(ids)}",
            back=RETENTION,
        )
        return page.render("triage_confirm.html", values)
    done = failed = 0
    for thought_id in ids:
        arguments = {"action": "protect", "thought_id": thought_id, "protected": True}
        protected = await checked(page, "retention_review", arguments, protect_one)
        if isinstance(protected, Refusal) and protected.status == 403:
            return outcome(page, protected.answer, "Refused", RETENTION)
        done, failed = (done, failed + 1) if isinstance(protected, Refusal) else (done + 1, failed)
    return back_to_queue(RETENTION, "protected", done, failed)


async def _delete(page: Page, form: Form, ids: list[str]) -> Response:
    """One page for the tool's previews of every selected delete; confirming redeems each preview's token."""
    if form.get("confirm") == "true":
        tokens = dict(zip(form.all("source_ids"), form.all("preview_tokens"), strict=False))
        done = failed = 0
        for thought_id in ids:
            confirming = {
                "action": "delete",
                "thought_id": thought_id,
                "confirm": True,
                "preview_token": tokens.get(thought_id),
            }
            answer = await call(page, "retention_review", confirming)
            if answer.status == 403:
                return outcome(page, answer, "Refused", RETENTION)
            deleted = answer.error is None and (answer.item or {}).get("deleted") is True
            done, failed = (done + 1, failed) if deleted else (done, failed + 1)
        return back_to_queue(RETENTION, "deleted", done, failed)
    previews: list[tuple[str, Answer]] = []
    for thought_id in ids:
        answer = await call(page, "retention_review", {"action": "delete", "thought_id": thought_id})
        if answer.status == 403:
            return outcome(page, answer, "Refused", RETENTION)
        previews.append((thought_id, answer))
    thoughts = await page.thoughts(ids)
    # The delete's preview lists the edges only; the execute refuses a protected or an active thought, so such a
    # preview is not offered for confirming (the page says why) rather than failing after the confirm.
    blocked = {thought_id: _why_kept(thoughts.get(thought_id) or {}) for thought_id in ids}
    ready = [
        (thought_id, answer)
        for thought_id, answer in previews
        if answer.preview and answer.preview.get("token") and not blocked[thought_id]
    ]
    hidden = [("do", "delete"), ("confirm", "true")]
    for thought_id, answer in ready:
        hidden += [("source_ids", thought_id), ("preview_tokens", str((answer.preview or {})["token"]))]
    values = page.values(
        title=f"Delete {len(ready)} of {len(ids)} selected thought(s) for good?",
        previews=previews,
        blocked=blocked,
        thoughts=thoughts,
        hidden=hidden,
        ready=len(ready),
        action=page.path,
        back=RETENTION,
    )
    return page.render("triage_delete.html", values)


def _why_kept(thought: dict[str, Any]) -> str | None:
    if thought.get("is_protected"):
        return "protected: unprotect it first"
    if thought.get("status") == "active":
        return "active: only draft or archived thoughts can be deleted"
    return None
