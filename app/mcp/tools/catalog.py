"""The 11 tools, in the contract's order."""

from __future__ import annotations

from app.mcp.registry import ToolSpec
from app.mcp.tools import (
    crystallize,
    edge_review,
    guide,
    manage,
    primers,
    recall,
    reflect,
    retention,
    status,
    store,
    supersede,
)

ALL_SPECS: tuple[ToolSpec, ...] = (
    recall.SPEC,
    store.SPEC,
    supersede.SPEC,
    status.SPEC,
    manage.SPEC,
    edge_review.SPEC,
    retention.SPEC,
    crystallize.SPEC,
    reflect.SPEC,
    primers.SPEC,
    guide.SPEC,
)
