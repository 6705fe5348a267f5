"""`kt metadata shell`: the image as of any offset or time, browsed like kafka-metadata-shell."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kraft_fixtures import T0, UUIDS, incident_log, partition, pchange, register

from kt.cli import cli
from kt.storage.metadata_codec import decode_metadata_record, encode_metadata_record
from kt.storage.metadata_image import MetadataImage
from kt.storage.metadata_log import MetadataBatchWriter, build_snapshot, metadata_files
from kt.storage.metadata_replay import AsOf, replay_files, replay_path
from kt.tools.metadata_shell import Shell


def kt(*args: str | Path, stdin: str | None = None) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, [str(a) for a in args], input=stdin)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    assert "Traceback" not in r.stdout + r.stderr
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture
def incident(tmp_path: Path):  # type: ignore[no-untyped-def]
    return incident_log(tmp_path)


def test_the_tree_has_kafkas_layout(incident) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = kt("metadata", "shell", "-s", incident.directory, "ls", "/image")
    assert code == 0
    assert out.split() == [
        "acls",
        "clientQuotas",
        "cluster",
        "configs",
        "delegationToken",
        "features",
        "producerIds",
        "provenance",
        "scram",
        "topics",
    ]
    _, out, _ = kt("metadata", "shell", "-s", incident.directory, "ls", "/image/topics/byName")
    assert out.split() == ["orders"]  # payments was deleted at the end
    _, out, _ = kt(
        "metadata", "shell", "-s", incident.directory, "ls", "/image/topics/byName/orders"
    )
    assert out.split() == ["0", "1", "2", "id", "name"]
    _, out, _ = kt(
        "metadata",
        "shell",
        "-s",
        incident.directory,
        "cat",
        f"/image/topics/byId/{UUIDS['orders']}/name",
    )
    assert out == "orders\n"


def test_as_of_offset_and_time(incident) -> None:  # type: ignore[no-untyped-def]
    d = incident.directory
    # During the outage orders-1 has no leader.
    t_outage = "2026-01-30T03:12:10Z"
    code, out, _ = kt(
        "metadata", "shell", "-s", d, "--as-of", t_outage, "cat", "/image/topics/byName/orders/1"
    )
    assert code == 0 and "leader=-1," in out and "isr=[2]" in out
    _, out, _ = kt("metadata", "shell", "-s", d, "cat", "/image/topics/byName/orders/1")
    assert "leader=3," in out and "isr=[2, 3, 1]" in out and "leaderEpoch=3" in out
    _, out, _ = kt("metadata", "shell", "-s", d, "--as-of", "20", "cat", "/image/provenance")
    assert out.startswith("offset 20, ")
    _, out, _ = kt("metadata", "shell", "-s", d, "--as-of", "20", "ls", "/image/topics/byName")
    assert out.split() == ["orders"]
    _, out, _ = kt("metadata", "shell", "-s", d, "--as-of", "23", "ls", "/image/topics/byName")
    assert out.split() == ["orders", "payments"]
    _, out, _ = kt("metadata", "shell", "-s", d, "--as-of", "3", "ls", "/image/topics/byName")
    assert out == ""


def test_brokers_fencing_and_secrets(incident) -> None:  # type: ignore[no-untyped-def]
    d = incident.directory
    _, out, _ = kt(
        "metadata",
        "shell",
        "-s",
        d,
        "--as-of",
        "2026-01-30T03:12:08Z",
        "cat",
        "/image/cluster/brokers/2",
    )
    assert "fenced=true" in out and "PLAINTEXT://localhost:9092" in out
    _, out, _ = kt("metadata", "shell", "-s", d, "ls", "/image/cluster/brokers")
    assert out.split() == ["1", "2"]  # broker 3 unregistered at the end
    code, out, _ = kt(
        "metadata", "shell", "-s", d, "--as-of", "2026-01-30T03:12:08Z", "tree", "/image"
    )
    assert code == 0
    assert "SCRAM-SHA-256:" in out and "alice: ScramCredentialData(salt=[redacted]" in out
    assert "ssl.keystore.password: [redacted]" in out
    assert "hunter2" not in out and "secret" not in out
    assert "min.insync.replicas: 2" in out
    assert "user=alice:" in out and "producer_byte_rate: 1048576" in out


def test_errors_and_scripts(incident) -> None:  # type: ignore[no-untyped-def]
    d = incident.directory
    code, out, err = kt("metadata", "shell", "-s", d, "cat", "/image/nope")
    assert code == 1 and err == "kt: error: cat: /image/nope: no such file or directory\n"
    code, _, err = kt("metadata", "shell", "-s", d, "frobnicate")
    assert code == 1 and "unknown command" in err
    code, _, err = kt("metadata", "shell", "-s", d / "missing", "ls")
    assert code == 2 and err.startswith("kt: error: ")
    code, _, err = kt("metadata", "shell", "-s", d, "--as-of", "yesterday", "ls")
    assert code == 2 and "ISO-8601" in err
    script = "cd /image/topics/byName\nls\ncd orders\npwd\nfind .\ncat name\n"
    code, out, _ = kt("metadata", "shell", "-s", d, stdin=script)
    assert code == 0
    assert out.splitlines()[:3] == [
        "orders",
        "/image/topics/byName/orders",
        "/image/topics/byName/orders",
    ]
    assert out.splitlines()[-1] == "orders"


def test_globs_and_relative_paths() -> None:
    sh_out: list[str] = []
    sh = Shell(
        {"image": {"a": {"x": "1", "y": "2"}, "b": {"x": "3"}}},
        out=sh_out.append,
        err=sh_out.append,
    )
    assert sh.run("cat /image/*/x")
    assert sh_out == ["1", "3"]
    sh_out.clear()
    assert sh.run("cd /image/a") and sh.run("cat ../b/x y")
    assert sh_out == ["3", "2"]
    assert sh.complete("../b/") == ["../b/x"]
    assert not sh.run("cd x")


def test_snapshot_and_log_replay_give_the_same_image(incident) -> None:  # type: ignore[no-untyped-def]
    logs, snaps = metadata_files(incident.directory)
    end = incident.snapshot_end
    from_log = replay_files(None, logs, AsOf(offset=end - 1))
    from_snapshot = replay_files(snaps[0], [], None)
    assert from_snapshot.image.content() == from_log.image.content()
    assert from_snapshot.image.provenance.offset == from_log.image.provenance.offset == end - 1
    # A snapshot followed by the log after it equals the whole log.
    assert (
        replay_path(incident.directory).image.content() == replay_files(None, logs).image.content()
    )
    assert replay_path(incident.directory).snapshot == snaps[0]


def test_a_damaged_record_is_skipped_with_a_warning(tmp_path: Path) -> None:
    w = MetadataBatchWriter(0, 1)
    w.records([(2, 0, {"Name": "orders", "TopicId": UUIDS["orders"]})], T0)
    w.raw([b"\x01\x63\x00"], T0 + 1)
    w.records([partition("orders", 0, [1], 1)], T0 + 2)
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(bytes(w.out))
    code, out, err = kt("metadata", "shell", "-s", log, "ls", "/image/topics/byName/orders")
    assert code == 0 and "0" in out.split()
    assert "1 record could not be decoded" in err and "Unknown metadata id 99" in err


# --- the equality on generated histories -------------------------------------------

BROKERS = [1, 2, 3, 4]
TOPICS = ["orders", "payments"]


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[int, int, dict]]:  # type: ignore[type-arg]
    recs: list[tuple[int, int, dict]] = []  # type: ignore[type-arg]
    for b in BROKERS:
        recs.append(register(b, 10 + b, UUIDS["b1"]))
    live_topics: set[str] = set()
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(
            st.sampled_from(
                [
                    "topic",
                    "remove",
                    "change",
                    "fence",
                    "unfence",
                    "config",
                    "quota",
                    "feature",
                    "pid",
                    "txn",
                ]
            )
        )
        topic = draw(st.sampled_from(TOPICS))
        if kind == "topic" and topic not in live_topics:
            live_topics.add(topic)
            recs.append((2, 0, {"Name": topic, "TopicId": UUIDS[topic]}))
            for p in range(2):
                recs.append(partition(topic, p, [1, 2, 3], 1))
        elif kind == "remove" and topic in live_topics:
            live_topics.discard(topic)
            recs.append((9, 0, {"TopicId": UUIDS[topic]}))
        elif kind == "change" and topic in live_topics:
            fields: dict = {}  # type: ignore[type-arg]
            if draw(st.booleans()):
                fields["Leader"] = draw(st.sampled_from([-1, 1, 2, 3]))
            if draw(st.booleans()):
                fields["Isr"] = draw(st.lists(st.sampled_from(BROKERS), max_size=3, unique=True))
            if draw(st.booleans()):
                fields["EligibleLeaderReplicas"] = [4]
            recs.append(pchange(topic, draw(st.integers(0, 1)), **fields))
        elif kind == "fence":
            b = draw(st.sampled_from(BROKERS))
            recs.append((17, 0, {"BrokerId": b, "BrokerEpoch": 10 + b, "Fenced": 1}))
        elif kind == "unfence":
            b = draw(st.sampled_from(BROKERS))
            recs.append((8, 0, {"Id": b, "Epoch": 10 + b}))
        elif kind == "config":
            recs.append(
                (
                    4,
                    0,
                    {
                        "ResourceType": 2,
                        "ResourceName": topic,
                        "Name": "retention.ms",
                        "Value": draw(st.sampled_from([None, "1000", "2000"])),
                    },
                )
            )
        elif kind == "quota":
            recs.append(
                (
                    14,
                    0,
                    {
                        "Entity": [{"EntityType": "user", "EntityName": None}],
                        "Key": "consumer_byte_rate",
                        "Value": 5.0,
                        "Remove": draw(st.booleans()),
                    },
                )
            )
        elif kind == "feature":
            recs.append(
                (12, 0, {"Name": "metadata.version", "FeatureLevel": draw(st.integers(1, 25))})
            )
        elif kind == "pid":
            recs.append(
                (
                    15,
                    0,
                    {
                        "BrokerId": 1,
                        "BrokerEpoch": 11,
                        "NextProducerId": draw(st.integers(0, 10**6)),
                    },
                )
            )
        elif kind == "txn":
            recs.append((23, 0, {"Name": "t"}))
            recs.append((4, 0, {"ResourceType": 4, "ResourceName": "", "Name": "x", "Value": "1"}))
            recs.append((24 if draw(st.booleans()) else 25, 0, {}))
    return recs


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(histories(), st.data())
def test_snapshot_at_any_offset_equals_log_replay(tmp_path: Path, recs, data) -> None:  # type: ignore[no-untyped-def]
    cut = data.draw(st.integers(0, len(recs)))
    w = MetadataBatchWriter(0, 1)
    for i in range(0, len(recs), 3):
        w.records(recs[i : i + 3], T0 + i)
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(bytes(w.out))
    image = MetadataImage()
    for off, (k, v, d) in enumerate(recs[:cut]):
        image.apply_data(k, v, decode_metadata_record(encode_metadata_record(k, v, d)).data, off)
    if image.pending is not None:
        return  # a snapshot is never taken inside a metadata transaction
    snap = tmp_path / f"{cut:020d}-0000000001.checkpoint"
    snap.write_bytes(build_snapshot(image.to_records()))
    from_snapshot = replay_files(snap, [], None).image
    from_log = replay_files(None, [log], AsOf(offset=cut - 1)).image
    assert from_snapshot.content() == from_log.content()
    # And the snapshot followed by the rest of the log is the whole log.
    rest = replay_files(snap, [log], None).image
    assert rest.content() == replay_files(None, [log], None).image.content()
    log.unlink()
    snap.unlink()


def test_interactive_on_a_terminal(incident) -> None:  # type: ignore[no-untyped-def]
    """The shell on a real pseudo-terminal: banner, prompt, commands, tab, exit."""
    import os
    import pty
    import select
    import subprocess
    import sys
    import time

    main, child = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kt.cli", "metadata", "shell", "-s", str(incident.directory)],
        stdin=child,
        stdout=child,
        stderr=child,
        close_fds=True,
    )
    os.close(child)
    seen = b""

    def until(token: bytes, deadline: float = 120.0) -> None:
        nonlocal seen
        end = time.monotonic() + deadline
        while token not in seen:
            assert time.monotonic() < end, f"no {token!r} in {seen[-500:]!r}"
            ready, _, _ = select.select([main], [], [], 1.0)
            if ready:
                try:
                    seen += os.read(main, 4096)
                except OSError:
                    break

    try:
        until(b"kt-metadata:/> ")
        assert b"image at offset 43, epoch 2" in seen
        os.write(main, b"cd /image/topics/byN\t\n")  # tab completes the path
        until(b"kt-metadata:/image/topics/byName> ")
        os.write(main, b"ls\n")
        until(b"orders")
        os.write(main, b"exit\n")
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(main)


def test_json_output_for_scripts(incident) -> None:  # type: ignore[no-untyped-def]
    import json

    d = incident.directory

    def ndjson(*command: str, stdin: str | None = None) -> list[dict[str, Any]]:
        code, out, err = kt("metadata", "shell", "-s", d, "--json", *command, stdin=stdin)
        assert (code, err) == (0, "")
        return [json.loads(line) for line in out.splitlines()]

    listing = ndjson("ls", "/image/topics/byName/orders", "/image/topics/byName/orders/name")
    assert [e["name"] for e in listing] == ["0", "1", "2", "id", "name", "name"]
    assert {e["type"] for e in listing} == {"file"}
    assert listing[-1]["path"] == "/image/topics/byName/orders/name"
    # cat: one object per file, the text `cat` prints as the value.
    _, text, _ = kt("metadata", "shell", "-s", d, "cat", "/image/topics/byName/orders/1")
    cats = ndjson("cat", "/image/topics/byName/orders/1", "/image/topics/byName/orders/name")
    assert cats == [
        {"path": "/image/topics/byName/orders/1", "value": text.rstrip("\n")},
        {"path": "/image/topics/byName/orders/name", "value": "orders"},
    ]
    # find: every path under the start, directories and files, in find's order.
    _, text, _ = kt("metadata", "shell", "-s", d, "find", "/image/cluster")
    found = ndjson("find", "/image/cluster")
    assert [e["path"] for e in found] == text.splitlines()
    assert found[0] == {"path": "/image/cluster", "name": "cluster", "type": "directory"}
    assert {"path": "/image/cluster/brokers/1", "name": "1", "type": "file"} in found
    # tree: the subtree as one object; secrets stay redacted (alice exists at 03:12:08).
    (tree,) = ndjson("--as-of", "2026-01-30T03:12:08Z", "tree", "/image/scram")
    assert tree["path"] == "/image/scram"
    assert isinstance(tree["tree"], dict) and "[redacted]" in json.dumps(tree["tree"])
    assert "hunter2" not in json.dumps(tree["tree"])
    # Piped commands: every command's output is NDJSON.
    script = "cd /image/topics/byName\npwd\nls\nhistory\n"
    assert ndjson(stdin=script) == [
        {"path": "/image/topics/byName"},
        {"path": "/image/topics/byName/orders", "name": "orders", "type": "directory"},
        {"index": 1, "command": "cd /image/topics/byName"},
        {"index": 2, "command": "pwd"},
        {"index": 3, "command": "ls"},
        {"index": 4, "command": "history"},
    ]
    # Errors stay one text line on stderr, exit 1.
    code, out, err = kt("metadata", "shell", "-s", d, "--json", "cat", "/image/nope")
    assert (code, out) == (1, "")
    assert err == "kt: error: cat: /image/nope: no such file or directory\n"
