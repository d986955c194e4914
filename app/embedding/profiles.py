"""Model profiles: how to call a model and where its calibration floors sit."""

from __future__ import annotations

from dataclasses import dataclass

E5_SMALL = "intfloat/multilingual-e5-small"
# all-MiniLM-L6-v2, int8 weights quantised per channel for integer matrix products (app/embedding/offline_model.py)
OFFLINE_MINILM = "sentence-transformers/all-MiniLM-L6-v2-int8-dynamic"
OFFLINE_DIR_NAME = "all-minilm-l6-v2-int8-dynamic"


@dataclass(frozen=True)
class ModelProfile:
    model_id: str
    dim: int
    query_prefix: str
    passage_prefix: str
    unrelated_floor: float  # cosine of unrelated pairs (p95): calibrated relevance 0
    vector_floor: float  # cosine of a strong match: calibrated relevance 1
    auto_cluster_distance: float  # autoCluster.minSimilarity default (a cosine distance)
    hub_source: str | None  # where fastembed would fetch it; None = local files only
    model_file: str
    # Texts per ONNX run when storing. 1 for a dynamically quantised model: it scales its activations per
    # run, so a text batched with others would embed slightly differently than alone.
    passage_batch_size: int = 8


PROFILES: dict[str, ModelProfile] = {
    E5_SMALL: ModelProfile(
        model_id=E5_SMALL,
        dim=384,
        query_prefix="query: ",
        passage_prefix="passage: ",
        unrelated_floor=0.8,
        vector_floor=0.9,
        auto_cluster_distance=0.09,
        hub_source="intfloat/multilingual-e5-small",
        model_file="onnx/model.onnx",
    ),
    # Floors measured by `python -m bench.calibrate` on bench/data/retrieval_set.json (docs/BENCHMARKS.md).
    OFFLINE_MINILM: ModelProfile(
        model_id=OFFLINE_MINILM,
        dim=384,
        query_prefix="",
        passage_prefix="",
        unrelated_floor=0.23,
        vector_floor=0.45,
        auto_cluster_distance=0.15,
        hub_source=None,
        model_file="model.onnx",
        passage_batch_size=1,
    ),
}


def profile_for(model_id: str) -> ModelProfile:
    try:
        return PROFILES[model_id]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown embedding model {model_id!r}; known models: {known}") from None
