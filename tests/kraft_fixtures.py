"""KRaft metadata fixtures written with kt's own encoder (no real KRaft log is a fixture).

`sample_data` fills every field of a metadata record schema with a non-default
value; `incident_log` writes a small cluster's history as a `__cluster_metadata-0`
directory: controller elections, broker registrations and fencing, a topic's
partitions losing and regaining their leader, configs, quotas, ACLs, SCRAM users,
producer-id blocks, a deleted topic, a rolled segment and a snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kt.storage.metadata_log import (
    MetadataBatchWriter,
    build_snapshot,
    snapshot_file_name,
)
from kt.storage.metadata_schema import Field, MessageSchema, in_range

UUIDS = {
    "orders": "x2Hj2kQ-SvSGmSg0wP3EYA",
    "payments": "Lr4wgsBnRZGP7hjZcn3vzQ",
    "b1": "Q1ZOSDkyUUxTQ1NCRlJFQQ",
    "b2": "AAECAwQFBgcICQoLDA0ODw",
    "b3": "EBESExQVFhcYGRobHB0eHw",
    "acl": "ICEiIyQlJicoKSorLC0uLw",
    "dir": "MDEyMzQ1Njc4OTo7PD0-Pw",
}


def _value(f: Field, t: str, version: int, i: int) -> Any:
    if t in ("int8", "int16", "int32", "int64"):
        return 7 + i
    if t == "uint16":
        return 9092 + i
    if t == "float64":
        return 1048576.5
    if t == "bool":
        return f.default != "true"
    if t == "string":
        return f"{f.name.lower()}-{i}"
    if t == "bytes":
        return bytes([1, 2, 3, i])
    if t == "uuid":
        return UUIDS["b2"]
    return sample_fields(f.fields, version)


def sample_fields(fields: tuple[Field, ...], version: int) -> dict[str, Any]:
    """Every field of `version` set to a non-default value."""
    out: dict[str, Any] = {}
    for f in fields:
        if not in_range(version, f.versions):
            continue
        if f.is_array:
            out[f.name] = [_value(f, f.element, version, i) for i in range(2)]
        else:
            out[f.name] = _value(f, f.type, version, 0)
    return out


def sample_data(schema: MessageSchema, version: int) -> dict[str, Any]:
    """A record of `schema` at `version` with no field at its default."""
    return sample_fields(schema.fields, version)


T0 = 1_769_742_000_000  # 2026-01-30T03:00:00Z


def endpoint(port: int) -> dict[str, Any]:
    return {"Name": "PLAINTEXT", "Host": "localhost", "Port": port, "SecurityProtocol": 0}


def register(broker: int, epoch: int, incarnation: str) -> tuple[int, int, dict[str, Any]]:
    return (
        0,
        3,
        {
            "BrokerId": broker,
            "IncarnationId": incarnation,
            "BrokerEpoch": epoch,
            "EndPoints": [endpoint(9090 + broker)],
            "Features": [
                {"Name": "metadata.version", "MinSupportedVersion": 1, "MaxSupportedVersion": 21}
            ],
            "Rack": f"rack-{broker}",
            "Fenced": True,
            "LogDirs": [UUIDS["dir"]],
        },
    )


def pchange(topic: str, p: int, **fields: Any) -> tuple[int, int, dict[str, Any]]:
    return (5, 2, {"PartitionId": p, "TopicId": UUIDS[topic], **fields})


def partition(
    topic: str, p: int, replicas: list[int], leader: int
) -> tuple[int, int, dict[str, Any]]:
    return (
        3,
        2,
        {
            "PartitionId": p,
            "TopicId": UUIDS[topic],
            "Replicas": replicas,
            "Isr": replicas,
            "Leader": leader,
            "LeaderEpoch": 0,
            "PartitionEpoch": 0,
            "Directories": [UUIDS["dir"]] * len(replicas),
        },
    )


def leader_change(leader: int) -> tuple[int, dict[str, Any]]:
    voters = [{"VoterId": v} for v in (1, 2, 3)]
    return (2, {"Version": 0, "LeaderId": leader, "Voters": voters, "GrantingVoters": voters[:2]})


@dataclass
class IncidentLog:
    """What `incident_log` wrote, for the tests' expectations."""

    directory: Path
    segments: list[Path] = field(default_factory=list)
    snapshot: Path | None = None
    snapshot_end: int = 0
    end_offset: int = 0
    times: dict[str, int] = field(default_factory=dict)  # event -> timestamp
    offsets: dict[str, int] = field(default_factory=dict)  # event -> offset


