"""A confirm step for the admin pages' destructive buttons, without JavaScript.

A destructive form (revoke or rotate a token, clear a password, end sessions, remove a member, close a project)
posts to its action; without `confirmed=yes` the action does nothing and answers a confirm page saying in words
what will happen, whose form carries the same fields and `confirmed=yes`; posting that runs the action. The CSRF
check (`posting`) and the role check (`admin_only`) run before either step, so the confirm page itself is refused
as the action would be. The wrapped handlers are unchanged: the step sits in front of them (routes.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.responses import Response

from app.http.ui.forms import Form
from app.http.ui.page import FormHandler, Page
from app.services.auth import operations as token_operations

CONFIRMED = "confirmed"


@dataclass(frozen=True)
class Question:
    """What the confirm page says: a heading, what will happen, and the button that does it."""

    title: str
    what: str
    button: str
    back: str


Describe = Callable[[Page, Form], Awaitable[Question]]


def confirming(describe: Describe) -> Callable[[FormHandler], FormHandler]:
    """Run the handler only on a post with `confirmed=yes`; any other post answers the confirm page."""

    def wrap(handler: FormHandler) -> FormHandler:
        async def step(page: Page, form: Form) -> Response:
            if form.get(CONFIRMED) == "yes":
                return await handler(page, form)
            question = await describe(page, form)
            hidden = [
                (name, value)
                for name, values in form.fields.items()
                if name not in ("csrf", CONFIRMED)
                for value in values
            ]
            values = page.values(question=question, hidden=hidden, action=page.path)
            return page.render("confirm.html", values)

        return step

    return wrap


async def _token(page: Page, token_id: str) -> str:
    """A token as a person knows it: its user and label (its id when it is not found)."""
    rows = await token_operations.list_tokens(page.context, page.actor)
    row = next((row for row in rows if str(row.id) == token_id), None)
    if row is None:
        return f"token {token_id}"
    label = f" labelled “{row.label}”" if row.label else ""
    return f"{row.user_name}'s {row.role.value} token{label} ({token_id})"


async def revoke_token(page: Page, form: Form) -> Question:
    token = await _token(page, form.get("token_id"))
    what = (
        f"Revoke {token}? Every agent and script using it is refused from its next call, and the console sessions "
        "signed in with it end. This cannot be undone; a new token can be created."
    )
    return Question("Revoke this token?", what, "Yes, revoke it", "/ui/admin/tokens")


async def rotate_token(page: Page, form: Form) -> Question:
    token = await _token(page, form.get("token_id"))
    what = (
        f"Rotate {token}? A new token replaces it, shown once on the next page; the old one is revoked at once, so "
        "every agent using it needs the new value."
    )
    return Question("Rotate this token?", what, "Yes, rotate it", "/ui/admin/tokens")


async def clear_password(page: Page, form: Form) -> Question:
    name = form.get("name")
    what = (
        f"Clear the password of {name}? They can no longer sign in with a password, and every console session of "
        "theirs ends. Their API tokens still work."
    )
    return Question("Clear this password?", what, "Yes, clear it", "/ui/admin/users")


async def end_sessions(page: Page, form: Form) -> Question:
    name = form.get("name")
    what = (
        f"End every console session of {name}? Their next page asks them to sign in again; their tokens and "
        "password still sign in."
    )
    return Question("End these sessions?", what, "Yes, end them", "/ui/admin/users")


async def _project(page: Page, project_id: str) -> str:
    found = await page.project(project_id)
    return f"project “{found.name}”" if found else f"project {project_id}"


async def remove_member(page: Page, form: Form) -> Question:
    project = await _project(page, form.get("project"))
    user = form.get("user")
    what = f"Remove {user} from {project}? If the project is closed, they no longer see it or anything in it."
    return Question("Remove this member?", what, "Yes, remove", "/ui/admin/members")


async def close_project(page: Page, form: Form) -> Question:
    project = await _project(page, form.get("project"))
    what = (
        f"Close {project} to everyone? Only its members will see it and its thoughts; to anyone else it will not exist."
    )
    return Question("Close this project?", what, "Yes, close it", "/ui/admin/members")
