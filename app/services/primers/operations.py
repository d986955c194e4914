"""memory_primers list as a unit of work: the most-hit primers up to the cap (delete runs in its confirm flow)."""

from __future__ import annotations

from typing import Any

from app.services.context import AppContext
from app.services.primers.service import PrimerService


async def primer_page(app: AppContext) -> tuple[list[dict[str, Any]], int]:
    """The most-hit primers up to the configured cap, and how many there are in all."""
    cap = app.settings.primer.list_cap
    async with app.db.unit_of_work() as session:
        service = PrimerService(session)
        rows = await service.list(cap)
        # the cap is a page: the total is every primer, so the answer can say what the cap left out
        total = await service.count() if len(rows) >= cap else len(rows)
    return rows, total