def incident_history() -> list[tuple[str, int, int, list[Any]]]:
    """(label, timestamp, raft epoch, batch) in order: ("c", ...) control, ("r", ...) data."""
    t = T0
    h: list[tuple[str, int, int, list[Any]]] = []
    h.append(("c", t, 1, [leader_change(1)]))
    h.append(
        (
            "r",
            t,
            1,
            [
                (23, 0, {"Name": "Bootstrap records"}),
                (12, 0, {"Name": "metadata.version", "FeatureLevel": 20}),
                (24, 0, {}),
            ],
        )
    )
    h.append(
        (
            "r",
            t + 1000,
            1,
            [
                (
                    27,
                    0,
                    {
                        "ControllerId": c,
                        "IncarnationId": UUIDS["b1"],
                        "ZkMigrationReady": False,
                        "EndPoints": [
                            {
                                "Name": "CONTROLLER",
                                "Host": "localhost",
                                "Port": 9093 + c,
                                "SecurityProtocol": 0,
                            }
                        ],
                        "Features": [],
                    },
                )
                for c in (1, 2, 3)
            ],
        )
    )
    h.append(("r", t + 2000, 1, [register(b, 10 + b, UUIDS[f"b{b}"]) for b in (1, 2, 3)]))
    h.append(("r", t + 3000, 1, [(8, 0, {"Id": b, "Epoch": 10 + b}) for b in (1, 2, 3)]))
    h.append(
        (
            "r",
            t + 4000,
            1,
            [
                (2, 0, {"Name": "orders", "TopicId": UUIDS["orders"]}),
                partition("orders", 0, [1, 2, 3], 1),
                partition("orders", 1, [2, 3, 1], 2),
                partition("orders", 2, [3, 1, 2], 3),
                (
                    4,
                    0,
                    {
                        "ResourceType": 2,
                        "ResourceName": "orders",
                        "Name": "min.insync.replicas",
                        "Value": "2",
                    },
                ),
            ],
        )
    )
    h.append(
        (
            "r",
            t + 5000,
            1,
            [
                (
                    4,
                    0,
                    {
                        "ResourceType": 4,
                        "ResourceName": "",
                        "Name": "ssl.keystore.password",
                        "Value": "hunter2",
                    },
                ),
                (
                    14,
                    0,
                    {
                        "Entity": [{"EntityType": "user", "EntityName": "alice"}],
                        "Key": "producer_byte_rate",
                        "Value": 1048576.0,
                        "Remove": False,
                    },
                ),
                (
                    18,
                    0,
                    {
                        "Id": UUIDS["acl"],
                        "ResourceType": 2,
                        "ResourceName": "orders",
                        "PatternType": 3,
                        "Principal": "User:alice",
                        "Host": "*",
                        "Operation": 3,
                        "PermissionType": 3,
                    },
                ),
                (
                    11,
                    0,
                    {
                        "Name": "alice",
                        "Mechanism": 1,
                        "Salt": b"salty",
                        "StoredKey": b"stored-secret",
                        "ServerKey": b"server-secret",
                        "Iterations": 4096,
                    },
                ),
                (15, 0, {"BrokerId": 1, "BrokerEpoch": 11, "NextProducerId": 1000}),
                (2, 0, {"Name": "payments", "TopicId": UUIDS["payments"]}),
                partition("payments", 0, [1, 2], 1),
                (12, 0, {"Name": "metadata.version", "FeatureLevel": 21}),
            ],
        )
    )
    # Broker 2 dies at 03:12:07: fenced, leadership of orders-1 lost (offline: no ISR left
    # that is alive), and comes back at 03:12:19.
    t2 = T0 + 12 * 60_000 + 7_000
    h.append(
        (
            "r",
            t2,
            1,
            [
                (17, 1, {"BrokerId": 2, "BrokerEpoch": 12, "Fenced": 1}),
                pchange("orders", 0, Isr=[1, 3]),
                pchange("orders", 1, Leader=-1, Isr=[2], LeaderRecoveryState=-1),
                pchange("orders", 2, Isr=[3, 1]),
            ],
        )
    )
    h.append(("c", t2 + 2000, 2, [leader_change(2)]))  # the controller quorum moves too
    t3 = t2 + 12_000
    h.append(
        (
            "r",
            t3,
            2,
            [
                (8, 0, {"Id": 2, "Epoch": 12}),
                pchange("orders", 1, Leader=2, Isr=[2]),
            ],
        )
    )
    h.append(
        (
            "r",
            t3 + 5000,
            2,
            [
                pchange("orders", 1, Isr=[2, 3, 1]),
                pchange("orders", 0, Isr=[1, 3, 2]),
                pchange("orders", 2, Isr=[3, 1, 2]),
                pchange("orders", 1, Leader=3),
            ],
        )
    )
    h.append(
        (
            "r",
            t3 + 6000,
            2,
            [
                (19, 0, {"Id": UUIDS["acl"]}),
                (22, 0, {"Name": "alice", "Mechanism": 1}),
                (9, 0, {"TopicId": UUIDS["payments"]}),
                (17, 2, {"BrokerId": 3, "BrokerEpoch": 13, "InControlledShutdown": 1}),
                (7, 0, {"Id": 3, "Epoch": 13}),
                (1, 0, {"BrokerId": 3, "BrokerEpoch": 13}),
                (20, 0, {}),
            ],
        )
    )
    return h


