"""app/services/review/placement.py: the placement plan behind memory_status propose and edge_review enqueue."""

from __future__ import annotations

import dataclasses
import uuid

from app.db.repositories.projects import ProjectRepository
from app.db.repositories.thoughts import ThoughtRepository
from app.embedding.profiles import E5_SMALL, OFFLINE_E5, OFFLINE_MINILM, PROFILES
from app.services.context import AppContext
from app.services.review.placement import neighbour_threshold, plan_placement
from tests.support.helpers import ToolCaller
from tests.support.search import create


def test_the_neighbour_threshold_follows_the_active_model() -> None:
    assert neighbour_threshold(None) == 0.75
    assert neighbour_threshold(PROFILES[E5_SMALL]) == neighbour_threshold(PROFILES[OFFLINE_E5]) == 0.75
    assert neighbour_threshold(PROFILES[OFFLINE_MINILM]) == PROFILES[OFFLINE_MINILM].unrelated_floor + 0.1
    other = dataclasses.replace(
        PROFILES[E5_SMALL], model_id="some/other-model", unrelated_floor=0.3, neighbour_similarity=None
    )
    assert neighbour_threshold(other) == 0.3 + 0.1


async def test_a_draft_is_planned_against_one_project(writer: ToolCaller, app_context: AppContext) -> None:
    neighbour = await create(writer, "The staging database is refreshed from production every Sunday night")
    async with app_context.db.unit_of_work() as session:
        project = await ProjectRepository(session).ensure_default()
        draft = "The staging database is now refreshed from production every Saturday night instead"
        plan = await plan_placement(session, app_context.embedding, None, draft, project.id)
    assert plan.project_id == project.id
    assert plan.degraded == (app_context.embedding.profile is None)
    if not plan.degraded:
        assert str(uuid.UUID(neighbour["id"])) in {str(edge.target.id) for edge in plan.edges}


async def test_a_stored_thought_is_planned_without_itself(writer: ToolCaller, app_context: AppContext) -> None:
    made = await create(writer, "Backups are verified by a monthly restore drill")
    async with app_context.db.unit_of_work() as session:
        thought = await ThoughtRepository(session).get(uuid.UUID(made["id"]))
        assert thought is not None
        plan = await plan_placement(session, app_context.embedding, thought, thought.content, thought.project_id)
    assert made["id"] not in {str(edge.target.id) for edge in plan.edges}
