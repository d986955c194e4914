"""app/mcp/envelope.py: the counts and the optional meta keys of an answer."""

from __future__ import annotations

from app.mcp.envelope import Meta, collection, preview_meta, single


def test_collection_counts_default_to_the_rows_returned() -> None:
    answer = collection(Meta("list"), [1, 2, 3])
    assert answer == {
        "items": [1, 2, 3],
        "meta": {
            "action": "list",
            "scope": None,
            "counts": {"total": 3, "returned": 3, "filtered_out": 0},
            "degraded": False,
            "warnings": [],
        },
    }


def test_collection_filtered_out_defaults_to_total_minus_returned() -> None:
    assert collection(Meta("list"), [1, 2], total=10)["meta"]["counts"] == {
        "total": 10,
        "returned": 2,
        "filtered_out": 8,
    }
    # An explicit filtered_out wins (paging is not filtering, for instance).
    assert collection(Meta("list"), [1, 2], total=10, filtered_out=0)["meta"]["counts"]["filtered_out"] == 0
    # Never negative, even if a caller's total undercounts.
    assert collection(Meta("search"), [1, 2, 3], total=1)["meta"]["counts"]["filtered_out"] == 0


def test_action_specific_counters_sit_beside_the_shared_ones() -> None:
    meta = Meta("link_batch", counts={"linked": 2, "failed": 1, "returned": 99})
    counts = collection(meta, ["a", "b", "c"])["meta"]["counts"]
    assert counts == {"linked": 2, "failed": 1, "total": 3, "returned": 3, "filtered_out": 0}


def test_single_counts_one_for_any_item_and_zero_for_null() -> None:
    assert single(Meta("get"), {"id": "x"})["meta"]["counts"] == {
        "total": 1,
        "returned": 1,
        "filtered_out": 0,
    }
    assert single(Meta("get"), {"status": "not_found"})["meta"]["counts"]["returned"] == 1
    assert single(Meta("get"), {})["meta"]["counts"]["returned"] == 1
    empty = single(Meta("context", reason="no_match"), None)
    assert empty["item"] is None
    assert empty["meta"]["counts"] == {"total": 0, "returned": 0, "filtered_out": 0}


def test_reason_and_preview_keys_appear_only_when_set() -> None:
    plain = single(Meta("get"), None)["meta"]
    assert set(plain) == {"action", "scope", "counts", "degraded", "warnings"}
    preview = preview_meta("tok", "archives 1 thought", "repeat with confirm=true")
    meta = Meta(
        "archive",
        scope={"project": "p", "project_name": "P", "global": False},
        warnings=["w"],
        degraded=True,
        reason="id_not_found",
        preview=preview,
    )
    rendered = single(meta, {"status": "preview"})["meta"]
    assert list(rendered) == ["action", "scope", "counts", "degraded", "warnings", "reason", "preview"]
    assert rendered["reason"] == "id_not_found"
    assert rendered["preview"] == {
        "token": "tok",
        "destructive": True,
        "consequence": "archives 1 thought",
        "instruction": "repeat with confirm=true",
    }
    assert preview_meta(None) == {"token": None, "destructive": True}


def test_rendering_does_not_share_the_warning_list() -> None:
    meta = Meta("list", warnings=["a"])
    rendered = collection(meta, [])["meta"]
    rendered["warnings"].append("b")
    assert meta.warnings == ["a"]
