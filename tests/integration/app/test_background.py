"""What the server's background start does once its embedder is loaded (app.main.background)."""

from __future__ import annotations

import gc

from app.config import EmbeddingSettings
from app.embedding.runtime import EmbeddingRuntime
from app.main import _load_then_freeze
from app.services.context import AppContext
from tests.conftest import MODEL_CACHE


async def test_the_embedder_loads_then_what_the_process_holds_leaves_the_full_collections(
    app_context: AppContext,
) -> None:
    runtime = EmbeddingRuntime(EmbeddingSettings(cache_dir=MODEL_CACHE))
    context = AppContext(app_context.db, runtime, app_context.settings)
    gc.unfreeze()
    try:
        assert gc.get_freeze_count() == 0
        await _load_then_freeze(context)
        assert runtime.state == "ready"
        assert gc.get_freeze_count() > 0  # moved to the permanent generation: a full collection skips them
    finally:
        gc.unfreeze()  # the test process's objects back where they were
