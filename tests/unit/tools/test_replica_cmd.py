"""`kt replica diff`: replicas of a partition compared offline.

The replicas are real logs written with the storage core (leader appends, follower
appends of the leader's batches, leader epochs, checkpoints) in tmp dirs, plus the
real Kafka fixtures compared with copies of themselves.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kt.cli import cli
from kt.storage.checkpoint import TopicPartition, write_offset_checkpoint
from kt.storage.log import PartitionLog
from kt.storage.log_config import LogConfig
from kt.storage.meta_properties import MetaProperties, write_meta_properties
from kt.storage.record_batch import RecordSpec, build_batch

TP = TopicPartition("orders", 0)
SEG = "00000000000000000000.log"
T0 = 1_700_000_000_000  # 2023-11-14T22:13:20Z


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, ["replica", "diff", *map(str, args)])


def one_error_line(result: Result, code: int) -> str:
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kt: error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def producer_batch(n: int, ts: int, tag: bytes) -> bytes:
    return build_batch([RecordSpec(b"key", tag * 20, timestamp=ts + i) for i in range(n)])


@dataclass
class Broker:
    """A broker's log directory with one replica of orders-0."""

    dir: Path
    log: PartitionLog

    def lead(self, batches: int, epoch: int, *, records: int = 2, ts: int = T0) -> None:
        if self.log.leader_epoch_cache.latest_epoch != epoch:
            # Becoming leader assigns the epoch at the log end (Kafka's makeLeader).
            self.log.leader_epoch_cache.assign(epoch, self.log.log_end_offset)
        for k in range(batches):
            self.log.append_as_leader(
                producer_batch(records, ts + 1000 * k, b"e%d" % epoch), epoch, now_ms=ts
            )

    def follow(self, leader: Broker, up_to: int | None = None) -> None:
        """Fetch the leader's batches from this log's end (up to offset `up_to`)."""
        for b in leader.log.iter_batches(self.log.log_end_offset):
            if up_to is not None and b.last_offset >= up_to:
                break
            self.log.append_as_follower(bytes(b.data))

    def high_watermark(self, hw: int) -> None:
        write_offset_checkpoint(self.dir / "replication-offset-checkpoint", {TP: hw})

    @property
    def partition(self) -> Path:
        return self.dir / "orders-0"


@pytest.fixture
def broker(tmp_path: Path) -> Callable[..., Broker]:
    made: list[Broker] = []

    def make(node_id: int, config: LogConfig | None = None) -> Broker:
        d = tmp_path / f"broker{node_id}"
        d.mkdir()
        write_meta_properties(d / "meta.properties", MetaProperties(0, node_id=node_id))
        b = Broker(d, PartitionLog.open(d / "orders-0", config or LogConfig()))
        made.append(b)
        return b

    yield make
    for b in made:
        b.log.close()


def unclean_election(broker: Callable[..., Broker]) -> tuple[Broker, Broker, Broker]:
    """Broker 1 leads epoch 0 with broker 3 in sync and acknowledges offsets 0..7 (HW 8),
    then writes 8..9; broker 2 fell out of sync at offset 6. Brokers 1 and 3 die;
    broker 2 is elected uncleanly in epoch 1 and writes 6..11 (HW 12)."""
    b1, b2, b3 = broker(1), broker(2), broker(3)
    b1.lead(5, 0)  # offsets 0..9, two records a batch
    b3.follow(b1)
    b2.follow(b1, up_to=6)
    b2.lead(2, 1, records=3, ts=T0 + 100_000)  # offsets 6..11
    b1.high_watermark(8)
    b3.high_watermark(8)
    b2.high_watermark(12)
    return b1, b2, b3


# --- verdicts ----------------------------------------------------------------


def test_identical_replicas(broker: Callable[..., Broker]) -> None:
    b1, b2 = broker(1), broker(2)
    b1.lead(4, 0)
    b2.follow(b1)
    b1.high_watermark(8)
    b2.high_watermark(8)
    result = run(b1.dir, b2.dir)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "orders-0: IDENTICAL on 2 replicas (offsets 0..7, log end 8)"
    assert f"broker 1 ({b1.dir}): {b1.partition}; leader epochs 0@0" in result.output
    assert "DAMAGED" not in result.output


def test_lagging_follower_is_ok_with_a_note(broker: Callable[..., Broker]) -> None:
    b1, b2 = broker(1), broker(2)
    b1.lead(5, 0)
    b2.follow(b1, up_to=6)
    b1.high_watermark(6)
    b2.high_watermark(4)
    result = run(b1.dir, b2.dir)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == (
        f"orders-0: OK, followers lag the reference broker 1 ({b1.dir}): "
        f"broker 2 ({b2.dir}) 4 behind"
    )
    assert "    lags the reference by 4 offsets" in result.output
    assert "    only on the reference: offsets 6..9 (4 records in 2 batches, epoch 0" in (
        result.output
    )
    doc = json.loads(run("--json", b1.dir, b2.dir).output)
    part = doc["partitions"][0]
    assert doc["ok"] is True and part["verdict"] == "lagging"
    assert part["reference"] == str(b1.partition)
    assert [r["state"] for r in part["replicas"]] == ["reference", "lagging"]


