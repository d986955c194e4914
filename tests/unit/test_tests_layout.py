"""The test tree's own rules (docs/CONTRIBUTING.md, "Where a test goes"): a test module imports test code only from
tests/support/ (and fixtures' constants from a conftest), and every other file under tests/ is a test module, a
conftest or a package marker."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _imported_test_modules(path: Path) -> list[str]:
    """The `tests.…` modules a file imports, at any depth (an import inside a function counts too)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            names = [node.module] if node.module != "tests" else [f"tests.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [name for name in names if name == "tests" or name.startswith("tests.")]
    return found


def _allowed(module: str) -> bool:
    return module.startswith("tests.support.") or module.split(".")[-1] == "conftest"


def test_test_modules_import_test_code_only_from_support() -> None:
    outside = {
        str(path.relative_to(TESTS.parent)): module
        for path in sorted(TESTS.rglob("*.py"))
        if "support" not in path.relative_to(TESTS).parts
        for module in _imported_test_modules(path)
        if not _allowed(module)
    }
    assert outside == {}, "move what they share to tests/support/"


def test_the_rule_sees_an_import_of_another_test_module(tmp_path: Path) -> None:
    module = tmp_path / "test_example.py"
    module.write_text(
        "from tests.integration.http.ui.test_console import BASE\nfrom tests.support.helpers import rows\n"
    )
    assert [name for name in _imported_test_modules(module) if not _allowed(name)] == [
        "tests.integration.http.ui.test_console"
    ]


def test_every_file_outside_support_is_a_test_module_a_conftest_or_a_package() -> None:
    strays = [
        str(path.relative_to(TESTS.parent))
        for path in sorted(TESTS.rglob("*.py"))
        if "support" not in path.relative_to(TESTS).parts
        and not (path.name.startswith("test_") or path.name in ("conftest.py", "__init__.py"))
    ]
    assert strays == []
