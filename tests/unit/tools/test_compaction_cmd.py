"""`kt compaction estimate`: offline prediction that matches the cleaner exactly."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from kt.cli import cli
from kt.storage import record_batch as v2
from kt.storage.cleaner import clean_log
from kt.storage.log import AppendOrigin, PartitionLog
from kt.storage.log_config import LogConfig

NOW = 1_700_000_000_000


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["compaction", *args])


def _log(d: Path) -> PartitionLog:
    cfg = LogConfig(segment_bytes=300, cleanup_policy="compact", delete_retention_ms=1000)
    log = PartitionLog.open(d, cfg)
    for i in range(40):
        key = None if i % 13 == 5 else b"k%d" % (i % 6)
        value = None if i % 7 == 3 else b"v%d" % i
        batch = v2.build_batch([v2.RecordSpec(key, value, timestamp=NOW)], codec=i % 3)
        # Not as a producer (which may not write keyless records to a compacted log):
        # such records get there when a topic becomes compacted later.
        log.append_as_leader(batch, 0, now_ms=NOW, origin=AppendOrigin.COORDINATOR)
    log.roll(now_ms=NOW)
    log.update_high_watermark(log.log_end_offset)
    return log


def _state(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def test_estimate_json_matches_the_cleaner(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = _log(d)
    before = _state(d)
    res = run("estimate", "--json", "--now", str(NOW), "--delete-retention-ms", "1000", str(d))
    assert res.exit_code == 0, res.output
    assert _state(d) == before  # read-only
    predicted = json.loads(res.output)
    done = clean_log(log, now_ms=NOW)
    actual = done.stats.to_dict()
    for key, value in actual.items():
        assert predicted[key] == value, key
    assert predicted["cleanable_end_offset"] == done.end_offset
    assert predicted["keyless_dropped"] == 3
    assert predicted["distinct_keys"] == 6
    assert predicted["tombstones_kept"] >= 1
    assert predicted["records_dropped"] == predicted["records_read"] - predicted["records_kept"]


def test_estimate_after_horizon_counts_expired_tombstones(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = _log(d)
    clean_log(log, now_ms=NOW)
    later = str(NOW + 1000)
    res = run("estimate", "--json", "--now", later, "--delete-retention-ms", "1000", str(d))
    predicted = json.loads(res.output)
    done = clean_log(log, now_ms=NOW + 1000)
    assert predicted["tombstones_dropped"] == done.stats.tombstones_dropped > 0
    assert predicted["records_kept"] == done.stats.records_kept


def test_estimate_text(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    _log(d).close()
    res = run("estimate", "--now", "2023-11-14T22:13:20Z", str(d))
    assert res.exit_code == 0, res.output
    assert "records: " in res.output and "distinct keys: 6" in res.output
    assert "without a key" in res.output


def test_usage_errors(tmp_path: Path) -> None:
    res = run("estimate", str(tmp_path / "missing"))
    assert res.exit_code == 2 and res.stderr.startswith("kt: error: ")
    empty = tmp_path / "empty"
    empty.mkdir()
    res = run("estimate", str(empty))
    assert res.exit_code == 2 and "no segments" in res.stderr
    f = tmp_path / "file"
    f.write_text("x")
    assert run("estimate", str(f)).exit_code == 2
    assert run("estimate", "--now", "yesterday", str(empty)).exit_code == 2
