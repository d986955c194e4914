"""What every tool call can reach: the database, the embedder and the limits (no settings object)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.db.engine import Database
from app.db.repositories.search import Bm25
from app.embedding.runtime import EmbeddingRuntime
from app.services.ratelimit import RateLimiter


@dataclass(frozen=True)
class Limits:
    content_soft: int = 600
    content_hard: int = 720
    preview_ttl_seconds: int = 300
    primer_threshold: int = 5
    primer_list_cap: int = 500
    graph_max_degree: int = 25
    default_min_relevance: float = 0.4
    bm25: Bm25 = field(default_factory=Bm25)
    unrelated_floor: float | None = None
    vector_floor: float | None = None
    slot_max_chars: int = 2000
    auto_cluster_min_members: int = 3
    auto_cluster_min_age_days: int = 3
    auto_cluster_distance: float | None = None
    auto_cluster_probe_workers: int = 2
    retention_min_age_days: float = 30
    retention_importance_floor: float = 0.3
    retention_page_size: int = 20


@dataclass(frozen=True)
class AppContext:
    db: Database
    embedding: EmbeddingRuntime
    limits: Limits
    settings_view: dict[str, Any] = field(default_factory=dict)  # flattened, secrets masked
    rate_limiter: RateLimiter | None = None