def test_unclean_election_reports_the_lost_acknowledged_offsets(
    broker: Callable[..., Broker],
) -> None:
    b1, b2, b3 = unclean_election(broker)
    result = run(b1.dir, b2.dir, b3.dir)
    assert result.exit_code == 1, result.output
    out = result.output
    assert out.splitlines()[0] == (
        "orders-0: DIVERGED BELOW THE HIGH WATERMARK at offset 6: acknowledged offsets "
        f"6..7 are not in the reference broker 2 ({b2.dir}); still on broker 1 ({b1.dir}), "
        f"broker 3 ({b3.dir})"
    )
    assert (
        "    diverges from the reference at offset 6, below its high watermark 8: "
        "acknowledged offsets 6..7 are not in the reference"
    ) in out
    # Offsets 6..7 start at byte 483 of the old leader's segment (3 batches of 161 bytes).
    assert (
        "    only here: offsets 6..9 (4 records in 2 batches, epoch 0, "
        f"2023-11-14T22:13:23.000Z..2023-11-14T22:13:24.001Z) in {SEG} bytes 483..805"
    ) in out
    assert "    only on the reference: offsets 6..11 (6 records in 2 batches, epoch 1," in out
    assert "    Kafka's leader-epoch truncation would cut this log at offset 6" in out

    doc = json.loads(run("--json", b1.dir, b2.dir, b3.dir).output)
    part = doc["partitions"][0]
    assert doc["ok"] is False
    assert part["verdict"] == "diverged-committed"
    assert part["reference"] == str(b2.partition)
    assert part["diverges_at"] == 6
    assert part["common_high_watermark"] == 8
    old_leader, new_leader, _ = part["replicas"]
    assert new_leader["state"] == "reference" and new_leader["leader_epochs"] == [[0, 0], [1, 6]]
    assert old_leader["state"] == "diverged" and old_leader["committed"] is True
    assert old_leader["acknowledged_lost"] == [[6, 7]]
    assert old_leader["only_here"] == [
        {
            "first_offset": 6,
            "last_offset": 9,
            "batches": 2,
            "records": 4,
            "epochs": [0],
            "min_timestamp": T0 + 3000,
            "max_timestamp": T0 + 4001,
            "locations": [{"file": str(b1.partition / SEG), "start": 483, "end": 805}],
        }
    ]
    assert [(b["base_offset"], b["last_offset"]) for b in old_leader["only_here_batches"]] == [
        (6, 7),
        (8, 9),
    ]
    assert old_leader["epoch_truncation_offset"] == 6


def test_reference_can_be_chosen(broker: Callable[..., Broker]) -> None:
    b1, b2, _ = unclean_election(broker)
    doc = json.loads(run("--json", "--reference", b1.dir, b1.dir, b2.dir).output)
    part = doc["partitions"][0]
    assert part["reference"] == str(b1.partition)
    new_leader = part["replicas"][1]
    assert new_leader["acknowledged_lost"] == [[6, 11]]
    assert [r["first_offset"] for r in new_leader["only_here"]] == [6]


def test_divergence_above_the_high_watermark_is_ok(broker: Callable[..., Broker]) -> None:
    """A clean leader change: the old leader's unacknowledged tail 6..9 is truncated."""
    b1, b2 = broker(1), broker(2)
    b1.lead(5, 0)
    b2.follow(b1, up_to=6)
    b2.lead(1, 1, records=4, ts=T0 + 100_000)
    b1.high_watermark(6)
    b2.high_watermark(10)
    result = run(b1.dir, b2.dir)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == (
        "orders-0: DIVERGED ABOVE THE HIGH WATERMARK at offset 6: uncommitted tails differ "
        f"from the reference broker 2 ({b2.dir}) (Kafka truncates them)"
    )
    assert "at or above its high watermark 6: an uncommitted tail" in result.output


def test_no_high_watermark_counts_as_committed(broker: Callable[..., Broker]) -> None:
    b1, b2, _ = unclean_election(broker)
    (b1.dir / "replication-offset-checkpoint").unlink()
    result = run(b1.dir, b2.dir)
    assert result.exit_code == 1, result.output
    assert "and no high watermark was recorded: counted as committed" in result.output


