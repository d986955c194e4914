"""bench.eval's --check on recorded figures (no model, no database): the targets of each measured model, what a
run of the served default meets, and what a broken fusion misses. The figures are those of the runs in
docs/BENCHMARKS.md ("make eval --check on e5"); the rankings behind them are deterministic."""

from __future__ import annotations

from typing import Any

import pytest

from app.embedding.profiles import OFFLINE_E5, OFFLINE_MINILM
from bench import eval as bench_eval

KINDS = ("overall", "single-hop", "temporal", "multi-hop", "open-domain")
# mode → R@5 / R@10 per group, in KINDS' order: the conversation set with e5 at 518c2bc (shipped fusion).
E5_SHIPPED: dict[str, list[tuple[float, float]]] = {
    "hybrid_default": [(0.3425, 0.3867), (0.375, 0.4143), (0.4236, 0.468), (0.1833, 0.2528), (0.075, 0.1167)],
    "hybrid": [(0.3858, 0.461), (0.4107, 0.4714), (0.4926, 0.5961), (0.2111, 0.2917), (0.0833, 0.125)],
    "vector": [(0.3842, 0.4583), (0.375, 0.4643), (0.532, 0.5911), (0.2528, 0.3222), (0.0583, 0.1167)],
    "lexical": [(0.2888, 0.3024), (0.3179, 0.3321), (0.3645, 0.3695), (0.1111, 0.1389), (0.075, 0.1)],
    "bm25": [(0.2687, 0.304), (0.2821, 0.3429), (0.3596, 0.3645), (0.1, 0.1222), (0.0667, 0.1)],
    "dense": [(0.3842, 0.4583), (0.375, 0.4643), (0.532, 0.5911), (0.2528, 0.3222), (0.0583, 0.1167)],
    "rrf": [(0.2922, 0.3314), (0.325, 0.375), (0.3695, 0.3941), (0.1361, 0.1639), (0.0333, 0.0833)],
}
# The same run with the lexical leg off in the fusion (`--search vector_weight=1`: the lexical leg's weight 0).
E5_LEXICAL_OFF = {
    **E5_SHIPPED,
    "hybrid_default": [(0.3156, 0.3427), (0.325, 0.3571), (0.4138, 0.4286), (0.2056, 0.2444), (0.05, 0.0833)],
    "hybrid": [(0.3914, 0.4547), (0.3857, 0.4571), (0.5419, 0.5961), (0.2417, 0.3111), (0.0583, 0.1083)],
}
# The hand-written set, default call (hybrid_default_gate) R@5, with e5 at 518c2bc.
E5_HAND_SHIPPED = {"overall": 0.8728, "exact": 1.0, "identifier": 0.9825, "superseded": 1.0}


def missed(lines: list[str]) -> list[str]:
    """Which targets a shortfall list names (its figures left out: they are the check's own arithmetic)."""
    tags = {"< rrf +": "rrf", "< bm25 +": "bm25", "gate loses": "gate", "< dense": "vector~dense"}
    tags |= {"< bm25 ": "lexical~bm25", "< rrf 0": "hybrid~rrf"}
    found = []
    for line in lines:
        tag = next((tag for text, tag in tags.items() if text in line), line)
        kind = next((kind for kind in KINDS[1:] if f" {kind} " in line), None)
        found.append(f"{kind} {tag}" if kind else tag)
    return found


def summary(figures: dict[str, list[tuple[float, float]]]) -> dict[str, Any]:
    return {
        mode: {group: {"recall@5": r5, "recall@10": r10} for group, (r5, r10) in zip(KINDS, rows, strict=True)}
        for mode, rows in figures.items()
    }


def hand_summary(figures: dict[str, float]) -> dict[str, Any]:
    return {"hybrid_default_gate": {group: {"recall@5": r5} for group, r5 in figures.items()}}


def test_the_served_default_meets_its_own_targets_and_not_issue_15s() -> None:
    """e5's targets are re-derived from its own run (each a measured figure minus 0.01); MiniLM's stay issue 15's,
    which the e5 run misses exactly where the eleventh round said it does."""
    shipped = summary(E5_SHIPPED)
    assert bench_eval.shortfalls(shipped, bench_eval.TARGETS[OFFLINE_E5]) == []
    assert bench_eval.hand_written_shortfalls(hand_summary(E5_HAND_SHIPPED), bench_eval.TARGETS[OFFLINE_E5]) == []
    assert missed(bench_eval.shortfalls(shipped, bench_eval.TARGETS[OFFLINE_MINILM])) == ["bm25", "gate"]


def test_a_fusion_without_its_lexical_leg_fails_the_check() -> None:
    """With the lexical leg's weight 0 the default call falls 0.027 R@5 (its gate then drops what the lexical leg
    held up), open-domain under bm25s; `min_relevance 0` alone would not show it (0.391, over the shipped 0.386)."""
    assert missed(bench_eval.shortfalls(summary(E5_LEXICAL_OFF), bench_eval.TARGETS[OFFLINE_E5])) == [
        "rrf",
        "bm25",
        "open-domain bm25",
        "gate",
    ]


def test_the_minilm_profile_keeps_the_targets_of_issue_15() -> None:
    minilm = bench_eval.TARGETS[OFFLINE_MINILM]
    assert (minilm.rrf_margin, minilm.bm25_margin, minilm.kind_margin, minilm.gate_loss, minilm.tolerance) == (
        0.05,
        0.08,
        0.0,
        0.01,
        0.02,
    )
    assert (minilm.hand_default, minilm.hand_kinds) == (None, ())


def test_every_re_derived_target_sits_an_allowance_under_what_e5_measured() -> None:
    """Each margin is at most the measured one minus ALLOWANCE, and not more than a rounding (0.001) under it: the
    check is as tight as its stated origin, so a fall of more than 0.01 fails it."""
    shipped, e5 = summary(E5_SHIPPED), bench_eval.TARGETS[OFFLINE_E5]
    default = shipped["hybrid_default"]["overall"]["recall@5"]
    lost = shipped["hybrid"]["overall"]["recall@5"] - default
    for measured, target in (
        (default - shipped["rrf"]["overall"]["recall@5"], e5.rrf_margin),
        (default - shipped["bm25"]["overall"]["recall@5"], e5.bm25_margin),
        (E5_HAND_SHIPPED["overall"], e5.hand_default),
        (-lost, -e5.gate_loss),
    ):
        assert target is not None
        assert measured - bench_eval.ALLOWANCE - 0.001 <= target <= measured - bench_eval.ALLOWANCE


def test_a_fall_of_more_than_the_allowance_fails_the_check() -> None:
    shipped = summary(E5_SHIPPED)
    fallen = {
        **shipped,
        "hybrid_default": {
            **shipped["hybrid_default"],
            "overall": {"recall@5": 0.3425 - 0.011, "recall@10": 0.3867},
        },
    }
    assert missed(bench_eval.shortfalls(fallen, bench_eval.TARGETS[OFFLINE_E5])) == ["rrf", "bm25", "gate"]


def test_check_refuses_a_model_without_targets_before_running(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        bench_eval.main(["--check", "--model", "intfloat/multilingual-e5-small"])
    assert refused.value.code == 2
    assert "--check: no targets for intfloat/multilingual-e5-small" in capsys.readouterr().err


def test_the_default_model_is_the_served_default() -> None:
    assert bench_eval.arguments([]).model == OFFLINE_E5 == bench_eval.shipped_settings().embedding.model
