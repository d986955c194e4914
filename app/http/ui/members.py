"""The console's memberships page (admin only): every project the signed-in admin sees with its members and their
roles, open to everyone (and as what) or closed; adding a member or changing their role, removing one, opening a
project to everyone or closing it.

Every change is an operation of app.services.admin.operations (the ones `synaptomind member add|remove` runs),
in its own unit of work with its audit event (`console` / `member_add`, `member_role`, `member_remove`,
`member_open`, `member_close`), as the users page audits. The page runs as its admin (`Console.page`), so they see
their projects only; the service lets them change a project's members only where they are an admin themselves
(`require_role`, the contract's role refusal otherwise) and refuses a change that would leave a project with no
admin who can reach it.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.responses import Response

from app.errors import AppError, bad_request
from app.http.ui.forms import FieldErrors, Form
from app.http.ui.operations import admin_page, parse_role
from app.http.ui.page import Page
from app.services.admin import operations
from app.services.admin.membership import MembershipChange
from app.services.admin.operations import membership_details
from app.services.values import Role

logger = logging.getLogger(__name__)

# The add form's fields, by the argument a refusal carries (AppError.argument): the project is a hidden field, so a
# refusal about it (or about no argument: the role rule, the last admin) is the page's message only.
MEMBER_FIELDS = {"user": "user", "role": "role"}


async def members(page: Page) -> Response:
    return await _members_page(page)


async def _members_page(
    page: Page,
    status: int = 200,
    **values: Any,
) -> Response:
    found = await operations.members_overview(page.context, page.actor)
    return admin_page(page, "members.html", status, projects=found.projects, users=found.users, **values)


def _user(form: Form) -> str:
    name = form.get("user").strip()
    if not name:
        raise bad_request("Choose a user.", argument="user", reason="choose a user")
    return name


async def member_add(page: Page, form: Form) -> Response:
    """Add a member, or change a member's role."""
    try:
        role = parse_role(form.get("role"))
        changed = await _set(page, form.get("project"), _user(form), role)
    except AppError as error:  # the project's add form again with what was chosen, the refusal beside its field
        errors = FieldErrors()
        errors.refused(error.message, error, MEMBER_FIELDS)
        typed = form.typed("project", "user", "role")
        return await _members_page(page, error.status_code, error=error.message, errors=errors, typed=typed)
    who, name = repr(changed.user_name), changed.project.name
    notice = _role_notice(
        changed,
        f"{who} already is a {role.value} of project {name!r}",
        f"{who} is now a {role.value} of project {name!r}",
    )
    return await _members_page(page, notice=notice + _hidden(changed))


async def member_remove(page: Page, form: Form) -> Response:
    try:
        changed = await _drop(page, form.get("project"), _user(form))
    except AppError as error:
        return await _members_page(page, error.status_code, error=error.message)
    notice = f"{changed.user_name!r} is no longer a member of project {changed.project.name!r}."
    return await _members_page(page, notice=notice + _hidden(changed))


async def project_open(page: Page, form: Form) -> Response:
    """Open a project to everyone with a role, or change everyone's role there."""
    try:
        role = parse_role(form.get("role"))
        changed = await _set(page, form.get("project"), None, role)
    except AppError as error:
        return await _members_page(page, error.status_code, error=error.message)
    name = changed.project.name
    notice = _role_notice(
        changed,
        f"Project {name!r} already is open to everyone as {role.value}",
        f"Project {name!r} is open to everyone as {role.value}",
    )
    return await _members_page(page, notice=notice)


async def project_close(page: Page, form: Form) -> Response:
    try:
        changed = await _drop(page, form.get("project"), None)
    except AppError as error:
        return await _members_page(page, error.status_code, error=error.message)
    notice = f"Project {changed.project.name!r} is closed: only its members see it."
    return await _members_page(page, notice=notice + _hidden(changed))


async def _set(page: Page, project: str, user: str | None, role: Role) -> MembershipChange:
    changed = await operations.set_member(page.context, page.actor, project, user, role)
    logger.info("console: user %r set %s", page.principal.name, membership_details(changed))
    return changed


async def _drop(page: Page, project: str, user: str | None) -> MembershipChange:
    changed = await operations.drop_member(page.context, page.actor, project, user)
    logger.info("console: user %r removed %s", page.principal.name, membership_details(changed))
    return changed


def _role_notice(changed: MembershipChange, already: str, now: str) -> str:
    """What a set role reads as: `already` when nothing changed, else `now`, with the role it replaced."""
    if changed.before == changed.role:
        return already + "."
    if changed.before is None:
        return now + "."
    return f"{now} (was {changed.before.value})."


def _hidden(changed: MembershipChange) -> str:
    if changed.still_visible:
        return ""
    return " You are not a member of it, so it is no longer listed here."
