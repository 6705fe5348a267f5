"""KRaft metadata decoding benchmark: `--cluster-metadata-decoder` against
`--deep-iteration --print-data-log` on the same bytes, in the same run.

Run by hand (not a test):  .venv/bin/python bench/kraft_bench.py [--records 200000]

Two metadata logs are generated with kt's own metadata writer (cached under
bench/out/):

- churn: every record distinct (leader and ISR changes with growing epochs,
  broker registration changes, configs, partition records with directories),
  the worst case for the decoder's cache of identical record values;
- steady: what an idle-ish KRaft cluster writes: mostly NoOpRecords (one every
  500 ms by default since Kafka 3.7) with a few broker and partition changes.

Each command runs as its own process with stdout to /dev/null, the two commands
alternating, --repeat runs each. The row gives records/s of each from the median of
the process's CPU time (user + system: steadier than wall time on a shared, loaded
machine) and their ratio, then the ratio of the median wall times. Both commands
run from bytecode caches, as an installed kt does (a first run of each, untimed,
writes them under bench/out/pycache).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kt.storage.metadata_log import MetadataBatchWriter  # noqa: E402

KT = str(Path(sys.executable).with_name("kt"))
OUT = ROOT / "bench" / "out"
TOPIC_IDS = [
    "x2Hj2kQ-SvSGmSg0wP3EYA",
    "Lr4wgsBnRZGP7hjZcn3vzQ",
    "Q1ZOSDkyUUxTQ1NCRlJFQQ",
    "AAECAwQFBgcICQoLDA0ODw",
]
DIR = "MDEyMzQ1Njc4OTo7PD0-Pw"


def churn(n: int, rng: random.Random) -> list[tuple[int, int, dict[str, object]]]:
    """n distinct records: the decoder's cache never hits."""
    out: list[tuple[int, int, dict[str, object]]] = []
    for i in range(n):
        r = rng.random()
        tid = TOPIC_IDS[i % len(TOPIC_IDS)]
        if r < 0.55:
            isr = rng.sample([1, 2, 3, 4, 5], 3)
            out.append((5, 2, {"PartitionId": i, "TopicId": tid, "Leader": isr[0], "Isr": isr}))
        elif r < 0.75:
            out.append(
                (17, 2, {"BrokerId": i % 50, "BrokerEpoch": i, "Fenced": rng.choice([1, -1])})
            )
        elif r < 0.9:
            out.append(
                (
                    3,
                    2,
                    {
                        "PartitionId": i,
                        "TopicId": tid,
                        "Replicas": [1, 2, 3],
                        "Isr": [1, 2, 3],
                        "Leader": 1,
                        "LeaderEpoch": i,
                        "PartitionEpoch": i,
                        "Directories": [DIR] * 3,
                    },
                )
            )
        else:
            out.append(
                (
                    4,
                    0,
                    {
                        "ResourceType": 2,
                        "ResourceName": f"topic-{i}",
                        "Name": "retention.ms",
                        "Value": str(i),
                    },
                )
            )
    return out


def steady(n: int, rng: random.Random) -> list[tuple[int, int, dict[str, object]]]:
    """Mostly NoOpRecords, with a few changes in between."""
    out: list[tuple[int, int, dict[str, object]]] = []
    for i in range(n):
        if rng.random() < 0.9:
            out.append((20, 0, {}))
        else:
            out.append(
                (
                    5,
                    1,
                    {
                        "PartitionId": i % 30,
                        "TopicId": TOPIC_IDS[0],
                        "Isr": rng.sample([1, 2, 3], 2),
                    },
                )
            )
    return out


def generate(path: Path, records: list[tuple[int, int, dict[str, object]]]) -> None:
    """Batches of 1 to 20 records, as a controller writes them."""
    w = MetadataBatchWriter(0, 1)
    ts = 1_769_742_000_000
    i = 0
    rng = random.Random(7)
    while i < len(records):
        k = rng.randint(1, 20)
        w.records(records[i : i + k], ts + i * 50)
        i += k
    path.write_bytes(bytes(w.out))


def count_records(path: Path) -> int:
    """The records of a log file (for a given file's rate)."""
    from kt.storage.metadata_log import read_entries

    return sum(1 for _ in read_entries(path))


# The commands run as an installed kt does: from bytecode caches (kept under bench/out,
# written by a first, untimed run), even where the environment turns them off
# (PYTHONDONTWRITEBYTECODE), so that the rows time the dump, not compiling kt.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
ENV["PYTHONPYCACHEPREFIX"] = str(OUT / "pycache")


def timed(cmd: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of cmd."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with open(os.devnull, "wb") as devnull:
        subprocess.run(cmd, stdout=devnull, stderr=subprocess.DEVNULL, check=False, env=ENV)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument(
        "--file",
        type=Path,
        action="append",
        default=[],
        help="Also time this metadata log (e.g. a copy of a real cluster's); repeatable.",
    )
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    print(
        f"{'log':<8} {'records':>8} {'MiB':>6}  {'decoder rec/s':>14} "
        f"{'print-data-log rec/s':>21}  {'ratio':>5} {'wall ratio':>10}"
    )
    cases: list[tuple[str, Path, int]] = []
    for name, make in (("churn", churn), ("steady", steady)):
        path = OUT / f"kraft-{name}-{args.records}" / "00000000000000000000.log"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            generate(path, make(args.records, random.Random(1)))
        cases.append((name, path, args.records))
    for extra in args.file:
        cases.append((extra.name[:8], extra, count_records(extra)))
    for name, path, n in cases:
        dec = [KT, "dump-log-segments", "--cluster-metadata-decoder", "--files", str(path)]
        pdl = [
            KT,
            "dump-log-segments",
            "--deep-iteration",
            "--print-data-log",
            "--files",
            str(path),
        ]
        timed(dec)  # untimed: writes the bytecode caches
        timed(pdl)
        runs_dec: list[tuple[float, float]] = []
        runs_pdl: list[tuple[float, float]] = []
        for _ in range(args.repeat):
            runs_dec.append(timed(dec))
            runs_pdl.append(timed(pdl))
        cpu_dec = statistics.median(r[0] for r in runs_dec)
        cpu_pdl = statistics.median(r[0] for r in runs_pdl)
        wall_dec = statistics.median(r[1] for r in runs_dec)
        wall_pdl = statistics.median(r[1] for r in runs_pdl)
        print(
            f"{name:<8} {n:>8} {path.stat().st_size / 2**20:>6.1f}  {n / cpu_dec:>14,.0f} "
            f"{n / cpu_pdl:>21,.0f}  {cpu_pdl / cpu_dec:>5.2f} {wall_pdl / wall_dec:>10.2f}"
        )


if __name__ == "__main__":
    main()
