"""Rate limiting by token bucket.

`SharedRateLimiter` keeps one bucket row per key in PostgreSQL, so every worker of `serve --workers N` and every
replica takes from the same bucket: one UPSERT per call, in its own autocommit statement (docs/BENCHMARKS.md,
"Workers"). It limits tool calls per API token (or user for stdio) and password sign-in attempts per user name
(app.services.auth.passwords). `RateLimiter` is the in-process bucket, for throttles whose state may stay in one
process.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from datetime import datetime

from app.db.engine import Database
from app.db.repositories.rate_buckets import RateBucketRepository


@dataclass
class RateLimiter:
    per_minute: int
    # Seconds from any fixed point; a test passes a clock it moves itself, so refills never depend on its pace.
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[Hashable, tuple[float, float]] = field(default_factory=dict)  # key → (tokens, stamp)

    def retry_after(self, key: Hashable) -> float | None:
        """None when the call may go ahead (and is counted), else the seconds until it may."""
        if self.per_minute <= 0:
            return None
        now = self.clock()
        rate = self.per_minute / 60.0
        tokens, stamp = self._buckets.get(key, (float(self.per_minute), now))
        tokens = min(float(self.per_minute), tokens + (now - stamp) * rate)
        if tokens < 1.0:
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / rate
        self._buckets[key] = (tokens - 1.0, now)
        return None


@dataclass
class SharedRateLimiter:
    """`per_minute` calls a minute per key, with a burst of as many, across every process on the database."""

    db: Database
    per_minute: int
    # None: the database's clock. A test passes moments it sets itself, so refills never depend on its pace.
    clock: Callable[[], datetime] | None = None
    # Every this many takes of this process, forget the buckets that are full again (0: never): for keys a caller
    # can make up (user names typed into a sign-in form), so the table stays bounded; tokens are bounded already.
    purge_every: int = 0
    _takes: int = field(default=0, init=False)

    async def retry_after(self, key: str) -> float | None:
        """None when the call may go ahead (and is counted), else the seconds until it may."""
        if self.per_minute <= 0:
            return None
        rate = self.per_minute / 60.0
        async with self.db.autocommit() as session:
            at = self.clock() if self.clock is not None else None
            buckets = RateBucketRepository(session)
            granted, tokens = await buckets.take(key, float(self.per_minute), rate, at)
            self._takes += 1
            if self.purge_every and self._takes % self.purge_every == 0:
                await buckets.purge_full(at)
        return None if granted else (1.0 - tokens) / rate
