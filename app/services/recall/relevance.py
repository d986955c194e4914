"""Calibrated relevance: raw cosine mapped onto the measured 0–1 scale of the active model."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Calibration:
    unrelated_floor: float  # measured zero point (p95 of unrelated pairs)
    vector_floor: float  # a strong match

    def relevance(self, similarity: float) -> float:
        span = self.vector_floor - self.unrelated_floor
        if span <= 0:
            return 1.0 if similarity >= self.vector_floor else 0.0
        return min(1.0, max(0.0, (similarity - self.unrelated_floor) / span))

    def is_weak(self, similarity: float | None) -> bool:
        """A cosine below the strong-match floor (no cosine at all counts as weak)."""
        return similarity is None or similarity < self.vector_floor
