"""The offline model `prepare-model` builds: integer matrix products, checked against the float model."""

from __future__ import annotations

import shutil
from pathlib import Path

import onnx
import pytest

from app.embedding import offline_model
from app.embedding.offline_model import TOKENIZER_FILES, is_prepared
from app.embedding.profiles import OFFLINE_DIR_NAME
from tests.conftest import MODEL_CACHE

PREPARED = MODEL_CACHE / OFFLINE_DIR_NAME


def _tokenizer_only(tmp_path: Path) -> Path:
    """A folder with the prepared tokenizer files and no model: what prepare has built before the model."""
    target = tmp_path / OFFLINE_DIR_NAME
    target.mkdir()
    for name in TOKENIZER_FILES:
        shutil.copyfile(PREPARED / name, target / name)
    return target


def test_the_prepared_model_multiplies_in_int8() -> None:
    operators = {node.op_type for node in onnx.load(str(PREPARED / "model.onnx")).graph.node}
    # A float MatMul on a weight would mean ONNX Runtime dequantises it: the slow path this model replaces.
    assert "MatMulInteger" in operators
    assert "DequantizeLinear" not in operators


def test_the_quantised_model_is_written_after_it_agrees_with_the_float_model(tmp_path: Path) -> None:
    target = _tokenizer_only(tmp_path)
    offline_model._install_onnx(target)
    assert is_prepared(target)
    # Deterministic for given onnx/onnxruntime versions (replicas building their own folder rely on it).
    assert (target / "model.onnx").read_bytes() == (PREPARED / "model.onnx").read_bytes(), (
        f"a fresh build differs from {PREPARED}: after an onnx or onnxruntime upgrade, delete it and run `make model`"
    )
    assert [path.name for path in target.iterdir() if path.is_dir()] == []  # the work folder is gone


def test_a_model_that_strays_from_the_float_model_is_refused_and_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = _tokenizer_only(tmp_path)
    monkeypatch.setattr(offline_model, "MIN_AGREEMENT", 1.01)  # no quantised model reaches it
    with pytest.raises(RuntimeError, match=r"embeds a probe text at cosine 0\.99\d\d to the float model"):
        offline_model._install_onnx(target)
    assert not (target / "model.onnx").exists()
    assert not is_prepared(target)
