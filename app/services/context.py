"""What every tool call can reach: the database, the embedder and the settings, built once by app/main.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.config import Settings
from app.db.engine import Database
from app.embedding.runtime import EmbeddingRuntime
from app.services.auth.ratelimit import SharedRateLimiter


@dataclass(frozen=True)
class AppContext:
    db: Database
    embedding: EmbeddingRuntime
    settings: Settings  # frozen; services read the groups they need (`settings.search.bm25.k1`)
    settings_view: dict[str, Any] = field(default_factory=dict)  # flattened, secrets masked
    rate_limiter: SharedRateLimiter | None = None
