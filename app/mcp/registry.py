"""The tool registry's types: a tool (`ToolSpec`) and its actions (`Action`), each with its argument model, its role,
and a handler or a confirm flow. The schema built from them is app.mcp.schema's; running a call, app.mcp.dispatch's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcp_types import ToolAnnotations

from app.mcp.arguments import ActionArgs
from app.mcp.calls import Handler
from app.mcp.confirm import ConfirmFlow
from app.services.values import Role


@dataclass(frozen=True)
class Action:
    """An action: its argument model, its role, and either a handler or — destructive — a `ConfirmFlow`."""

    name: str
    model: type[ActionArgs]
    handler: Handler | ConfirmFlow[Any, Any]
    role: Role = Role.reader


@dataclass(frozen=True)
class ToolSpec:
    """A tool: its actions, and the retired arguments it refuses with a migration text.

    Argument descriptions live on the argument models (`Field(description=…)`); the advertised input
    schema is derived from them by `app.mcp.schema.build_input_schema`. Retired arguments are not advertised as
    properties: the description names their replacements and `dispatch` refuses them by name.
    """

    name: str
    description: str
    actions: tuple[Action, ...]
    annotations: ToolAnnotations
    # retired argument → migration text; `per_action` restricts a name to some actions only
    retired: dict[str, str] = field(default_factory=dict)
    retired_per_action: dict[str, dict[str, str]] = field(default_factory=dict)

    def action(self, name: str) -> Action | None:
        return next((action for action in self.actions if action.name == name), None)

    @property
    def has_actions(self) -> bool:
        return bool(self.actions) and self.actions[0].name != ""
