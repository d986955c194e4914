"""app/services/retention.py candidate_page and app/services/primers.py primer_page: settings as defaults."""

from __future__ import annotations

import dataclasses

from app.services.context import AppContext
from app.services.primers import primer_page
from app.services.retention import candidate_page
from tests.helpers import ToolCaller


async def test_the_candidate_page_falls_back_to_the_settings(writer: ToolCaller, app_context: AppContext) -> None:
    page = await candidate_page(app_context, writer.principal, None, None, None, 0)
    assert page.limit == app_context.limits.retention_page_size and page.rows == [] and page.total == 0
    tuned = dataclasses.replace(app_context, limits=dataclasses.replace(app_context.limits, retention_page_size=3))
    assert (await candidate_page(tuned, writer.principal, 5, 0.5, None, 0)).limit == 3
    assert (await candidate_page(tuned, writer.principal, 5, 0.5, 7, 0)).limit == 7


async def test_the_primer_page_is_empty_on_a_fresh_graph(app_context: AppContext) -> None:
    assert await primer_page(app_context) == ([], 0)
