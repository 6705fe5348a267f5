"""`.ci/conformance_ran.py`: CI fails when the conformance tests skipped or did not run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

GUARD = Path(__file__).resolve().parents[2] / ".ci" / "conformance_ran.py"
CLASS = "tests.unit.protocol.test_conformance"


def report(tmp_path: Path, *cases: str) -> Path:
    """A JUnit XML report, as pytest writes it, holding these testcase elements."""
    path = tmp_path / "pytest.xml"
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">'
        + "".join(cases)
        + "</testsuite></testsuites>"
    )
    return path


def guard(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(GUARD), str(path)], capture_output=True, text=True, check=False
    )


def test_passes_when_every_conformance_test_ran(tmp_path: Path) -> None:
    out = guard(report(tmp_path,
        f'<testcase classname="{CLASS}" name="test_api_matches_spec[Produce]" time="0.1"/>',
        '<testcase classname="tests.unit.other" name="test_x" time="0.1"><skipped/></testcase>',
    ))  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "1 conformance tests ran" in out.stdout


@pytest.mark.parametrize(
    "case",
    [
        # one test skipped (the specs were not found)
        f'<testcase classname="{CLASS}" name="test_api_matches_spec[Produce]">'
        '<skipped type="pytest.skip" message="specs not found"/></testcase>',
        # the whole module skipped at collection
        '<testcase classname="tests.unit.protocol" name="test_conformance">'
        '<skipped message="specs not found"/></testcase>',
        # deselected, or never collected
        '<testcase classname="tests.unit.other" name="test_x"/>',
    ],
)
def test_fails_when_skipped_or_missing(tmp_path: Path, case: str) -> None:
    out = guard(report(tmp_path, case))
    assert out.returncode == 1
    assert "FAILED" in out.stderr


def test_fails_without_a_report(tmp_path: Path) -> None:
    out = guard(tmp_path / "missing.xml")
    assert out.returncode == 1 and "no pytest report" in out.stderr
