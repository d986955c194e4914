"""Settings are read once and frozen: what receives them reads them, nothing changes them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.config import Settings


def test_the_settings_and_every_group_are_frozen() -> None:
    settings = Settings(_env_file=None)
    with pytest.raises(ValidationError, match="frozen"):
        settings.port = 1  # type: ignore[misc]
    with pytest.raises(ValidationError, match="frozen"):
        settings.content.hard_limit = 10  # type: ignore[misc]
    with pytest.raises(ValidationError, match="frozen"):
        settings.search.bm25.k1 = 2.0  # type: ignore[misc]
    moved = settings.model_copy(update={"port": 1})  # how the CLI applies --port: a new object
    assert (moved.port, settings.port) == (1, 8765)
