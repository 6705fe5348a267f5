"""Long fault campaigns against a local 3-broker kt cluster.

    python bench/fault_campaign.py --duration 600 --seed 42 [--dir DIR] [--kinds a,b]

Prints the seed first (replay a run with the same seed), then the table: faults
injected by kind, records acknowledged, anomalies found with the smallest history
slice showing each. Exit 1 when the checker found anomalies or the final read was
incomplete. The history (JSON lines) stays in DIR/history.jsonl.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# this tree's kt, for us and for the brokers we start (`python -m kt.cli` inherits it),
# not whatever kt the venv was installed from
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
)

from faults.campaign import FAULT_KINDS, run_campaign  # noqa: E402


def main() -> int:
    """Parse options, run one campaign, print the report."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=300.0, help="seconds of faults")
    ap.add_argument("--seed", type=int, default=None, help="nemesis seed (random if unset)")
    ap.add_argument("--dir", type=Path, default=None, help="work directory (kept)")
    ap.add_argument("--kinds", default=",".join(FAULT_KINDS), help="comma-separated fault kinds")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    kinds = tuple(k for k in args.kinds.split(",") if k)
    unknown = set(kinds) - set(FAULT_KINDS)
    if unknown:
        ap.error(f"unknown fault kinds: {', '.join(sorted(unknown))}")
    directory = args.dir or Path(tempfile.mkdtemp(prefix="kt-faults-"))
    result = run_campaign(directory, seed, args.duration, kinds=kinds)
    print(result.report())
    return 0 if result.verdict.valid and result.final_read_ok else 1


if __name__ == "__main__":
    sys.exit(main())
