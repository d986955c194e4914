"""Plain records that repositories hand to services (no ORM state leaks upwards)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from app.db.models import EdgeType, Role, ThoughtStatus


@dataclass(frozen=True)
class ProjectRecord:
    id: uuid.UUID
    name: str
    local_path: str | None
    description: str | None
    is_default: bool
    created_at: datetime
    counted_small: bool = False  # recently counted at most EXACT_SCAN_MAX_ROWS thoughts: searched exactly
    has_project_index: bool = False  # a valid HNSW index of its own (app.db.project_indexes)


@dataclass(frozen=True)
class ThoughtRecord:
    id: uuid.UUID
    project_id: uuid.UUID
    project_name: str
    content: str
    status: ThoughtStatus
    tags: list[str]
    is_protected: bool
    is_global: bool
    is_cluster: bool
    importance: float
    surface_after: datetime | None
    archived_at: datetime | None
    created_by: uuid.UUID | None
    created_at: datetime
    updated_at: datetime
    embedding_model: str | None


@dataclass(frozen=True)
class EdgeRecord:
    id: uuid.UUID
    source_id: uuid.UUID
    target_id: uuid.UUID
    type: EdgeType
    created_at: datetime


@dataclass(frozen=True)
class UrlLinkRecord:
    thought_id: uuid.UUID
    text: str
    url: str
    label: str


@dataclass(frozen=True)
class Principal:
    """The caller of a tool: a user with a role (stdio acts as the local user)."""

    user_id: uuid.UUID | None
    name: str
    role: Role
    token_id: uuid.UUID | None = None  # the API token used, for per-token limits
    # The local user of `stdio` and auth mode `none`: sees every project, whatever the membership
    # (app.db.visibility); a token's user sees the projects they are a member of.
    sees_everything: bool = False
