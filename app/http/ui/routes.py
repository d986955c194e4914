"""The console's routes: the memory pages of console.py, the review, operations, users and members pages, the static
assets.

Kept apart from console.py so that review.py, operations.py, users.py and members.py, which take a Console, and
the Console itself do not import each other.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from app.http.ui import members, operations, review, users
from app.http.ui.console import HERE, Console, ConsoleConfig, posting
from app.http.ui.operations import admin_only
from app.http.ui.session import COOKIE_PATH, SessionData
from app.services.context import AppContext
from app.services.values import Principal


def build_console(context: AppContext, config: ConsoleConfig) -> Starlette:
    console = Console(context, config)

    def page(handler: Callable[[Console, Request, Principal, SessionData | None], Awaitable[Response]]) -> Any:
        return console.page(partial(handler, console))

    routes = [
        Route("/", console.page(console.home), methods=["GET"]),
        Route("/sign-in", console.sign_in_form, methods=["GET"]),
        Route("/sign-in", console.sign_in, methods=["POST"]),
        Route("/sign-out", console.sign_out, methods=["POST"]),
        Route("/search", console.page(console.search), methods=["GET"]),
        Route("/thoughts/{thought_id}", console.page(console.thought), methods=["GET"]),
        Route("/projects/{project_id}/timeline", console.page(console.timeline), methods=["GET"]),
        Route("/thoughts/{thought_id}/archive", page(posting(review.thought_archive)), methods=["POST"]),
        Route("/thoughts/{thought_id}/merge", page(posting(review.thought_merge)), methods=["POST"]),
        Route("/review/edges", page(review.edge_queue), methods=["GET"]),
        Route("/review/edges/apply", page(posting(review.edge_apply)), methods=["POST"]),
        Route("/review/edges/apply-batch", page(posting(review.edge_apply_batch)), methods=["POST"]),
        Route("/review/edges/rollback", page(posting(review.edge_rollback)), methods=["POST"]),
        Route("/review/edges/reject", page(posting(review.edge_reject)), methods=["POST"]),
        Route("/review/retention", page(review.retention_list), methods=["GET"]),
        Route("/review/retention/protect", page(posting(review.retention_protect)), methods=["POST"]),
        Route("/review/retention/delete", page(posting(review.retention_delete)), methods=["POST"]),
        Route("/review/retention/compact", page(posting(review.retention_compact)), methods=["POST"]),
        Route("/review/clusters", page(review.clusters), methods=["GET"]),
        Route("/review/clusters/auto", page(posting(review.auto_cluster)), methods=["POST"]),
        Route("/admin/operations", page(admin_only(operations.overview)), methods=["GET"]),
        Route("/admin/health", page(admin_only(operations.health)), methods=["GET"]),
        Route("/admin/health/check", page(admin_only(posting(operations.health_check))), methods=["POST"]),
        Route("/admin/health/fix", page(admin_only(posting(operations.health_fix))), methods=["POST"]),
        Route("/admin/tokens", page(admin_only(operations.tokens)), methods=["GET"]),
        Route("/admin/tokens/create", page(admin_only(posting(operations.token_create))), methods=["POST"]),
        Route("/admin/tokens/revoke", page(admin_only(posting(operations.token_revoke))), methods=["POST"]),
        Route("/admin/tokens/rotate", page(admin_only(posting(operations.token_rotate))), methods=["POST"]),
        Route("/admin/users", page(admin_only(users.users)), methods=["GET"]),
        Route("/admin/users/create", page(admin_only(posting(users.user_create))), methods=["POST"]),
        Route("/admin/users/role", page(admin_only(posting(users.user_role))), methods=["POST"]),
        Route("/admin/users/password", page(admin_only(posting(users.user_password))), methods=["POST"]),
        Route("/admin/users/password/clear", page(admin_only(posting(users.user_password_clear))), methods=["POST"]),
        Route("/admin/users/sign-out", page(admin_only(posting(users.user_sign_out))), methods=["POST"]),
        Route("/admin/members", page(admin_only(members.members)), methods=["GET"]),
        Route("/admin/members/add", page(admin_only(posting(members.member_add))), methods=["POST"]),
        Route("/admin/members/remove", page(admin_only(posting(members.member_remove))), methods=["POST"]),
        Route("/admin/members/open", page(admin_only(posting(members.project_open))), methods=["POST"]),
        Route("/admin/members/close", page(admin_only(posting(members.project_close))), methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=str(HERE / "static"))),
    ]
    return Starlette(routes=[Mount(COOKIE_PATH, routes=routes)])
