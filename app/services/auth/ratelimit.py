"""Per-token rate limiting: an in-process token bucket per API token (or user for stdio)."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field


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
