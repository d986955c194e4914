"""The MCP server: our 11 tool specs behind the SDK's MCPServer, and who is calling."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from mcp_types import Tool as MCPTool

from app import __version__
from app.errors import bad_request
from app.mcp import wire
from app.mcp.dispatch import dispatch
from app.mcp.registry import ToolSpec
from app.mcp.schema import mcp_tool
from app.services.context import AppContext
from app.services.values import Principal

PRINCIPAL_SCOPE_KEY = "synaptomind.principal"

INSTRUCTIONS = (
    "SynaptoMind is the team's shared memory. Call memory_guide once for the quick map. "
    "Pass cwd (your working directory) to scope reads and writes to your project."
)


class SynaptoServer(MCPServer[Any]):
    """Lists our specs and routes calls through `dispatch`, which builds the contract's envelopes."""

    def __init__(self, app: AppContext, specs: Sequence[ToolSpec], local_principal: Principal | None) -> None:
        super().__init__(name="synaptomind", version=__version__, instructions=INSTRUCTIONS)
        self._app = app
        self._specs = {spec.name: spec for spec in specs}
        self._tools = [mcp_tool(spec) for spec in specs]
        self._local_principal = local_principal

    async def list_tools(self) -> list[MCPTool]:
        return list(self._tools)

    # The one private override, kept because MCPServer has no public hook for it: its __init__ hands the low-level
    # Server `get_tool_input_schema=self._tool_input_schema` (mcp/server/mcpserver/server.py), which looks in the
    # SDK's own tool manager, where our specs are not; the 2026-07-28 HTTP path validates `Mcp-Param-*` headers
    # against what it returns (mcp/server/_streamable_http_modern.py). The public hook is the low-level Server's
    # `get_tool_input_schema` argument, but serving from the low-level Server changes `initialize` (no prompts or
    # resources capability) and drops MCPServer's request-state middleware: not a move without behaviour change.
    def _tool_input_schema(self, name: str) -> dict[str, Any] | None:
        tool = next((tool for tool in self._tools if tool.name == name), None)
        return None if tool is None else dict(tool.input_schema)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult:
        spec = self._specs.get(name)
        if spec is None:
            return wire.classified_error(bad_request(f"Unknown tool '{name}'; tools: {', '.join(self._specs)}"))
        principal = self._principal(context)
        if principal is None:  # only reachable if the HTTP auth layer was bypassed
            return wire.unclassified_error("Unauthenticated call")
        return await dispatch(spec, arguments or {}, self._app, principal)

    def _principal(self, context: Context[Any, Any] | None) -> Principal | None:
        request = None
        if context is not None:
            try:
                request = context.request_context.request
            except (AttributeError, ValueError, LookupError):
                request = None
        scope = getattr(request, "scope", None)
        if isinstance(scope, dict) and PRINCIPAL_SCOPE_KEY in scope:
            principal = scope[PRINCIPAL_SCOPE_KEY]
            return principal if isinstance(principal, Principal) else None
        return self._local_principal
