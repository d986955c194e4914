"""The console's forms: a posted form read with a cap (`read_form`; its CSRF check, `posting`, is page.py's), and
fields that speak to people: a typed value read back with the message for its field, and a refusal put next to the
field of the argument it is about, in words (never pydantic's text or the tool's argument name).

A form keeps what was typed: the handlers render the form again with `FieldErrors` and the raw values, so a
person corrects one field instead of typing everything again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NoReturn
from urllib.parse import parse_qs

from starlette.exceptions import HTTPException
from starlette.requests import Request

from app.errors import AppError

# the largest console form: a page of selected ids (≤ 50 × 36 characters) beside a summary (≤ 720 characters)
FORM_LIMIT = 16 * 1024

# pydantic's error types as people would say them, the bound from the error's `ctx` (the rest: the rule's reason).
WORDS = {
    "missing": "This field is required.",
    "too_short": "Pick at least {min_length}.",
    "too_long": "Pick at most {max_length}.",
    "string_too_short": "Write at least {min_length} character(s).",
    "string_too_long": "Write at most {max_length} characters.",
    "less_than_equal": "Enter a number no larger than {le}.",
    "less_than": "Enter a number below {lt}.",
    "greater_than_equal": "Enter a number of at least {ge}.",
    "greater_than": "Enter a number above {gt}.",
    "int_type": "Enter a whole number.",
    "int_parsing": "Enter a whole number.",
    "int_from_float": "Enter a whole number.",
    "float_type": "Enter a number.",
    "float_parsing": "Enter a number.",
}


@dataclass
class FieldErrors:
    """Messages by form field; `general` holds a refusal that names no field of the form."""

    by_field: dict[str, str] = field(default_factory=dict)
    general: str | None = None

    def __bool__(self) -> bool:
        return bool(self.by_field) or self.general is not None

    def add(self, name: str, message: str) -> None:
        self.by_field.setdefault(name, message)

    def get(self, name: str) -> str | None:
        return self.by_field.get(name)

    def refused(self, message: str, cause: AppError | None, fields: Mapping[str, str]) -> None:
        """A refusal of the tool's checks or of its operation (a `Refusal`'s message and cause): beside the form
        field of the argument its cause carries (`fields`: argument → form field), in words; otherwise — no
        argument, or one the form has no field for — as the form's general message, the tool's own text."""
        argument = top_argument(cause) if cause is not None else None
        if cause is not None and argument is not None and argument in fields:
            self.add(fields[argument], in_words(cause))
        else:
            self.general = message


def top_argument(error: AppError) -> str | None:
    """The call's argument a refusal is about: the first step of pydantic's `loc`, else of the rule's argument path
    (`tags.3`, `links[0].source`: a form's field holds a whole argument)."""
    loc = error.validation.get("loc") if error.validation is not None else None
    if loc:
        return str(loc[0])
    if error.argument is None:
        return None
    return error.argument.split(".", 1)[0].split("[", 1)[0]


def in_words(error: AppError) -> str:
    """A refusal of one argument without the tool's wording: pydantic's error by its type and bounds, else the
    rule's reason."""
    detail = error.validation
    words = WORDS.get(str(detail.get("type"))) if detail is not None else None
    if detail is not None and words is not None:
        try:
            return words.format(**(detail.get("ctx") or {}))
        except (KeyError, IndexError):  # a bound pydantic did not report: say the reason instead
            pass
    reason = error.reason or error.message
    return reason[:1].upper() + reason[1:] if reason else "This value is not accepted."


def number(
    errors: FieldErrors,
    name: str,
    raw: str,
    *,
    label: str,
    whole: bool = False,
    low: float | None = None,
    high: float | None = None,
    above: float | None = None,
) -> float | None:
    """The field's number, None when left empty; a value that is not one (or out of range) is an error for that
    field, said with its label — never dropped in silence."""
    text = raw.strip()
    if not text:
        return None
    try:
        value = float(int(text)) if whole else float(text)
    except ValueError:
        errors.add(name, f"{label}: enter a {'whole number' if whole else 'number'} (you typed “{text[:40]}”).")
        return None
    if value != value or value in (float("inf"), float("-inf")):
        errors.add(name, f"{label}: enter a finite number.")
        return None
    if above is not None and value <= above:
        errors.add(name, f"{label}: enter a number above {above:g}.")
    elif low is not None and value < low:
        errors.add(name, f"{label}: enter a number of at least {low:g}.")
    elif high is not None and value > high:
        errors.add(name, f"{label}: enter a number no larger than {high:g}.")
    else:
        return value
    return None


def tags(raw: str) -> list[str]:
    """Comma-separated tags as typed, trimmed, empty ones left out, each once."""
    return list(dict.fromkeys(tag.strip() for tag in raw.split(",") if tag.strip()))


# A page's `offset` or `limit` from its query string: a whole number, at least 0, at most MAX_COUNT (past any
# memory's size and within PostgreSQL's bigint, so a read never fails on it); anything else reads as 0.
MAX_COUNT = 1_000_000_000


def count_param(value: str | None) -> int:
    try:
        return min(max(int(value or 0), 0), MAX_COUNT)
    except ValueError:
        return 0


class Form:
    """A console form's urlencoded fields: `get` the first value of a name, `all` every value in order."""

    def __init__(self, fields: dict[str, list[str]]) -> None:
        self.fields = fields

    def get(self, name: str) -> str:
        values = self.fields.get(name)
        return values[0] if values else ""

    def all(self, name: str) -> list[str]:
        return [value for value in self.fields.get(name, []) if value]

    def typed(self, *names: str) -> dict[str, str]:
        """The named fields as posted, for a refused form shown again with what was typed or chosen."""
        return {name: self.get(name) for name in names}


async def read_form(request: Request) -> Form:
    """The urlencoded fields of a console form, refused with 413 past FORM_LIMIT bytes: read with a cap, so an
    unauthenticated post cannot make the process buffer an arbitrary body."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > FORM_LIMIT:
            raise HTTPException(413, "Request body too large for a console form.")
    return Form(parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True))


def csrf_refusal() -> NoReturn:
    # Raised, so the console's error page (routes.py) answers it with the console's chrome; nothing ran.
    raise HTTPException(
        403, "Forbidden: the form's CSRF token is missing or stale. Reload the page and submit it again."
    )
