"""The console's review pages: the edge_review queue, the retention_review list, auto_cluster, and archive / merge
from a thought page. The edge queue reads its operation (app.services.review.operations.queue_page), the retention
list its own (app.services.retention.operations.candidate_page) behind the list action's checks; reject and protect
run their operation behind the action's checks (tool_calls.checked) and show the answer the tool would give (its
handler's `rejected_answer` / `protected_answer`); every destructive write goes through the tool's own preview
(tool_calls.two_step), and a single apply or delete from a queue comes back to the queue with its one-line result,
as the selected actions do (triage.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from starlette.responses import RedirectResponse, Response

from app.http.ui import forms
from app.http.ui.forms import FieldErrors, Form, count_param
from app.http.ui.page import Page
from app.http.ui.tool_calls import Answer, Listing, Refusal, checked, outcome, two_step
from app.mcp.calls import CallContext
from app.mcp.shaping import ThoughtShaper
from app.mcp.tools.edge_review.args import RejectArgs
from app.mcp.tools.edge_review.handlers import rejected_answer, shape_proposal
from app.mcp.tools.retention.args import ListArgs as RetentionListArgs
from app.mcp.tools.retention.args import ProtectArgs
from app.mcp.tools.retention.handlers import protected_answer
from app.services.retention import operations as retention_operations
from app.services.retention.operations import CandidatePage
from app.services.review import operations as review_operations
from app.services.values import ThoughtRecord

PROPOSAL_STATUSES = ("pending", "accepted", "rejected", "stale", "expired", "rolled_back")
PROPOSAL_PAGE = 25
RETENTION_PAGE = 25
EDGES = "/ui/review/edges"
RETENTION = "/ui/review/retention"
CLUSTERS = "/ui/review/clusters"


def back_to_queue(queue: str, done: str, n: int = 0, failed: int = 0, keep: str = "") -> Response:
    """Back on the queue after an action, with its one-line result (`?done=<code>&n=<count>&failed=<count>`, fixed
    texts: triage.triage_result) and what the queue showed (`keep`: its project)."""
    query = {"done": done, "n": str(n), "failed": str(failed)}
    return RedirectResponse(f"{queue}?{urlencode(query)}{'&' + keep if keep else ''}", status_code=303)


# ---------------------------------------------------------------- edge_review


async def edge_queue(page: Page) -> Response:
    params = page.params
    project = await page.project(params.get("project"))
    status = params.get("status") if params.get("status") in PROPOSAL_STATUSES else "pending"
    offset = count_param(params.get("offset"))
    # that project's own queue, with or without a path (scoped by the project's id), else every project's
    found = await review_operations.queue_page(
        page.context, page.principal, None, status, None, False, PROPOSAL_PAGE, offset, project.id if project else None
    )
    answer = Listing([shape_proposal(row) for row in found.rows], found.total, tuple(found.scope.warnings))
    thoughts = await page.thoughts([end for row in answer.items for end in _ends(row)])
    values = page.values(
        projects=await page.projects(),
        project=project,
        answer=answer,
        thoughts=thoughts,
        status=status,
        statuses=PROPOSAL_STATUSES,
        offset=offset,
        page=PROPOSAL_PAGE,
        total=answer.total,
    )
    return page.render("review_edges.html", values, answer.page_status)


async def edge_apply(page: Page, form: Form) -> Response:
    """One proposal through its preview; once confirmed, back on the queue (its project kept) with the result."""
    proposal_id = form.get("proposal_id")
    arguments = {"action": "apply", "proposal_id": proposal_id}
    title = "Apply an edge proposal"
    fields = [("proposal_id", proposal_id)]
    keep = ""
    if form.get("project"):  # the queue's project, kept through the preview
        fields.append(("project", form.get("project")))
        keep = urlencode({"project": form.get("project")})

    def applied(answer: Answer) -> Response:
        accepted = (answer.item or {}).get("status") == "accepted"
        return back_to_queue(EDGES, "applied", int(accepted), int(not accepted), keep)

    return await two_step(page, form, "edge_review", arguments, title, fields, EDGES, _proposal_ends, applied)


async def edge_apply_batch(page: Page, form: Form) -> Response:
    ids = form.all("proposal_ids")
    arguments: dict[str, Any] = {"action": "apply_batch", "proposal_ids": ids}
    fields = [("proposal_ids", proposal_id) for proposal_id in ids]
    title = "Apply the selected proposals"
    return await two_step(page, form, "edge_review", arguments, title, fields, EDGES)


async def edge_rollback(page: Page, form: Form) -> Response:
    run_id = form.get("run_id")
    arguments = {"action": "rollback", "run_id": run_id}
    title = "Roll back an apply run"
    return await two_step(page, form, "edge_review", arguments, title, [("run_id", run_id)], EDGES)


async def reject_one(args: Any, ctx: CallContext) -> dict[str, Any]:
    """edge_review reject's operation on the validated arguments (this page, and the queue's selection)."""
    assert isinstance(args, RejectArgs)
    return await review_operations.reject(ctx.app, ctx.principal, args.proposal_id)


async def edge_reject(page: Page, form: Form) -> Response:
    arguments = {"action": "reject", "proposal_id": form.get("proposal_id")}
    rejected = await checked(page, "edge_review", arguments, reject_one)
    answer = rejected.answer if isinstance(rejected, Refusal) else Answer(rejected_answer(rejected).payload)
    return outcome(page, answer, "Reject an edge proposal", EDGES)


# ---------------------------------------------------------------- retention_review


async def _candidates(page: Page, arguments: dict[str, Any]) -> Listing:
    """A page of retention candidates (content cut, every project the user sees), behind the list action's checks."""

    async def run(args: Any, ctx: CallContext) -> CandidatePage:
        assert isinstance(args, RetentionListArgs)  # the list action's validated arguments
        return await retention_operations.candidate_page(
            ctx.app, ctx.principal, args.min_age_days, args.importance_floor, args.limit, args.offset
        )

    found = await checked(page, "retention_review", arguments, run)
    if isinstance(found, Refusal):
        return Listing.refused(found)
    shape = ThoughtShaper(compact=False)
    return Listing([shape(candidate) for candidate in found.candidates], found.total)


