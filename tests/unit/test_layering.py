"""The dependency rule, checked on every module's imports: storage and protocol use
nothing of ours, the pure cluster model only those two, and the client, the tools,
the TUI and the Spark pipeline never reach into the broker (the `kt broker` command,
which starts one, excepted)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kt

ROOT = Path(kt.__file__).parent

#: package -> the kt packages its modules may import (besides themselves)
ALLOWED: dict[str, set[str]] = {
    "storage": set(),
    "protocol": set(),
    "cluster": {"storage", "protocol"},
    "client": {"storage", "protocol"},
}
#: packages that must not import the broker, and the modules excused (why)
NO_BROKER = ("client", "tools", "tui", "spark", "cluster", "storage", "protocol")
EXCUSED = {"kt/tools/broker_cmd.py"}  # `kt broker start` runs the broker


def _kt_imports(path: Path) -> set[str]:
    """The first component under kt of every `kt.*` module the file imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
            if node.module == "kt":
                names = [f"kt.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "kt" and len(parts) > 1:
                found.add(parts[1])
    return found


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_core_packages_import_only_what_they_may(package: str) -> None:
    bad = {
        str(path.relative_to(ROOT.parent)): sorted(found - ALLOWED[package] - {package})
        for path in _modules(package)
        if (found := _kt_imports(path)) - ALLOWED[package] - {package}
    }
    assert not bad, f"kt.{package} may import only {sorted(ALLOWED[package])}: {bad}"


@pytest.mark.parametrize("package", NO_BROKER)
def test_nothing_outside_the_broker_imports_it(package: str) -> None:
    bad = [
        str(path.relative_to(ROOT.parent))
        for path in _modules(package)
        if "broker" in _kt_imports(path) and str(path.relative_to(ROOT.parent)) not in EXCUSED
    ]
    assert not bad, f"these kt.{package} modules import kt.broker: {bad}"


def test_the_checks_see_imports() -> None:
    # the walker itself: a broker import in a function body counts
    assert _kt_imports(ROOT / "tools" / "broker_cmd.py") >= {"broker"}
