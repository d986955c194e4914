"""memory_retention's candidate pages and protect as units of work (delete and compact run in their confirm flows)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.db.records import Principal, ThoughtRecord
from app.ids import parse_uuid
from app.services.context import AppContext
from app.services.retention.service import RetentionRule, RetentionService

# A candidate's content is listed cut to this many characters: enough to recognise it, its page shows the rest.
CONTENT_CUT = 200


def listed(thought: ThoughtRecord) -> ThoughtRecord:
    """A retention candidate as every door lists it: its content cut to CONTENT_CUT characters (the record keeps
    its project's id and name)."""
    return replace(thought, content=thought.content[:CONTENT_CUT])


@dataclass(frozen=True)
class CandidatePage:
    candidates: list[ThoughtRecord]  # each `listed`
    total: int  # candidates for the rule, ignoring the page
    limit: int  # the page size that ran


async def candidate_page(
    app: AppContext,
    principal: Principal,
    min_age_days: float | None,
    importance_floor: float | None,
    limit: int | None,
    offset: int,
) -> CandidatePage:
    """A page of retention candidates, every project; each filter left out falls back to its setting."""
    defaults = app.settings.retention_review
    rule = RetentionRule(
        min_age_days or defaults.min_age_days,
        defaults.importance_floor if importance_floor is None else importance_floor,
    )
    size = limit or defaults.page_size
    async with app.db.unit_of_work() as session:
        rows, total = await RetentionService(session, principal).candidates(rule, size, offset)
    return CandidatePage([listed(row) for row in rows], total, size)


async def protect_thought(app: AppContext, principal: Principal, thought_id: str, protected: bool) -> ThoughtRecord:
    """retention_review protect as every door receives it: the id parsed (refused as `thought_id`), then protected
    or unprotected."""
    parsed = parse_uuid(thought_id, "thought_id")
    async with app.db.unit_of_work() as session:
        return await RetentionService(session, principal).protect(parsed, protected)
