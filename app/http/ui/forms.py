"""The console's forms: a posted form read with a cap (`read_form`; its CSRF check, `posting`, is page.py's), and
fields that speak to people: a typed value read back with the message for its field, and a refusal put next to the
field it names, in words (never pydantic's text or the tool's argument name).

A form keeps what was typed: the handlers render the form again with `FieldErrors` and the raw values, so a
person corrects one field instead of typing everything again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NoReturn
from urllib.parse import parse_qs

from starlette.exceptions import HTTPException
from starlette.requests import Request

# the largest console form: a page of selected ids (≤ 50 × 36 characters) beside a summary (≤ 720 characters)
FORM_LIMIT = 16 * 1024

# "Invalid argument 'min_similarity' for memory_crystallize action=auto_cluster: Input should be …"
ARGUMENT = re.compile(r"argument '([A-Za-z_][\w.]*)'")
# pydantic's messages, as people would say them (the rest name the field and say "is not accepted").
PHRASES = (
    (re.compile(r"List should have at least (\d+) items?"), "Pick at least {0}."),
    (re.compile(r"List should have at most (\d+) items?"), "Pick at most {0}."),
    (re.compile(r"Input should be less than or equal to ([\d.]+)"), "Enter a number no larger than {0}."),
    (re.compile(r"Input should be less than ([\d.]+)"), "Enter a number below {0}."),
    (re.compile(r"Input should be greater than or equal to ([\d.]+)"), "Enter a number of at least {0}."),
    (re.compile(r"Input should be greater than ([\d.]+)"), "Enter a number above {0}."),
    (re.compile(r"String should have at least (\d+) characters?"), "Write at least {0} character(s)."),
    (re.compile(r"String should have at most (\d+) characters?"), "Write at most {0} characters."),
    (re.compile(r"Input should be a valid (integer|number)"), "Enter a {0}."),
)


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

    def from_tool(self, message: str, fields: dict[str, str]) -> None:
        """A tool's refusal: beside the form field its argument maps to (`fields`: argument → form field),
        in words; otherwise as the form's general message."""
        found = ARGUMENT.search(message)
        argument = found[1].split(".")[0] if found else None
        if argument is not None and argument in fields:
            self.add(fields[argument], plain(message))
        else:
            self.general = message


def plain(message: str) -> str:
    """A validation message without the tool's wording: pydantic's text as a person would say it."""
    detail = message.split(": ", 1)[1] if message.startswith(("Invalid argument", "Missing required")) else message
    if message.startswith("Missing required"):
        return "This field is required."
    for pattern, phrase in PHRASES:
        matched = pattern.search(detail)
        if matched:
            return phrase.format(*matched.groups())
    return detail[:1].upper() + detail[1:] if detail else "This value is not accepted."


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
