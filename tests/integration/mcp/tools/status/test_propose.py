"""memory_status propose holds draft content to the configured content limit, not to a copy of it."""

from __future__ import annotations

from tests.conftest import settings_with
from tests.support.helpers import ToolCaller


async def test_propose_content_is_held_to_the_configured_hard_limit(writer: ToolCaller) -> None:
    answer = await writer("memory_status", {"action": "propose", "content": "x" * 721})
    assert answer.is_error
    assert answer.text == (
        "Invalid argument 'content' for memory_status action=propose: String should have at most 720 characters"
    )
    await writer.ok("memory_status", {"action": "propose", "content": "x" * 720})
    small = writer.with_settings(settings_with(content={"hard_limit": 10}))
    refused = await small("memory_status", {"action": "propose", "content": "x" * 11})
    assert refused.text.endswith("String should have at most 10 characters")
