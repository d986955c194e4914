"""The answer envelope: {items|item, meta} with the same meta keys for every action."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Meta:
    action: str
    scope: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    degraded: bool = False
    reason: str | None = None
    preview: dict[str, Any] | None = None
    counts: dict[str, int] = field(default_factory=dict)

    def render(self, total: int, returned: int, filtered_out: int) -> dict[str, Any]:
        counts = {**self.counts, "total": total, "returned": returned, "filtered_out": filtered_out}
        meta: dict[str, Any] = {
            "action": self.action,
            "scope": self.scope,
            "counts": counts,
            "degraded": self.degraded,
            "warnings": list(self.warnings),
        }
        if self.reason is not None:
            meta["reason"] = self.reason
        if self.preview is not None:
            meta["preview"] = self.preview
        return meta


def collection(
    meta: Meta, items: Sequence[Any], *, total: int | None = None, filtered_out: int | None = None
) -> dict[str, Any]:
    """`total` defaults to the rows returned; `filtered_out` to total − returned."""
    returned = len(items)
    total = returned if total is None else total
    dropped = max(total - returned, 0) if filtered_out is None else filtered_out
    return {"items": list(items), "meta": meta.render(total, returned, dropped)}


def single(meta: Meta, item: Any) -> dict[str, Any]:
    returned = 0 if item is None else 1
    return {"item": item, "meta": meta.render(returned, returned, 0)}


def preview_meta(token: str | None, consequence: str | None = None, instruction: str | None = None) -> dict[str, Any]:
    preview: dict[str, Any] = {"token": token, "destructive": True}
    if consequence is not None:
        preview["consequence"] = consequence
    if instruction is not None:
        preview["instruction"] = instruction
    return preview
