"""What every tool call can reach: the database, the embedder and the limits (no settings object)."""

from __future__ import annotations

from dataclasses import dataclass

from app.db.engine import Database
from app.embedding.runtime import EmbeddingRuntime


@dataclass(frozen=True)
class Limits:
    content_soft: int = 600
    content_hard: int = 720
    preview_ttl_seconds: int = 300
    primer_threshold: int = 5
    primer_list_cap: int = 500
    graph_max_degree: int = 25
    default_min_relevance: float = 0.4
    unrelated_floor: float | None = None
    vector_floor: float | None = None


@dataclass(frozen=True)
class AppContext:
    db: Database
    embedding: EmbeddingRuntime
    limits: Limits
