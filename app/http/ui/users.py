"""The console's users page (admin only): every user with their global role, whether a password is set, their
active tokens, last token use and open console sessions; creating a user, changing a role, setting or clearing
a password, ending all of a user's console sessions.

Every change is an operation of app.services.admin.operations (the ones `synaptomind user …` runs), in its own unit
of work with its audit event (`console` / `user_create`, `user_role`, `user_password_set`,
`user_password_clear`), as the tokens page audits; the service refuses a change that would leave no admin, or no
admin who can sign in. A lower role and a new or cleared password end the user's console sessions; so does
**End sessions** (`session` / `end` audit events, app.services.auth.sessions).
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.responses import Response

from app.errors import AppError
from app.http.ui.forms import Form
from app.http.ui.operations import admin_page, parse_role
from app.http.ui.page import Page
from app.services.admin import operations
from app.services.values import ROLE_RANK

logger = logging.getLogger(__name__)


async def users(page: Page) -> Response:
    return await _users_page(page)


async def _users_page(
    page: Page,
    status: int = 200,
    **values: Any,
) -> Response:
    rows = await operations.list_users(page.context, page.actor)
    return admin_page(page, "users.html", status, rows=rows, **values)


async def user_create(page: Page, form: Form) -> Response:
    password = form.get("password") or None
    try:
        role = parse_role(form.get("role"))
        user = await operations.create_user(page.context, page.actor, form.get("name"), role, password)
    except AppError as error:  # the form again with the name and role typed (never the password: a secret)
        typed = form.typed("name", "role")
        return await _users_page(page, error.status_code, error=error.message, typed=typed)
    logger.info("console: user %r created user %r (%s)", page.principal.name, user.name, role.value)
    with_password = ", with a password" if password is not None else ""
    notice = f"User {user.name} created ({role.value}{with_password})."
    return await _users_page(page, notice=notice)


async def user_role(page: Page, form: Form) -> Response:
    try:
        role = parse_role(form.get("role"))
        changed = await operations.set_user_role(page.context, page.actor, form.get("name"), role)
    except AppError as error:
        return await _users_page(page, error.status_code, error=error.message)
    user, before = changed.user, changed.before
    if before == role:
        notice = f"{user.name} already has the {role.value} role."
    else:
        logger.info("console: user %r made %r a %s", page.principal.name, user.name, role.value)
        notice = f"{user.name} now has the {role.value} role (was {before.value})."
        if ROLE_RANK[role] < ROLE_RANK[before]:
            notice += " Their console sessions have ended."
    return await _users_page(page, notice=notice)


async def user_password(page: Page, form: Form) -> Response:
    return await _set_password(page, form.get("name"), form.get("password"))


async def user_password_clear(page: Page, form: Form) -> Response:
    return await _set_password(page, form.get("name"), None)


async def _set_password(
    page: Page,
    name: str,
    password: str | None,
) -> Response:
    try:
        user = await operations.set_user_password(page.context, page.actor, name, password)
    except AppError as error:
        return await _users_page(page, error.status_code, error=error.message)
    logger.info(
        "console: user %r %s the password of %r", page.principal.name, "set" if password else "cleared", user.name
    )
    if password is None:
        notice = (
            f"The password of {user.name} is cleared and their console sessions have ended: they sign in with an "
            "API token only."
        )
    else:
        notice = f"The password of {user.name} is set; their console sessions have ended."
    return await _users_page(page, notice=notice)


async def user_sign_out(page: Page, form: Form) -> Response:
    """End every console session of the user (`synaptomind user sign-out`): their next page asks them to sign in.
    The admin's own included, when they name themselves."""
    try:
        ended = await operations.end_user_sessions(page.context, page.actor, form.get("name"))
    except AppError as error:
        return await _users_page(page, error.status_code, error=error.message)
    name = ended.user.name
    logger.info("console: user %r ended %d console session(s) of %r", page.principal.name, ended.ended, name)
    notice = f"{ended.ended} console session(s) of {name} ended; their tokens and password still sign in."
    return await _users_page(page, notice=notice)
