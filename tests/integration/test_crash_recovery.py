"""Crash recovery: a writer killed with SIGKILL at random moments loses nothing it flushed.

A child process appends batches through PartitionLog, flushing every few appends
and printing what the flush made durable. The parent kills it at a random moment,
sometimes tears the tail further (a partial write past the flushed data, or
garbage), then loads the log as after an unclean shutdown and checks every flushed
record, the offsets, the indexes, and that appends continue.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kt.storage.index_check import verify_segment
from kt.storage.log import PartitionLog
from kt.storage.log_config import LogConfig
from kt.storage.log_files import segment_file_name
from kt.storage.record_batch import RecordSpec, build_batch

pytestmark = pytest.mark.integration

CONFIG = dict(segment_bytes=48 * 1024, index_interval_bytes=1024)

CHILD = textwrap.dedent(
    """
    import sys
    from kt.storage.log import PartitionLog
    from kt.storage.log_config import LogConfig
    from kt.storage.record_batch import RecordSpec, build_batch

    directory, every, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    log = PartitionLog.open(directory, LogConfig(**CONFIG), had_clean_shutdown=False)
    n = seed
    appended = 0
    while True:
        n += 1
        start = log.log_end_offset
        count = 1 + n % 5
        batch = build_batch(
            [RecordSpec(b"key-%d" % (start + i), b"value-%d-" % (start + i) + b"x" * (n % 300),
                        timestamp=1_700_000_000_000 + start + i) for i in range(count)]
        )
        log.append_as_leader(batch, 1)
        appended += 1
        if appended % every == 0:
            log.flush()
            seg = log.active_segment
            # flushed offset, and where the durable part of the active segment ends
            print(log.recovery_point, seg.base_offset, seg.size, flush=True)
    """
).replace("CONFIG", repr(CONFIG))


def expected_value(offset: int, value: bytes) -> bool:
    return value.startswith(b"value-%d-" % offset) and set(value[len(b"value-%d-" % offset) :]) <= {
        ord("x")
    }


def check_log(d: Path, flushed: int) -> int:
    """Load after an unclean shutdown; check everything; return the log end offset."""
    log = PartitionLog.open(d, LogConfig(**CONFIG), had_clean_shutdown=False)
    try:
        offsets = []
        for batch in log.iter_batches(0):
            assert batch.is_valid()
            for rec in batch.records():
                assert rec.key == b"key-%d" % rec.offset
                assert rec.value is not None and expected_value(rec.offset, rec.value)
                assert rec.timestamp == 1_700_000_000_000 + rec.offset
                offsets.append(rec.offset)
        assert offsets == list(range(len(offsets)))
        assert len(offsets) >= flushed, "flushed records were lost"
        assert log.log_end_offset == len(offsets)
        for seg in log.segments:
            seg.flush()
            check = verify_segment(seg.log_path)
            assert check.ok, check.problems
        res = log.append_as_leader(
            build_batch(
                [
                    RecordSpec(
                        b"key-%d" % log.log_end_offset,
                        b"value-%d-" % log.log_end_offset,
                        timestamp=1_700_000_000_000 + log.log_end_offset,
                    )
                ]
            ),
            2,
        )
        assert res.first_offset == len(offsets)
        log.flush()
        return log.log_end_offset
    finally:
        log.close()


def test_sigkill_loses_nothing_flushed(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("KT_CRASH_SEED", "20240611")))
    d = tmp_path / "crash-0"
    script = tmp_path / "writer.py"
    script.write_text(CHILD)
    flushed_total = 0
    deadline = time.monotonic() + 25
    iterations = 0
    while iterations < 6 and time.monotonic() < deadline:
        iterations += 1
        child = subprocess.Popen(
            [sys.executable, str(script), str(d), str(rng.randint(1, 8)), str(iterations * 1000)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        # Wait for a first flush, then let it run a random while before the kill.
        first = child.stdout.readline()
        assert first, child.stderr.read() if child.stderr else ""
        time.sleep(rng.uniform(0.02, 0.3))
        child.send_signal(signal.SIGKILL)
        rest, err = child.communicate(timeout=30)
        assert child.returncode == -signal.SIGKILL, err
        lines = [first, *rest.splitlines()]
        # The last line may itself be cut by the kill; use the last complete one.
        reports = [ln.split() for ln in lines if len(ln.split()) == 3]
        flushed, base, durable_size = map(int, reports[-1])
        flushed_total = max(flushed_total, flushed)

        how = rng.choice(["none", "torn", "garbage", "zeros"])
        active = d / segment_file_name(max(_bases(d)), ".log")
        if how == "torn":
            # A partial write past the durable bytes: cut the newest segment somewhere
            # after what was flushed (never into it).
            size = active.stat().st_size
            floor = durable_size if max(_bases(d)) == base else 0
            os.truncate(active, rng.randint(floor, size))
        elif how == "garbage":
            with open(active, "ab") as f:
                f.write(rng.randbytes(rng.randint(1, 200)))
        elif how == "zeros":
            with open(active, "ab") as f:
                f.write(b"\x00" * rng.randint(1, 4096))
        leo = check_log(d, flushed_total)
        flushed_total = leo  # check_log flushed its own append
    assert iterations >= 3


def _bases(d: Path) -> list[int]:
    return [int(p.name.split(".")[0]) for p in d.glob("*.log")]
