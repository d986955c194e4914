"""The wire envelope: structuredContent.result mirrors content[].text; errors carry their class."""

from __future__ import annotations

import json
from typing import Any

from mcp_types import CallToolResult, TextContent

from app.errors import AppError

# mcp-tools.md, "Wire envelope": every tool declares the same output shape, `{result: <payload>}`; the SDK client
# validates structuredContent against it. `result` is declared as a property, not only required, so a client that
# generates types from the schema (or a validator that wants every required key declared) sees it; the payload's
# own shape is the action's, documented per action.
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"result": {"type": "object"}},
    "required": ["result"],
}


def to_json(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def success(payload: Any, raw_text: str | None = None) -> CallToolResult:
    """`raw_text` keeps a human-readable display verbatim in content[].text (guide, config)."""
    if isinstance(payload, str):
        payload = {"text": payload}
    text = raw_text if raw_text is not None else to_json(payload)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content={"result": payload})


def classified_error(error: AppError) -> CallToolResult:
    detail = {"message": error.message, "statusCode": error.status_code, "retryable": error.retryable}
    return CallToolResult(
        content=[TextContent(type="text", text=error.message)],
        structured_content={"result": {"error": detail}},
        is_error=True,
    )


def unclassified_error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)
