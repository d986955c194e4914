"""The fusion of the two legs (SearchService._fuse): nominations, the lexical leg's weight, the order of the rest."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from app.config import SearchSettings
from app.db.repositories.search import LegRow, LexicalLeg
from app.db.repositories.thoughts import ThoughtFilter
from app.services.relevance import Calibration
from app.services.search import RRF_K, Candidate, SearchQuery, SearchService

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _ids(count: int) -> list[uuid.UUID]:
    return [uuid.UUID(int=index + 1) for index in range(count)]


def _rows(ids: list[uuid.UUID], scores: list[float]) -> list[LegRow]:
    return [LegRow(thought_id, score, NOW) for thought_id, score in zip(ids, scores, strict=True)]


def _fuse(vector: list[LegRow], lexical: list[LegRow], idf_mass: float = 0.0, limit: int = 10) -> list[Candidate]:
    service: Any = SearchService(None, None, Calibration(0.2, 0.5), SearchSettings(), None)  # type: ignore[arg-type]
    return service._fuse(vector, LexicalLeg(lexical, idf_mass), SearchQuery("q", ThoughtFilter(), limit))  # type: ignore[no-any-return]


def test_the_first_row_of_one_leg_outranks_rows_met_deeper_in_both() -> None:
    ids = _ids(61)
    nearest, shared, lexical_only = ids[0], ids[1:51], ids[51:]
    # Plain RRF over every rank would put the row 2nd in vector and 11th in lexical (1/62 + 1/71) above the vector
    # leg's first (1/61); here the lexical leg nominates its first 10 rows only.
    vector = _rows([nearest, *shared], [0.1 + 0.001 * rank for rank in range(51)])
    lexical = _rows([*lexical_only, *shared], [10.0] * 60)
    fused = _fuse(vector, lexical, idf_mass=40.0)
    assert fused[0].id == nearest
    assert fused[1].id == shared[0] and fused[1].rrf_score == pytest.approx(1 / (RRF_K + 2))
    beyond = {candidate.id: candidate for candidate in fused}[shared[20]]  # rank 22 in vector, 30 in lexical
    assert beyond.rrf_score == 0.0 and beyond.tail_score > 0


def test_lexical_rows_under_the_share_of_the_best_score_do_not_nominate() -> None:
    ids = _ids(3)
    fused = {c.id: c for c in _fuse([], _rows(ids, [10.0, 7.0, 6.9]))}
    assert fused[ids[0]].rrf_score == pytest.approx(1 / (RRF_K + 1))
    assert fused[ids[1]].rrf_score == pytest.approx(1 / (RRF_K + 2))
    assert fused[ids[2]].rrf_score == 0.0
    assert [c.id for c in _fuse([], _rows(ids, [10.0, 7.0, 6.9]))] == ids  # the rest still follow, in order


def test_the_lexical_leg_weighs_the_root_of_how_much_of_the_query_its_best_row_holds() -> None:
    ids = _ids(2)
    vector, lexical = _rows([ids[0]], [0.2]), _rows([ids[1]], [10.0])
    fused = {c.id: c for c in _fuse(vector, lexical, idf_mass=40.0)}
    assert fused[ids[1]].rrf_score == pytest.approx(math.sqrt(10 / 40) / (RRF_K + 1))
    assert fused[ids[0]].final_score == 1.0 and fused[ids[1]].final_score == pytest.approx(0.5)
    # A best row holding the whole query (or more, by repeating a lexeme) weighs like the vector leg.
    whole = {c.id: c for c in _fuse(vector, lexical, idf_mass=8.0)}
    assert whole[ids[1]].rrf_score == pytest.approx(1 / (RRF_K + 1))


def test_a_larger_limit_nominates_deeper() -> None:
    ids = _ids(30)
    vector = _rows(ids, [0.01 * rank for rank in range(30)])
    assert sum(1 for c in _fuse(vector, [], limit=10) if c.rrf_score > 0) == 10
    assert sum(1 for c in _fuse(vector, [], limit=25) if c.rrf_score > 0) == 25
