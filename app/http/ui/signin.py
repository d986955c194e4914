"""Signing in and out of the console: the sign-in form (an API token, or a user name and password), the session it
opens, and sign-out.

The checks and the session are the operations of app.services.auth.operations (`verify_token`, `check_password`,
`open_console_session`, `end_console_session`); this module holds the form, its double-submit CSRF cookie, the
refusals' words and the session cookie.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from app.http.ui.console import Console, is_unavailable
from app.http.ui.forms import Form, csrf_refusal, read_form
from app.http.ui.session import COOKIE_PATH, SESSION_COOKIE, SIGN_IN_COOKIE, open_session, same_token
from app.services.auth import operations as auth_operations
from app.services.auth import sessions
from app.services.auth.passwords import TooManyAttempts

logger = logging.getLogger(__name__)

BAD_TOKEN = "That API token was not accepted: it is unknown, revoked or expired. Paste the whole token (smt_…)."
# One text for an unknown user, a user without a password and a wrong password: nothing tells them apart.
BAD_PASSWORD = "That user name and password were not accepted."
UNAVAILABLE = "The database is unavailable; try again shortly."


def sign_in_page(
    console: Console,
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
        "next": safe_next(next_page or request.query_params.get("next")),
        "upstream": console.config.upstream,
    }
    response = console.render(request, "sign_in.html", values, status)
    response.set_cookie(SIGN_IN_COOKIE, csrf, max_age=3600, path=COOKIE_PATH, **cookie_flags(request))
    return response


async def sign_in_form(console: Console, request: Request) -> Response:
    principal, _ = await console.principal(request)
    if principal is not None:
        return RedirectResponse(f"{COOKIE_PATH}/", status_code=303)
    return sign_in_page(console, request)


async def sign_in(console: Console, request: Request) -> Response:
    form = await read_form(request)
    if not same_token(request.cookies.get(SIGN_IN_COOKIE), form.get("csrf")):
        csrf_refusal()
    if "password" in form.fields:
        return await _with_password(console, request, form)
    token = form.get("token").strip()
    if not token:
        return sign_in_page(console, request, "Paste your API token to sign in.", 400, next_page=form.get("next"))
    try:
        principal = await auth_operations.verify_token(console.context, token)
        if principal is None:
            logger.info("console sign-in refused: token not accepted")
            return sign_in_page(console, request, BAD_TOKEN, 401, next_page=form.get("next"))
        assert principal.user_id is not None and principal.token_id is not None
        # Revoked between the two: the session's lookup checks its token, so it would open nothing.
        cookie = await open_session(
            console.context.db, console.config.codec, principal.user_id, sessions.TOKEN, token_id=principal.token_id
        )
    except Exception as error:
        if not is_unavailable(error):
            raise
        return sign_in_page(console, request, UNAVAILABLE, 503)
    logger.info("console sign-in: user %r (API token)", principal.name)
    return _signed_in(console, request, form, cookie)


async def _with_password(console: Console, request: Request, form: Form) -> Response:
    """The OAuth sign-in page's check (PasswordCheck: throttled per user name, one answer and one pace for an
    unknown user, no password and a wrong one), then the same session cookie as a token's."""
    name, password = form.get("user").strip()[:200], form.get("password")

    def refuse(message: str, status: int) -> Response:
        return sign_in_page(
            console, request, message, status, by_password=True, user_name=name, next_page=form.get("next")
        )

    if not name or not password:
        return refuse("Enter your user name and password to sign in.", 400)
    try:
        matched = await auth_operations.check_password(console.context, console.config.passwords, name, password)
        if matched is None or matched.principal.user_id is None:
            return refuse(BAD_PASSWORD, 401)
        cookie = await open_session(
            console.context.db,
            console.config.codec,
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
        return refuse(UNAVAILABLE, 503)
    logger.info("console sign-in: user %r (password)", matched.principal.name)
    return _signed_in(console, request, form, cookie)


def _signed_in(console: Console, request: Request, form: Form, cookie: str) -> Response:
    response = RedirectResponse(safe_next(form.get("next")), status_code=303)
    response.set_cookie(
        SESSION_COOKIE, cookie, max_age=console.config.codec.max_age, path=COOKIE_PATH, **cookie_flags(request)
    )
    response.delete_cookie(SIGN_IN_COOKIE, path=COOKIE_PATH)
    return response


async def sign_out(console: Console, request: Request) -> Response:
    form = await read_form(request)
    principal, session = await console.principal(request)
    if principal is not None and not same_token(console.csrf(session), form.get("csrf")):
        csrf_refusal()
    if session is not None:  # ended on the server: a copy of the cookie is refused from now on
        await auth_operations.end_console_session(console.context, session.secret)
        logger.info("console sign-out: user %r", principal.name if principal else None)
    response = RedirectResponse(f"{COOKIE_PATH}/sign-in", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH, **cookie_flags(request))
    return response


def cookie_flags(request: Request) -> dict[str, Any]:
    # Secure where the request came over TLS (uvicorn's --proxy-headers makes a proxy's https count).
    return {"httponly": True, "samesite": "lax", "secure": request.url.scheme == "https"}


def safe_next(target: str | None) -> str:
    """Only a console path: an open redirect after sign-in would be a phishing aid."""
    if target and target.startswith(COOKIE_PATH + "/") and not target.startswith("//") and "\\" not in target:
        return target
    return f"{COOKIE_PATH}/"
