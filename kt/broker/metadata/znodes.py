"""Kafka's ZooKeeper layout: znode paths and their payloads, encoded as Kafka writes them.

Pure functions only (no store, no I/O). Payloads are compact JSON
(`separators=(",", ":")`, UTF-8 as Jackson writes it) with the keys in the order of
Kafka's ZkData.scala encoders, so a Kafka tool reading a kt-written ZooKeeper (or the
other way round) finds exactly what it expects. Decoders accept the older versions
Kafka still reads.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# --- paths --------------------------------------------------------------------------

CONSUMERS = "/consumers"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = ISR_CHANGE_NOTIFICATION + "/isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = LOG_DIR_EVENT_NOTIFICATION + "/log_dir_event_"
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = CONFIG_CHANGES + "/config_change_"
CLUSTER_ID = "/cluster/id"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
FEATURE = "/feature"

# Kafka's ConfigType.all: the entity types under /config.
CONFIG_TYPES = ("topics", "clients", "users", "brokers", "ips")
DEFAULT_ENTITY = "<default>"

# ZkData.PersistentZkPaths: created by every broker at startup when missing.
PERSISTENT_PATHS = (
    CONSUMERS,
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION,
    PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    *(f"{CONFIG}/{t}" for t in CONFIG_TYPES),
)

PRODUCER_ID_BLOCK_SIZE = 1000


def broker_path(broker_id: int) -> str:
    """/brokers/ids/N: a live broker's ephemeral registration."""
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    """/brokers/topics/T: a topic's replica assignment and id."""
    return f"{BROKER_TOPICS}/{topic}"


def topic_partitions_path(topic: str) -> str:
    """/brokers/topics/T/partitions."""
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    """/brokers/topics/T/partitions/P (no data)."""
    return f"{topic_partitions_path(topic)}/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    """/brokers/topics/T/partitions/P/state: leader, ISR and epochs."""
    return f"{partition_path(topic, partition)}/state"


def delete_topic_path(topic: str) -> str:
    """/admin/delete_topics/T: the marker of a topic being deleted."""
    return f"{DELETE_TOPICS}/{topic}"


def config_entity_path(entity_type: str, name: str) -> str:
    """/config/<type>/<name>, e.g. /config/topics/T or /config/brokers/<default>."""
    return f"{CONFIG}/{entity_type}/{name}"


# --- JSON helpers -------------------------------------------------------------------


class ZnodeFormatError(ValueError):
    """A znode's payload is not what Kafka writes there."""


def _dumps(doc: Any) -> bytes:
    # Jackson writes compact JSON and raw UTF-8 (no \\u escapes for non-ASCII).
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _loads(data: bytes | None, what: str) -> dict[str, Any]:
    if not data:
        raise ZnodeFormatError(f"{what}: empty znode")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ZnodeFormatError(f"{what}: not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ZnodeFormatError(f"{what}: expected a JSON object")
    return doc


def _int_list(value: Any, what: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) for v in value):
        raise ZnodeFormatError(f"{what}: expected a list of integers")
    return list(value)


