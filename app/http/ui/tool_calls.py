"""The console's calls of a tool: the one way the console reaches the tools' confirm flows (preview → confirm, the
preview tokens of app/services/previews.py), so a console preview is exactly the one an agent gets; and the reads
and single-step writes whose arguments a person types, refused in the contract's words before their operation runs
(`checked`).

`call` runs the tool's own call through the typed entry of the tool boundary (app.mcp.dispatch.call_typed:
validation, role, rate limit, audit, confirm flows, errors) and holds the answer the tool built as an `Answer`;
`two_step` is a destructive action's preview screen and confirm. The pages that come this way, and why, are listed
in docs/ARCHITECTURE.md ("The console on the operations").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.responses import Response

from app.errors import AppError
from app.mcp.calls import CallContext
from app.mcp.dispatch import ToolFailure, call_typed, run_typed
from app.mcp.registry import ToolSpec
from app.mcp.tools.catalog import ALL_SPECS

if TYPE_CHECKING:
    from app.http.ui.forms import Form
    from app.http.ui.page import Page

SPECS: dict[str, ToolSpec] = {spec.name: spec for spec in ALL_SPECS}
Result = TypeVar("Result")


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
    def page_status(self) -> int:
        """The status of the page that shows this answer: the error's, else 200."""
        return self.status if self.error else 200


async def call(page: Page, tool: str, arguments: dict[str, Any]) -> Answer:
    """The tool's own call, as over MCP (app.mcp.dispatch.call_typed: the contract's validation, roles, confirm flows
    and errors), its answer as the tool built it — never read back from the wire — or its refusal's message and
    status."""
    try:
        answer = await call_typed(SPECS[tool], arguments, page.context, page.principal)
    except (AppError, ToolFailure) as failure:
        return Answer(error=failure.message, status=failure.status_code)
    payload = {"text": answer.payload} if isinstance(answer.payload, str) else answer.payload
    return Answer(payload if isinstance(payload, dict) else {})


async def two_step(
    page: Page,
    form: Form,
    tool: str,
    arguments: dict[str, Any],
    title: str,
    fields: list[tuple[str, str]],
    back: str,
    involved: Callable[[Answer], list[str]] | None = None,
    done: Callable[[Answer], Response] | None = None,
) -> Response:
    """A destructive action through its preview screen, as over MCP: without `confirm` the tool previews and the
    page shows what it answered (consequence, instruction, plan) with a confirm form carrying the same fields,
    `confirm=true` and the preview's token; the confirm post executes (the tool redeems the token). `involved`
    names the thoughts the preview concerns: the screen shows their content beside the plan. `done`, when given,
    answers an executed confirm instead of the outcome page (a queue's redirect back to itself)."""
    confirmed = form.get("confirm") == "true"
    arguments = dict(arguments)
    if confirmed:
        arguments["confirm"] = True
        if form.get("preview_token"):
            arguments["preview_token"] = form.get("preview_token")
    answer = await call(page, tool, arguments)
    values = page.values(answer=answer, title=title, back=back, action=page.path)
    if answer.error is not None:
        return page.render("outcome.html", values, answer.status)
    if confirmed and done is not None:
        return done(answer)
    if confirmed or answer.preview is None:  # executed, or nothing to confirm (e.g. not found)
        return page.render("outcome.html", values)
    token = answer.preview.get("token")
    hidden = [*fields, ("confirm", "true")] + ([("preview_token", str(token))] if token else [])
    thoughts = await page.thoughts(involved(answer) if involved else [])
    return page.render("preview.html", {**values, "hidden": hidden, "thoughts": thoughts})


def outcome(page: Page, answer: Answer, title: str, back: str) -> Response:
    """A one-step write's outcome page (no preview), or its refusal: what the tool answered, and the way back."""
    return page.render("outcome.html", page.values(answer=answer, title=title, back=back), answer.page_status)


@dataclass(frozen=True)
class Refusal:
    """A typed read's refusal as a page shows it: the tool's message and status, and the classified refusal itself
    (`cause`: the argument it is about, as data, for a form's field; None for an unexpected failure)."""

    error: str
    status: int
    cause: AppError | None = None

    @property
    def answer(self) -> Answer:
        """The refusal as a one-step write's outcome page shows it (`outcome`)."""
        return Answer(error=self.error, status=self.status)


async def checked(
    page: Page, tool: str, arguments: dict[str, Any], run: Callable[[Any, CallContext], Awaitable[Result]]
) -> Result | Refusal:
    """A read or a single-step write whose arguments a person typed, through the tool's checks (validation, role,
    rate limit, the contract's refusal texts), running `run` — an operation — on the validated arguments: its typed
    result, or the refusal."""
    try:
        return await run_typed(SPECS[tool], arguments, page.context, page.principal, run)
    except AppError as refusal:
        return Refusal(refusal.message, refusal.status_code, refusal)
    except ToolFailure as failure:
        return Refusal(failure.message, failure.status_code)


@dataclass(frozen=True)
class Listing:
    """A typed read as a list page shows it: its rows (shaped for the templates' lines), the total its filters
    match, its scope's warnings; or the refusal's message and status."""

    items: list[dict[str, Any]]
    total: int = 0
    warnings: tuple[str, ...] = ()
    error: str | None = None
    status: int = 200
    total_capped: bool = False  # more match than `total` (a console page's capped count, app/http/ui/browse.py)

    @classmethod
    def refused(cls, refusal: Refusal) -> Listing:
        return cls([], error=refusal.error, status=refusal.status)

    @property
    def page_status(self) -> int:
        return self.status if self.error else 200
