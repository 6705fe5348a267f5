"""The bounded SIGKILL-cycles test: one broker killed mid-produce 12 times under
acks=1 and acks=all, with `flush.messages` unset and =1 (four topics, every cycle
covers every mode); nothing acknowledged may be missing afterwards.
`bench/sigkill_cycles.py` runs the full 100 cycles."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .sigkill import MODES, run_kill_cycles

pytestmark = pytest.mark.integration

SEED = int(os.environ.get("KT_KILL_SEED", "20261125"))
CYCLES = int(os.environ.get("KT_KILL_CYCLES", "12"))


@pytest.mark.timeout(300)
def test_sigkill_cycles_lose_nothing_acknowledged(tmp_path: Path) -> None:
    result = run_kill_cycles(tmp_path, CYCLES, SEED)
    report = result.report()
    print(report)
    for mode in MODES:
        # every mode was exercised (a cycle in which no send was acknowledged proves
        # nothing; across the run each mode must have many)
        assert result.modes[mode].acknowledged >= CYCLES * 10, report
    assert result.ok, report
