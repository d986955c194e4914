"""The base of every tool input model: unknown keys refused by name, strict JSON types, 64-bit integers."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

INT64_LIMIT = 2**63


class ArgumentModel(BaseModel):
    """Base of every input model, an action's and a nested object's (a link, a bulk_create row, a summary): unknown
    keys are refused by name; types are strict, as JSON spells them (`"10"` or `true` is not a number, `"true"` or
    `1` not a boolean: a client that sends them has a bug the answer should show, not hide); and so are numbers
    nothing downstream can hold (NaN, ±infinity, integers beyond PostgreSQL's 64-bit bigint). Enum arguments take
    their values' strings (`app.mcp.tools.common.EdgeTypeArg`)."""

    model_config = ConfigDict(extra="forbid", strict=True, str_strip_whitespace=False, allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _fits_in_64_bits(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool) and not -INT64_LIMIT <= value < INT64_LIMIT:
            raise ValueError("integer out of range (it must fit in 64 bits)")
        return value


class ActionArgs(ArgumentModel):
    """Base of every per-action input model."""
