"""bench.locomo's pure parts on a made-up dialogue (no LoCoMo data needed): parsing, evidence ids, the scores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import locomo

CONVERSATION: dict[str, Any] = {
    "speaker_a": "Ann",
    "speaker_b": "Bo",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat."},
        {"speaker": "Bo", "dia_id": "D1:2", "text": "Lovely! What is its name?", "blip_caption": "a photo of a cat"},
    ],
    "session_2_date_time": "10:00 am on 9 June, 2023",
    "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "Her name is Miso."}],
    "session_3_date_time": "a session without turns",  # upstream files date sessions they hold no turns for
    "session_1_summary": "not a session",
}
QA: list[dict[str, Any]] = [
    {"question": "When did Ann adopt a cat?", "answer": "May 2023", "evidence": ["D1:1"], "category": 2},
    {"question": "What is the cat called?", "answer": "Miso", "evidence": ["D1:2; D2:01"], "category": 1},
    {"question": "Did Bo adopt a dog?", "evidence": ["D1:1"], "category": 5, "adversarial_answer": "yes"},
    {"question": "Who likes tea?", "answer": "nobody", "evidence": [], "category": 3},
    {"question": "What did Ann adopt?", "answer": "a cat", "evidence": ["D:1:1", "D9:9"], "category": 4},
]


def test_turns_are_stored_as_dated_speaker_lines_in_session_order() -> None:
    dialogue, _, _ = locomo.parse_dialogue("7", CONVERSATION, QA)
    assert dialogue.speakers == ("Ann", "Bo")
    assert [turn.key for turn in dialogue.turns] == ["7/D1:1", "7/D1:2", "7/D2:1"]
    assert dialogue.turns[0].content == "[1:56 pm on 8 May, 2023] Ann: I adopted a cat."
    assert dialogue.turns[1].content == "[1:56 pm on 8 May, 2023] Bo: Lovely! What is its name?"  # no caption
    assert dialogue.turns[2].content == "[10:00 am on 9 June, 2023] Ann: Her name is Miso."


def test_adversarial_and_unanswerable_questions_are_left_out_and_evidence_ids_are_read_leniently() -> None:
    _, questions, left_out = locomo.parse_dialogue("7", CONVERSATION, QA)
    assert [(q.id, q.category) for q in questions] == [
        ("7/q0", "temporal"),
        ("7/q1", "multi-hop"),
        ("7/q4", "single-hop"),
    ]
    assert questions[1].evidence == {"7/D1:2", "7/D2:1"}  # "D1:2; D2:01": two ids, the leading zero read
    assert questions[2].evidence == {"7/D1:1"}  # "D:1:1" read, "D9:9" names no turn
    assert left_out == {
        "adversarial (category 5)": 1,
        "no evidence id names a turn": 1,
        "evidence ids naming no turn (dropped from their question)": 1,
    }


def test_both_file_forms_give_the_same_set(tmp_path: Path) -> None:
    folder = tmp_path / "dialogues"
    folder.mkdir()
    (folder / "7.json").write_text(json.dumps({**CONVERSATION, "qa": QA}), encoding="utf-8")
    upstream = tmp_path / "locomo10.json"
    upstream.write_text(json.dumps([{"sample_id": "conv-7", "conversation": CONVERSATION, "qa": QA}]), encoding="utf-8")
    from_folder, from_list = locomo.load(folder), locomo.load(upstream)
    assert from_folder == from_list
    assert len(from_folder.questions) == 3 and from_folder.digest == from_list.digest


def test_recall_is_the_share_of_evidence_in_the_first_k_and_hit_any_of_it() -> None:
    evidence = frozenset({"a", "b"})
    ranked = ["x", "a", "y", "z", "w", "b"]
    assert locomo.recall_at(ranked, evidence, 5) == 0.5
    assert locomo.recall_at(ranked, evidence, 10) == 1.0
    assert locomo.hit_at(ranked, evidence, 5) == 1.0
    assert locomo.hit_at(["x"], evidence, 5) == 0.0
    assert locomo.recall_at([], evidence, 5) == 0.0


def test_the_table_averages_per_question_by_category_and_overall() -> None:
    questions = [
        locomo.Question("7/q0", "7", "temporal", "?", frozenset({"a"})),
        locomo.Question("7/q1", "7", "multi-hop", "?", frozenset({"a", "b"})),
        locomo.Question("7/q2", "7", "multi-hop", "?", frozenset({"c"})),
    ]
    ranked = {"7/q0": ["a"], "7/q1": ["b", "x"], "7/q2": []}
    result = locomo.table(questions, ranked)
    assert result["temporal"]["n"] == 1 and result["temporal"]["R@5"] == 1.0
    assert result["multi-hop"]["n"] == 2 and result["multi-hop"]["R@5"] == pytest.approx(0.25)
    assert result["multi-hop"]["hit@5"] == pytest.approx(0.5)
    assert result["overall"]["R@5"] == pytest.approx(0.5)  # (1 + 0.5 + 0) / 3: each question weighs alike
    assert "single-hop" not in result


def test_the_halves_split_the_ten_dialogues() -> None:
    assert set(locomo.TUNING).isdisjoint(locomo.HELD_OUT)
    assert sorted(locomo.TUNING + locomo.HELD_OUT) == ["26", "30", "41", "42", "43", "44", "47", "48", "49", "50"]