def incident_log(root: Path, *, roll_after: int = 6, snapshot_after: int = 8) -> IncidentLog:
    """Write the incident's metadata log: two segments, a snapshot after some batches."""
    d = root / "__cluster_metadata-0"
    d.mkdir(parents=True, exist_ok=True)
    info = IncidentLog(d)
    w = MetadataBatchWriter(0, 1)
    image_records: list[tuple[int, int, dict[str, Any]]] = []
    segment_start = 0
    history = incident_history()
    for i, (kind, ts, epoch, batch) in enumerate(history):
        if i == roll_after:
            path = d / f"{segment_start:020d}.log"
            path.write_bytes(bytes(w.out))
            info.segments.append(path)
            w.out.clear()
            segment_start = w.next_offset
        w.epoch = epoch
        if kind == "c":
            w.control(batch, ts)
        else:
            w.records(batch, ts)
            image_records.extend(batch)
        if i + 1 == snapshot_after:
            info.snapshot_end = w.next_offset
            info.snapshot = d / snapshot_file_name(w.next_offset, epoch)
            info.snapshot.write_bytes(_snapshot_of(image_records, ts, epoch))
    path = d / f"{segment_start:020d}.log"
    path.write_bytes(bytes(w.out))
    info.segments.append(path)
    info.end_offset = w.next_offset
    return info


def _snapshot_of(records: list[tuple[int, int, dict[str, Any]]], ts: int, epoch: int) -> bytes:
    """A snapshot holding the image after `records`, computed by kt's own replay."""
    from kt.storage.metadata_codec import decode_metadata_record, encode_metadata_record
    from kt.storage.metadata_image import MetadataImage

    image = MetadataImage()
    for off, (k, v, d) in enumerate(records):
        # Through the codec, so every field holds what a reader of the log would see.
        rec = decode_metadata_record(encode_metadata_record(k, v, d))
        image.apply_data(k, v, rec.data, off, ts)
    return build_snapshot(
        image.to_records(), last_contained_timestamp=ts, timestamp=ts, epoch=epoch
    )
