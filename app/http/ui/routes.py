"""The console's routes: sign-in (signin.py), the pages by area (memory.py, browse.py, curate.py, review.py, …),
the static assets (headers.py), the confirm step of the destructive admin buttons (confirm.py), and the error page
every unknown path, refusal and failure under /ui answers.

Every signed-in page is `Console.page(handler)`: the handler gets its `Page` (page.py), and a form handler the
posted fields too (`posting`, page.py: the size limit and the CSRF check). Kept apart from console.py so that the
page modules and the Console do not import each other.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

from app.http.ui import (
    browse,
    clusters,
    confirm,
    curate,
    humane,
    members,
    memory,
    operations,
    project_graph,
    review,
    signin,
    triage,
    users,
)
from app.http.ui.console import HERE, Console, ConsoleConfig
from app.http.ui.headers import StaticAssets, asset_url
from app.http.ui.operations import admin_only
from app.http.ui.page import FormHandler, Page, PageHandler, posting
from app.http.ui.session import COOKIE_PATH
from app.services.context import AppContext

logger = logging.getLogger(__name__)
POST = ["POST"]

STATIC = HERE / "static"
# The error page's heading per status; its message says what happened and what to do.
HEADINGS = {
    403: "Not allowed",
    404: "Page not found",
    405: "Not a form this page takes",
    413: "Form too large",
    500: "Something went wrong",
}


def build_console(context: AppContext, config: ConsoleConfig) -> Starlette:
    console = Console(context, config)
    console.templates.env.globals["asset"] = partial(asset_url, STATIC)
    humane.register(console.templates.env)
    console.templates.env.globals.update(
        done_message=curate.done_message, edge_types=curate.EDGE_TYPES, triage_result=triage.triage_result
    )

    def page(handler: PageHandler) -> Any:
        return console.page(handler)

    def bare(handler: Any) -> Any:
        """A page without a session (sign-in, sign-out): the handler gets the console and the request."""
        return partial(handler, console)

    def asked(describe: confirm.Describe, handler: FormHandler) -> Any:
        """A destructive admin form, behind its confirm page (confirm.py)."""
        return page(admin_only(posting(confirm.confirming(describe)(handler))))

    routes = [
        Route("/", page(memory.search), methods=["GET"]),
        Route("/sign-in", bare(signin.sign_in_form), methods=["GET"]),
        Route("/sign-in", bare(signin.sign_in), methods=["POST"]),
        Route("/sign-out", bare(signin.sign_out), methods=["POST"]),
        Route("/search", page(memory.search), methods=["GET"]),
        Route("/thoughts/new", page(curate.new_thought), methods=["GET"]),
        Route("/thoughts/new", page(posting(curate.create_thought)), methods=["POST"]),
        Route("/thoughts/{thought_id}", page(memory.thought), methods=["GET"]),
        Route("/thoughts/{thought_id}/edit", page(curate.edit_thought), methods=["GET"]),
        Route("/thoughts/{thought_id}/edit", page(posting(curate.update_thought)), methods=["POST"]),
        Route("/thoughts/{thought_id}/pick", page(curate.pick), methods=["GET"]),
        Route("/thoughts/{thought_id}/link", page(posting(curate.link)), methods=["POST"]),
        Route("/thoughts/{thought_id}/unlink", page(posting(curate.unlink)), methods=["POST"]),
        Route("/thoughts/{thought_id}/retype", page(posting(curate.retype)), methods=["POST"]),
        Route("/thoughts/{thought_id}/unarchive", page(posting(curate.unarchive)), methods=["POST"]),
        Route("/thoughts/{thought_id}/delete", page(posting(curate.delete)), methods=["POST"]),
        Route("/projects/{project_id}/timeline", page(browse.timeline), methods=["GET"]),
        Route("/browse", page(browse.browse), methods=["GET"]),
        Route("/graph", page(project_graph.project_graph), methods=["GET"]),
        Route("/thoughts/{thought_id}/archive", page(posting(review.thought_archive)), methods=["POST"]),
        Route("/thoughts/{thought_id}/merge", page(posting(review.thought_merge)), methods=["POST"]),
        Route("/review/edges", page(review.edge_queue), methods=["GET"]),
        Route("/review/edges/apply", page(posting(review.edge_apply)), methods=["POST"]),
        Route("/review/edges/apply-batch", page(posting(review.edge_apply_batch)), methods=["POST"]),
        Route("/review/edges/rollback", page(posting(review.edge_rollback)), methods=["POST"]),
        Route("/review/edges/reject", page(posting(review.edge_reject)), methods=["POST"]),
        Route("/review/edges/selected", page(posting(triage.edges_selected)), methods=["POST"]),
        Route("/review/retention", page(review.retention_list), methods=["GET"]),
        Route("/review/retention/protect", page(posting(review.retention_protect)), methods=["POST"]),
        Route("/review/retention/delete", page(posting(review.retention_delete)), methods=["POST"]),
        Route("/review/retention/compact", page(posting(review.retention_compact)), methods=["POST"]),
        Route("/review/retention/selected", page(posting(triage.retention_selected)), methods=["POST"]),
        Route("/review/clusters", page(review.clusters), methods=["GET"]),
        Route("/review/clusters/auto", page(posting(clusters.auto_cluster)), methods=["POST"]),
        Route("/admin/operations", page(admin_only(operations.overview)), methods=["GET"]),
        Route("/admin/health", page(admin_only(operations.health)), methods=["GET"]),
        Route("/admin/health/check", page(admin_only(posting(operations.health_check))), methods=["POST"]),
        Route("/admin/health/fix", page(admin_only(posting(operations.health_fix))), methods=["POST"]),
        Route("/admin/tokens", page(admin_only(operations.tokens)), methods=["GET"]),
        Route("/admin/tokens/create", page(admin_only(posting(operations.token_create))), methods=["POST"]),
        Route("/admin/tokens/revoke", asked(confirm.revoke_token, operations.token_revoke), methods=["POST"]),
        Route("/admin/tokens/rotate", asked(confirm.rotate_token, operations.token_rotate), methods=["POST"]),
        Route("/admin/users", page(admin_only(users.users)), methods=["GET"]),
        Route("/admin/users/create", page(admin_only(posting(users.user_create))), methods=["POST"]),
        Route("/admin/users/role", page(admin_only(posting(users.user_role))), methods=["POST"]),
        Route("/admin/users/password", page(admin_only(posting(users.user_password))), methods=["POST"]),
        Route("/admin/users/password/clear", asked(confirm.clear_password, users.user_password_clear), methods=POST),
        Route("/admin/users/sign-out", asked(confirm.end_sessions, users.user_sign_out), methods=["POST"]),
        Route("/admin/members", page(admin_only(members.members)), methods=["GET"]),
        Route("/admin/members/add", page(admin_only(posting(members.member_add))), methods=["POST"]),
        Route("/admin/members/remove", asked(confirm.remove_member, members.member_remove), methods=["POST"]),
        Route("/admin/members/open", page(admin_only(posting(members.project_open))), methods=["POST"]),
        Route("/admin/members/close", asked(confirm.close_project, members.project_close), methods=["POST"]),
        Mount("/static", app=StaticAssets(STATIC)),
    ]

    async def error_page(request: Request, error: Exception) -> Response:
        """Unknown paths, refused forms and failures: the error page with the console's chrome (the user's
        navigation when the session is good), never the framework's plain text."""
        status = error.status_code if isinstance(error, HTTPException) else 500
        if status == 404:
            message = f"There is no console page at {request.url.path}. Search, or pick a page from the navigation."
        elif isinstance(error, HTTPException) and status != 500:
            message = str(error.detail)
        else:
            message = "The console failed on this page; it is logged. Retry, or go back and try another way."
        values: dict[str, Any] = {"user": None, "message": message, "status": status}
        try:
            principal, session = await console.principal(request)
            if principal is not None:
                values = Page(console, request, principal, session).values(message=message, status=status)
        except Exception:  # the database may be why this page is shown: the chrome then goes without the user
            logger.warning("console error page: session lookup failed", exc_info=True)
        values["heading"] = HEADINGS.get(status, "Something went wrong")
        return console.render(request, "error.html", values, status)

    handlers = {HTTPException: error_page, Exception: error_page}
    return Starlette(routes=[Mount(COOKIE_PATH, routes=routes)], exception_handlers=handlers)
