"""The web console at /ui: server-rendered pages over the same tool dispatch agents call.

The memory and review pages read and write through `app.mcp.dispatch.dispatch` with the signed-in principal, so
roles, validation, scoping and rate limits are the contract's; the one shortcut is `Console.thoughts`, one read for
many thoughts (app.services.recall.operations). The admin pages (operations.py, users.py, members.py) call the services
the CLI and the REST routes call, as their docstrings say. Every signed-in page runs as its user (`Console.page`).
"""

from __future__ import annotations

import logging
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import parse_qs, urlencode

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Receive, Scope, Send

from app.db.engine import is_unavailable
from app.http.ui.forms import count_param
from app.http.ui.graph import legend, neighbourhood
from app.http.ui.headers import SecurityHeaders
from app.http.ui.session import (
    COOKIE_PATH,
    SESSION_COOKIE,
    SIGN_IN_COOKIE,
    SessionCodec,
    SessionData,
    open_session,
    same_token,
)
from app.mcp.calls import CallContext, ToolAnswer
from app.mcp.dispatch import Runner, dispatch
from app.mcp.registry import ToolSpec
from app.mcp.shaping import ThoughtShaper
from app.mcp.tools.catalog import ALL_SPECS
from app.mcp.tools.recall.args import SearchArgs
from app.mcp.tools.recall.handlers import search_answer
from app.services.actors import Actor
from app.services.auth import sessions
from app.services.auth.passwords import PasswordCheck, TooManyAttempts
from app.services.auth.sessions import ConsoleSessionService
from app.services.auth.tokens import AuthService
from app.services.context import AppContext
from app.services.recall import operations as recall_operations
from app.services.values import Principal

logger = logging.getLogger(__name__)

HERE = Path(__file__).parent
SPECS: dict[str, ToolSpec] = {spec.name: spec for spec in ALL_SPECS}
STATUSES = ("active", "draft", "archived", "all")
# memory_recall search's supersession_mode: how superseded thoughts stand in the answer.
STANDINGS = (("flag", "flag superseded"), ("suppress", "hide superseded"), ("off", "ignore supersession"))
# memory_recall search answers at most 100 hits and takes no offset: "more" asks again for SEARCH_STEP more.
SEARCH_STEP = 10
SEARCH_LIMIT = 100
# the largest console form: a page of selected ids (≤ 50 × 36 characters) beside a summary (≤ 720 characters)
FORM_LIMIT = 16 * 1024
BAD_TOKEN = "That API token was not accepted: it is unknown, revoked or expired. Paste the whole token (smt_…)."
# One text for an unknown user, a user without a password and a wrong password: nothing tells them apart.
BAD_PASSWORD = "That user name and password were not accepted."


@dataclass(frozen=True)
class ConsoleConfig:
    codec: SessionCodec
    local: Callable[[], Principal | None] | None = None  # auth mode `none`: every caller is the local user
    # The process's password check, shared with the OAuth sign-in page (one throttle for both forms).
    passwords: PasswordCheck = field(default_factory=PasswordCheck)
    # The upstream OpenID Connect provider's name when single sign-on is on (its flow: app/http/oidc.py).
    upstream: str | None = None


@dataclass
class Answer:
    """One tool call's answer as a page needs it: the payload, or the error message and status."""

    payload: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    status: int = 200

    @property
    def items(self) -> list[Any]:
        items = self.payload.get("items")
        return items if isinstance(items, list) else []

    @property
    def item(self) -> dict[str, Any] | None:
        item = self.payload.get("item")
        return item if isinstance(item, dict) else None

    @property
    def meta(self) -> dict[str, Any]:
        meta = self.payload.get("meta")
        return meta if isinstance(meta, dict) else {}

    @property
    def warnings(self) -> list[str]:
        return list(self.meta.get("warnings") or [])

    @property
    def preview(self) -> dict[str, Any] | None:
        """meta.preview of a destructive action's preview answer; None on an executed (or refused) one."""
        preview = self.meta.get("preview")
        return preview if isinstance(preview, dict) else None

    @property
    def total(self) -> int:
        """meta.counts.total of a listing answer (0 without it)."""
        counts = self.meta.get("counts")
        return int((counts if isinstance(counts, dict) else {}).get("total") or 0)

    @property
    def total_capped(self) -> bool:
        """meta.counts.total_capped of a console page's capped count (app/http/ui/browse.py): more match than
        `total`."""
        counts = self.meta.get("counts")
        return bool((counts if isinstance(counts, dict) else {}).get("total_capped"))

    @property
    def page_status(self) -> int:
        """The status of the page that shows this answer: the error's, else 200."""
        return self.status if self.error else 200