def test_different_log_start_offsets(broker: Callable[..., Broker]) -> None:
    """Retention deleted the first segments of broker 2 only."""
    cfg = LogConfig(segment_bytes=200, retention_ms=-1)  # a batch of two records: 161 bytes
    b1, b2 = broker(1, cfg), broker(2, cfg)
    b1.lead(6, 0)
    b2.follow(b1)
    b2.log.update_high_watermark(12)
    b2.log.maybe_increment_log_start_offset(4)
    b2.log.delete_old_segments()
    assert b2.log.log_start_offset == 4
    write_offset_checkpoint(b2.dir / "log-start-offset-checkpoint", {TP: 4})
    b1.high_watermark(12)
    b2.high_watermark(12)
    result = run(b1.dir, b2.dir)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].startswith("orders-0: IDENTICAL on 2 replicas")
    assert (
        "  note: log start offsets differ (0..4: retention or DeleteRecords on some "
        "replicas); compared from offset 4"
    ) in result.output
    part = json.loads(run("--json", b1.dir, b2.dir).output)["partitions"][0]
    assert [r["log_start_offset"] for r in part["replicas"]] == [0, 4]
    assert [r["compared_from"] for r in part["replicas"]] == [None, 4]


def test_partition_dirs_given_directly(broker: Callable[..., Broker], tmp_path: Path) -> None:
    b1, b2, _ = unclean_election(broker)
    result = run(b1.partition, b2.partition)
    assert result.exit_code == 1, result.output
    # The high watermarks come from the partition directories' log directories.
    assert "acknowledged offsets 6..7" in result.output
    # Copies without their log directory: no high watermark, identical replicas.
    a, b = tmp_path / "a" / "orders-0", tmp_path / "b" / "orders-0"
    shutil.copytree(b1.partition, a)
    shutil.copytree(b1.partition, b)
    result = run(a, b)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == (
        "orders-0: IDENTICAL on 2 replicas (offsets 0..9, log end 10)"
    )


def test_single_replica_partitions_are_noted(broker: Callable[..., Broker]) -> None:
    b1, b2 = broker(1), broker(2)
    b1.lead(1, 0)
    b2.follow(b1)
    PartitionLog.open(b1.dir / "payments-3").close()
    result = run(b1.dir, b2.dir)
    assert result.exit_code == 0, result.output
    assert f"payments-3: SINGLE REPLICA on broker 1 ({b1.dir}): nothing to compare" in (
        result.output
    )
    assert result.output.rstrip().splitlines()[-1] == "2 partitions, 0 with problems"


# --- damage and usage ------------------------------------------------------------


def test_damaged_segment_is_reported_and_compared_up_to_the_damage(
    broker: Callable[..., Broker],
) -> None:
    b1, b2 = broker(1), broker(2)
    b1.lead(4, 0)
    b2.follow(b1)
    b1.high_watermark(8)
    b2.high_watermark(8)
    b2.log.close()
    seg = b2.partition / SEG
    data = bytearray(seg.read_bytes())
    data[-5] ^= 0xFF  # a flipped bit in the last batch's records: CRC mismatch
    seg.write_bytes(bytes(data))
    (b2.partition / "leader-epoch-checkpoint").write_text("0\n1\nnot an entry\n")
    result = run(b1.dir, b2.dir)
    assert result.exit_code == 1, result.output
    first = result.output.splitlines()[0]
    assert first.startswith("orders-0: OK, followers lag the reference broker 1")
    assert first.endswith("; DAMAGED replicas")
    assert (
        f"    DAMAGED {seg}: at position 483: CRC-32C mismatch" in result.output
        and "compared up to offset 6 (recovery would truncate the log here)" in result.output
    )
    assert f"    DAMAGED {b2.partition / 'leader-epoch-checkpoint'}: unreadable:" in (result.output)
    part = json.loads(run("--json", b1.dir, b2.dir).output)["partitions"][0]
    assert part["damaged"] is True and part["ok"] is False
    assert part["replicas"][1]["log_end_offset"] == 6


