"""The fusion of the two legs (SearchService._fuse): each leg's scores standardised, weighted, summed; neighbours."""

from __future__ import annotations

import math
import statistics
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from app.config import SearchSettings
from app.db.repositories.search import LegRow, LexicalLeg
from app.db.repositories.thoughts import ThoughtFilter
from app.services.recall.relevance import Calibration
from app.services.recall.search import (
    LEXICAL_ABSENT_FLOOR,
    MIN_COSINE_DEVIATION,
    RRF_K,
    VECTOR_ABSENT_PENALTY,
    Candidate,
    SearchQuery,
    SearchService,
)

NOW = datetime(2026, 12, 1, tzinfo=UTC)
WEIGHT = SearchSettings().vector_weight


def _ids(count: int) -> list[uuid.UUID]:
    return [uuid.UUID(int=index + 1) for index in range(count)]


def _rows(ids: list[uuid.UUID], scores: list[float]) -> list[LegRow]:
    return [LegRow(thought_id, score, NOW) for thought_id, score in zip(ids, scores, strict=True)]


def _z(values: list[float]) -> list[float]:
    mean, deviation = statistics.fmean(values), statistics.pstdev(values)
    return [(value - mean) / deviation for value in values]


def _service(settings: SearchSettings | None = None) -> Any:
    return SearchService(None, None, Calibration(0.2, 0.5), settings or SearchSettings(), None)  # type: ignore[arg-type]


def _fuse(
    vector: list[LegRow], lexical: list[LegRow], settings: SearchSettings | None = None
) -> dict[uuid.UUID, Candidate]:
    query = SearchQuery(text="q", where=ThoughtFilter(), limit=10)
    return {candidate.id: candidate for candidate in _service(settings)._fuse(vector, LexicalLeg(lexical, 0.0), query)}


def test_the_shipped_weights() -> None:
    # Chosen on LoCoMo's tuning half within what the generated sets allow (docs/BENCHMARKS.md).
    assert SearchSettings().vector_weight == 0.55
    assert SearchSettings().neighbour_weight == 0.3
    assert (VECTOR_ABSENT_PENALTY, LEXICAL_ABSENT_FLOOR) == (1.0, 1.0)


def test_a_leg_alone_is_standardised_and_the_final_score_falls_by_e_per_deviation() -> None:
    ids = _ids(3)
    fused = _fuse(_rows(ids, [0.1, 0.2, 0.3]), [])  # cosines 0.9, 0.8, 0.7
    expected = [WEIGHT * z for z in _z([0.9, 0.8, 0.7])]
    assert [fused[i].fused_score for i in ids] == pytest.approx(expected)
    assert [fused[i].final_score for i in ids] == pytest.approx([math.exp(z - expected[0]) for z in expected])


def test_nearly_equal_scores_of_a_small_leg_stay_nearly_equal() -> None:
    first, second = _ids(2)
    # Two cosines 0.002 apart: standardised alone they would be two deviations apart; the floor keeps them close.
    fused = _fuse(_rows([first, second], [0.129, 0.131]), [])
    assert fused[first].fused_score - fused[second].fused_score == pytest.approx(WEIGHT * 0.002 / MIN_COSINE_DEVIATION)
    assert fused[second].final_score > 0.85


def test_the_lexical_leg_is_padded_with_zeros_to_the_vector_legs_rows_and_missing_rows_take_its_lowest() -> None:
    ids = _ids(4)
    vector = _rows(ids, [0.2, 0.2, 0.2, 0.2])  # all alike: z 0 each
    fused = _fuse(vector, _rows(ids[:2], [10.0, 5.0]))
    z = _z([10.0, 5.0, 0.0, 0.0])  # the padded zeros stand 0.9 deviations under the mean: above the floor
    assert min(z) > -LEXICAL_ABSENT_FLOOR
    assert [fused[i].fused_score for i in ids] == pytest.approx([(1 - WEIGHT) * value for value in z])
    assert fused[ids[2]].bm25_score is None and fused[ids[2]].match_source == ["embedding"]


def test_a_row_missing_from_the_lexical_leg_counts_at_most_the_floor_under_its_mean() -> None:
    # The lexical leg is bounded and its zero padding sets its lowest: a row it lacks counts no lower than
    # LEXICAL_ABSENT_FLOOR deviations under its mean, however far under it the padding stands.
    ids = _ids(5)
    fused = _fuse(_rows(ids, [0.2] * 5), _rows(ids[:4], [10.0, 9.0, 8.0, 1.0]))
    assert _z([10.0, 9.0, 8.0, 1.0, 0.0])[-1] < -LEXICAL_ABSENT_FLOOR  # −1.41
    assert fused[ids[4]].fused_score == pytest.approx((1 - WEIGHT) * -LEXICAL_ABSENT_FLOOR)