async def retention_list(page: Page) -> Response:
    params = page.params
    offset = count_param(params.get("offset"))
    arguments: dict[str, Any] = {"action": "list", "limit": RETENTION_PAGE, "offset": offset, "compact": False}
    errors = FieldErrors()  # a value that is not a number is said next to its field, never dropped in silence
    min_age = forms.number(errors, "min_age_days", params.get("min_age_days", ""), label="Minimum age", above=0)
    floor = forms.number(
        errors, "importance_floor", params.get("importance_floor", ""), label="Importance below", low=0, high=1
    )
    if min_age is not None:
        arguments["min_age_days"] = min_age
    if floor is not None:
        arguments["importance_floor"] = floor
    answer = await _candidates(page, arguments) if not errors else Listing([])
    values = page.values(
        answer=answer,
        errors=errors,
        offset=offset,
        page=RETENTION_PAGE,
        min_age_days=params.get("min_age_days", ""),
        importance_floor=params.get("importance_floor", ""),
        total=answer.total,
    )
    return page.render("review_retention.html", values, 400 if errors else answer.page_status)


async def protect_one(args: Any, ctx: CallContext) -> ThoughtRecord:
    """retention_review protect's operation on the validated arguments (this page, and the list's selection)."""
    assert isinstance(args, ProtectArgs)
    return await retention_operations.protect_thought(ctx.app, ctx.principal, args.thought_id, args.protected)


async def retention_protect(page: Page, form: Form) -> Response:
    protected = form.get("protected") != "false"
    arguments = {"action": "protect", "thought_id": form.get("thought_id"), "protected": protected}
    found = await checked(page, "retention_review", arguments, protect_one)
    answer = found.answer if isinstance(found, Refusal) else Answer(protected_answer(found).payload)
    title = "Protect a thought" if protected else "Unprotect a thought"
    return outcome(page, answer, title, RETENTION)


async def retention_delete(page: Page, form: Form) -> Response:
    thought_id = form.get("thought_id")
    arguments = {"action": "delete", "thought_id": thought_id}
    title = "Delete a retention candidate"
    fields = [("thought_id", thought_id)]

    def deleted(answer: Answer) -> Response:
        gone = (answer.item or {}).get("deleted") is True
        return back_to_queue(RETENTION, "deleted", int(gone), int(not gone))

    return await two_step(
        page, form, "retention_review", arguments, title, fields, RETENTION, _just(thought_id), deleted
    )


async def retention_compact(page: Page, form: Form) -> Response:
    ids = form.all("source_ids")
    content = form.get("summary_content")
    tags = [tag.strip() for tag in form.get("summary_tags").split(",") if tag.strip()]
    summary: dict[str, Any] = {"content": content}
    if tags:
        summary["tags"] = tags
    arguments = {"action": "compact", "source_ids": ids, "summary": summary}
    fields = [("source_ids", source_id) for source_id in ids]
    fields += [("summary_content", content), ("summary_tags", form.get("summary_tags"))]
    title = "Compact retention candidates into a summary"
    return await two_step(page, form, "retention_review", arguments, title, fields, RETENTION)


# ---------------------------------------------------------------- thought page: archive, merge


async def thought_archive(page: Page, form: Form) -> Response:
    thought_id = page.path_param("thought_id")
    arguments = {"action": "archive", "thought_id": thought_id}
    title = "Archive a thought"
    back = _page(thought_id)
    return await two_step(page, form, "memory_supersede", arguments, title, [], back, _just(thought_id))


async def thought_merge(page: Page, form: Form) -> Response:
    thought_id = page.path_param("thought_id")
    target_id = form.get("target_id").strip()
    content = form.get("merged_content").strip()
    arguments: dict[str, Any] = {"action": "merge", "source_id": thought_id, "target_id": target_id}
    if content:
        arguments["merged_content"] = content
    fields = [("target_id", target_id), ("merged_content", content)]
    title = "Merge this thought into another"
    back = _page(thought_id)
    return await two_step(
        page,
        form,
        "memory_supersede",
        arguments,
        title,
        fields,
        back,
        _just(thought_id, target_id),
    )


def _page(thought_id: str) -> str:
    return f"/ui/thoughts/{thought_id}"


def _ends(proposal: dict[str, Any]) -> list[str]:
    return [str(end) for end in (proposal.get("source_id"), proposal.get("target_id")) if end]


def _proposal_ends(answer: Answer) -> list[str]:
    """The two thoughts of an apply preview's proposal."""
    proposal = (answer.item or {}).get("proposal")
    return _ends(proposal) if isinstance(proposal, dict) else []


def _just(*ids: str) -> Callable[[Answer], list[str]]:
    return lambda answer: list(ids)


# ---------------------------------------------------------------- auto_cluster


async def clusters(page: Page) -> Response:
    """The auto_cluster form: its two optional arguments, then the tool's preview screen (clusters.py)."""
    values = page.values(min_similarity="", min_members="", errors=FieldErrors())
    return page.render("review_clusters.html", values)