async def call_tool(
    context: AppContext, principal: Principal, tool: str, arguments: dict[str, Any], run: Runner | None = None
) -> Answer:
    """The tool's own dispatch, as over MCP: the contract's validation, roles and errors apply (`run`: see
    `app.mcp.dispatch.dispatch`)."""
    result = await dispatch(SPECS[tool], arguments, context, principal, run)
    structured = result.structured_content or {}
    payload = structured.get("result")
    if not result.is_error:
        return Answer(payload if isinstance(payload, dict) else {})
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict):
        return Answer(error=str(error.get("message")), status=int(error.get("statusCode") or 500))
    text = "".join(getattr(block, "text", "") for block in result.content)
    return Answer(error=text or f"{tool} failed", status=500)


def in_project(project_id: str) -> Runner:
    """`memory_recall action=search` scoped to a project by its id: the contract's cwd cannot name a project
    without a `local_path`, so the tool's call (validation, role, rate limit, errors) runs the operation with
    the project's id instead of the cwd (a project the user may not see is not found)."""

    async def run(args: Any, ctx: CallContext) -> ToolAnswer:
        assert isinstance(args, SearchArgs)  # the search action's validated arguments
        return await recall_operations.search_answered(
            ctx.app, args, lambda found: search_answer(args, args, found), project_id=uuid.UUID(project_id)
        )

    return run


