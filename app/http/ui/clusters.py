"""auto_cluster from the console: its form's numbers checked with the form's labels, its preview with a checkbox
per group, and the confirm.

Confirming every group is the tool's own confirm (`memory_crystallize action=auto_cluster confirm=true` with the
preview's token). Leaving groups out creates the kept ones with `memory_crystallize action=cluster` — one call
per group, the group's members, tag `auto` — which makes the same cluster thought auto_cluster would (its title
from the newest member, tags `cluster` and `auto`, the members' project when they share one); the unused token
expires. The confirm is the tool's call; each kept group runs the cluster operation
(app.services.crystallize.operations.create_cluster, with the arguments' rules the tool's handler uses) behind the
action's checks (tool_calls.checked), so roles, validation and audit are MCP's.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from app.http.ui import forms
from app.http.ui.forms import FieldErrors, Form
from app.http.ui.page import Page
from app.http.ui.review import CLUSTERS
from app.http.ui.tool_calls import Refusal, call, checked, two_step
from app.mcp.calls import CallContext
from app.mcp.tools.crystallize.args import ClusterArgs
from app.services.crystallize import operations as crystallize_operations
from app.services.crystallize.operations import NewClusterResult

TITLE = "Group similar thoughts into clusters"


async def auto_cluster(page: Page, form: Form) -> Response:
    typed_distance, typed_members = form.get("min_similarity").strip(), form.get("min_members").strip()
    # The contract's bounds (0 < min_similarity ≤ 2, 2 ≤ min_members ≤ 1000), said with the form's labels.
    errors = FieldErrors()
    distance = forms.number(errors, "min_similarity", typed_distance, label="Largest cosine distance", above=0, high=2)
    members = forms.number(errors, "min_members", typed_members, label="Smallest cluster", whole=True, low=2, high=1000)
    if errors:
        values = page.values(min_similarity=typed_distance, min_members=typed_members, errors=errors)
        return page.render("review_clusters.html", values, 400)
    arguments: dict[str, Any] = {"action": "auto_cluster"}
    if distance is not None:
        arguments["min_similarity"] = distance
    if members is not None:
        arguments["min_members"] = int(members)
    fields = [("min_similarity", typed_distance), ("min_members", typed_members)]
    if form.get("confirm") != "true":
        return await _preview(page, arguments, fields)
    groups = int(forms.number(FieldErrors(), "groups", form.get("groups"), label="", whole=True) or 0)
    kept = [index for index in dict.fromkeys(form.all("keep")) if form.all(f"members_{index}")]
    if len(kept) == groups:  # every group: the tool's own confirm, redeeming the preview's token
        return await two_step(page, form, "memory_crystallize", arguments, TITLE, fields, CLUSTERS)
    made, failures = 0, []
    for index in kept:
        cluster = {"action": "cluster", "thought_ids": form.all(f"members_{index}"), "tags": ["auto"]}
        created = await checked(page, "memory_crystallize", cluster, _cluster_one)
        if isinstance(created, Refusal) and created.status == 403:
            values = page.values(answer=created.answer, title=TITLE, back=CLUSTERS)
            return page.render("outcome.html", values, 403)
        if isinstance(created, Refusal):
            failures.append(created.error)
        else:
            made += 1
    values = page.values(made=made, left_out=groups - len(kept), failures=failures, back=CLUSTERS)
    return page.render("cluster_result.html", values)


async def _cluster_one(args: Any, ctx: CallContext) -> NewClusterResult:
    assert isinstance(args, ClusterArgs)
    return await crystallize_operations.create_cluster(
        ctx.app, ctx.principal, args.thought_ids, args.title, args.tags, args.cwd
    )


async def _preview(
    page: Page,
    arguments: dict[str, Any],
    fields: list[tuple[str, str]],
) -> Response:
    answer = await call(page, "memory_crystallize", arguments)
    values = page.values(answer=answer, title=TITLE, back=CLUSTERS, action=page.path)
    if answer.error is not None or answer.preview is None:
        return page.render("outcome.html", values, answer.page_status)
    token = answer.preview.get("token")
    hidden = [*fields, ("confirm", "true"), ("groups", str(len(answer.items)))]
    hidden += [("preview_token", str(token))] if token else []
    for index, group in enumerate(answer.items):
        hidden += [(f"members_{index}", str(member["id"])) for member in group.get("members") or []]
    return page.render("cluster_preview.html", {**values, "hidden": hidden})