def test_torn_tail(broker: Callable[..., Broker]) -> None:
    b1, b2 = broker(1), broker(2)
    b1.lead(2, 0)
    b2.follow(b1)
    b2.log.close()
    with open(b2.partition / SEG, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\x01")
    result = run(b1.dir, b2.dir)
    assert result.exit_code == 1, result.output
    assert "DAMAGED" in result.output and "too few for a batch header" in result.output


def test_usage_errors(broker: Callable[..., Broker], tmp_path: Path) -> None:
    b1, b2 = broker(1), broker(2)
    b1.lead(1, 0)
    b2.follow(b1)
    assert "no such file or directory" in one_error_line(run(b1.dir, tmp_path / "nope"), 2)
    (tmp_path / "empty").mkdir()
    assert "not a log directory or a partition directory" in one_error_line(
        run(b1.dir, tmp_path / "empty"), 2
    )
    assert "not a log directory" in one_error_line(run(b1.dir, b1.dir / "meta.properties"), 2)
    assert "at least two" in one_error_line(run(b1.dir), 2)
    assert "given twice" in one_error_line(run(b1.dir, b1.dir), 2)
    assert "not one of the DIRs" in one_error_line(run("--reference", tmp_path, b1.dir, b2.dir), 2)
    other = tmp_path / "x" / "payments-0"
    PartitionLog.open(other).close()
    assert "no partition is in more than one" in one_error_line(run(b1.partition, other), 2)


# --- real Kafka files ------------------------------------------------------------


def writable_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def test_real_kafka_partition_compared_with_a_copy(tmp_path: Path, fixtures_dir: Path) -> None:
    a = writable_copy(fixtures_dir / "test-0", tmp_path / "a" / "test-0")
    b = writable_copy(fixtures_dir / "test-0", tmp_path / "b" / "test-0")
    result = run(a, b)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == (
        "test-0: IDENTICAL on 2 replicas (offsets 0..108, log end 109)"
    )
    part = json.loads(run("--json", a, b).output)["partitions"][0]
    assert [r["batches"] for r in part["replicas"]] == [109, 109]
    assert [r["leader_epochs"] for r in part["replicas"]] == [[[0, 0]], [[0, 0]]]
    # Cut the copy's last batch: it lags by that batch, nothing else differs.
    cut = _cut_last_batch(b / SEG)
    result = run(a, b)
    assert result.exit_code == 0, result.output
    assert "    lags the reference by 1 offset\n" in result.output
    assert "    only on the reference: offset 108 (1 record in 1 batch, epoch 0, " in (
        result.output
    )
    assert f"in {SEG} bytes {cut}..{(a / SEG).stat().st_size}" in result.output


def _cut_last_batch(seg: Path) -> int:
    """Truncate a v2 segment before its last batch; return the new size."""
    data = seg.read_bytes()
    pos = 0
    starts = []
    while pos < len(data):
        starts.append(pos)
        pos += int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
    seg.write_bytes(data[: starts[-1]])
    return starts[-1]


def test_real_kafka_legacy_log_dir_compared_with_a_copy(tmp_path: Path, fixtures_dir: Path) -> None:
    a = writable_copy(fixtures_dir / "logdir-0.10", tmp_path / "a")
    b = writable_copy(fixtures_dir / "logdir-0.10", tmp_path / "b")
    result = run(a, b)
    assert result.exit_code == 0, result.output
    verdicts = [line for line in result.output.splitlines() if line.endswith(")")]
    assert [v.split(":")[0] for v in verdicts if ": IDENTICAL on 2" in v] == [
        "__consumer_offsets-40",
        "foo-0",
        "topic1-0",
    ]
    assert "no leader-epoch-checkpoint" in result.output


def test_log_dirs_named_like_partitions(broker: Callable[..., Broker], tmp_path: Path) -> None:
    """/data/kafka-1 is a log directory, not partition 1 of topic "kafka"."""
    b1, b2, _ = unclean_election(broker)
    k1, k2 = tmp_path / "kafka-1", tmp_path / "kafka-2"
    shutil.copytree(b1.dir, k1)
    shutil.copytree(b2.dir, k2)
    result = run(k1, k2)
    assert result.exit_code == 1, result.output
    assert result.output.startswith("orders-0: DIVERGED BELOW THE HIGH WATERMARK at offset 6")


def test_reference_without_the_partition_is_noted(broker: Callable[..., Broker]) -> None:
    b1, b2, b3 = unclean_election(broker)
    PartitionLog.open(b1.dir / "payments-0").close()
    PartitionLog.open(b2.dir / "payments-0").close()
    result = run("--reference", b3.dir, b1.dir, b2.dir, b3.dir)
    assert result.exit_code == 1, result.output
    assert (
        f"  note: {b3.dir} has no replica of payments-0: the reference was chosen by leader epoch"
    ) in result.output
    assert "payments-0: IDENTICAL on 2 replicas (empty, log end 0)" in result.output


def test_real_kafka_legacy_replica_cut_short_lags(tmp_path: Path, fixtures_dir: Path) -> None:
    a = writable_copy(fixtures_dir / "logdir-0.10", tmp_path / "a")
    b = writable_copy(fixtures_dir / "logdir-0.10", tmp_path / "b")
    _cut_last_batch(b / "foo-0" / SEG)
    result = run(a / "foo-0", b / "foo-0")
    assert result.exit_code == 0, result.output
    assert result.output.startswith(
        f"foo-0: OK, followers lag the reference broker 0 ({a / 'foo-0'})"
    )
    part = json.loads(run("--json", a / "foo-0", b / "foo-0").output)["partitions"][0]
    follower = part["replicas"][1]
    assert follower["state"] == "lagging"
    assert follower["log_end_offset"] == part["replicas"][0]["log_end_offset"] - 1
