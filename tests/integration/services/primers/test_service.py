"""app/services/primers/: the primer page on a fresh graph, and a primer delete audited once."""

from __future__ import annotations

import uuid

from app.db.repositories.thoughts import ThoughtRepository
from app.services.context import AppContext
from app.services.primers.operations import primer_page
from app.services.primers.service import PrimerService
from app.services.recall.hits import HitService
from tests.support.helpers import ToolCaller
from tests.support.search import create, rows


async def test_the_primer_page_is_empty_on_a_fresh_graph(app_context: AppContext) -> None:
    assert await primer_page(app_context) == ([], 0)


async def test_a_primer_delete_is_audited_once(writer: ToolCaller, app_context: AppContext) -> None:
    thought = await create(writer, "Always at hand")
    async with app_context.db.unit_of_work() as session:
        record = await ThoughtRepository(session).get(uuid.UUID(thought["id"]))
        assert record is not None
        await HitService(session, 1).record([record])
    async with app_context.db.unit_of_work() as session:
        [primer] = await PrimerService(session).list(10)
        primer_id = uuid.UUID(primer["id"])
        assert await PrimerService(session).delete(primer_id, writer.principal, primer)
        assert not await PrimerService(session).delete(primer_id, writer.principal, primer)  # gone already
    audited = await rows(app_context, "SELECT tool, action, target_ids, details FROM audit_event")
    assert [tuple(row) for row in audited] == [("memory_primers", "delete", [primer["id"]], primer)]
