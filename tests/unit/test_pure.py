"""Pure functions and the advertised tool surface: no database, no model."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import mcp_types
import pytest

from app.db.models import ThoughtStatus
from app.db.records import ThoughtRecord, UrlLinkRecord
from app.errors import AppError, ErrorKind
from app.ids import parse_uuid
from app.mcp.envelope import Meta, collection, preview_meta, single
from app.mcp.schema import mcp_tool
from app.mcp.shaping import COMPACT_FIELDS, FULL_FIELDS, ThoughtShaper, iso
from app.mcp.tools.catalog import ALL_SPECS
from app.services.previews import fingerprint
from app.services.scope import normalize_path
from tests.contract import CONTRACT_ACTIONS

# ---------------------------------------------------------------- ids

SAMPLE = uuid.UUID("01a172b4-d486-700c-a16e-5ae3d2d77a90")


@pytest.mark.parametrize(
    "spelling",
    [
        "01a172b4-d486-700c-a16e-5ae3d2d77a90",
        "01A172B4-D486-700C-A16E-5AE3D2D77A90",
        "01a172b4d486700ca16e5ae3d2d77a90",
        "01a1-72b4d486-700ca16e5ae3d2d7-7a90",
        "-01a172b4d486700ca16e5ae3d2d77a90-",
        "01a172b4--d486700ca16e5ae3d2d77a90",
        "  01a172b4-d486-700c-A16E-5ae3d2d77a90 ",
    ],
)
def test_parse_uuid_accepts_hyphens_anywhere_and_any_case(spelling: str) -> None:
    assert parse_uuid(spelling, "thought_id") == SAMPLE


@pytest.mark.parametrize(
    "value",
    [
        "",
        "01a172b4-d486-700c-a16e-5ae3d2d77a9",  # 31 hex digits
        "01a172b4-d486-700c-a16e-5ae3d2d77a900",  # 33
        "01a172b4-d486-700c-a16e-5ae3d2d77a9g",  # not hex
        "01a172b4 d486 700c a16e 5ae3d2d77a90",  # inner spaces
        "{01a172b4-d486-700c-a16e-5ae3d2d77a90}",
        "urn:uuid:01a172b4-d486-700c-a16e-5ae3d2d77a90",
    ],
)
def test_parse_uuid_refusals_name_the_argument(value: str) -> None:
    with pytest.raises(AppError) as raised:
        parse_uuid(value, "parent_id")
    assert raised.value.kind is ErrorKind.bad_request
    assert raised.value.message == f"Invalid 'parent_id': {value!r} is not a valid id (a UUID)"


def test_parse_uuid_refuses_a_non_string() -> None:
    with pytest.raises(AppError) as raised:
        parse_uuid(12345, "edge_id")  # type: ignore[arg-type]
    assert raised.value.message.startswith("Invalid 'edge_id': 12345")


# ---------------------------------------------------------------- paths


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/work/demo", "/work/demo"),
        ("/work/demo/", "/work/demo"),
        ("/work//demo///", "/work/demo"),
        ("  /work/demo  ", "/work/demo"),
        ("/work/./demo/sub/..", "/work/demo"),
        ("/", "/"),
        ("//", "/"),
        ("///work", "/work"),
        ("/..", "/"),
        ("relative/dir/", "relative/dir"),
        ("", ""),
        ("   ", ""),
    ],
)
def test_normalize_path_gives_one_spelling_per_directory(path: str, expected: str) -> None:
    assert normalize_path(path) == expected


def test_normalize_path_collapses_a_doubled_leading_slash() -> None:
    assert normalize_path("//work/demo") == "/work/demo"


# ---------------------------------------------------------------- envelope counts


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


# ---------------------------------------------------------------- shaping


def test_iso_is_utc_with_milliseconds_and_z() -> None:
    moment = datetime(2026, 1, 2, 3, 4, 5, 678_901, tzinfo=UTC)
    assert iso(moment) == "2026-01-02T03:04:05.678Z"  # truncated, not rounded
    assert iso(moment.replace(microsecond=0)) == "2026-01-02T03:04:05.000Z"
    plus_two = datetime(2026, 1, 2, 5, 4, 5, 1_000, tzinfo=timezone(timedelta(hours=2)))
    assert iso(plus_two) == "2026-01-02T03:04:05.001Z"
    assert iso(None) is None


PROJECT_ID = uuid.UUID("01a172b4-d49b-76f4-ada8-7ba408661064")
USER_ID = uuid.UUID("01a172b4-0000-7000-8000-000000000001")


def _thought(**overrides: Any) -> ThoughtRecord:
    values: dict[str, Any] = {
        "id": SAMPLE,
        "project_id": PROJECT_ID,
        "project_name": "Doc Probe",
        "content": "Read the ADR before the rewrite",
        "status": ThoughtStatus.active,
        "tags": ["adr", "Docs"],
        "is_protected": True,
        "is_global": False,
        "is_cluster": False,
        "importance": 0.123456,
        "surface_after": None,
        "archived_at": None,
        "created_by": USER_ID,
        "created_at": datetime(2026, 10, 26, 12, 0, 0, 250_000, tzinfo=UTC),
        "updated_at": datetime(2026, 10, 27, 8, 30, 0, tzinfo=UTC),
        "embedding_model": "sentence-transformers/all-MiniLM-L6-v2-int8-dynamic",
    }
    values.update(overrides)
    return ThoughtRecord(**values)


def test_compact_shape() -> None:
    assert ThoughtShaper(compact=True)(_thought()) == {
        "id": str(SAMPLE),
        "content": "Read the ADR before the rewrite",
        "status": "active",
        "tags": ["adr", "Docs"],
        "project": "Doc Probe",
    }


def test_full_shape() -> None:
    shaped = ThoughtShaper(compact=False)(_thought())
    assert list(shaped) == list(FULL_FIELDS)
    assert shaped == {
        "id": str(SAMPLE),
        "content": "Read the ADR before the rewrite",
        "status": "active",
        "tags": ["adr", "Docs"],
        "project": "Doc Probe",
        "project_id": str(PROJECT_ID),
        "importance": 0.1235,
        "is_protected": True,
        "is_global": False,
        "is_cluster": False,
        "surface_after": None,
        "archived_at": None,
        "created_by": str(USER_ID),
        "created_at": "2026-10-26T12:00:00.250Z",
        "updated_at": "2026-10-27T08:30:00.000Z",
    }
    assert "embedding_model" not in shaped


def test_full_shape_of_an_archived_anonymous_thought() -> None:
    archived = datetime(2026, 11, 1, tzinfo=UTC)
    shaped = ThoughtShaper(compact=False)(
        _thought(status=ThoughtStatus.archived, archived_at=archived, created_by=None, tags=[])
    )
    assert (shaped["status"], shaped["archived_at"], shaped["created_by"], shaped["tags"]) == (
        "archived",
        "2026-11-01T00:00:00.000Z",
        None,
        [],
    )


def test_fields_select_a_subset_in_canonical_order_and_beat_compact() -> None:
    shaper = ThoughtShaper(compact=True, fields=["importance", "id", "no_such_field", "embedding_model"])
    assert shaper(_thought()) == {"id": str(SAMPLE), "importance": 0.1235}
    # An empty list selects nothing special: the compact/full default applies.
    assert list(ThoughtShaper(compact=True, fields=[])(_thought())) == list(COMPACT_FIELDS)


def test_url_links_ride_after_shaping() -> None:
    links = {
        SAMPLE: [
            UrlLinkRecord(SAMPLE, "adr", "https://example.org/adr", "adr"),
            UrlLinkRecord(SAMPLE, "spec", "http://example.org/spec", "Spec"),
        ]
    }
    shaped = ThoughtShaper(compact=False, fields=["id"], url_links=links)(_thought())
    assert shaped == {
        "id": str(SAMPLE),
        "url_links": [
            {"text": "adr", "url": "https://example.org/adr", "label": "adr"},
            {"text": "spec", "url": "http://example.org/spec", "label": "Spec"},
        ],
    }
    # Asked for, none stored: an empty list. Not asked for: no key at all.
    other = _thought(id=uuid.UUID(int=1))
    assert ThoughtShaper(compact=True, url_links=links)(other)["url_links"] == []
    assert "url_links" not in ThoughtShaper(compact=True)(_thought())


# ---------------------------------------------------------------- preview fingerprints


def test_fingerprint_ignores_argument_order_and_the_flow_arguments() -> None:
    base = {"thought_id": "abc", "reason": "dup", "thought_ids": ["a", "b"]}
    reordered = {"thought_ids": ["a", "b"], "reason": "dup", "thought_id": "abc"}
    with_flow = {**base, "confirm": True, "preview_token": "tok", "action": "archive"}
    with_none = {**base, "cwd": None}
    digests = {fingerprint(candidate) for candidate in (base, reordered, with_flow, with_none)}
    assert len(digests) == 1
    digest = digests.pop()
    assert len(digest) == 64 and all(char in "0123456789abcdef" for char in digest)
    assert fingerprint(base) == fingerprint(dict(base))  # stable across calls


def test_fingerprint_changes_with_what_is_written() -> None:
    base = {"thought_id": "abc", "reason": "dup"}
    assert fingerprint(base) != fingerprint({**base, "thought_id": "abd"})
    assert fingerprint(base) != fingerprint({**base, "cwd": "/work"})
    assert fingerprint({"ids": ["a", "b"]}) != fingerprint({"ids": ["a", "b", "c"]})
    assert fingerprint({"flag": False}) != fingerprint({})


# ---------------------------------------------------------------- advertised tools

SCHEMAS = {spec.name: mcp_tool(spec).input_schema for spec in ALL_SPECS}


def test_the_eleven_tools_in_contract_order() -> None:
    assert list(SCHEMAS) == list(CONTRACT_ACTIONS)


@pytest.mark.parametrize("tool", list(CONTRACT_ACTIONS))
def test_action_enum_lists_exactly_the_contract_actions(tool: str) -> None:
    schema = SCHEMAS[tool]
    actions = CONTRACT_ACTIONS[tool]
    if not actions:
        assert schema == {"type": "object", "properties": {}}
        return
    assert schema["properties"]["action"] == {"enum": actions}  # an enum of strings: its type goes without saying
    assert schema["required"] == ["action"]


def _schema_nodes(node: dict[str, Any], path: str) -> list[tuple[str, dict[str, Any]]]:
    """Every JSON-schema node below `node` (property *names* are not schema keys)."""
    found = [(path, node)]
    for name, child in (node.get("properties") or {}).items():
        found += _schema_nodes(child, f"{path}.{name}")
    for key in ("items", "additionalProperties", "not"):
        if isinstance(node.get(key), dict):
            found += _schema_nodes(node[key], f"{path}[{key}]")
    for key in ("anyOf", "oneOf", "allOf"):
        for index, child in enumerate(node.get(key) or []):
            found += _schema_nodes(child, f"{path}[{key}{index}]")
    return found


@pytest.mark.parametrize("tool", list(CONTRACT_ACTIONS))
def test_input_schema_is_flat_and_carries_no_titles(tool: str) -> None:
    schema = SCHEMAS[tool]
    assert schema["type"] == "object"
    assert set(schema) <= {"type", "properties", "required"}
    for path, node in _schema_nodes(schema, tool):
        assert "title" not in node, path
        assert not {"$ref", "$defs", "definitions"} & set(node), path
    assert all(isinstance(prop, dict) for prop in schema["properties"].values())


def test_a_property_named_title_survives() -> None:
    """`title` the argument (memory_crystallize cluster) is not `title` the schema annotation."""
    assert SCHEMAS["memory_crystallize"]["properties"]["title"]["type"] == "string"


def test_the_whole_tools_list_stays_small() -> None:
    tools = [mcp_tool(spec) for spec in ALL_SPECS]
    wire = mcp_types.ListToolsResult(tools=tools).model_dump_json(by_alias=True, exclude_none=True)
    assert len(json.loads(wire)["tools"]) == 11
    assert len(wire) < 24_000, len(wire)
