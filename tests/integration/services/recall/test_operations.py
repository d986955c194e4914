"""app/services/recall/operations.py: memory_recall's ranked reads (and the thought page's neighbourhood) as units of
work, without the tool layer."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest

from app.errors import AppError
from app.services.context import AppContext
from app.services.recall import operations as recall_operations
from app.services.recall import search
from app.services.recall.operations import ContextRequest, calibration
from app.services.recall.relevance import Calibration
from app.services.recall.requests import PageRequest, SearchRequest
from tests.conftest import settings_with
from tests.support.helpers import ToolCaller
from tests.support.search import create, hit_count, link, make_cluster, register


async def test_a_search_spans_every_project_without_cwd_and_counts_its_hits(
    writer: ToolCaller, app_context: AppContext
) -> None:
    made = await create(writer, "The espresso machine descales every Friday")
    found = await recall_operations.search(app_context, SearchRequest(query="espresso machine descaling", limit=5))
    assert [hit.thought.id for hit in found.outcome.hits][:1] == [uuid.UUID(made["id"])]
    assert not found.scope.cwd_given and found.scope.project is None
    assert found.links is None and found.clusters == {}
    assert await hit_count(app_context, made["id"]) == 1


async def test_a_picking_search_counts_no_hit(writer: ToolCaller, app_context: AppContext) -> None:
    """The console's thought picker searches to choose a thought to act on: choosing is not recalling."""
    made = await create(writer, "The espresso machine descales every Friday")
    request = SearchRequest(query="espresso machine descaling", status="all", limit=5)
    found = await recall_operations.search(app_context, request, count_hits=False)
    assert [hit.thought.id for hit in found.outcome.hits][:1] == [uuid.UUID(made["id"])]
    assert await hit_count(app_context, made["id"]) is None  # no thought_hit row at all


async def test_a_cwd_scopes_the_search_to_its_project(writer: ToolCaller, app_context: AppContext) -> None:
    project = await register(writer, "billing", "/work/billing")
    inside = await create(writer, "Invoices are numbered per fiscal year", cwd="/work/billing")
    await create(writer, "Invoices of the old system used a global counter")
    found = await recall_operations.search(
        app_context, SearchRequest(query="invoice numbering", cwd="/work/billing/src", include_url_links=True)
    )
    assert found.scope.project is not None and str(found.scope.project.id) == project["id"]
    assert [str(hit.thought.id) for hit in found.outcome.hits] == [inside["id"]]
    assert found.links == {uuid.UUID(inside["id"]): []}


