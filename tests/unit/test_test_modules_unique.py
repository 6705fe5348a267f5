"""Test modules need distinct file names: most test directories have no __init__.py,
so pytest imports each module by its basename and a second module of the same name
stops the whole collection ("import file mismatch"), which ends a CI run at once."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_name() -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("*.py"):
        if "node_modules" in path.parts or not path.name.startswith("test_"):
            continue
        seen[path.name].append(str(path.relative_to(TESTS)))
    clashes = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not clashes, f"rename one of each: {clashes}"
