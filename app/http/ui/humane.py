"""Jinja filters and tests that make tool answers read as words: dates for ISO timestamps, Yes/No for booleans,
a thought's name (the start of its content) for its id. Registered on the console's templates by routes.py."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from jinja2 import Environment
from markupsafe import Markup, escape

# The wire's one time format (app.formats.iso: 2026-10-08T13:34:09.796Z) and the offsets PostgreSQL answers.
ISO_MOMENT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$")
NAME_CHARS = 60


def is_moment(value: Any) -> bool:
    return isinstance(value, (str, datetime)) and (isinstance(value, datetime) or bool(ISO_MOMENT.match(value)))


def _parsed(value: str | datetime) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _readable(value: str | datetime, moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if moment else str(value)


def readable(value: str | datetime | None) -> str:
    """`2026-10-08 13:34 UTC`: minutes are what a person compares; the full moment stays in `datetime`."""
    if value is None or value == "":
        return "—"
    return _readable(value, _parsed(value))


def moment(value: str | datetime | None) -> Markup:
    """A `<time>` element: the readable date, with the exact ISO moment in its `datetime` attribute. (Parsed once
    and escaped directly: a search page of 100 hits calls it 100 times, and Markup.format took 2/3 of its time.)"""
    if value is None or value == "":
        return Markup("—")
    parsed = _parsed(value)
    exact = escape(parsed.isoformat().replace("+00:00", "Z") if parsed else str(value))
    return Markup(f'<time datetime="{exact}" title="{exact}">{escape(_readable(value, parsed))}</time>')


def yes_no(value: Any) -> str:
    return "Yes" if value else "No"


def name(content: Any, limit: int = NAME_CHARS) -> str:
    """A thought as a person knows it: the start of its content on one line, cut at a word with an ellipsis."""
    text = " ".join(str(content or "").split())
    if len(text) <= limit:
        return text or "(empty)"
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,.;:") + "…"


def counted(total: int, capped: bool = False, noun: str = "thought") -> str:
    """A count in words: `1 thought`, `37 thoughts`, or for a count that stopped at a bound (`capped`: more
    match), `more than 1,000 thoughts`."""
    if capped:
        return f"more than {total:,} {noun}s"
    return f"{total} {noun}{'' if total == 1 else 's'}"


def copyable_id(value: Any, label: str = "Id") -> Markup:
    """The full id in a read-only field a person can select and copy (the first 8 digits of a UUIDv7 are only
    its timestamp, shared by every thought of that hour)."""
    return Markup(
        '<span class="copy-id">{} <input readonly value="{}" aria-label="{} (select to copy)" '
        'size="36" spellcheck="false"></span>'
    ).format(label, escape(str(value)), label)


def register(environment: Environment) -> None:
    environment.filters["moment"] = moment
    environment.filters["readable"] = readable
    environment.filters["yes_no"] = yes_no
    environment.filters["thought_name"] = name
    environment.filters["copyable_id"] = copyable_id
    environment.filters["counted"] = counted
    environment.tests["moment"] = is_moment
