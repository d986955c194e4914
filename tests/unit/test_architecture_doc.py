"""docs/ARCHITECTURE.md against the tree: every path it names exists (a `<placeholder>` segment stands for any
name), and every package under app/ has its row."""

from __future__ import annotations

import re
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
DOC = CHECKOUT / "docs" / "ARCHITECTURE.md"
ROOTS = ("app/", "tests/", "bench/", "alembic/", "docs/")
CODE_SPAN = re.compile(r"`([^`\s]+)`")


def named_paths(text: str) -> set[str]:
    """The repository paths a document names in code spans (`app/db/engine.py`, `app/services/<area>/`)."""
    return {span for span in CODE_SPAN.findall(text) if span.startswith(ROOTS) and "…" not in span}


def missing_paths(paths: set[str], root: Path) -> list[str]:
    """The named paths nothing in the tree matches; a folder must be one, a file must be one."""
    missing = []
    for path in sorted(paths):
        pattern = re.sub(r"<[^>]+>", "*", path.rstrip("/"))
        found = list(root.glob(pattern))
        wanted_folder = path.endswith("/")
        if not any(match.is_dir() == wanted_folder for match in found):
            missing.append(path)
    return missing


def unlisted_packages(text: str, root: Path) -> list[str]:
    named = named_paths(text)
    packages = sorted(init.parent.relative_to(root).as_posix() + "/" for init in (root / "app").rglob("__init__.py"))
    return [package for package in packages if package not in named]


def test_every_path_the_document_names_exists() -> None:
    assert missing_paths(named_paths(DOC.read_text(encoding="utf-8")), CHECKOUT) == []


def test_every_package_under_app_is_listed() -> None:
    assert unlisted_packages(DOC.read_text(encoding="utf-8"), CHECKOUT) == []


def test_the_checks_see_a_stale_path_and_an_unlisted_package(tmp_path: Path) -> None:
    (tmp_path / "app" / "services" / "recall").mkdir(parents=True)
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "services" / "__init__.py").write_text("")
    (tmp_path / "app" / "services" / "recall" / "__init__.py").write_text("")
    (tmp_path / "app" / "services" / "recall" / "operations.py").write_text("")
    text = "`app/` `app/services/<area>/operations.py` `app/services/recall_reads.py` `app/services/recall/`"
    assert missing_paths(named_paths(text), tmp_path) == ["app/services/recall_reads.py"]
    assert unlisted_packages(text, tmp_path) == ["app/services/"]
