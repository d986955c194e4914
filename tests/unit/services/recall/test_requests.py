"""app/services/recall/requests.py: a search's (and a page's) arguments are declared once — the tool takes the
request model as its arguments, and the search service's query receives every ranking field of it as sent."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from app.db.repositories.thoughts import ThoughtFilter
from app.mcp.tools.common import ShapeArgs
from app.mcp.tools.recall.args import ClustersArgs, ListArgs, SearchArgs
from app.mcp.tools.reflect.args import TimelineArgs
from app.services.recall.operations import search_query
from app.services.recall.requests import ClustersRequest, PageRequest, Ranking, Reranking, SearchRequest
from app.services.recall.search import SearchQuery

# A value other than the default for every field of Ranking and Reranking.
SENT: dict[str, Any] = {
    "hybrid": False,
    "limit": 7,
    "min_relevance": 0.25,
    "recency_weight": 0.5,
    "recency_half_life_days": 12.0,
    "supersession_mode": "suppress",
    "contradiction_mode": "off",
}


def _fields(*models: type[BaseModel]) -> set[str]:
    return {name for model in models for name in model.model_fields}


def test_every_ranking_field_is_covered_here() -> None:
    assert set(SENT) == _fields(Ranking, Reranking)
    defaults = {name: field.default for name, field in {**Ranking.model_fields, **Reranking.model_fields}.items()}
    assert all(SENT[name] != default for name, default in defaults.items())


def test_the_search_tool_takes_the_request_and_adds_only_its_action_and_output_shape() -> None:
    assert issubclass(SearchArgs, SearchRequest) and issubclass(ClustersArgs, ClustersRequest)
    assert _fields(SearchArgs) == _fields(SearchRequest, ShapeArgs) | {"action"}
    assert _fields(ClustersArgs) == _fields(ClustersRequest, ShapeArgs) | {"action"}


def test_the_query_gets_every_ranking_field_as_sent() -> None:
    request = SearchArgs.model_validate({"action": "search", "query": "release train", **SENT})
    query = search_query(request, ThoughtFilter(), None, None)
    assert {name: getattr(query, name) for name in SENT} == SENT
    assert query.text == "release train" and query.id_parsed


def test_defaults_are_the_request_models_own() -> None:
    """One default per argument: the tool's, the request's and the service query's are the same declaration."""
    request = SearchRequest(query="q")
    query = SearchQuery(text="q", where=ThoughtFilter())
    for name in _fields(Ranking, Reranking):
        assert getattr(request, name) == getattr(query, name) == SearchArgs.model_fields[name].default
    assert query.recency_half_life_days == 30


def test_clusters_search_cluster_thoughts_with_searchs_other_defaults() -> None:
    args = ClustersArgs.model_validate({"action": "clusters", "query": "q", "limit": 3, "hybrid": False})
    request = SearchRequest.of_clusters(args)
    assert (request.is_cluster, request.limit, request.hybrid, request.query) == (True, 3, False, "q")
    assert request.recency_half_life_days == SearchRequest.model_fields["recency_half_life_days"].default


def test_list_takes_the_page_request_and_timeline_reaches_it_by_field_name() -> None:
    assert issubclass(ListArgs, PageRequest)
    assert _fields(ListArgs) == _fields(PageRequest, ShapeArgs) | {"action"}
    sent = {"cwd": "/work/app", "status": "draft", "limit": 7, "offset": 3, "include_url_links": True}
    page = PageRequest.of(TimelineArgs.model_validate({"action": "timeline", **sent, "compact": True}))
    assert type(page) is PageRequest
    assert page.model_dump() == {**sent, "tag": None, "is_cluster": None}
