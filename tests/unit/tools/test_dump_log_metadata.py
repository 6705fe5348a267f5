"""`kt dump-log-segments --cluster-metadata-decoder`: Kafka's lines on logs and snapshots."""

from __future__ import annotations

import itertools
import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kraft_fixtures import UUIDS, leader_change, partition, pchange, register

from kt.storage.metadata_log import MetadataBatchWriter, build_snapshot
from kt.tools.dump_log import dump_log_segments
from kt.tools.dump_log_metadata import plain_batch_lines as _plain_batch_lines

REPO = Path(__file__).resolve().parents[3]
GOLDEN = REPO / "tests" / "golden" / "kraft-metadata.dump.txt"
TS = 1769791434545


def run(*args: str | os.PathLike[str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(dump_log_segments, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert "Traceback" not in result.stdout + result.stderr
    return result.exit_code, result.stdout, result.stderr


def write_log(d: Path) -> Path:
    meta = d / "__cluster_metadata-0"
    meta.mkdir(parents=True, exist_ok=True)
    w = MetadataBatchWriter(0, 1)
    w.control([leader_change(1)], TS)
    w.records(
        [
            (23, 0, {"Name": "Bootstrap records"}),
            (12, 0, {"Name": "metadata.version", "FeatureLevel": 21}),
            (24, 0, {}),
        ],
        TS,
    )
    w.records([register(1, 11, UUIDS["b1"]), (8, 0, {"Id": 1, "Epoch": 11})], TS + 100)
    w.records(
        [
            (2, 0, {"Name": "orders", "TopicId": UUIDS["orders"]}),
            partition("orders", 0, [1], 1),
            pchange("orders", 0, Leader=-1, Isr=[1]),
        ],
        TS + 200,
    )
    w.raw([b"\x01\x63\x00", b"\x01\x14\x00\x00"], TS + 300)  # an unknown apiKey; a NoOp
    path = meta / "00000000000000000000.log"
    path.write_bytes(bytes(w.out))
    return path


def test_golden_log_text(tmp_path: Path) -> None:
    log = write_log(tmp_path)
    code, out, err = run("--cluster-metadata-decoder", "--files", log)
    assert code == 1  # the undecodable record is a problem found
    assert "metadata record at offset 9 does not decode" in err
    text = out.replace(str(tmp_path), "TMP")
    if os.environ.get("KT_UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_kafkas_line_format(tmp_path: Path) -> None:
    log = write_log(tmp_path)
    _, out, _ = run("--cluster-metadata-decoder", "--files", log)
    lines = out.splitlines()
    assert lines[0] == f"Dumping {log}"
    assert lines[1] == "Log starting offset: 0"
    assert lines[2] == (
        "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 1 isTransactional: false isControl: true "
        f"deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: {TS} size: 106 magic: 2 "
        f"compresscodec: none crc: {lines[2].split('crc: ')[1].split()[0]} isvalid: true"
    )
    assert lines[3] == (
        f"| offset: 0 CreateTime: {TS} keySize: 4 valueSize: 34 sequence: -1 headerKeys: [] "
        'LeaderChange: {"version":0,"leaderId":1,"voters":[{"voterId":1},{"voterId":2},'
        '{"voterId":3}],"grantingVoters":[{"voterId":1},{"voterId":2}]}'
    )
    assert lines[5] == (
        f"| offset: 1 CreateTime: {TS} keySize: -1 valueSize: 24 sequence: -1 headerKeys: [] "
        'payload: {"type":"BEGIN_TRANSACTION_RECORD","version":0,'
        '"data":{"name":"Bootstrap records"}}'
    )
    assert (
        '"data":{"partitionId":0,"topicId":"x2Hj2kQ-SvSGmSg0wP3EYA","isr":[1],"leader":-1}}' in out
    )
    assert (
        "payload: Error at 9, skipping. org.apache.kafka.common.errors."
        "UnsupportedVersionException: Unknown metadata id 99" in out
    )
    # The dump goes on past it.
    assert lines[-1].endswith('payload: {"type":"NO_OP_RECORD","version":0,"data":{}}')


def test_skip_record_metadata(tmp_path: Path) -> None:
    log = write_log(tmp_path)
    _, out, _ = run("--cluster-metadata-decoder", "--skip-record-metadata", "--files", log)
    lines = out.splitlines()
    assert lines[3] == ""  # a control record: no metadata, no payload
    assert lines[5] == (
        ' payload: {"type":"BEGIN_TRANSACTION_RECORD","version":0,'
        '"data":{"name":"Bootstrap records"}}'
    )


def test_snapshot_and_bootstrap_headers(tmp_path: Path) -> None:
    meta = tmp_path / "__cluster_metadata-0"
    meta.mkdir()
    snap = meta / "00000000000000004929-0000000001.checkpoint"
    snap.write_bytes(
        build_snapshot(
            [(12, 0, {"Name": "metadata.version", "FeatureLevel": 21})],
            last_contained_timestamp=TS,
            timestamp=TS,
            epoch=1,
        )
    )
    boot = tmp_path / "bootstrap.checkpoint"
    boot.write_bytes(build_snapshot([(12, 0, {"Name": "metadata.version", "FeatureLevel": 20})]))
    voters = {
        "Version": 0,
        "Voters": [
            {
                "VoterId": 1,
                "VoterDirectoryId": UUIDS["b2"],
                "Endpoints": [{"Name": "CONTROLLER", "Host": "c1", "Port": 9093}],
                "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1},
            }
        ],
    }
    dyn = meta / "00000000000000000100-0000000002.checkpoint"
    dyn.write_bytes(build_snapshot([], voters=voters))
    code, out, err = run("--cluster-metadata-decoder", "--files", f"{snap},{boot},{dyn}")
    assert (code, err) == (0, "")
    assert "Snapshot end offset: 4929, epoch: 1\n" in out
    assert "KRaft bootstrap snapshot\n" in out
    assert f' SnapshotHeader {{"version":0,"lastContainedLogTimestamp":{TS}}}' in out
    assert ' SnapshotFooter {"version":0}' in out
    assert ' KRaftVersion {"version":0,"kRaftVersion":1}' in out
    assert (
        ' KRaftVoters {"version":0,"voters":[{"voterId":1,"voterDirectoryId":'
        '"AAECAwQFBgcICQoLDA0ODw","endpoints":[{"name":"CONTROLLER","host":"c1","port":9093}],'
        '"kRaftVersionFeature":{"minSupportedVersion":0,"maxSupportedVersion":1}}]}'
    ) in out
    assert '"data":{"name":"metadata.version","featureLevel":20}' in out


def test_json_carries_the_decoded_record(tmp_path: Path) -> None:
    log = write_log(tmp_path)
    code, out, _ = run("--cluster-metadata-decoder", "--json", "--files", log)
    assert code == 1
    objs = [json.loads(x) for x in out.splitlines()]
    recs = {o["offset"]: o for o in objs if o["type"] == "record"}
    assert recs[1]["value"] == {
        "type": "BEGIN_TRANSACTION_RECORD",
        "version": 0,
        "data": {"name": "Bootstrap records"},
    }
    assert recs[1]["value_encoding"] == "json"
    assert recs[0]["control"]["type"] == "LEADER_CHANGE"
    assert recs[0]["control"]["data"]["leaderId"] == 1
    assert recs[9]["value_encoding"] == "text"
    assert recs[9]["value"].startswith("Error at 9, skipping.")
    problems = [o for o in objs if o["type"] == "problem"]
    assert [p["offset"] for p in problems] == [9]


def test_scram_secrets_are_never_printed(tmp_path: Path) -> None:
    w = MetadataBatchWriter(0, 1)
    w.records(
        [
            (
                11,
                0,
                {
                    "Name": "alice",
                    "Mechanism": 1,
                    "Salt": b"salt-bytes",
                    "StoredKey": b"stored-key",
                    "ServerKey": b"server-key",
                    "Iterations": 4096,
                },
            )
        ],
        TS,
    )
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(bytes(w.out))
    for extra in ([], ["--json"]):
        _, out, _ = run("--cluster-metadata-decoder", *extra, "--files", log)
        assert "[redacted]" in out and "alice" in out
        for secret in (b"salt-bytes", b"stored-key", b"server-key"):
            import base64

            assert base64.b64encode(secret).decode() not in out


def test_damaged_batch_is_reported_and_the_rest_dumped(tmp_path: Path) -> None:
    log = write_log(tmp_path)
    data = bytearray(log.read_bytes())
    data[106 + 70] ^= 0xFF  # a byte inside the second batch's records: its CRC fails
    log.write_bytes(bytes(data))
    code, out, err = run("--cluster-metadata-decoder", "--files", log)
    assert code == 1
    assert "isvalid: false" in out
    assert "fails its CRC check" in err
    assert '"type":"NO_OP_RECORD"' in out


@pytest.mark.parametrize("other", ["--offsets-decoder", "--transaction-log-decoder"])
def test_decoders_exclude_each_other(tmp_path: Path, other: str) -> None:
    log = write_log(tmp_path)
    code, _, err = run("--cluster-metadata-decoder", other, "--files", log)
    assert code == 2 and "exclude each other" in err


def test_every_type_and_version_round_trips_through_a_log_file(tmp_path: Path) -> None:
    from kraft_fixtures import sample_data

    from kt.storage.metadata_codec import decode_metadata_record, encode_metadata_record
    from kt.storage.metadata_schema import METADATA_RECORDS

    written = []
    w = MetadataBatchWriter(0, 3)
    for key, schema in sorted(METADATA_RECORDS.items()):
        for version in range(schema.valid[0], (schema.valid[1] or 0) + 1):
            data = sample_data(schema, version)
            written.append(decode_metadata_record(encode_metadata_record(key, version, data)))
            w.records([(key, version, data)], TS + len(written))
    meta = tmp_path / "__cluster_metadata-0"
    meta.mkdir()
    log = meta / "00000000000000000000.log"
    log.write_bytes(bytes(w.out))
    code, out, err = run("--cluster-metadata-decoder", "--json", "--files", log)
    assert (code, err) == (0, "")
    values = [json.loads(x)["value"] for x in out.splitlines() if '"type":"record"' in x]
    assert len(values) == len(written) == 36  # 27 record types, 36 type-versions
    for rec, value in zip(written, values, strict=True):
        assert value == json.loads(rec.kafka_json())
        assert (value["type"], value["version"]) == (rec.type_name, rec.version)


def test_shell_reads_bootstrap_checkpoint(tmp_path: Path) -> None:
    from kt.cli import cli

    boot = tmp_path / "bootstrap.checkpoint"
    boot.write_bytes(build_snapshot([(12, 0, {"Name": "metadata.version", "FeatureLevel": 20})]))
    r = CliRunner().invoke(
        cli, ["metadata", "shell", "-s", str(boot), "cat", "/image/features/metadata.version"]
    )
    assert (r.exit_code, r.stdout) == (0, "20\n")


def _fast_and_general(
    monkeypatch: pytest.MonkeyPatch, *args: str | os.PathLike[str]
) -> tuple[tuple[int, str, str], tuple[int, str, str], int]:
    """The dump with the whole-batch fast path, without it, and how many batches took it."""
    import kt.tools.dump_log_metadata as dm

    fast_batches = 0
    real = _plain_batch_lines  # not dm's: an earlier call's patch may still be in place

    def counting(*a: Any) -> list[str] | None:
        nonlocal fast_batches
        lines = real(*a)
        fast_batches += lines is not None
        return lines

    monkeypatch.setattr(dm, "plain_batch_lines", counting)
    fast = run("--cluster-metadata-decoder", *args)
    monkeypatch.setattr(dm, "plain_batch_lines", lambda *a: None)
    general = run("--cluster-metadata-decoder", *args)
    return fast, general, fast_batches


def _all_types_log(d: Path) -> Path:
    from kraft_fixtures import sample_data

    from kt.storage.metadata_schema import METADATA_RECORDS

    w = MetadataBatchWriter(0, 3)
    for key, schema in sorted(METADATA_RECORDS.items()):
        for version in range(schema.valid[0], (schema.valid[1] or 0) + 1):
            w.records([(key, version, sample_data(schema, version))], TS + key)
    # A batch of many records (two-byte offset deltas) and a value over 8 KiB.
    big = {"ResourceType": 2, "ResourceName": "t" * 300, "Name": "x", "Value": "y" * 9000}
    w.records([(20, 0, {})] * 200 + [(4, 0, big)], TS)
    path = d / "all" / "00000000000000000000.log"
    path.parent.mkdir(parents=True)
    path.write_bytes(bytes(w.out))
    return path


@pytest.mark.parametrize("extra", [[], ["--skip-record-metadata"]])
def test_batch_fast_path_prints_what_the_record_loop_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str]
) -> None:
    from kt.storage import record_batch as v2

    logs = [write_log(tmp_path), _all_types_log(tmp_path)]
    # LogAppendTime: the records show the batch's max timestamp.
    data = bytearray(logs[1].read_bytes())
    v2.set_log_append_time(data, TS + 999)
    logs.append(tmp_path / "append-time.log")
    logs[-1].write_bytes(bytes(data))
    # A gap between batches (the base offset is outside the CRC): Kafka's end report.
    first = v2.BatchHeader(*v2._HEADER.unpack_from(data, 0)).size_in_bytes
    struct.pack_into(">q", data, first, 100)
    logs.append(tmp_path / "gap.log")
    logs[-1].write_bytes(bytes(data))
    for log in logs:
        fast, general, taken = _fast_and_general(monkeypatch, *extra, "--files", log)
        assert fast == general
        assert taken > 0, log
        if log.name == "append-time.log":
            assert "LogAppendTime: 1769791435544" in fast[1]
    assert "Non-consecutive offsets" in fast[1] + fast[2]


def test_batch_fast_path_on_damaged_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bytes changed inside records (CRCs fixed up): the fast path gives way, same text."""
    import random

    import crc32c

    from kt.storage import record_batch as v2

    original = [write_log(tmp_path).read_bytes(), _all_types_log(tmp_path).read_bytes()]
    rng = random.Random(22)
    log = tmp_path / "damaged" / "00000000000000000000.log"
    log.parent.mkdir()
    errors = 0
    for n in range(60):
        data = bytearray(original[n % 2])
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(61, len(data))] = rng.randrange(256)
        pos = 0
        while pos + v2.HEADER_SIZE <= len(data):
            h = v2.BatchHeader(*v2._HEADER.unpack_from(data, pos))
            end = pos + h.size_in_bytes
            if h.size_in_bytes < v2.HEADER_SIZE or end > len(data):
                break
            struct.pack_into(">I", data, pos + v2.CRC_OFFSET, crc32c.crc32c(data[pos + 21 : end]))
            pos = end
        log.write_bytes(bytes(data))
        fast, general, _ = _fast_and_general(monkeypatch, "--files", log)
        assert fast == general
        errors += "Error at" in fast[1]
    assert errors > 0


def test_batch_fast_path_on_unusual_record_frames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Frames the fast path checks byte by byte: timestamps of their own (one- and
    two-byte deltas, either side of the base), values either side of a one-byte
    length (63/64 bytes), offset deltas past 63, a key, a header, record attributes.
    The fast path takes or leaves each batch; either way the text is the record loop's."""
    import crc32c

    from kt.storage import record_batch as v2
    from kt.storage.metadata_codec import encode_metadata_record

    def config(size: int) -> bytes:
        value = encode_metadata_record(4, 0, {"ResourceType": 2, "ResourceName": "t", "Name": "n"})
        pad = size - len(value)
        return encode_metadata_record(
            4, 0, {"ResourceType": 2, "ResourceName": "t" * (1 + pad), "Name": "n"}
        )

    sizes = [config(n) for n in (20, 62, 63, 64, 65, 200)]
    assert {len(v) for v in sizes} >= {63, 64}
    noop = b"\x01\x14\x00\x00"
    batches = [
        [v2.RecordSpec(None, v) for v in sizes],
        [
            v2.RecordSpec(None, v, timestamp=TS + d)
            for v, d in zip(sizes, (0, 1, -1, 63, 64, -8000))
        ],
        [v2.RecordSpec(None, sizes[i % 6]) for i in range(150)],
        [v2.RecordSpec(None, noop, timestamp=TS + i % 3) for i in range(130)],
        [v2.RecordSpec(b"k", noop), v2.RecordSpec(None, noop)],
        [v2.RecordSpec(None, noop), v2.RecordSpec(None, noop, headers=[("h", b"1")])],
        # A header whose last byte is 0, like the header count that ends a plain record.
        [v2.RecordSpec(None, noop, headers=[("h", b"\x00")])],
    ]
    data = bytearray()
    offset = 0
    for specs in batches:
        data += v2.build_batch(specs, base_offset=offset, base_timestamp=TS)
        offset += len(specs)
    # Record attributes are unused, but a record with some set still prints: set the
    # first record's of the first batch (its length is one byte, then the attributes).
    attrs = bytearray(v2.build_batch(batches[0], base_offset=offset, base_timestamp=TS))
    attrs[v2.HEADER_SIZE + 1] = 0x40
    struct.pack_into(">I", attrs, v2.CRC_OFFSET, crc32c.crc32c(attrs[21:]))
    data += attrs
    log = tmp_path / "frames" / "00000000000000000000.log"
    log.parent.mkdir()
    log.write_bytes(bytes(data))
    for extra in ([], ["--skip-record-metadata"]):
        fast, general, taken = _fast_and_general(monkeypatch, *extra, "--files", log)
        assert fast == general
        assert fast[0] == 0
        assert taken == 5  # all but the batches with a key and with a header
        if not extra:
            assert f"CreateTime: {TS - 8000} keySize: -1 valueSize: " in fast[1]
            assert "offset: 149 CreateTime" in fast[1]

    # Offset deltas that are not the record's position (as in a damaged batch): one-byte
    # deltas that repeat i mod 64 (and mod 128) past record 63, in short records and in
    # longer ones, and a two-byte delta that repeats i mod 128. Kafka prints base +
    # delta and reports the offsets as non-consecutive; the fast path prints base + i,
    # so it must leave these batches to the record loop.
    odd_batches = [
        (noop, 65, lambda i: i if i < 64 else 0),
        (sizes[2], 65, lambda i: i if i < 64 else 0),
        (noop, 130, lambda i: i if i < 128 else i % 64),
        (noop, 200, lambda i: i if i < 199 else i % 128),
    ]
    data = bytearray()
    followed = []
    offset = 0
    for value, n, delta in odd_batches:
        specs = [v2.RecordSpec(None, value, offset_delta=delta(i)) for i in range(n)]
        data += v2.build_batch(
            specs, base_offset=offset, base_timestamp=TS, last_offset_delta=n - 1
        )
        at = [offset + delta(i) for i in range(n)]
        followed += [f"  {a} is followed by {b}" for a, b in itertools.pairwise(at) if b != a + 1]
        offset += n
    log = tmp_path / "odd" / "00000000000000000000.log"
    log.parent.mkdir()
    log.write_bytes(bytes(data))
    for extra in ([], ["--skip-record-metadata"]):
        fast, general, taken = _fast_and_general(monkeypatch, *extra, "--files", log)
        assert fast == general
        assert taken == 0
        if not extra:
            assert fast[0] == 1
            assert all(line in fast[2] for line in followed)
            assert "| offset: 64 " not in fast[1]
