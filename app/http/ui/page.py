"""The page context: what every signed-in console page gets in one object — the request, its user and session, the
console (context, templates) and the forms' CSRF token — so every handler is `(page)` or `(page, form)`.

`Console.page` (console.py) builds it once the session is looked up; a handler renders through it (`values`,
`render`, `error`) and calls the operations with `page.context` as `page.actor`, the `console` door's actor.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response

from app.http.ui.forms import Form, csrf_refusal, read_form
from app.http.ui.session import SessionData, same_token
from app.mcp.shaping import ThoughtShaper
from app.services.actors import Actor
from app.services.admin import operations as admin_operations
from app.services.context import AppContext
from app.services.recall import operations as recall_operations
from app.services.values import Principal, ProjectRecord


class Chrome(Protocol):
    """What a page needs of the console (app.http.ui.console.Console): its context, the forms' CSRF token, the
    rendering, and whether auth mode `none` signs everyone in. A protocol, so this module need not import the
    console that builds its pages."""

    context: AppContext

    @property
    def signs_in_locally(self) -> bool: ...

    def csrf(self, session: SessionData | None) -> str: ...

    def render(self, request: Request, name: str, values: dict[str, Any], status: int = 200) -> Response: ...


@dataclass
class Page:
    console: Chrome
    request: Request
    principal: Principal
    session: SessionData | None
    _projects: list[ProjectRecord] | None = field(default=None, repr=False)

    @property
    def context(self) -> AppContext:
        return self.console.context

    @property
    def actor(self) -> Actor:
        """The signed-in user as the `console` door's actor: the role check and audit event of each operation."""
        return Actor.console(self.principal)

    @property
    def params(self) -> QueryParams:
        return self.request.query_params

    @property
    def path(self) -> str:
        return self.request.url.path

    def path_param(self, name: str) -> str:
        return str(self.request.path_params[name])

    @property
    def csrf(self) -> str:
        return self.console.csrf(self.session)

    def values(self, **values: Any) -> dict[str, Any]:
        """A template's values beside what the chrome needs (the user, the forms' CSRF token, auth mode `none`)."""
        return {"user": self.principal, "csrf": self.csrf, "local": self.console.signs_in_locally, **values}

    def render(self, template: str, values: dict[str, Any], status: int = 200) -> Response:
        return self.console.render(self.request, template, values, status)

    def error(self, message: str, status: int) -> Response:
        return self.render("error.html", self.values(message=message), status)

    async def projects(self) -> list[ProjectRecord]:
        """The projects the user may see (memory_manage action=list's operation), read once per page."""
        if self._projects is None:
            self._projects = await admin_operations.list_projects(self.context)
        return self._projects

    async def thoughts(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """Each thought by id, shaped as `memory_recall action=get` answers it, or `{"error": …}` for an id that is
        not a thought. One read for all of them (app.services.recall.operations.get_many), no hit counted: a page of
        25 proposals shows up to 50 thoughts, which took 50 `get` calls (~150 ms at 100 k thoughts, docs/CONSOLE.md).
        Every role may read every thought, so the user only has to be signed in."""
        unique = list(dict.fromkeys(thought_id for thought_id in ids if thought_id))
        parsed = {thought_id: parsed_uuid(thought_id) for thought_id in unique}
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

    async def project(self, project_id: str | None) -> ProjectRecord | None:
        """The listed project of that id; None for no id, an id that is not one, or a project the user cannot see."""
        if not project_id:
            return None
        return next((row for row in await self.projects() if str(row.id) == project_id), None)


def parsed_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


PageHandler = Callable[[Page], Awaitable[Response]]
FormHandler = Callable[[Page, Form], Awaitable[Response]]


async def posted(page: Page) -> Form:
    """A signed-in form's fields, once their size and CSRF token pass (403 without its token, 413 past FORM_LIMIT)."""
    form = await read_form(page.request)
    if not same_token(page.csrf, form.get("csrf")):
        csrf_refusal()
    return form


def posting(handler: FormHandler) -> PageHandler:
    """A form page: the handler gets the posted fields, only once their CSRF token and size pass (`posted`);
    otherwise the refusal is the answer."""

    async def with_form(page: Page) -> Response:
        return await handler(page, await posted(page))

    return with_form
