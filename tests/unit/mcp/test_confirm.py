"""Every destructive action runs the one preview → confirm flow of dispatch (app/mcp/confirm.py)."""

from __future__ import annotations

from app.mcp.confirm import ConfirmFlow, confirm_instruction
from app.mcp.tools.catalog import ALL_SPECS

# the contract's two tokenless destructive actions (mcp-tools.md, "Dry-run / confirm pattern")
TOKENLESS = {("memory_store", "unlink_batch"), ("retention_review", "compact")}


def test_every_action_taking_confirm_runs_the_confirm_flow() -> None:
    flows = set()
    for spec in ALL_SPECS:
        for action in spec.actions:
            takes_confirm = "confirm" in action.model.model_fields
            assert takes_confirm == isinstance(action.handler, ConfirmFlow), (spec.name, action.name)
            if isinstance(action.handler, ConfirmFlow):
                flows.add((spec.name, action.name))
                assert action.handler.token == ("preview_token" in action.model.model_fields), action.name
                assert action.handler.token == ((spec.name, action.name) not in TOKENLESS), action.name
    assert len(flows) == 14


def test_the_instruction_names_the_confirm_call() -> None:
    assert confirm_instruction("memory_primers", "delete", "primer_id=p", "t") == (
        "Call memory_primers again with action=delete, primer_id=p, confirm=true, preview_token=t to proceed."
    )
    assert confirm_instruction("memory_store", "unlink_batch", "edge_ids=[...]", None) == (
        "Call memory_store again with action=unlink_batch, edge_ids=[...], confirm=true to proceed."
    )
