"""The console's review pages: the edge_review queue, the retention_review list, auto_cluster, and archive / merge
from a thought page. Every write goes through the tool's own dispatch, each destructive one through its preview."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from app.http.ui import forms
from app.http.ui.console import Answer
from app.http.ui.forms import FieldErrors, count_param
from app.http.ui.session import SessionData
from app.mcp.calls import CallContext, ToolAnswer
from app.mcp.tools.edge_review.args import ListArgs as EdgeListArgs
from app.mcp.tools.edge_review.handlers import list_proposals
from app.services.values import Principal

if TYPE_CHECKING:
    from app.http.ui.console import Console, Form

PROPOSAL_STATUSES = ("pending", "accepted", "rejected", "stale", "expired", "rolled_back")
PROPOSAL_PAGE = 25
RETENTION_PAGE = 25
EDGES = "/ui/review/edges"
RETENTION = "/ui/review/retention"
CLUSTERS = "/ui/review/clusters"


# ---------------------------------------------------------------- edge_review


async def _queue_of(project_id: uuid.UUID, args: Any, ctx: CallContext) -> ToolAnswer:
    assert isinstance(args, EdgeListArgs)  # edge_review list's validated arguments
    return await list_proposals(args, ctx, project_id)


async def edge_queue(console: Console, request: Request, principal: Principal, session: SessionData | None) -> Response:
    params = request.query_params
    projects = await console.projects(principal)
    project = console.pick(projects.items, params.get("project"))
    status = params.get("status") if params.get("status") in PROPOSAL_STATUSES else "pending"
    offset = count_param(params.get("offset"))
    arguments: dict[str, Any] = {"action": "list", "status": status, "limit": PROPOSAL_PAGE, "offset": offset}
    # that project's own queue, with or without a path (the tool's call, scoped by the project's id)
    run = partial(_queue_of, uuid.UUID(str(project["id"]))) if project else None
    answer = await console.call(principal, "edge_review", arguments, run)
    thoughts = await console.thoughts(principal, [end for row in answer.items for end in _ends(row)])
    values = console.base(
        principal,
        session,
        projects=projects,
        project=project,
        answer=answer,
        thoughts=thoughts,
        status=status,
        statuses=PROPOSAL_STATUSES,
        offset=offset,
        page=PROPOSAL_PAGE,
        total=answer.total,
    )
    return console.render(request, "review_edges.html", values, answer.page_status)


async def edge_apply(
    console: Console, request: Request, principal: Principal, session: SessionData | None, form: Form
) -> Response:
    proposal_id = form.get("proposal_id")
    arguments = {"action": "apply", "proposal_id": proposal_id}
    title = "Apply an edge proposal"
    fields = [("proposal_id", proposal_id)]
    return await console.two_step(
        request, principal, session, form, "edge_review", arguments, title, fields, EDGES, _proposal_ends
    )


async def edge_apply_batch(
    console: Console, request: Request, principal: Principal, session: SessionData | None, form: Form
) -> Response:
    ids = form.all("proposal_ids")
    arguments: dict[str, Any] = {"action": "apply_batch", "proposal_ids": ids}
    fields = [("proposal_ids", proposal_id) for proposal_id in ids]
    title = "Apply the selected proposals"
    return await console.two_step(request, principal, session, form, "edge_review", arguments, title, fields, EDGES)


async def edge_rollback(
    console: Console, request: Request, principal: Principal, session: SessionData | None, form: Form
) -> Response:
    run_id = form.get("run_id")
    arguments = {"action": "rollback", "run_id": run_id}
    title = "Roll back an apply run"
    return await console.two_step(
        request, principal, session, form, "edge_review", arguments, title, [("run_id", run_id)], EDGES
    )


async def edge_reject(
    console: Console, request: Request, principal: Principal, session: SessionData | None, form: Form
) -> Response:
    answer = await console.call(principal, "edge_review", {"action": "reject", "proposal_id": form.get("proposal_id")})
    return _outcome(console, request, principal, session, answer, "Reject an edge proposal", EDGES)


# ---------------------------------------------------------------- retention_review


async def retention_list(
    console: Console, request: Request, principal: Principal, session: SessionData | None
) -> Response:
    params = request.query_params
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
    answer = await console.call(principal, "retention_review", arguments) if not errors else Answer()
    values = console.base(
        principal,
        session,
        answer=answer,
        errors=errors,
        offset=offset,
        page=RETENTION_PAGE,
        min_age_days=params.get("min_age_days", ""),
        importance_floor=params.get("importance_floor", ""),
        total=answer.total,
    )
    return console.render(request, "review_retention.html", values, 400 if errors else answer.page_status)


async def retention_protect(
    console: Console, request: Request, principal: Principal, session: SessionData | None, form: Form
) -> Response:
    protected = form.get("protected") != "false"
    arguments = {"action": "protect", "thought_id": form.get("thought_id"), "protected": protected}
    answer = await console.call(principal, "retention_review", arguments)
    title = "Protect a thought" if protected else "Unprotect a thought"
    return _outcome(console, request, principal, session, answer, title, RETENTION)


async def retention_delete(
    console: Console, request: Request, principal: Principal, session: SessionData | None, form: Form
) -> Response:
    thought_id = form.get("thought_id")
    arguments = {"action": "delete", "thought_id": thought_id}
    title = "Delete a retention candidate"
    fields = [("thought_id", thought_id)]
    return await console.two_step(
        request, principal, session, form, "retention_review", arguments, title, fields, RETENTION, _just(thought_id)
    )


async def retention_compact(
    console: Console, request: Request, principal: Principal, session: SessionData | None, form: Form
) -> Response:
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
    return await console.two_step(
        request, principal, session, form, "retention_review", arguments, title, fields, RETENTION
    )


# ---------------------------------------------------------------- thought page: archive, merge


async def thought_archive(
    console: Console, request: Request, principal: Principal, session: SessionData | None, form: Form
) -> Response:
    thought_id = request.path_params["thought_id"]
    arguments = {"action": "archive", "thought_id": thought_id}
    title = "Archive a thought"
    back = _page(thought_id)
    return await console.two_step(
        request, principal, session, form, "memory_supersede", arguments, title, [], back, _just(thought_id)
    )


async def thought_merge(
    console: Console, request: Request, principal: Principal, session: SessionData | None, form: Form
) -> Response:
    thought_id = request.path_params["thought_id"]
    target_id = form.get("target_id").strip()
    content = form.get("merged_content").strip()
    arguments: dict[str, Any] = {"action": "merge", "source_id": thought_id, "target_id": target_id}
    if content:
        arguments["merged_content"] = content
    fields = [("target_id", target_id), ("merged_content", content)]
    title = "Merge this thought into another"
    back = _page(thought_id)
    return await console.two_step(
        request,
        principal,
        session,
        form,
        "memory_supersede",
        arguments,
        title,
        fields,
        back,
        _just(thought_id, target_id),
    )


def _outcome(
    console: Console,
    request: Request,
    principal: Principal,
    session: SessionData | None,
    answer: Answer,
    title: str,
    back: str,
) -> Response:
    """A one-step write's outcome page (no preview): what the tool answered, and the way back."""
    values = console.base(principal, session, answer=answer, title=title, back=back)
    return console.render(request, "outcome.html", values, answer.page_status)


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


async def clusters(console: Console, request: Request, principal: Principal, session: SessionData | None) -> Response:
    """The auto_cluster form: its two optional arguments, then the tool's preview screen (clusters.py)."""
    values = console.base(principal, session, min_similarity="", min_members="", errors=FieldErrors())
    return console.render(request, "review_clusters.html", values)
