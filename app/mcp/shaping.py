"""Thought output: full, compact or an explicit field subset; url links attached after shaping."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.formats import iso
from app.services.values import EdgeRecord, ProjectRecord, ThoughtRecord, UrlLinkRecord

COMPACT_FIELDS = ("id", "content", "status", "tags", "project")
FULL_FIELDS = (
    "id",
    "content",
    "status",
    "tags",
    "project",
    "project_id",
    "importance",
    "is_protected",
    "is_global",
    "is_cluster",
    "surface_after",
    "archived_at",
    "created_by",
    "created_at",
    "updated_at",
)


def _thought_values(thought: ThoughtRecord) -> dict[str, Any]:
    return {
        "id": str(thought.id),
        "content": thought.content,
        "status": thought.status.value,
        "tags": list(thought.tags),
        "project": thought.project_name,
        "project_id": str(thought.project_id),
        "importance": round(float(thought.importance), 4),
        "is_protected": bool(thought.is_protected),
        "is_global": bool(thought.is_global),
        "is_cluster": bool(thought.is_cluster),
        "surface_after": iso(thought.surface_after),
        "archived_at": iso(thought.archived_at),
        "created_by": str(thought.created_by) if thought.created_by else None,
        "created_at": iso(thought.created_at),
        "updated_at": iso(thought.updated_at),
    }


class ThoughtShaper:
    """Shapes every thought of one answer the same way."""

    def __init__(
        self,
        compact: bool,
        fields: Sequence[str] | None = None,
        url_links: dict[Any, list[UrlLinkRecord]] | None = None,
    ) -> None:
        if fields:
            self.columns = tuple(name for name in FULL_FIELDS if name in set(fields))
        else:
            self.columns = COMPACT_FIELDS if compact else FULL_FIELDS
        self.url_links = url_links

    def __call__(self, thought: ThoughtRecord) -> dict[str, Any]:
        values = _thought_values(thought)
        shaped = {name: values[name] for name in self.columns}
        if self.url_links is not None:
            links = self.url_links.get(thought.id, [])
            shaped["url_links"] = [{"text": link.text, "url": link.url, "label": link.label} for link in links]
        return shaped


def shape_edge(edge: EdgeRecord) -> dict[str, Any]:
    return {
        "id": str(edge.id),
        "source_id": str(edge.source_id),
        "target_id": str(edge.target_id),
        "type": edge.type.value,
        "created_at": iso(edge.created_at),
    }


def shape_project(project: ProjectRecord) -> dict[str, Any]:
    return {
        "id": str(project.id),
        "name": project.name,
        "local_path": project.local_path,
        "description": project.description,
        "is_default": project.is_default,
        "created_at": iso(project.created_at),
    }