class Console:
    def __init__(self, context: AppContext, config: ConsoleConfig) -> None:
        self.context = context
        self.config = config
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))

    # ------------------------------------------------------------ sessions

    async def principal(self, request: Request) -> tuple[Principal | None, SessionData | None]:
        """The signed-in user, looked up again on every request with their session (app.services.auth.sessions): an
        ended session, or one whose token or password went, is refused like an expired one."""
        if self.config.local is not None:
            return self.config.local(), None
        session = self.config.codec.read(request.cookies.get(SESSION_COOKIE))
        if session is None:
            return None, None
        async with self.context.db.autocommit() as db:  # one SELECT (and, once a minute, the last-seen UPDATE)
            found = await ConsoleSessionService(db).current(session.secret)
        if found is None:
            return None, None
        if found.kind == sessions.UPSTREAM and not self.config.upstream:  # valid while single sign-on stays on
            return None, None
        return found.principal, session

    def render(self, request: Request, name: str, values: dict[str, Any], status: int = 200) -> Response:
        response = self.templates.TemplateResponse(request, name, values, status_code=status)
        _no_store(response)
        return response

    def sign_in_page(
        self,
        request: Request,
        error: str | None = None,
        status: int = 200,
        *,
        by_password: bool = False,
        user_name: str = "",
        next_page: str | None = None,
    ) -> Response:
        # A fresh double-submit token per form: the cookie and the hidden field must come back equal.
        csrf = secrets.token_urlsafe(32)
        values = {
            "csrf": csrf,
            "error": error,
            "error_for": "password" if by_password else "token",
            "user": None,
            "user_name": user_name,
            "next": _safe_next(next_page or request.query_params.get("next")),
            "upstream": self.config.upstream,
        }
        response = self.render(request, "sign_in.html", values, status)
        response.set_cookie(SIGN_IN_COOKIE, csrf, max_age=3600, path=COOKIE_PATH, **_flags(request))
        return response

    async def sign_in_form(self, request: Request) -> Response:
        principal, _ = await self.principal(request)
        if principal is not None:
            return RedirectResponse(f"{COOKIE_PATH}/", status_code=303)
        return self.sign_in_page(request)

    async def sign_in(self, request: Request) -> Response:
        form = await _form(request)
        if form is None:
            return _too_large()
        if not same_token(request.cookies.get(SIGN_IN_COOKIE), form.get("csrf")):
            return _csrf_refusal()
        if "password" in form.fields:
            return await self.sign_in_with_password(request, form)
        token = form.get("token").strip()
        if not token:
            return self.sign_in_page(request, "Paste your API token to sign in.", 400, next_page=form.get("next"))
        try:
            async with self.context.db.autocommit() as db:  # the bearer check's verification, token and all
                # No TokenUsage: its flusher belongs to the /mcp app; `token list` shows MCP use, not sign-ins.
                principal = await AuthService(db).verify(token)
            if principal is None:
                logger.info("console sign-in refused: token not accepted")
                return self.sign_in_page(request, BAD_TOKEN, 401, next_page=form.get("next"))
            assert principal.user_id is not None and principal.token_id is not None
            # Revoked between the two: the session's lookup checks its token, so it would open nothing.
            cookie = await open_session(
                self.context.db, self.config.codec, principal.user_id, sessions.TOKEN, token_id=principal.token_id
            )
        except Exception as error:
            if not is_unavailable(error):
                raise
            return self.sign_in_page(request, "The database is unavailable; try again shortly.", 503)
        logger.info("console sign-in: user %r (API token)", principal.name)
        return self.signed_in(request, form, cookie)

    async def sign_in_with_password(self, request: Request, form: Form) -> Response:
        """The OAuth sign-in page's check (PasswordCheck: throttled per user name, one answer and one pace for
        an unknown user, no password and a wrong one), then the same session cookie as a token's."""
        name, password = form.get("user").strip()[:200], form.get("password")

        def refuse(message: str, status: int) -> Response:
            return self.sign_in_page(
                request, message, status, by_password=True, user_name=name, next_page=form.get("next")
            )

        if not name or not password:
            return refuse("Enter your user name and password to sign in.", 400)
        try:
            matched = await self.config.passwords.check(self.context.db, name, password)
            if matched is None or matched.principal.user_id is None:
                return refuse(BAD_PASSWORD, 401)
            cookie = await open_session(
                self.context.db,
                self.config.codec,
                matched.principal.user_id,
                sessions.PASSWORD,
                password_hash=matched.password_hash,
            )
        except TooManyAttempts as refusal:
            wait = f"retry in {refusal.retry_after:.0f} s"
            response = refuse(f"Too many sign-in attempts for this user name: {wait}.", 429)
            response.headers["Retry-After"] = str(max(1, round(refusal.retry_after)))
            return response
        except Exception as error:
            if not is_unavailable(error):
                raise
            return refuse("The database is unavailable; try again shortly.", 503)
        logger.info("console sign-in: user %r (password)", matched.principal.name)
        return self.signed_in(request, form, cookie)

    def signed_in(self, request: Request, form: Form, cookie: str) -> Response:
        response = RedirectResponse(_safe_next(form.get("next")), status_code=303)
        response.set_cookie(
            SESSION_COOKIE, cookie, max_age=self.config.codec.max_age, path=COOKIE_PATH, **_flags(request)
        )
        response.delete_cookie(SIGN_IN_COOKIE, path=COOKIE_PATH)
        return response

    async def sign_out(self, request: Request) -> Response:
        form = await _form(request)
        if form is None:
            return _too_large()
        principal, session = await self.principal(request)
        if principal is not None and not same_token(self.csrf(session), form.get("csrf")):
            return _csrf_refusal()
        if session is not None:  # ended on the server: a copy of the cookie is refused from now on
            async with self.context.db.unit_of_work() as db:
                await ConsoleSessionService(db).sign_out(session.secret)
            logger.info("console sign-out: user %r", principal.name if principal else None)
        response = RedirectResponse(f"{COOKIE_PATH}/sign-in", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH, **_flags(request))
        return response

    # ------------------------------------------------------------ pages

    def page(
        self, handler: Callable[[Request, Principal, SessionData | None], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """A signed-in page: anyone else goes to the sign-in form, then comes back."""

        async def endpoint(request: Request) -> Response:
            started = time.perf_counter()
            try:
                principal, session = await self.principal(request)
            except Exception as error:
                if not is_unavailable(error):
                    raise
                return self.render(request, "error.html", _error("The database is unavailable; retry shortly."), 503)
            if principal is None:
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return RedirectResponse(f"{COOKIE_PATH}/sign-in?{urlencode({'next': target})}", status_code=303)
            # Every unit of work the page opens sees what the user may see over MCP (docs/SECURITY.md,
            # "Per-project membership"): the services it calls directly as well as its tool calls.
            with Actor.console(principal).acting(f"console {request.url.path}"):
                response = await handler(request, principal, session)
            response.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.1f}"
            return response

        return endpoint

    def csrf(self, session: SessionData | None) -> str:
        """The forms' CSRF token: the session's, or with auth mode `none` one derived from the signing key."""
        return session.csrf if session else self.config.codec.local_csrf()

    def base(self, principal: Principal, session: SessionData | None, **values: Any) -> dict[str, Any]:
        return {
            "user": principal,
            "csrf": self.csrf(session),
            "local": self.config.local is not None,
            **values,
        }

    async def posted(self, request: Request, session: SessionData | None) -> Form | Response:
        """A signed-in form's fields, or the refusal (403 without its CSRF token, 413 past FORM_LIMIT)."""
        form = await _form(request)
        if form is None:
            return _too_large()
        if not same_token(self.csrf(session), form.get("csrf")):
            return _csrf_refusal()
        return form

    async def two_step(
        self,
        request: Request,
        principal: Principal,
        session: SessionData | None,
        form: Form,
        tool: str,
        arguments: dict[str, Any],
        title: str,
        fields: list[tuple[str, str]],
        back: str,
        involved: Callable[[Answer], list[str]] | None = None,
    ) -> Response:
        """A destructive action through its preview screen, as over MCP: without `confirm` the tool previews and
        the page shows what it answered (consequence, instruction, plan) with a confirm form carrying the same
        fields, `confirm=true` and the preview's token; the confirm post executes (the tool redeems the token).
        `involved` names the thoughts the preview concerns: the screen shows their content beside the plan."""
        confirmed = form.get("confirm") == "true"
        call = dict(arguments)
        if confirmed:
            call["confirm"] = True
            if form.get("preview_token"):
                call["preview_token"] = form.get("preview_token")
        answer = await call_tool(self.context, principal, tool, call)
        values = self.base(principal, session, answer=answer, title=title, back=back, action=request.url.path)
        if answer.error is not None:
            return self.render(request, "outcome.html", values, answer.status)
        if confirmed or answer.preview is None:  # executed, or nothing to confirm (e.g. not found)
            return self.render(request, "outcome.html", values)
        token = answer.preview.get("token")
        hidden = [*fields, ("confirm", "true")] + ([("preview_token", str(token))] if token else [])
        thoughts = await self.thoughts(principal, involved(answer) if involved else [])
        return self.render(request, "preview.html", {**values, "hidden": hidden, "thoughts": thoughts})

    async def thoughts(self, principal: Principal, ids: list[str]) -> dict[str, dict[str, Any]]:
        """Each thought by id, shaped as `memory_recall action=get` answers it, or `{"error": …}` for an id that is
        not a thought. One read for all of them (app.services.recall.operations.get_many), no hit counted: a page of 25
        proposals shows up to 50 thoughts, which took 50 `get` calls (~150 ms at 100 k thoughts, docs/CONSOLE.md).
        Every role may read every thought, so the principal only has to be signed in."""
        unique = list(dict.fromkeys(thought_id for thought_id in ids if thought_id))
        parsed = {thought_id: _uuid(thought_id) for thought_id in unique}
        found = await recall_operations.get_many(
            self.context, [value for value in parsed.values() if value is not None]
        )
        shape = ThoughtShaper(compact=False)
        return {
            thought_id: shape(found[value])
            if value is not None and value in found
            else {"error": f"Thought {thought_id} not found"}
            for thought_id, value in parsed.items()
        }

    async def call(
        self, principal: Principal, tool: str, arguments: dict[str, Any], run: Runner | None = None
    ) -> Answer:
        return await call_tool(self.context, principal, tool, arguments, run)

    @staticmethod
    def pick(projects: list[dict[str, Any]], project_id: str | None) -> dict[str, Any] | None:
        return _pick(projects, project_id)

    async def projects(self, principal: Principal) -> Answer:
        return await call_tool(self.context, principal, "memory_manage", {"action": "list"})

    async def home(self, request: Request, principal: Principal, session: SessionData | None) -> Response:
        return await self.search(request, principal, session)

    async def search(self, request: Request, principal: Principal, session: SessionData | None) -> Response:
        params = request.query_params
        projects = await self.projects(principal)
        project = _pick(projects.items, params.get("project"))
        form = {
            "query": params.get("query", "").strip(),
            "tag": params.get("tag", "").strip(),
            "status": params.get("status") if params.get("status") in STATUSES else "active",
            "standing": params.get("standing") if params.get("standing") in dict(STANDINGS) else "flag",
            "project": project["id"] if project else "",
            "limit": min(max(count_param(params.get("limit")), SEARCH_STEP), SEARCH_LIMIT),
        }
        if form["tag"] and not form["query"]:  # a tag alone is a browse of the tagged thoughts, not a search
            browse = {"project": form["project"], "tag": form["tag"], "status": form["status"]}
            return RedirectResponse(f"{COOKIE_PATH}/browse?{urlencode(browse)}", status_code=303)
        results: Answer | None = None
        if form["query"]:
            arguments: dict[str, Any] = {
                "action": "search",
                "query": form["query"],
                "status": form["status"],
                "supersession_mode": form["standing"],
                "limit": form["limit"],
                "compact": False,  # scores and match source come with the full shape only
            }
            if form["tag"]:
                arguments["tag"] = form["tag"]
            if project:  # that project's own thoughts, with or without a path
                run = in_project(str(project["id"]))
                results = await call_tool(self.context, principal, "memory_recall", arguments, run)
            else:
                results = await call_tool(self.context, principal, "memory_recall", arguments)
        values = self.base(
            principal,
            session,
            projects=projects,
            project=project,
            form=form,
            results=results,
            statuses=STATUSES,
            standings=STANDINGS,
            step=SEARCH_STEP,
            most=SEARCH_LIMIT,
        )
        return self.render(request, "search.html", values, results.page_status if results is not None else 200)

    async def thought(self, request: Request, principal: Principal, session: SessionData | None) -> Response:
        thought_id = request.path_params["thought_id"]
        found = await call_tool(
            self.context,
            principal,
            "memory_recall",
            {"action": "get", "thought_id": thought_id, "include_edges": True, "compact": False},
        )
        history = Answer()
        if found.error is None:
            history = await call_tool(
                self.context, principal, "memory_recall", {"action": "chain", "thought_id": thought_id}
            )
        item = found.item or {}
        edges_in = item.get("upstream") or []
        edges_out = item.get("downstream") or []
        supersession = [step for step in [*edges_in, *edges_out] if step["edge"]["type"] == "replaces"]
        graph = neighbourhood(found.item, history.item) if found.item else None
        values = self.base(
            principal,
            session,
            found=found,
            thought=found.item,
            edges_in=edges_in,
            edges_out=edges_out,
            supersession=supersession,
            history=history,
            graph=graph,
            legend=legend(graph) if graph else None,
        )
        return self.render(request, "thought.html", values, found.page_status)


PageHandler = Callable[["Console", Request, Principal, "SessionData | None"], Awaitable[Response]]
FormHandler = Callable[["Console", Request, Principal, "SessionData | None", "Form"], Awaitable[Response]]


def posting(handler: FormHandler) -> PageHandler:
    """A form page: the handler gets the posted fields, only once their CSRF token and size pass
    (`Console.posted`); otherwise the refusal is the answer."""

    async def with_form(
        console: Console, request: Request, principal: Principal, session: SessionData | None
    ) -> Response:
        form = await console.posted(request, session)
        if isinstance(form, Response):
            return form
        return await handler(console, request, principal, session, form)

    return with_form


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


def _flags(request: Request) -> dict[str, Any]:
    # Secure where the request came over TLS (uvicorn's --proxy-headers makes a proxy's https count).
    return {"httponly": True, "samesite": "lax", "secure": request.url.scheme == "https"}


def _no_store(response: Response) -> None:
    # Pages show memory content: no shared or back-button cache keeps them after sign-out. (The security headers
    # of every /ui response are ConsoleRouter's: app/http/ui/headers.py.)
    response.headers["Cache-Control"] = "no-store"


def _csrf_refusal() -> NoReturn:
    # Raised, so the console's error page (routes.py) answers it with the console's chrome; nothing ran.
    raise HTTPException(
        403, "Forbidden: the form's CSRF token is missing or stale. Reload the page and submit it again."
    )


def _error(message: str) -> dict[str, Any]:
    return {"message": message}


class Form:
    """A console form's urlencoded fields: `get` the first value of a name, `all` every value in order."""

    def __init__(self, fields: dict[str, list[str]]) -> None:
        self.fields = fields

    def get(self, name: str) -> str:
        values = self.fields.get(name)
        return values[0] if values else ""

    def all(self, name: str) -> list[str]:
        return [value for value in self.fields.get(name, []) if value]


async def _form(request: Request) -> Form | None:
    """The urlencoded fields of a console form, or None past FORM_LIMIT bytes: read with a cap, so an
    unauthenticated post cannot make the process buffer an arbitrary body."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > FORM_LIMIT:
            return None
    return Form(parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True))


def _too_large() -> NoReturn:
    raise HTTPException(413, "Request body too large for a console form.")


def _safe_next(target: str | None) -> str:
    """Only a console path: an open redirect after sign-in would be a phishing aid."""
    if target and target.startswith(COOKIE_PATH + "/") and not target.startswith("//") and "\\" not in target:
        return target
    return f"{COOKIE_PATH}/"


def _pick(projects: list[dict[str, Any]], project_id: str | None) -> dict[str, Any] | None:
    return next((project for project in projects if project.get("id") == project_id), None) if project_id else None


def _uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None