def test_a_row_missing_from_the_vector_leg_counts_a_penalty_under_its_lowest_cosine() -> None:
    near, far, keyword = _ids(3)
    fused = _fuse(_rows([near, far], [0.1, 0.3]), _rows([keyword], [4.0]))
    lexical_gap = (1 - WEIGHT) * (_z([4.0, 0.0])[0] * 2)  # the keyword row's lexical z over `far`'s
    assert fused[keyword].fused_score == pytest.approx(
        fused[far].fused_score + lexical_gap - WEIGHT * VECTOR_ABSENT_PENALTY
    )


def test_every_row_the_lexical_leg_scores_is_a_candidate() -> None:
    # The former fusion left out lexical rows under 0.7 × the best BM25; a row at 0.5 × counts now.
    ids = _ids(3)
    fused = _fuse([], _rows(ids, [10.0, 7.0, 5.0]))
    assert list(fused) == ids
    assert fused[ids[2]].fused_score == pytest.approx((1 - WEIGHT) * _z([10.0, 7.0, 5.0])[2])


def test_the_vector_weight_turns_the_balance() -> None:
    near, keyword, other = _ids(3)
    vector = _rows([near, other, keyword], [0.1, 0.3, 0.5])
    lexical = _rows([keyword, near], [6.0, 3.0])
    lexical_heavy, vector_heavy = SearchSettings(vector_weight=0.1), SearchSettings(vector_weight=0.9)
    assert next(iter(_fuse(vector, lexical, lexical_heavy))) == keyword
    assert next(iter(_fuse(vector, lexical, vector_heavy))) == near


def test_rrf_is_reported_over_every_rank_and_breaks_ties() -> None:
    low, high = _ids(2)
    fused = _fuse(_rows([high, low], [0.2, 0.2]), _rows([high], [4.0]))
    assert fused[high].rrf_score == pytest.approx(2 / (RRF_K + 1))
    assert fused[low].rrf_score == pytest.approx(1 / (RRF_K + 2))
    # Equal cosines fuse alike; the row its leg ranked first comes first, not the lower id.
    tied = _fuse(_rows([high, low], [0.2, 0.2]), [])
    assert tied[high].fused_score == tied[low].fused_score and list(tied) == [high, low]


def test_each_leader_lifts_the_candidate_stored_just_before_it() -> None:
    question, reply, stranger, outside = _ids(4)
    vector = _rows([reply, stranger, question], [0.1, 0.2, 0.3])
    plain = _fuse(vector, [])
    own = {thought_id: candidate.fused_score for thought_id, candidate in plain.items()}
    lowest = min(own.values())
    service = _service(SearchSettings(neighbour_weight=0.75))
    query = SearchQuery(text="q", where=ThoughtFilter(), limit=10)
    # `question` was stored just before `reply`; `outside`, stored before `stranger`, is in neither leg.
    lifted = service._lift(list(plain.values()), {reply: question, stranger: outside, question: None}, query)
    assert {candidate.id for candidate in lifted} == {question, reply, stranger}
    scores = {candidate.id: candidate.fused_score for candidate in lifted}
    assert scores[question] == pytest.approx(own[question] + 0.75 * (own[reply] - lowest))
    assert scores[reply] == pytest.approx(own[reply]) and scores[stranger] == pytest.approx(own[stranger])
    assert [candidate.id for candidate in lifted] == [reply, question, stranger]  # lifted past the stranger
    assert math.isclose(lifted[0].final_score, 1.0)


def test_lexical_rows_outside_the_vector_leg_no_longer_bury_its_clear_answer() -> None:
    # The 100 k notes' failure (docs/BENCHMARKS.md, eleventh round): the lexical leg lacks the vector leg's clear
    # answer, holds rows the vector leg does not have, and is a few rows short of the vector leg, so the zeros it
    # is padded with stand ~3 deviations under its mean. Under the tenth round's rule (a missing row at its leg's
    # lowest) the answer fell to 8th; now it is first.
    ids = _ids(23)
    answer, nearby, keywords = ids[0], ids[1:20], ids[20:]
    vector = _rows([answer, *nearby], [0.10] + [0.115 + 0.001 * index for index in range(19)])
    lexical = _rows([*keywords, *nearby[4:]], [9.0, 8.8, 8.6] + [8.0 - 0.1 * index for index in range(15)])
    fused = _fuse(vector, lexical)
    assert next(iter(fused)) == answer
