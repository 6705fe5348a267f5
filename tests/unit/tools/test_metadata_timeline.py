"""`kt metadata timeline`: what the cluster did, filtered, summarized, as text and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from kraft_fixtures import T0, UUIDS, incident_log, partition, pchange, register

from kt.cli import cli
from kt.storage.file_records import FileRecords, LogBatch
from kt.storage.metadata_log import MetadataBatchWriter, read_entries
from kt.storage.metadata_timeline import EVENT_KINDS, summarize, timeline


def kt(*args: str | Path) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, [str(a) for a in args])
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    assert "Traceback" not in r.stdout + r.stderr
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture
def meta(tmp_path: Path) -> Path:
    return incident_log(tmp_path).directory


def events(out: str) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in out.splitlines()]


def test_the_outage_is_told_in_order(meta: Path) -> None:
    code, out, err = kt("metadata", "timeline", meta, "--topic", "orders", "--partition", "1")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("2026-01-30T03:00:04.000Z       15  e1   orders-1")
    assert lines[1] == (
        "2026-01-30T03:12:07.000Z       28  e1   orders-1           leader 2 -> none, "
        "leader epoch 1 (no eligible leader: the partition is offline)"
    )
    assert "isr [2, 3, 1] -> [2] (-[3, 1])" in lines[2]
    assert "leader none -> 2, leader epoch 2 (the partition is back online)" in lines[3]
    assert "leader 2 -> 3, leader epoch 3" in lines[-1]


def test_every_kind_of_change_is_named(meta: Path) -> None:
    _, out, _ = kt("metadata", "timeline", meta, "--json")
    evs = events(out)
    kinds = {e["kind"] for e in evs}
    assert kinds >= {
        "quorum_leader",
        "broker_registered",
        "broker_fenced",
        "broker_unfenced",
        "broker_controlled_shutdown",
        "broker_unregistered",
        "controller_registered",
        "topic_created",
        "topic_deleted",
        "partition_created",
        "leader_changed",
        "isr_changed",
        "config_set",
        "quota_set",
        "acl_created",
        "acl_deleted",
        "scram_user_set",
        "scram_user_deleted",
        "feature_changed",
        "producer_ids_allocated",
    }
    assert kinds <= set(EVENT_KINDS)
    assert [e["offset"] for e in evs] == sorted(e["offset"] for e in evs)
    quorum = [e for e in evs if e["kind"] == "quorum_leader"]
    assert [(q["epoch"], q["details"]["leader"]) for q in quorum] == [(1, 1), (2, 2)]
    assert quorum[1]["subject"] == "controller-2"
    upgrade = [e for e in evs if e["kind"] == "feature_changed"][-1]
    assert upgrade["message"] == "feature metadata.version: 20 -> 21"
    # Secrets never appear.
    assert "hunter2" not in out and "stored-secret" not in out
    pw = next(e for e in evs if e["kind"] == "config_set" and "password" in e["message"])
    assert pw["details"]["value"] == "[redacted]"


def test_filters(meta: Path) -> None:
    _, out, _ = kt(
        "metadata",
        "timeline",
        meta,
        "--broker",
        "2",
        "--json",
        "--since",
        "2026-01-30T03:10:00Z",
        "--until",
        "2026-01-30T03:12:20Z",
    )
    evs = events(out)
    assert [e["kind"] for e in evs] == [
        "broker_fenced",
        "isr_changed",
        "leader_changed",
        "isr_changed",
        "isr_changed",
        "quorum_leader",
        "broker_unfenced",
        "leader_changed",
    ]
    _, out, _ = kt("metadata", "timeline", meta, "--since", "30", "--until", "32", "--json")
    assert [e["offset"] for e in events(out)] == [30, 31, 32]
    _, out, _ = kt("metadata", "timeline", meta, "--kind", "topic_created,topic_deleted", "--json")
    assert [(e["kind"], e["topic"]) for e in events(out)] == [
        ("topic_created", "orders"),
        ("topic_created", "payments"),
        ("topic_deleted", "payments"),
    ]
    code, _, err = kt("metadata", "timeline", meta, "--kind", "nonsense")
    assert code == 2 and "unknown kind" in err


def test_summary(meta: Path) -> None:
    code, out, _ = kt("metadata", "timeline", meta, "--summary")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "42 events, offsets 0..42, 03:00:00..03:12:25 on 2026-01-30 (UTC)"
    assert lines[1] == "metadata quorum leaders: 1 (epoch 1, 03:00:00), 2 (epoch 2, 03:12:09)"
    assert lines[2] == (
        "partition orders-1: 3 leader changes, 2 ISR changes (1 shrinking), "
        "offline 03:12:07-03:12:19 (12 s), last leader 3 (epoch 3)"
    )
    assert (
        "broker 2: 1 registration, fenced 03:12:07-03:12:19 (12 s), leaderships gained 1, lost 2"
        in lines
    )
    code, out, _ = kt("metadata", "timeline", meta, "--summary", "--json")
    doc = json.loads(out)
    p = doc["partitions"][0]
    assert (p["topic"], p["partition"], p["offline_ms"], p["leader_changes"]) == (
        "orders",
        1,
        12000,
        3,
    )
    assert p["offline"][0]["start_offset"] == 28 and p["offline"][0]["end_offset"] == 32


def test_timeline_from_a_truncated_log_starts_at_its_snapshot(tmp_path: Path) -> None:
    info = incident_log(tmp_path)
    assert info.snapshot_end == 30
    # The log as Kafka leaves it after deleting what the snapshot covers: from offset 30.
    kept = bytearray()
    for seg in info.segments:
        with open(seg, "rb") as f:
            fr = FileRecords(f)
            for b in fr.batches(0, fr.size):
                assert isinstance(b, LogBatch)
                if b.base_offset >= 30:
                    kept += bytes(b.data)
        seg.unlink()
    (info.directory / f"{30:020d}.log").write_bytes(bytes(kept))
    code, out, err = kt("metadata", "timeline", info.directory, "--topic", "orders", "--json")
    assert (code, err) == (0, "")
    evs = events(out)
    # The snapshot's state is known: the partition was offline under leader none.
    back = next(e for e in evs if e["kind"] == "leader_changed")
    assert back["offset"] == 32 and back["details"]["previous_leader"] == -1
    assert back["details"]["leader_epoch"] == 2
    # Without the snapshot the timeline warns that it starts from nothing.
    next(info.directory.glob("*.checkpoint")).unlink()
    code, _, err = kt("metadata", "timeline", info.directory)
    assert code == 0 and "no snapshot ends at or before it" in err


def test_an_open_outage_and_a_decode_error(tmp_path: Path) -> None:
    w = MetadataBatchWriter(0, 1)
    w.records(
        [
            register(1, 1, UUIDS["b1"]),
            (2, 0, {"Name": "t", "TopicId": UUIDS["orders"]}),
            partition("orders", 0, [1], 1),
        ],
        T0,
    )
    w.records([pchange("orders", 0, Leader=-1)], T0 + 1000)
    w.raw([b"\x01\x63\x00"], T0 + 61_000)
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(bytes(w.out))
    code, out, err = kt("metadata", "timeline", log, "--summary")
    assert code == 1 and "did not decode" in err
    assert "offline 03:00:01- (still at the end, 60 s so far)" in out
    evs = list(timeline(read_entries(log)))
    assert evs[-1].kind == "decode_error" and "Unknown metadata id 99" in evs[-1].message
    s = summarize(evs)
    assert s.partitions[("t", 0)].offline[0].end is None


def test_summary_groups_partitions_with_the_same_story(tmp_path: Path) -> None:
    w = MetadataBatchWriter(0, 1)
    w.records(
        [register(1, 1, UUIDS["b1"]), (2, 0, {"Name": "t", "TopicId": UUIDS["orders"]})]
        + [partition("orders", p, [1], 1) for p in range(5)],
        T0,
    )
    w.records([pchange("orders", p, Leader=-1) for p in range(5)], T0 + 1000)
    w.records([pchange("orders", 0, Leader=1)], T0 + 3000)
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(bytes(w.out))
    code, out, _ = kt("metadata", "timeline", log, "--summary")
    assert code == 0
    lines = out.splitlines()
    assert (
        "partition t-0: 2 leader changes, offline 03:00:01-03:00:03 (2 s), "
        "last leader 1 (epoch 2)" in lines
    )
    assert (
        "4 partitions (t-1, t-2, t-3 and 1 more): 1 leader change, offline 03:00:01- "
        "(still at the end, 2 s so far), last leader none (offline) (epoch 1)" in lines
    )
