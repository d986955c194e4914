"""The web console at /ui: the `Console` (context, templates, the session lookup of every page) and the router that
sends /ui to it.

What else the console is lives in a module per job: sign-in and sign-out (signin.py), the page context every handler
gets (page.py), the forms' reading and CSRF check (forms.py), the route table (routes.py), and the pages by area —
memory.py (search, a thought), browse.py, curate.py, review.py, triage.py, clusters.py, project_graph.py,
operations.py, users.py, members.py. The pages call the application operations (`app/services/<area>/operations.py`)
as the `console` door's actor; the writes that preview over MCP reach the tools' confirm flows through tool_calls.py.
Every signed-in page runs as its user (`Console.page`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Receive, Scope, Send

from app.db.engine import is_unavailable as is_unavailable  # also the sign-in forms' (signin.py)
from app.errors import AppError
from app.http.ui.headers import SecurityHeaders
from app.http.ui.page import Page, PageHandler
from app.http.ui.session import COOKIE_PATH, SESSION_COOKIE, SessionCodec, SessionData
from app.services.actors import Actor
from app.services.auth import operations as auth_operations
from app.services.auth import sessions
from app.services.auth.passwords import PasswordCheck
from app.services.context import AppContext
from app.services.values import Principal

logger = logging.getLogger(__name__)

HERE = Path(__file__).parent
UNAVAILABLE = "The database is unavailable; retry shortly."


@dataclass(frozen=True)
class ConsoleConfig:
    codec: SessionCodec
    local: Callable[[], Principal | None] | None = None  # auth mode `none`: every caller is the local user
    # The process's password check, shared with the OAuth sign-in page (one throttle for both forms).
    passwords: PasswordCheck = field(default_factory=PasswordCheck)
    # The upstream OpenID Connect provider's name when single sign-on is on (its flow: app/http/oidc.py).
    upstream: str | None = None


class Console:
    def __init__(self, context: AppContext, config: ConsoleConfig) -> None:
        self.context = context
        self.config = config
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))

    async def principal(self, request: Request) -> tuple[Principal | None, SessionData | None]:
        """The signed-in user, looked up again on every request with their session (app.services.auth.operations
        .console_session): an ended session, or one whose token or password went, is refused like an expired one."""
        if self.config.local is not None:
            return self.config.local(), None
        session = self.config.codec.read(request.cookies.get(SESSION_COOKIE))
        if session is None:
            return None, None
        found = await auth_operations.console_session(self.context, session.secret)
        if found is None:
            return None, None
        if found.kind == sessions.UPSTREAM and not self.config.upstream:  # valid while single sign-on stays on
            return None, None
        return found.principal, session

    def render(self, request: Request, name: str, values: dict[str, Any], status: int = 200) -> Response:
        response = self.templates.TemplateResponse(request, name, values, status_code=status)
        # Pages show memory content: no shared or back-button cache keeps them after sign-out. (The security
        # headers of every /ui response are ConsoleRouter's: app/http/ui/headers.py.)
        response.headers["Cache-Control"] = "no-store"
        return response

    @property
    def signs_in_locally(self) -> bool:
        """Auth mode `none`: everyone is the local user, with no session."""
        return self.config.local is not None

    def csrf(self, session: SessionData | None) -> str:
        """The forms' CSRF token: the session's, or with auth mode `none` one derived from the signing key."""
        return session.csrf if session else self.config.codec.local_csrf()

    def page(self, handler: PageHandler) -> Callable[[Request], Awaitable[Response]]:
        """A signed-in page: anyone else goes to the sign-in form, then comes back. An operation's refusal
        (`AppError`) is the error page with its status and message, as the tool answers it over MCP."""

        async def endpoint(request: Request) -> Response:
            started = time.perf_counter()
            try:
                principal, session = await self.principal(request)
            except Exception as error:
                if not is_unavailable(error):
                    raise
                return self.render(request, "error.html", {"message": UNAVAILABLE}, 503)
            if principal is None:
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return RedirectResponse(f"{COOKIE_PATH}/sign-in?{urlencode({'next': target})}", status_code=303)
            page = Page(self, request, principal, session)
            # Every unit of work the page opens sees what the user may see over MCP (docs/SECURITY.md,
            # "Per-project membership"): the operations it calls as well as its tool calls.
            with Actor.console(principal).acting(f"console {request.url.path}"):
                try:
                    response = await handler(page)
                except AppError as error:
                    response = page.error(error.message, error.status_code)
                except Exception as error:
                    if not is_unavailable(error):
                        raise
                    response = page.error(UNAVAILABLE, 503)
            response.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.1f}"
            return response

        return endpoint


class ConsoleRouter:
    """Sends /ui to the console, everything else to the service's app.

    The console sits beside the bearer check, not behind it: a browser sends its session cookie, never an
    Authorization header, and each console page authenticates the cookie itself.
    """

    def __init__(self, app: ASGIApp, console: ASGIApp) -> None:
        self.app = app
        # Every /ui response — pages, assets, refusals of the Host check, redirects — gets the security headers.
        self.console = SecurityHeaders(console)
        self.bare = SecurityHeaders(RedirectResponse(f"{COOKIE_PATH}/", status_code=308))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and _is_console(scope["path"]):
            await (self.bare if scope["path"] == COOKIE_PATH else self.console)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _is_console(path: str) -> bool:
    return path == COOKIE_PATH or path.startswith(COOKIE_PATH + "/")
