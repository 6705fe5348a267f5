"""SIGKILL cycles against one kt broker (issue 12): produce under acks=1 and acks=all,
with `flush.messages` unset and =1, kill the broker mid-stream, restart, repeat.

    python bench/sigkill_cycles.py --cycles 100 --seed 7 [--dir DIR]

Prints, per mode, the records acknowledged before a kill and how many of them were
missing (or truncated away) afterwards; exit 1 when any was. The bounded version is
tests/faults/test_sigkill_cycles.py.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# this tree's kt, for us and for the broker we start, not the venv's install
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
)

from faults.sigkill import run_kill_cycles  # noqa: E402


def main() -> int:
    """Parse options, run the cycles, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=100, help="kill cycles (default 100)")
    ap.add_argument("--seed", type=int, default=None, help="seed (random if unset)")
    ap.add_argument("--dir", type=Path, default=None, help="work directory (kept)")
    args = ap.parse_args()
    if args.cycles < 1:
        ap.error("--cycles must be at least 1")
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    directory = args.dir or Path(tempfile.mkdtemp(prefix="kt-sigkill-"))
    print(f"seed {seed}, directory {directory}", flush=True)
    result = run_kill_cycles(directory, args.cycles, seed, log=lambda s: print(s, flush=True))
    print(result.report())
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"load average at the end: {load}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
