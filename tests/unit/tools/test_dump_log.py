"""`kt dump-log-segments`: Kafka-compatible text, JSON, ranges, damage, exit codes."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kt.storage import record_batch as v2
from kt.storage.compression import Codec
from kt.storage.file_records import FileRecords
from kt.storage.legacy import build_message_set
from kt.storage.record_batch import RecordSpec, build_batch, build_end_txn_marker
from kt.tools.dump_log import dump_log_segments

REPO = Path(__file__).resolve().parents[3]
GOLDEN = REPO / "tests" / "golden"
SEG = "00000000000000000000"


def run(*args: str | os.PathLike[str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(dump_log_segments, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    out, err = result.stdout, result.stderr
    assert "Traceback" not in out + err
    return result.exit_code, out, err


def batch_lines(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.startswith(("baseOffset:", "offset:"))]


def record_lines(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.startswith("| ")]


def write_segment(tmp_path: Path, chunks: list[bytes], name: str = SEG + ".log") -> Path:
    path = tmp_path / name
    path.write_bytes(b"".join(chunks))
    return path


def simple_batches(n: int, per: int = 3, start: int = 0, ts: int = 1_000) -> list[bytes]:
    out = []
    for i in range(n):
        base = start + i * per
        recs = [
            RecordSpec(f"k{base + j}".encode(), f"v{base + j}".encode(), timestamp=ts + base + j)
            for j in range(per)
        ]
        out.append(build_batch(recs, base_offset=base))
    return out


def write_index(path: Path, base: int, entries: list[tuple[int, int]]) -> None:
    path.write_bytes(b"".join(struct.pack(">ii", o - base, p) for o, p in entries))


def write_time_index(path: Path, base: int, entries: list[tuple[int, int]]) -> None:
    path.write_bytes(b"".join(struct.pack(">qi", t, o - base) for t, o in entries))


# --- real Apache Kafka files ---------------------------------------------------

REAL_LOGS = [
    ("test-0", []),
    ("some-topic-0", []),
    ("tenitems-0", []),
    ("quickstart-events-0", []),
    ("__consumer_offsets-16", ["--offsets-decoder"]),
    ("logdir-0.10/foo-0", []),
    ("logdir-0.10/topic1-0", []),
    ("logdir-0.10/__consumer_offsets-40", ["--offsets-decoder"]),
]


@pytest.mark.parametrize(("rel", "extra"), REAL_LOGS)
def test_real_kafka_logs_decode_completely(fixtures_dir: Path, rel: str, extra: list[str]) -> None:
    log = fixtures_dir / rel / f"{SEG}.log"
    code, out, err = run("--print-data-log", *extra, "--files", log)
    assert code == 0, err
    assert err == ""
    assert "invalid bytes" not in out
    assert "isvalid: false" not in out and "isValid: false" not in out
    batches = batch_lines(out)
    assert batches
    # The batches tile the whole file.
    sizes = [int(b.split(" size: ")[1].split()[0]) for b in batches]
    assert sum(sizes) == log.stat().st_size
    # Every record is printed, with a payload, and no decoder error.
    records = record_lines(out)
    counts = [int(b.split(" count: ")[1].split()[0]) for b in batches if "count:" in b]
    if counts:
        assert len(records) == sum(counts)
    assert all("payload: " in r or "endTxnMarker" in r for r in records)
    assert "Error at offset" not in out and "Unknown record type" not in out


def test_real_codecs_are_seen(fixtures_dir: Path) -> None:
    _, out, _ = run("--files", fixtures_dir / "test-0" / f"{SEG}.log")
    assert "compresscodec: gzip" in out and "compresscodec: none" in out
    _, out, _ = run("--files", fixtures_dir / "some-topic-0" / f"{SEG}.log")
    assert "compresscodec: snappy" in out
    _, out, _ = run("--deep-iteration", "--files", fixtures_dir / "some-topic-0" / f"{SEG}.log")
    assert "headerKeys: [__Key_TypeId__]" in out
    _, out, _ = run("--files", fixtures_dir / "tenitems-0" / f"{SEG}.log")
    assert "producerId: 2 producerEpoch: 0" in out and "baseSequence: 1 lastSequence: 1" in out


def test_offsets_decoder_output(fixtures_dir: Path) -> None:
    _, out, _ = run(
        "--offsets-decoder", "--files", fixtures_dir / "__consumer_offsets-16" / f"{SEG}.log"
    )
    assert (
        "| offset: 1 CreateTime: 1641705888549 keySize: 43 valueSize: 24 sequence: 0 "
        'headerKeys: [] key: {"type":"1","data":{"group":"simple-consumer-example",'
        '"topic":"test-topic","partition":0}} payload: {"version":"3","data":{"offset":0,'
        '"leaderEpoch":-1,"metadata":"","commitTimestamp":1641705888545}}'
    ) in out.splitlines()
    assert '"subscription":{"topics":["test-topic"],"userData":null,"ownedPartitions":[]}' in out
    _, out, _ = run(
        "--offsets-decoder",
        "--files",
        fixtures_dir / "logdir-0.10" / "__consumer_offsets-40" / f"{SEG}.log",
    )
    assert (
        'payload: {"version":"1","data":{"offset":2,"metadata":"",'
        '"commitTimestamp":1479457455691,"expireTimestamp":1479543855691}}'
    ) in out


def test_offsets_decoder_json(fixtures_dir: Path) -> None:
    code, out, _ = run(
        "--json",
        "--offsets-decoder",
        "--files",
        fixtures_dir / "__consumer_offsets-16" / f"{SEG}.log",
    )
    assert code == 0
    recs = [o for o in map(json.loads, out.splitlines()) if o["type"] == "record"]
    assert recs and all(r["key_encoding"] == "json" for r in recs)
    assert recs[1]["key"] == {
        "type": "1",
        "data": {"group": "simple-consumer-example", "topic": "test-topic", "partition": 0},
    }
    assert recs[1]["value"]["data"]["commitTimestamp"] == 1641705888545


def test_test0_golden_deep(fixture_copy, tmp_path: Path, monkeypatch) -> None:
    fixture_copy("test-0")
    monkeypatch.chdir(tmp_path / "test-0")
    code, out, err = run(
        "--deep-iteration", "--print-data-log", "--max-bytes", "31567", "--files", f"{SEG}.log"
    )
    assert code == 0 and err == ""
    assert out == (GOLDEN / "test-0.deep.txt").read_text(encoding="utf-8")


def test_test0_golden_indexes_and_verify(fixture_copy, tmp_path: Path, monkeypatch) -> None:
    fixture_copy("test-0")
    monkeypatch.chdir(tmp_path / "test-0")
    code, out, err = run("--files", f"{SEG}.index,{SEG}.timeindex")
    assert code == 0 and err == ""
    assert out == (GOLDEN / "test-0.index.txt").read_text(encoding="utf-8")
    code, out, err = run(
        "--verify-index-only", "--files", f"{SEG}.index", "--files", f"{SEG}.timeindex"
    )
    assert (code, err) == (0, "")
    assert out == f"Dumping {SEG}.index\nDumping {SEG}.timeindex\n"
    code, out, err = run("--index-sanity-check", "--files", f"{SEG}.index,{SEG}.timeindex")
    assert (code, err) == (0, "")
    assert f"{SEG}.index passed sanity check." in out
    assert f"{SEG}.timeindex passed sanity check." in out


def test_index_golden_matches_the_raw_entries(fixtures_dir: Path) -> None:
    data = (fixtures_dir / "test-0" / f"{SEG}.index").read_bytes()
    expected = [f"offset: {o} position: {p}" for o, p in struct.iter_unpack(">ii", data)]
    golden = (GOLDEN / "test-0.index.txt").read_text().splitlines()
    assert golden[1 : 1 + len(expected)] == expected


def test_snapshots_and_checkpoint(fixtures_dir: Path) -> None:
    code, out, err = run(
        "--files",
        ",".join(
            str(fixtures_dir / p)
            for p in (
                "tenitems-0/00000000000000000009.snapshot",
                "quickstart-events-0/00000000000000000003.snapshot",
                "test-0/00000000000000000109.snapshot",
                "test-0/leader-epoch-checkpoint",
            )
        ),
    )
    assert (code, err) == (0, "")
    assert (
        "producerId: 2 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: "
        "OptionalLong.empty lastTimestamp: 1676143806952 firstSequence: 3 lastSequence: 3 "
        "lastOffset: 3 offsetDelta: 0 timestamp: 1676143806952"
    ) in out.splitlines()
    assert out.count("producerId:") == 4
    assert "epoch: 0 startOffset: 0" in out


# --- synthetic segments ----------------------------------------------------------


@pytest.mark.parametrize("codec", list(Codec))
def test_v2_every_codec(tmp_path: Path, codec: Codec) -> None:
    recs = [RecordSpec(b"k%d" % i, b"value-%d" % i, timestamp=5000 + i) for i in range(4)]
    log = write_segment(tmp_path, [build_batch(recs, base_offset=0, codec=codec)])
    code, out, err = run("--print-data-log", "--files", log)
    assert (code, err) == (0, "")
    (line,) = batch_lines(out)
    assert f"compresscodec: {codec.name.lower()} " in line
    assert line.startswith(
        "baseOffset: 0 lastOffset: 3 count: 4 baseSequence: -1 lastSequence: -1 "
        "producerId: -1 producerEpoch: -1 partitionLeaderEpoch: -1 isTransactional: false "
        "isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 5003 "
    )
    assert line.endswith(" isvalid: true")
    assert record_lines(out)[2] == (
        "| offset: 2 CreateTime: 5002 keySize: 2 valueSize: 7 sequence: -1 headerKeys: [] "
        "key: k2 payload: value-2"
    )


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", list(Codec))
def test_legacy_every_codec(tmp_path: Path, magic: int, codec: Codec) -> None:
    if magic == 0 and codec == Codec.ZSTD:
        pytest.skip("zstd needs magic 2")
    recs = [(b"k%d" % i, b"v%d" % i, 7000 + i) for i in range(3)]
    data = build_message_set(recs, magic=magic, base_offset=10, codec=codec)
    log = write_segment(tmp_path, [data], name="00000000000000000010.log")
    code, out, err = run("--print-data-log", "--files", log)
    assert (code, err) == (0, "")
    assert "Log starting offset: 10" in out
    label = "NoTimestampType" if magic == 0 else "CreateTime"
    lines = batch_lines(out)
    if codec == Codec.NONE:
        assert len(lines) == 3
        assert lines[0].startswith(f"offset: 10 position: 0 {label}: {-1 if magic == 0 else 7000} ")
    else:
        (line,) = lines
        assert line.startswith(f"offset: 12 position: 0 {label}: {-1 if magic == 0 else 7002} ")
        assert f"magic: {magic} compresscodec: {codec.name.lower()} crc: " in line
    recs_out = record_lines(out)
    assert len(recs_out) == 3
    ts = -1 if magic == 0 else 7001
    assert recs_out[1].startswith(
        f"| offset: 11 {label}: {ts} keySize: 2 valueSize: 2 isValid: true crc: "
    )
    assert recs_out[1].endswith("} key: k1 payload: v1")


def test_headers_nulls_log_append_time_and_horizon(tmp_path: Path) -> None:
    b1 = build_batch(
        [
            RecordSpec(None, b"x", headers=[("a", b"1"), ("b", None)], timestamp=10),
            RecordSpec(b"key", None, timestamp=11),
        ],
        base_offset=0,
        timestamp_type=v2.LOG_APPEND_TIME,
        log_append_time=99,
        producer_id=7,
        producer_epoch=2,
        base_sequence=2147483647,
        partition_leader_epoch=4,
    )
    b2 = build_batch([RecordSpec(b"t", None, timestamp=20)], base_offset=2, delete_horizon_ms=12345)
    log = write_segment(tmp_path, [b1, b2])
    code, out, err = run("--print-data-log", "--files", log)
    assert (code, err) == (0, "")
    l1, l2 = batch_lines(out)
    assert l1.startswith(
        "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 2147483647 lastSequence: 0 "
        "producerId: 7 producerEpoch: 2 partitionLeaderEpoch: 4 isTransactional: false "
        "isControl: false deleteHorizonMs: OptionalLong.empty position: 0 LogAppendTime: 99 "
    )
    assert "deleteHorizonMs: OptionalLong[12345] " in l2
    r = record_lines(out)
    assert r[0] == (
        "| offset: 0 LogAppendTime: 99 keySize: -1 valueSize: 1 sequence: 2147483647 "
        "headerKeys: [a,b] payload: x"
    )
    assert r[1] == (
        "| offset: 1 LogAppendTime: 99 keySize: 3 valueSize: -1 sequence: 0 headerKeys: [] key: key"
    )
    # --skip-record-metadata: Kafka's prefix rules.
    _, out, _ = run("--print-data-log", "--skip-record-metadata", "--files", log)
    lines = [ln for ln in out.splitlines() if ln.startswith(("|", " payload"))]
    assert lines == [" payload: x", "| key: key", "| key: t"]


def test_control_batches(tmp_path: Path) -> None:
    data = build_batch(
        [RecordSpec(b"a", b"1")], base_offset=0, producer_id=5, producer_epoch=1, base_sequence=0,
        is_transactional=True,
    )  # fmt: skip
    commit = build_end_txn_marker(
        commit=True, producer_id=5, producer_epoch=1, coordinator_epoch=3, base_offset=1
    )
    abort = build_end_txn_marker(
        commit=False, producer_id=5, producer_epoch=1, coordinator_epoch=3, base_offset=2
    )
    # A KRaft LeaderChange control record: version 0, leader 1, no voters.
    leader_change = build_batch(
        [
            RecordSpec(
                struct.pack(">hh", 0, 2), b"\x00\x00\x00\x00\x00\x01\x01\x01\x00", timestamp=0
            )
        ],
        base_offset=3,
        is_control=True,
    )
    log = write_segment(tmp_path, [data, commit, abort, leader_change])
    code, out, err = run("--print-data-log", "--files", log)
    assert (code, err) == (0, "")
    r = record_lines(out)
    assert r[1] == (
        "| offset: 1 CreateTime: 0 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: COMMIT coordinatorEpoch: 3"
    )
    assert r[2].endswith("endTxnMarker: ABORT coordinatorEpoch: 3")
    assert r[3].endswith(
        'headerKeys: [] LeaderChange: {"version":0,"leaderId":1,"voters":[],"grantingVoters":[]}'
    )
    assert "isTransactional: true isControl: true" in batch_lines(out)[1]
    code, out, _ = run("--json", "--deep-iteration", "--files", log)
    objs = [json.loads(x) for x in out.splitlines()]
    ctl = [o for o in objs if o["type"] == "record" and "control" in o]
    assert ctl[0]["control"] == {"type": "COMMIT", "type_id": 1, "coordinator_epoch": 3}


def test_non_consecutive_offsets(tmp_path: Path) -> None:
    b1 = build_batch(
        [RecordSpec(b"a", b"1"), RecordSpec(b"b", b"2", offset_delta=2)], base_offset=0
    )
    b2 = build_batch([RecordSpec(b"c", b"3")], base_offset=5)
    log = write_segment(tmp_path, [b1, b2])
    code, _out, err = run("--deep-iteration", "--files", log)
    assert code == 1
    assert err.splitlines() == [
        f"Non-consecutive offsets in {log}",
        "  2 is followed by 5",
        "  0 is followed by 2",
    ]


def test_deleted_cleaned_swap_files_are_dumped(tmp_path: Path) -> None:
    log = write_segment(tmp_path, simple_batches(2), name=f"{SEG}.log.deleted")
    write_index(tmp_path / f"{SEG}.index.swap", 0, [(2, 0), (5, 0)])
    code, out, err = run("--files", f"{log},{tmp_path / (SEG + '.index.swap')}")
    assert "Log starting offset: 0" in out
    assert len(batch_lines(out)) == 2 + 2  # 2 batches + 2 index lines start with "offset:"
    assert f"Mismatches in :{tmp_path / (SEG + '.index.swap')}" in err
    assert code == 1


def test_index_mismatch_report(tmp_path: Path) -> None:
    batches = simple_batches(3)
    write_segment(tmp_path, batches)
    pos1 = len(batches[0])
    idx = tmp_path / f"{SEG}.index"
    write_index(idx, 0, [(2, 0), (4, pos1), (8, pos1 + len(batches[1]))])
    code, out, err = run("--files", idx)
    assert code == 1
    assert "offset: 4 position: " in out
    assert err.splitlines() == [
        f"Mismatches in :{idx}",
        "  Index offset: 4, log offset: 5",
    ]


def test_time_index_problems(tmp_path: Path) -> None:
    batches = simple_batches(3, ts=100)  # max timestamps 102, 105, 108
    write_segment(tmp_path, batches)
    tidx = tmp_path / f"{SEG}.timeindex"
    write_time_index(tidx, 0, [(102, 2), (999, 5), (50, 8), (1, 7)])
    code, out, err = run("--verify-index-only", "--files", tidx)
    assert code == 1 and out == f"Dumping {tidx}\n"
    assert err.splitlines() == [
        f"Found timestamp mismatch in :{tidx}",
        "  Index timestamp: 999, log timestamp: 105",
        "  Index timestamp: 50, log timestamp: 108",
        f"Found out of order timestamp in :{tidx}",
        "  Index timestamp: 50, Previously indexed timestamp: 999",
        "The following indexed offsets are not found in the log.",
        "Indexed offset: 7, found log offset: 8",
    ]


def test_txn_index_dump(tmp_path: Path) -> None:
    from kt.storage.txn_index import AbortedTxn, encode_txn_index

    p = tmp_path / f"{SEG}.txnindex"
    p.write_bytes(encode_txn_index([AbortedTxn(7, 10, 20, 5), AbortedTxn(8, 30, 40, 25)]))
    code, out, err = run("--files", p)
    assert (code, err) == (0, "")
    assert out.splitlines()[1:] == [
        "version: 0 producerId: 7 firstOffset: 10 lastOffset: 20 lastStableOffset: 5",
        "version: 0 producerId: 8 firstOffset: 30 lastOffset: 40 lastStableOffset: 25",
    ]


def test_transaction_log_decoder(tmp_path: Path) -> None:
    from kt.protocol.coordinator_records import (
        TransactionLogRecord,
        TransactionLogValue,
        encode_transaction_log_record,
    )

    rec = TransactionLogRecord(
        "txn-1",
        TransactionLogValue(
            producer_id=9,
            producer_epoch=1,
            transaction_timeout_ms=60000,
            state=1,
            partitions=[("orders", [0, 1])],
            last_update_timestamp_ms=1234,
            start_timestamp_ms=1200,
        ),
    )
    k, v = encode_transaction_log_record(rec)
    tk, _ = encode_transaction_log_record(TransactionLogRecord("txn-2", None))
    log = write_segment(
        tmp_path, [build_batch([RecordSpec(k, v), RecordSpec(tk, None)], base_offset=0)]
    )
    code, out, err = run("--transaction-log-decoder", "--files", log)
    assert (code, err) == (0, "")
    r = record_lines(out)
    assert r[0].endswith(
        " key: transaction_metadata::transactionalId=txn-1 payload: producerId:9,producerEpoch:1,"
        "state=Ongoing,partitions=[orders-0,orders-1],txnLastUpdateTimestamp=1234,"
        "txnTimeoutMs=60000"
    )
    assert r[1].endswith(" key: transaction_metadata::transactionalId=txn-2 payload: <DELETE>")


def test_decode_modes(tmp_path: Path) -> None:
    log = write_segment(
        tmp_path, [build_batch([RecordSpec(b'{"a": 1}', b"\xff\x00ok", timestamp=1)])]
    )
    _, out, _ = run("--print-data-log", "--decode", "hex", "--files", log)
    assert record_lines(out)[0].endswith("key: 7b2261223a20317d payload: ff006f6b")
    _, out, _ = run("--print-data-log", "--decode", "base64", "--files", log)
    assert record_lines(out)[0].endswith("key: eyJhIjogMX0= payload: /wBvaw==")
    _, out, _ = run("--print-data-log", "--decode", "json", "--files", log)
    assert record_lines(out)[0].endswith('key: {"a":1} payload: \ufffd\x00ok')
    _, out, _ = run("--json", "--deep-iteration", "--decode", "json", "--files", log)
    rec = json.loads(out.splitlines()[2])
    assert rec["key"] == {"a": 1} and rec["key_encoding"] == "json"
    assert rec["value"] == "ff006f6b" and rec["value_encoding"] == "hex"


# --- JSON schema -----------------------------------------------------------------

BATCH_KEYS = {
    "type", "file", "position", "base_offset", "last_offset", "count", "magic", "codec",
    "timestamp_type", "max_timestamp", "producer_id", "producer_epoch", "base_sequence",
    "last_sequence", "partition_leader_epoch", "is_transactional", "is_control",
    "delete_horizon_ms", "size", "crc", "crc_valid",
}  # fmt: skip
RECORD_KEYS = {
    "type", "file", "offset", "timestamp", "key", "key_encoding", "value", "value_encoding",
    "headers", "key_size", "value_size", "sequence", "batch_base_offset",
}  # fmt: skip


def test_json_schema(fixtures_dir: Path, tmp_path: Path) -> None:
    log = write_segment(
        tmp_path,
        [
            build_batch(
                [RecordSpec(b"k", b"v", headers=[("h", b"x")], timestamp=3)],
                base_offset=0,
                codec=Codec.GZIP,
            )
        ],
    )
    code, out, _ = run("--json", "--deep-iteration", "--files", log)
    assert code == 0
    objs = [json.loads(line) for line in out.splitlines()]
    assert [o["type"] for o in objs] == ["file", "batch", "record"]
    assert set(objs[1]) == BATCH_KEYS
    assert objs[1]["codec"] == "gzip" and objs[1]["crc_valid"] is True
    assert objs[1]["delete_horizon_ms"] is None and objs[1]["timestamp_type"] == "CreateTime"
    assert set(objs[2]) == RECORD_KEYS
    assert objs[2]["headers"] == [{"key": "h", "value": "x", "value_encoding": "utf8"}]
    assert (objs[2]["key"], objs[2]["value"], objs[2]["key_encoding"]) == ("k", "v", "utf8")
    # Legacy batches carry the same keys; legacy records add crc and crc_valid.
    foo = fixtures_dir / "logdir-0.10" / "foo-0" / f"{SEG}.log"
    code, out, _ = run("--json", "--deep-iteration", "--files", foo)
    objs = [json.loads(line) for line in out.splitlines()]
    assert all(set(o) == BATCH_KEYS for o in objs if o["type"] == "batch")
    assert all(set(o) == RECORD_KEYS | {"crc", "crc_valid"} for o in objs if o["type"] == "record")
    # Index entries and problems.
    code, out, _ = run("--json", "--files", fixtures_dir / "test-0" / f"{SEG}.index")
    objs = [json.loads(line) for line in out.splitlines()]
    assert objs[1] == {
        "type": "index_entry",
        "file": str(fixtures_dir / "test-0" / f"{SEG}.index"),
        "offset": 1,
        "position": 5158,
    }


# --- ranges ----------------------------------------------------------------------


def _big_segment(tmp_path: Path) -> tuple[Path, list[int]]:
    """~6 MiB, 400 batches of 5 records, with a sparse .index and .timeindex."""
    value = b"x" * 3000
    chunks, positions, pos = [], [], 0
    for i in range(400):
        base = i * 5
        recs = [RecordSpec(b"k", value, timestamp=1_000_000 + base + j) for j in range(5)]
        b = build_batch(recs, base_offset=base)
        chunks.append(b)
        positions.append(pos)
        pos += len(b)
    log = write_segment(tmp_path, chunks)
    idx = [(i * 5 + 4, positions[i]) for i in range(0, 400, 10)]
    write_index(tmp_path / f"{SEG}.index", 0, idx)
    write_time_index(tmp_path / f"{SEG}.timeindex", 0, [(1_000_000 + o, o) for o, _ in idx])
    return log, positions


def test_offset_range_seeks_with_the_index(tmp_path: Path, monkeypatch) -> None:
    log, _ = _big_segment(tmp_path)
    read_bytes = []
    orig = FileRecords.read

    def counting(self: FileRecords, position: int, length: int) -> bytes:
        data = orig(self, position, length)
        read_bytes.append(len(data))
        return data

    monkeypatch.setattr(FileRecords, "read", counting)
    code, out, err = run(
        "--deep-iteration", "--start-offset", "1700", "--end-offset", "1712", "--files", log
    )
    assert (code, err) == (0, "")
    offsets = [int(r.split()[2]) for r in record_lines(out)]
    assert offsets == list(range(1700, 1713))
    assert [int(b.split()[1]) for b in batch_lines(out)] == [1700, 1705, 1710]
    ranged = sum(read_bytes)
    read_bytes.clear()
    run("--files", log)
    assert sum(read_bytes) >= log.stat().st_size
    assert ranged < log.stat().st_size / 2


def test_time_range_and_json(tmp_path: Path) -> None:
    log, _ = _big_segment(tmp_path)
    code, out, err = run(
        "--json", "--deep-iteration", "--start-time", "1001003", "--end-time", "1001006",
        "--files", log,
    )  # fmt: skip
    assert (code, err) == (0, "")
    recs = [json.loads(x) for x in out.splitlines() if '"type":"record"' in x]
    assert [r["offset"] for r in recs] == [1003, 1004, 1005, 1006]
    # ISO-8601 is accepted; 1970-01-01T00:16:41.003Z == 1001003 ms.
    _, out2, _ = run(
        "--json", "--deep-iteration", "--start-time", "1970-01-01T00:16:41.003+00:00",
        "--end-time", "1001006", "--files", log,
    )  # fmt: skip
    assert out2 == out


def test_range_without_index_falls_back(tmp_path: Path) -> None:
    log = write_segment(tmp_path, simple_batches(4))
    code, out, err = run("--deep-iteration", "--start-offset", "6", "--files", log)
    assert code == 0
    assert "no offset index" in err and "scanning from the start" in err
    assert [int(r.split()[2]) for r in record_lines(out)] == [6, 7, 8, 9, 10, 11]


def test_max_bytes_cuts_without_complaint(tmp_path: Path) -> None:
    batches = simple_batches(3)
    log = write_segment(tmp_path, batches)
    code, out, err = run("--max-bytes", str(len(batches[0]) + 5), "--files", log)
    assert (code, err) == (0, "")
    assert len(batch_lines(out)) == 1 and "invalid bytes" not in out


# --- damage ----------------------------------------------------------------------


def _unchanged(path: Path, before: bytes) -> None:
    assert path.read_bytes() == before


def test_truncated_tail(tmp_path: Path) -> None:
    batches = simple_batches(3)
    log = write_segment(tmp_path, [*batches[:2], batches[2][:30]])
    before = log.read_bytes()
    code, out, err = run("--files", log)
    assert code == 1
    assert out.splitlines()[-1] == f"Found 30 invalid bytes at the end of {SEG}.log"
    assert len(err.splitlines()) == 1 and err.startswith(f"kt: damage in {log} at position ")
    _unchanged(log, before)


def test_flipped_bits(tmp_path: Path) -> None:
    batches = simple_batches(3)
    data = bytearray(b"".join(batches))
    data[len(batches[0]) + 70] ^= 0x01  # inside the second batch's records
    log = write_segment(tmp_path, [bytes(data)])
    code, out, err = run("--deep-iteration", "--files", log)
    assert code == 1
    assert [ln.endswith("isvalid: false") for ln in batch_lines(out)] == [False, True, False]
    assert "fails its CRC check" in err
    assert len(batch_lines(out)) == 3


def test_garbage_appended_and_zero_tail(tmp_path: Path) -> None:
    log = write_segment(tmp_path, [*simple_batches(2), b"\x07garbage-garbage-garbage"])
    code, out, err = run("--files", log)
    assert code == 1 and "Found 24 invalid bytes at the end" in out
    assert len(err.splitlines()) == 1
    log.write_bytes(b"".join(simple_batches(2)) + bytes(4096))
    code, out, err = run("--files", log)
    assert code == 1 and "Found 4096 invalid bytes at the end" in out
    assert "zero-filled" in err and len(err.splitlines()) == 1


def test_corrupt_size_mid_file_with_and_without_resync(tmp_path: Path) -> None:
    batches = simple_batches(5)
    data = bytearray(b"".join(batches))
    p2 = len(batches[0]) + len(batches[1])
    struct.pack_into(">i", data, p2 + 8, 5)  # batch 2's length field: impossible
    log = write_segment(tmp_path, [bytes(data)])
    code, out, err = run("--files", log)
    assert code == 1 and len(batch_lines(out)) == 2
    assert out.splitlines()[-1] == f"Found {len(data) - p2} invalid bytes at the end of {SEG}.log"
    assert err.splitlines() == [
        f"kt: damage in {log} at position {p2}: batch length 5 is less than the minimum 49; "
        "stopped here (--resync scans on for later batches)"
    ]
    code, out, err = run("--resync", "--deep-iteration", "--files", log)
    assert code == 1
    assert [int(b.split()[1]) for b in batch_lines(out)] == [0, 3, 9, 12]
    assert f"skipped {len(batches[2])} bytes to the next valid batch" in err
    code, out, _ = run("--resync", "--json", "--files", log)
    damage = [json.loads(x) for x in out.splitlines() if '"damage"' in x]
    assert damage == [
        {"type": "damage", "file": str(log), "position": p2, "length": len(batches[2]),
         "reason": "batch length 5 is less than the minimum 49"}
    ]  # fmt: skip


def test_records_that_do_not_decode(tmp_path: Path) -> None:
    good = simple_batches(2)
    bad = bytearray(build_batch([RecordSpec(b"a", b"b")], base_offset=6))
    struct.pack_into(">i", bad, 57, 3)  # record count 3, only one record
    bad[17:21] = struct.pack(">I", v2.compute_crc(bad))
    log = write_segment(tmp_path, [*good, bytes(bad)])
    code, out, err = run("--deep-iteration", "--files", log)
    assert code == 1
    assert len(batch_lines(out)) == 3
    assert "the records of the batch do not decode" in err


def test_empty_file_and_wrong_kind(tmp_path: Path) -> None:
    empty = write_segment(tmp_path, [])
    code, out, err = run("--files", empty)
    assert (code, err) == (0, "")
    assert out == f"Dumping {empty}\nLog starting offset: 0\n"
    idx = tmp_path / "00000000000000000005.index"
    idx.write_bytes(b"")
    code, out, err = run("--files", idx)
    assert code == 0 and out.endswith(f"{idx} is empty.\n")
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    code, out, err = run("--files", text)
    assert code == 2 and err == f"Ignoring unknown file {text}\n"
    bogus = tmp_path / "00000000000000000099.log"
    bogus.write_text("this is not a kafka segment at all, just text\n" * 3)
    code, out, err = run("--files", bogus)
    assert code == 1 and len(err.splitlines()) == 1 and "invalid magic byte" in err


def test_usage_errors(tmp_path: Path) -> None:
    code, _, err = run("--files", tmp_path / "missing.log")
    assert (
        code == 2 and err == f"kt: error: {tmp_path / 'missing.log'}: no such file or directory\n"
    )
    d = tmp_path / "t-0"
    d.mkdir()
    (d / f"{SEG}.log").write_bytes(b"")
    code, out, err = run("--files", d)
    assert code == 2 and out == ""
    assert err.startswith(f"kt: error: {d}: is a directory; give the files inside, e.g. --files ")
    assert len(err.splitlines()) == 1
    code, _, err = run("--start-time", "yesterday", "--files", d / f"{SEG}.log")
    assert code == 2 and "ISO-8601" in err
    code, _, _ = run("--max-bytes", "-1", "--files", d / f"{SEG}.log")
    assert code == 2
    code, _, err = run(
        "--offsets-decoder", "--transaction-log-decoder", "--files", d / f"{SEG}.log"
    )
    assert code == 2


def test_tuple_decoder_agrees_with_kafka_python() -> None:
    """The dump path's tuple decoder (two-byte varints inline) against an independent reader."""
    from kafka.record.default_records import DefaultRecordBatch

    specs = [
        RecordSpec(None, None, timestamp=-5),
        RecordSpec(b"k" * 200, b"v" * 70000, headers=[("h1", b"x" * 300), ("h2", None)],
                   timestamp=10**12),
        RecordSpec(b"", b"", timestamp=3, offset_delta=100000),
    ]  # fmt: skip
    for codec in Codec:
        data = build_batch(specs, base_offset=42, codec=codec, base_sequence=2147483600)
        h = v2.parse_header(data)
        ours = [(o, t, k, v, list(hs)) for o, t, k, v, hs, _seq in v2.iter_record_tuples(h, data)]
        theirs = [
            (r.offset, r.timestamp, r.key, r.value, [(hk, hv) for hk, hv in r.headers])
            for r in DefaultRecordBatch(data)
        ]
        assert ours == theirs
        seqs = [seq for *_rest, seq in v2.iter_record_tuples(h, data)]
        # 2147483600 + 100000 wraps past Int.MaxValue to a small sequence, as Kafka's does.
        assert seqs == [2147483600, 2147483601, 2147483600 + 100000 - 2**31]


def test_help_documents_everything() -> None:
    result = CliRunner().invoke(dump_log_segments, ["--help"])
    assert result.exit_code == 0
    for opt in ("--files", "--deep-iteration", "--print-data-log", "--json", "--decode", "--resync",
                "--start-offset", "--end-time", "--offsets-decoder", "--max-bytes"):  # fmt: skip
        assert opt in result.output
    assert '"type":"batch"' in result.output and "--decode" in result.output


def test_real_subprocess(fixtures_dir: Path, tmp_path: Path) -> None:
    kt = Path(sys.executable).parent / "kt"
    if not kt.exists():
        kt = REPO / ".venv" / "bin" / "kt"
    shutil.copy(fixtures_dir / "tenitems-0" / f"{SEG}.log", tmp_path)
    proc = subprocess.run(
        [str(kt), "dump-segment", "--deep-iteration", "--files", f"{SEG}.log"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith(f"Dumping {SEG}.log\nLog starting offset: 0\nbaseOffset: 0 ")
    proc = subprocess.run(
        [str(kt), "dump-segment", "--files", str(tmp_path / "nope.log")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
