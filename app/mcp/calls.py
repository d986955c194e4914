"""What a tool handler is given (`CallContext`) and answers (`ToolAnswer`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from app.services.context import AppContext
from app.services.values import Principal


@dataclass(frozen=True)
class ToolAnswer:
    payload: Any
    raw_text: str | None = None


@dataclass(frozen=True)
class CallContext:
    app: AppContext
    principal: Principal
    tool: str
    action: str = ""


Handler = Callable[[Any, CallContext], Awaitable[ToolAnswer]]