async def test_an_id_query_is_parsed_once_and_never_embedded(
    writer: ToolCaller, app_context: AppContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = await create(writer, "Deploys freeze on the last day of the quarter")
    calls: list[str] = []
    parse = recall_operations.parse_id_query

    def counting(text: str) -> Any:
        calls.append(text)
        return parse(text)

    monkeypatch.setattr(recall_operations, "parse_id_query", counting)
    monkeypatch.setattr(search, "parse_id_query", counting)
    started: list[bool] = []
    monkeypatch.setattr(search.QueryVector, "start", lambda self: started.append(True))
    found = await recall_operations.search(app_context, SearchRequest(query=made["id"], limit=5))
    assert [str(hit.thought.id) for hit in found.outcome.hits] == [made["id"]]
    assert calls == [made["id"]] and started == []


async def test_a_clusters_request_reads_cluster_thoughts_only(writer: ToolCaller, app_context: AppContext) -> None:
    cluster = await create(writer, "Cluster: how the team reviews pull requests")
    await make_cluster(app_context, cluster["id"])
    await create(writer, "Pull requests need one approving review")
    found = await recall_operations.search(app_context, SearchRequest(query="pull request reviews", is_cluster=True))
    assert [str(hit.thought.id) for hit in found.outcome.hits] == [cluster["id"]]


async def test_context_answers_the_best_match_and_its_neighbourhood(
    writer: ToolCaller, app_context: AppContext
) -> None:
    parent = await create(writer, "The release train leaves every second Tuesday")
    child = await create(writer, "Hotfixes may board the release train late")
    await link(writer, parent["id"], child["id"], "parent")
    request = ContextRequest("when does the release train leave", None, None, max_edges=25)
    found = await recall_operations.context(app_context, request)
    assert found.thought is not None and str(found.thought.id) == parent["id"]
    assert [str(n.thought.id) for n in found.downstream] == [child["id"]] and found.upstream == []
    assert found.scope is not None and not found.scope.cwd_given
    assert await hit_count(app_context, child["id"]) == 1


async def test_context_without_a_match_or_with_a_missing_id(writer: ToolCaller, app_context: AppContext) -> None:
    await create(writer, "Lunch is at noon")
    nothing = await recall_operations.context(
        app_context, ContextRequest("quantum chromodynamics lattice", None, None, 25, min_relevance=1.0)
    )
    assert nothing.thought is None and nothing.links is None
    missing = uuid.uuid4()
    with pytest.raises(AppError, match=f"Thought {missing} not found"):
        await recall_operations.context(app_context, ContextRequest(None, missing, None, 25))


def test_configured_floors_override_the_model_profile(app_context: AppContext) -> None:
    floors = {"confidence": {"unrelated_floor": 0.1, "vector_floor": 0.2}}
    tuned = dataclasses.replace(app_context, settings=settings_with(search=floors))
    assert calibration(tuned) == Calibration(0.1, 0.2)
    profile = app_context.embedding.profile
    expected = Calibration(profile.unrelated_floor, profile.vector_floor) if profile else Calibration(0.8, 0.9)
    assert calibration(app_context) == expected


async def test_get_reads_one_hop_and_counts_every_thought_it_returns(
    writer: ToolCaller, app_context: AppContext
) -> None:
    parent = await create(writer, "The build cache lives on the shared volume")
    child = await create(writer, "Clearing the build cache takes ten minutes")
    await link(writer, parent["id"], child["id"], "parent")
    read = await recall_operations.get(app_context, uuid.UUID(parent["id"]), True, True)
    assert [str(n.thought.id) for n in read.found.downstream] == [child["id"]]
    assert read.links == {uuid.UUID(parent["id"]): [], uuid.UUID(child["id"]): []}
    assert await hit_count(app_context, child["id"]) == 1
    with pytest.raises(AppError, match="not found"):
        await recall_operations.get(app_context, uuid.uuid4(), False, False)


async def test_chain_walks_both_ways(writer: ToolCaller, app_context: AppContext) -> None:
    first = await create(writer, "Step one: provision the cluster")
    second = await create(writer, "Step two: install the operators")
    third = await create(writer, "Step three: deploy the services")
    await link(writer, first["id"], second["id"], "develops")
    await link(writer, second["id"], third["id"], "develops")
    walked = await recall_operations.chain(app_context, uuid.UUID(second["id"]), 25, False)
    assert [str(step.neighbour.thought.id) for step in walked.upstream] == [first["id"]]
    assert [str(step.neighbour.thought.id) for step in walked.downstream] == [third["id"]]
    assert walked.links is None


async def test_neighbourhood_reads_the_edges_both_ways_and_the_chain_in_one_read(
    writer: ToolCaller, app_context: AppContext
) -> None:
    """The thought page's read: `get`'s one hop (each counted a hit, as `get` counts them) and `chain`'s lineage
    (a thought only the chain reaches counts none, as `chain` counts none)."""
    parent = await create(writer, "Release trains leave every second Tuesday")
    centre = await create(writer, "The release train carries every merged change")
    child = await create(writer, "A hotfix boards the next train as a cherry-pick")
    grandchild = await create(writer, "Cherry-picks need the release manager's approval")
    other = await create(writer, "Merges freeze the day before a train leaves")
    await link(writer, parent["id"], centre["id"], "parent")
    await link(writer, centre["id"], child["id"], "develops")
    await link(writer, child["id"], grandchild["id"], "develops")
    await link(writer, centre["id"], other["id"], "related")
    found = await recall_operations.neighbourhood(app_context, uuid.UUID(centre["id"]), lambda read: read)
    assert str(found.thought.id) == centre["id"]
    assert [str(n.thought.id) for n in found.upstream] == [parent["id"]]
    assert sorted(str(n.thought.id) for n in found.downstream) == sorted([child["id"], other["id"]])
    assert [(str(s.neighbour.thought.id), s.depth) for s in found.ancestors] == [(parent["id"], 1)]
    assert [(str(s.neighbour.thought.id), s.depth) for s in found.descendants] == [
        (child["id"], 1),
        (grandchild["id"], 2),
    ]
    for counted in (centre, parent, child, other):
        assert await hit_count(app_context, counted["id"]) == 1
    assert await hit_count(app_context, grandchild["id"]) is None
    with pytest.raises(AppError, match="not found"):
        await recall_operations.neighbourhood(app_context, uuid.uuid4(), lambda read: read)


async def test_page_counts_the_total_beyond_the_page(writer: ToolCaller, app_context: AppContext) -> None:
    for n in range(3):
        await create(writer, f"Inventory row {n}", tags=["inventory"])
    found = await recall_operations.page(app_context, PageRequest(limit=2, tag="inventory"))
    assert len(found.rows) == 2 and found.total == 3 and found.links is None
    assert not found.scope.cwd_given
    rest = await recall_operations.page(app_context, PageRequest(limit=2, offset=2, tag="inventory"))
    assert len(rest.rows) == 1 and rest.total == 3


async def test_a_capped_page_counts_up_to_its_bound_and_exactly_below_it(
    writer: ToolCaller, app_context: AppContext
) -> None:
    """The console's pages count up to max(cap, offset + limit) rows: past that bound the total is the bound and
    `total_capped` says more match (so a next page exists); at or below it the total is exact."""
    for n in range(7):
        await create(writer, f"Inventory row {n}", tags=["inventory"])

    def capped(limit: int, offset: int, cap: int) -> Any:
        return recall_operations.page(
            app_context, PageRequest(limit=limit, offset=offset, tag="inventory"), total_cap=cap
        )

    first = await capped(2, 0, 3)
    assert len(first.rows) == 2 and (first.total, first.total_capped) == (3, True)
    later = await capped(2, 4, 3)  # the bound follows the page: offset + limit = 6, still fewer than 7
    assert [row.content for row in later.rows] == ["Inventory row 2", "Inventory row 1"]
    assert (later.total, later.total_capped) == (6, True)
    last = await capped(2, 6, 3)  # bound 8: every row counted
    assert [row.content for row in last.rows] == ["Inventory row 0"] and (last.total, last.total_capped) == (7, False)
    exact = await capped(2, 0, 7)  # a bound equal to the count is exact
    assert (exact.total, exact.total_capped) == (7, False)
    past = await capped(2, 50, 3)
    assert past.rows == [] and (past.total, past.total_capped) == (7, False)
    uncapped = await recall_operations.page(app_context, PageRequest(limit=2, tag="inventory"))
    assert (uncapped.total, uncapped.total_capped) == (7, False)  # the tools' total: exact, whatever the page