def _partition_map(value: Any, what: str) -> dict[int, list[int]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ZnodeFormatError(f"{what}: expected an object")
    try:
        return {int(k): _int_list(v, what) for k, v in value.items()}
    except ValueError:
        raise ZnodeFormatError(f"{what}: partition keys must be integers") from None


def _encode_partition_map(m: Mapping[int, list[int]]) -> dict[str, list[int]]:
    return {str(p): list(m[p]) for p in sorted(m)}


# --- topic ids (Kafka's Uuid) ---------------------------------------------------------


def uuid_to_string(uuid: bytes) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding (22 characters)."""
    if len(uuid) != 16:
        raise ValueError("a Kafka Uuid has 16 bytes")
    return base64.urlsafe_b64encode(uuid).decode("ascii").rstrip("=")


def uuid_from_string(text: str) -> bytes:
    """Kafka's Uuid.fromString (ZnodeFormatError unless 16 bytes of URL-safe base64)."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError):
        raise ZnodeFormatError(f"invalid Kafka Uuid {text!r}") from None
    if len(raw) != 16:
        raise ZnodeFormatError(f"invalid Kafka Uuid {text!r}: {len(raw)} bytes")
    return raw


# --- /brokers/ids/N -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener of a broker: `PLAINTEXT://host:9092` plus its security protocol."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def connection_string(self) -> str:
        """`LISTENER://host:port`, with IPv6 hosts in brackets as Kafka writes them."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """The payload of /brokers/ids/N (BrokerIdZNode, version 5)."""

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    timestamp_ms: int
    rack: str | None = None
    jmx_port: int = -1
    # feature name -> (min_version, max_version) this broker supports
    features: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    version: int = 5

    def endpoint(self, listener: str) -> Endpoint | None:
        """The endpoint of the named listener, if the broker has it."""
        for e in self.endpoints:
            if e.listener == listener:
                return e
        return None


def encode_broker(reg: BrokerRegistration) -> bytes:
    """Kafka's BrokerIdZNode.encode (v5; v4 leaves out `features`)."""
    plaintext = next((e for e in reg.endpoints if e.security_protocol == "PLAINTEXT"), None)
    doc: dict[str, Any] = {
        "version": reg.version,
        "host": plaintext.host if plaintext else None,
        "port": plaintext.port if plaintext else -1,
        "endpoints": [e.connection_string() for e in reg.endpoints],
        "listener_security_protocol_map": {e.listener: e.security_protocol for e in reg.endpoints},
        "jmx_port": reg.jmx_port,
        "timestamp": str(reg.timestamp_ms),
    }
    if reg.rack is not None:
        doc["rack"] = reg.rack
    if reg.version >= 5:
        doc["features"] = {
            name: {"min_version": lo, "max_version": hi}
            for name, (lo, hi) in sorted(reg.features.items())
        }
    return _dumps(doc)


def _parse_endpoint(text: str, protocols: Mapping[str, str]) -> Endpoint:
    listener, sep, rest = text.partition("://")
    host, _, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ZnodeFormatError(f"broker endpoint {text!r} is not LISTENER://host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return Endpoint(listener, host, int(port), protocols.get(listener, listener))


def decode_broker(broker_id: int, data: bytes) -> BrokerRegistration:
    """Kafka's BrokerIdZNode.decode (versions 1 to 5)."""
    doc = _loads(data, f"broker {broker_id}")
    try:
        version = int(doc["version"])
        protocols = doc.get("listener_security_protocol_map") or {}
        if "endpoints" in doc:
            endpoints = tuple(_parse_endpoint(e, protocols) for e in doc["endpoints"])
        else:  # version 1: only host and port
            endpoints = (Endpoint("PLAINTEXT", doc["host"], int(doc["port"])),)
        features = {
            name: (int(f["min_version"]), int(f["max_version"]))
            for name, f in (doc.get("features") or {}).items()
        }
        return BrokerRegistration(
            broker_id,
            endpoints,
            int(doc.get("timestamp", -1)),
            doc.get("rack"),
            int(doc.get("jmx_port", -1)),
            features,
            version,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ZnodeFormatError(f"broker {broker_id}: bad registration: {e!r}") from None


# --- /brokers/topics/T --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """The payload of /brokers/topics/T (TopicZNode, version 3)."""

    # partition -> replicas in preference order (during a reassignment: RS)
    partitions: Mapping[int, list[int]]
    topic_id: bytes | None = None
    adding_replicas: Mapping[int, list[int]] = field(default_factory=dict)
    removing_replicas: Mapping[int, list[int]] = field(default_factory=dict)


def encode_topic(topic: TopicAssignment) -> bytes:
    """Kafka's TopicZNode.encode (adding/removing maps are always written)."""
    doc: dict[str, Any] = {
        "version": 3,
        "partitions": _encode_partition_map(topic.partitions),
        # Kafka lists only partitions that have adding/removing replicas.
        "adding_replicas": _encode_partition_map(
            {p: r for p, r in topic.adding_replicas.items() if r}
        ),
        "removing_replicas": _encode_partition_map(
            {p: r for p, r in topic.removing_replicas.items() if r}
        ),
    }
    if topic.topic_id is not None:
        doc["topic_id"] = uuid_to_string(topic.topic_id)
    return _dumps(doc)


def decode_topic(name: str, data: bytes) -> TopicAssignment:
    """Kafka's TopicZNode.decode (versions 1 to 3)."""
    doc = _loads(data, f"topic {name}")
    tid = doc.get("topic_id")
    return TopicAssignment(
        _partition_map(doc.get("partitions"), f"topic {name} partitions"),
        uuid_from_string(tid) if isinstance(tid, str) else None,
        _partition_map(doc.get("adding_replicas"), f"topic {name} adding_replicas"),
        _partition_map(doc.get("removing_replicas"), f"topic {name} removing_replicas"),
    )


# --- /brokers/topics/T/partitions/P/state -------------------------------------------

LEADER_RECOVERED = 0
LEADER_RECOVERING = 1
NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class PartitionState:
    """LeaderIsrAndControllerEpoch: a partition's state znode.

    `partition_epoch` is the znode's zkVersion (not in the payload): conditional
    writes use it, and -1 means "not read from a store".
    """

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    leader_recovery_state: int = LEADER_RECOVERED
    partition_epoch: int = -1


def encode_partition_state(state: PartitionState) -> bytes:
    """Kafka's TopicPartitionStateZNode.encode."""
    doc: dict[str, Any] = {
        "controller_epoch": state.controller_epoch,
        "leader": state.leader,
        "version": 1,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
    }
    # KIP-704: written only when RECOVERING so older brokers keep reading the node.
    if state.leader_recovery_state == LEADER_RECOVERING:
        doc["leader_recovery_state"] = LEADER_RECOVERING
    return _dumps(doc)


def decode_partition_state(data: bytes, partition_epoch: int = -1) -> PartitionState:
    """Kafka's TopicPartitionStateZNode.decode; `partition_epoch` is the zkVersion."""
    doc = _loads(data, "partition state")
    try:
        return PartitionState(
            int(doc["leader"]),
            int(doc["leader_epoch"]),
            _int_list(doc["isr"], "partition state isr"),
            int(doc["controller_epoch"]),
            int(doc.get("leader_recovery_state", LEADER_RECOVERED)),
            partition_epoch,
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ZnodeFormatError(f"bad partition state: {e!r}") from None


# --- /controller and /controller_epoch ----------------------------------------------


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    """Kafka 3.x's ControllerZNode.encode (v2; kraftControllerEpoch -1 in ZK mode)."""
    return _dumps(
        {
            "version": 2,
            "brokerid": broker_id,
            "timestamp": str(timestamp_ms),
            "kraftControllerEpoch": -1,
        }
    )


def decode_controller(data: bytes) -> int:
    """The broker id in /controller (v1 or v2)."""
    doc = _loads(data, "controller")
    try:
        return int(doc["brokerid"])
    except (KeyError, TypeError, ValueError):
        raise ZnodeFormatError("controller: no brokerid") from None


def encode_controller_epoch(epoch: int) -> bytes:
    """/controller_epoch holds the epoch as plain integer text, not JSON."""
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    """The integer in /controller_epoch."""
    try:
        return int(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise ZnodeFormatError(f"controller_epoch: not an integer: {data!r}") from None


# --- /config -----------------------------------------------------------------------


def encode_entity_config(config: Mapping[str, str]) -> bytes:
    """Kafka's ConfigEntityZNode.encode."""
    return _dumps({"version": 1, "config": dict(config)})


def decode_entity_config(data: bytes | None) -> dict[str, str]:
    """The config map of /config/<type>/<name> (empty data: no overrides)."""
    if not data:
        return {}
    doc = _loads(data, "entity config")
    config = doc.get("config") or {}
    if not isinstance(config, dict):
        raise ZnodeFormatError("entity config: 'config' is not an object")
    return {str(k): str(v) for k, v in config.items()}


def encode_config_change(entity_type: str, name: str) -> bytes:
    """Kafka's ConfigEntityChangeNotificationSequenceZNode payload (v2)."""
    return _dumps({"version": 2, "entity_path": f"{entity_type}/{name}"})


def decode_config_change(data: bytes) -> tuple[str, str]:
    """(entity type, name) of a config change notification (v2)."""
    doc = _loads(data, "config change")
    entity_path = doc.get("entity_path")
    if doc.get("version") != 2 or not isinstance(entity_path, str) or "/" not in entity_path:
        raise ZnodeFormatError(f"config change: unsupported payload {doc!r}")
    entity_type, _, name = entity_path.partition("/")
    return entity_type, name


# --- /cluster/id, /latest_producer_id_block, /feature -------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    """Kafka's ClusterIdZNode.toJson: note the *string* version."""
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    """The id in /cluster/id."""
    doc = _loads(data, "cluster id")
    cid = doc.get("id")
    if not isinstance(cid, str):
        raise ZnodeFormatError("cluster id: no 'id'")
    return cid


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """A block of producer ids reserved by one broker (inclusive bounds)."""

    broker_id: int
    start: int
    end: int


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    """Kafka's ProducerIdBlockZNode payload (offsets as strings)."""
    return _dumps(
        {
            "version": 1,
            "broker": block.broker_id,
            "block_start": str(block.start),
            "block_end": str(block.end),
        }
    )


def decode_producer_id_block(data: bytes | None) -> ProducerIdBlock | None:
    """The last reserved block, or None when none was ever reserved (empty node)."""
    if not data:
        return None
    doc = _loads(data, "producer id block")
    try:
        return ProducerIdBlock(int(doc["broker"]), int(doc["block_start"]), int(doc["block_end"]))
    except (KeyError, TypeError, ValueError) as e:
        raise ZnodeFormatError(f"bad producer id block: {e!r}") from None


FEATURE_ENABLED = 1
FEATURE_DISABLED = 0


def encode_feature(features: Mapping[str, int], status: int = FEATURE_ENABLED) -> bytes:
    """Kafka's FeatureZNode payload (v2: finalized max version levels only)."""
    return _dumps(
        {
            "version": 2,
            "status": status,
            "features": {n: {"max_version_level": v} for n, v in sorted(features.items())},
        }
    )


def decode_feature(data: bytes) -> tuple[int, dict[str, int]]:
    """(status, feature -> finalized max version level) of /feature (v1 or v2)."""
    doc = _loads(data, "feature")
    try:
        feats = {n: int(f["max_version_level"]) for n, f in (doc.get("features") or {}).items()}
        return int(doc["status"]), feats
    except (KeyError, TypeError, ValueError) as e:
        raise ZnodeFormatError(f"bad feature znode: {e!r}") from None


# --- partition lists: admin triggers and notifications ------------------------------


def encode_partitions(partitions: Iterable[tuple[str, int]]) -> bytes:
    """`{"version":1,"partitions":[{"topic":..,"partition":..}]}`.

    The payload of /admin/preferred_replica_election and of ISR change notifications.
    """
    return _dumps(
        {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]}
    )


def decode_partitions(data: bytes) -> list[tuple[str, int]]:
    """The (topic, partition) list of a preferred election or ISR change znode."""
    doc = _loads(data, "partition list")
    try:
        return [(str(e["topic"]), int(e["partition"])) for e in doc["partitions"]]
    except (KeyError, TypeError, ValueError) as e:
        raise ZnodeFormatError(f"bad partition list: {e!r}") from None


def encode_reassignment(reassignment: Mapping[tuple[str, int], list[int]]) -> bytes:
    """The legacy /admin/reassign_partitions payload."""
    return _dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": list(r)}
                for (t, p), r in reassignment.items()
            ],
        }
    )


def decode_reassignment(data: bytes) -> dict[tuple[str, int], list[int]]:
    """(topic, partition) -> target replicas of /admin/reassign_partitions."""
    doc = _loads(data, "reassign partitions")
    try:
        return {
            (str(e["topic"]), int(e["partition"])): _int_list(e["replicas"], "replicas")
            for e in doc["partitions"]
        }
    except (KeyError, TypeError, ValueError) as e:
        raise ZnodeFormatError(f"bad partition reassignment: {e!r}") from None


def encode_log_dir_event(broker_id: int, event: int = 1) -> bytes:
    """A /log_dir_event_notification payload (event 1: a log dir failed)."""
    return _dumps({"version": 1, "broker": broker_id, "event": event})


def decode_log_dir_event(data: bytes) -> int:
    """The broker id of a log dir event notification."""
    doc = _loads(data, "log dir event")
    try:
        return int(doc["broker"])
    except (KeyError, TypeError, ValueError):
        raise ZnodeFormatError("log dir event: no broker") from None
