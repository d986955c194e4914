"""app/mcp/shaping.py: a thought as an answer carries it (compact, full, chosen fields, url links), times in UTC."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from app.db.models import ThoughtStatus
from app.db.records import ThoughtRecord, UrlLinkRecord
from app.mcp.shaping import COMPACT_FIELDS, FULL_FIELDS, ThoughtShaper, iso
from tests.support.helpers import SAMPLE

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
