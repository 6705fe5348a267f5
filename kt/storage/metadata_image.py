"""The cluster as KRaft's metadata records describe it, replayed offset by offset.

`MetadataImage` is kt's equivalent of Kafka's MetadataImage: features, brokers
and controllers with their registrations and fencing, topics (by name and id)
with every partition's replicas, ISR, ELR, leader and epochs, configs, client
quotas, ACLs, SCRAM users, delegation tokens, producer-id blocks and the ZK
migration state, plus its provenance (the offset, epoch and time of the last
record applied). Records are applied as Kafka's *Delta classes apply them,
including metadata transactions (records between BeginTransaction and
EndTransaction take effect together; an AbortTransaction drops them).

`to_records` writes the image back as the records of a snapshot (what Kafka's
image writer emits), and `to_tree` renders it as kafka-metadata-shell's tree
(3.5+ layout) of directories (dicts) and files (text). SCRAM secrets and
sensitive config values stay inside the image (a snapshot needs them) and are
never rendered.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kt.storage.metadata_codec import is_sensitive_config
from kt.storage.metadata_log import MetadataEntry

NO_LEADER = -1
NO_LEADER_CHANGE = -2
#: Kafka's ConfigResource.Type ids
CONFIG_RESOURCE_TYPES = {
    2: "TOPIC",
    4: "BROKER",
    8: "BROKER_LOGGER",
    16: "CLIENT_METRICS",
    32: "GROUP",
}
SCRAM_MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
ACL_RESOURCE_TYPES = {
    0: "UNKNOWN", 1: "ANY", 2: "TOPIC", 3: "GROUP", 4: "CLUSTER",
    5: "TRANSACTIONAL_ID", 6: "DELEGATION_TOKEN", 7: "USER",
}  # fmt: skip
ACL_PATTERN_TYPES = {0: "UNKNOWN", 1: "ANY", 2: "MATCH", 3: "LITERAL", 4: "PREFIXED"}
ACL_OPERATIONS = {
    0: "UNKNOWN", 1: "ANY", 2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE",
    7: "ALTER", 8: "DESCRIBE", 9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS",
    11: "ALTER_CONFIGS", 12: "IDEMPOTENT_WRITE", 13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS",
    15: "TWO_PHASE_COMMIT",
}  # fmt: skip
ACL_PERMISSIONS = {0: "UNKNOWN", 1: "ANY", 2: "DENY", 3: "ALLOW"}
SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
ZK_MIGRATION_STATES = {0: "NONE", 1: "MIGRATION", 2: "PRE_MIGRATION", 3: "POST_MIGRATION"}


@dataclass
class Partition:
    """One partition's registration (Kafka's PartitionRegistration)."""

    replicas: list[int]
    isr: list[int]
    removing_replicas: list[int] = field(default_factory=list)
    adding_replicas: list[int] = field(default_factory=list)
    leader: int = NO_LEADER
    leader_recovery_state: int = 0
    leader_epoch: int = 0
    partition_epoch: int = 0
    directories: list[str] = field(default_factory=list)
    elr: list[int] = field(default_factory=list)
    last_known_elr: list[int] = field(default_factory=list)

    @property
    def online(self) -> bool:
        """Whether the partition has a leader."""
        return self.leader >= 0


@dataclass
class Topic:
    """A topic: its name, id and partitions."""

    name: str
    id: str
    partitions: dict[int, Partition] = field(default_factory=dict)


@dataclass
class Provenance:
    """Where the image was taken: the last offset applied, its Raft epoch and time."""

    offset: int = -1
    epoch: int = -1
    timestamp: int = -1


@dataclass
class MetadataImage:
    """The cluster's metadata after applying records in order."""

    features: dict[str, int] = field(default_factory=dict)
    brokers: dict[int, dict[str, Any]] = field(default_factory=dict)
    controllers: dict[int, dict[str, Any]] = field(default_factory=dict)
    topics: dict[str, Topic] = field(default_factory=dict)  # by id
    configs: dict[tuple[int, str], dict[str, str]] = field(default_factory=dict)
    client_quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]] = field(
        default_factory=dict
    )
    acls: dict[str, dict[str, Any]] = field(default_factory=dict)
    scram: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)
    delegation_tokens: dict[str, dict[str, Any]] = field(default_factory=dict)
    producer_ids: dict[str, int] | None = None
    zk_migration_state: int | None = None
    provenance: Provenance = field(default_factory=Provenance)
    # Records of an open metadata transaction, applied when it ends.
    pending: list[tuple[int, int, dict[str, Any], int, int, int]] | None = None
    # Called with (apiKey, version, data, offset, timestamp, epoch) and the image as it
    # is just before each record takes effect (the timeline derives events from it).
    observer: Callable[[int, int, dict[str, Any], int, int, int], None] | None = field(
        default=None, repr=False, compare=False
    )
    # The leader of the metadata quorum (from LEADER_CHANGE) and its voters, if seen.
    quorum_leader: int | None = None
    quorum_epoch: int | None = None
    records_applied: int = 0

    # --- lookups ---
    def topic_by_name(self, name: str) -> Topic | None:
        """The topic called `name`."""
        for t in self.topics.values():
            if t.name == name:
                return t
        return None

    # --- replay ---
    def apply(self, entry: MetadataEntry) -> None:
        """Apply one entry of a metadata log or snapshot (control records, errors ignored)."""
        if entry.error is not None:
            return
        if entry.record is not None:
            r = entry.record
            self.apply_data(
                r.api_key, r.version, r.data, entry.offset, entry.timestamp, entry.epoch
            )
            return
        if entry.control_type == 2 and entry.control is not None:
            self.quorum_leader = entry.control["LeaderId"]
            self.quorum_epoch = entry.epoch
        if entry.offset >= 0:
            self.provenance = Provenance(entry.offset, entry.epoch, entry.timestamp)

    def apply_data(
        self,
        api_key: int,
        version: int,
        data: dict[str, Any],
        offset: int = -1,
        timestamp: int = -1,
        epoch: int = -1,
    ) -> None:
        """Apply one metadata record (apiKey, version, data) read at `offset`."""
        self.provenance = Provenance(offset, epoch, timestamp)
        if api_key == 23:  # BeginTransaction
            self.pending = []
            return
        if api_key == 24:  # EndTransaction
            pending, self.pending = self.pending or [], None
            for k, v, d, o, t, e in pending:
                self._apply(k, v, d, o, t, e)
            return
        if api_key == 25:  # AbortTransaction
            self.pending = None
            return
        if self.pending is not None:
            self.pending.append((api_key, version, data, offset, timestamp, epoch))
            return
        self._apply(api_key, version, data, offset, timestamp, epoch)

    def _apply(
        self, k: int, v: int, d: dict[str, Any], offset: int, timestamp: int, epoch: int = -1
    ) -> None:
        if self.observer is not None:
            self.observer(k, v, d, offset, timestamp, epoch)
        self.records_applied += 1
        if k == 0:
            self.brokers[d["BrokerId"]] = {
                **copy.deepcopy(d),
                "InControlledShutdown": d.get("InControlledShutdown", False),
                "IsMigratingZkBroker": d.get("IsMigratingZkBroker", False),
                "LogDirs": list(d.get("LogDirs", [])),
            }
        elif k == 1:
            # Kafka removes the registration whatever its epoch.
            self.brokers.pop(d["BrokerId"], None)
        elif k in (7, 8):
            b = self.brokers.get(d["Id"])
            if b is not None:
                b["Fenced"] = k == 7
                if k == 7:
                    b["InControlledShutdown"] = False
        elif k == 17:
            b = self.brokers.get(d["BrokerId"])
            if b is not None:
                if d.get("Fenced", 0) == 1:
                    b["Fenced"] = True
                elif d.get("Fenced", 0) == -1:
                    b["Fenced"] = False
                if d.get("InControlledShutdown", 0) == 1:
                    b["InControlledShutdown"] = True
                if d.get("LogDirs"):
                    b["LogDirs"] = list(d["LogDirs"])
        elif k == 27:
            self.controllers[d["ControllerId"]] = copy.deepcopy(d)
        elif k == 29:
            self.controllers.pop(d["ControllerId"], None)
        elif k == 2:
            self.topics[d["TopicId"]] = Topic(d["Name"], d["TopicId"])
        elif k == 9:
            t = self.topics.pop(d["TopicId"], None)
            if t is not None:
                self.configs.pop((2, t.name), None)
        elif k == 3:
            t = self.topics.get(d["TopicId"])
            if t is not None:
                t.partitions[d["PartitionId"]] = Partition(
                    list(d["Replicas"]),
                    list(d["Isr"]),
                    list(d["RemovingReplicas"]),
                    list(d["AddingReplicas"]),
                    d["Leader"],
                    d.get("LeaderRecoveryState", 0),
                    d["LeaderEpoch"],
                    d["PartitionEpoch"],
                    list(d.get("Directories", [])),
                    list(d.get("EligibleLeaderReplicas") or []),
                    list(d.get("LastKnownElr") or []),
                )
        elif k == 5:
            t = self.topics.get(d["TopicId"])
            p = t.partitions.get(d["PartitionId"]) if t is not None else None
            if p is not None:
                merge_partition_change(p, d)
        elif k == 28:
            for t in self.topics.values():
                if d["TopicName"] in ("", t.name):
                    for p in t.partitions.values():
                        p.elr = []
                        p.last_known_elr = []
        elif k == 4:
            key = (d["ResourceType"], d["ResourceName"])
            if d["Value"] is None:
                cfg = self.configs.get(key)
                if cfg is not None:
                    cfg.pop(d["Name"], None)
                    if not cfg:
                        del self.configs[key]
            else:
                self.configs.setdefault(key, {})[d["Name"]] = d["Value"]
        elif k == 14:
            entity = tuple(sorted((e["EntityType"], e["EntityName"]) for e in d["Entity"]))
            if d["Remove"]:
                q = self.client_quotas.get(entity)
                if q is not None:
                    q.pop(d["Key"], None)
                    if not q:
                        del self.client_quotas[entity]
            else:
                self.client_quotas.setdefault(entity, {})[d["Key"]] = d["Value"]
        elif k == 15:
            self.producer_ids = {
                "BrokerId": d["BrokerId"],
                "BrokerEpoch": d["BrokerEpoch"],
                "NextProducerId": d["NextProducerId"],
            }
        elif k == 18:
            self.acls[d["Id"]] = dict(d)
        elif k == 19:
            self.acls.pop(d["Id"], None)
        elif k == 11:
            self.scram[(d["Mechanism"], d["Name"])] = dict(d)
        elif k == 22:
            self.scram.pop((d["Mechanism"], d["Name"]), None)
        elif k == 10:
            self.delegation_tokens[d["TokenId"]] = copy.deepcopy(d)
        elif k == 26:
            self.delegation_tokens.pop(d["TokenId"], None)
        elif k == 12:
            if d["FeatureLevel"] == 0:
                self.features.pop(d["Name"], None)
            else:
                self.features[d["Name"]] = d["FeatureLevel"]
        elif k == 21:
            self.zk_migration_state = d["ZkMigrationState"]
        # 20 NoOp: nothing but provenance.

    # --- snapshots ---
    def to_records(self) -> Iterator[tuple[int, int, dict[str, Any]]]:
        """The image as snapshot records (apiKey, version, data), metadata.version first."""
        if "metadata.version" in self.features:
            yield (
                12,
                0,
                {"Name": "metadata.version", "FeatureLevel": self.features["metadata.version"]},
            )
        for name, level in sorted(self.features.items()):
            if name != "metadata.version":
                yield (12, 0, {"Name": name, "FeatureLevel": level})
        for _bid, b in sorted(self.brokers.items()):
            yield (0, 3, copy.deepcopy(b))
        for _cid, c in sorted(self.controllers.items()):
            yield (27, 0, copy.deepcopy(c))
        for t in sorted(self.topics.values(), key=lambda t: t.name):
            yield (2, 0, {"Name": t.name, "TopicId": t.id})
            for pid, p in sorted(t.partitions.items()):
                yield (3, 2, partition_record(t.id, pid, p))
        for (rtype, rname), cfg in sorted(self.configs.items()):
            for name, value in sorted(cfg.items()):
                yield (
                    4,
                    0,
                    {"ResourceType": rtype, "ResourceName": rname, "Name": name, "Value": value},
                )
        for entity, quotas in sorted(self.client_quotas.items(), key=lambda kv: str(kv[0])):
            ents = [{"EntityType": et, "EntityName": en} for et, en in entity]
            for qkey, qvalue in sorted(quotas.items()):
                yield (14, 0, {"Entity": ents, "Key": qkey, "Value": qvalue, "Remove": False})
        if self.producer_ids is not None:
            yield (15, 0, dict(self.producer_ids))
        for _aid, acl in sorted(self.acls.items()):
            yield (18, 0, dict(acl))
        for _key, cred in sorted(self.scram.items()):
            yield (11, 0, dict(cred))
        for _tid, tok in sorted(self.delegation_tokens.items()):
            yield (10, 0, copy.deepcopy(tok))
        if self.zk_migration_state is not None:
            yield (21, 0, {"ZkMigrationState": self.zk_migration_state})

    def content(self) -> dict[str, Any]:
        """Everything the image says about the cluster (no provenance), for comparisons."""
        return {
            "features": self.features,
            "brokers": self.brokers,
            "controllers": self.controllers,
            "topics": {
                i: (t.name, dict(sorted(t.partitions.items()))) for i, t in self.topics.items()
            },
            "configs": self.configs,
            "client_quotas": self.client_quotas,
            "acls": self.acls,
            "scram": self.scram,
            "delegation_tokens": self.delegation_tokens,
            "producer_ids": self.producer_ids,
            "zk_migration_state": self.zk_migration_state,
        }

    # --- kafka-metadata-shell's tree ---
    def to_tree(self, version: str = "") -> dict[str, Any]:
        """The image as kafka-metadata-shell's tree: dicts are directories, str files."""
        image: dict[str, Any] = {
            "provenance": self._provenance_text(),
            "features": {n: str(v) for n, v in sorted(self.features.items())},
            "cluster": {
                "brokers": {str(i): broker_text(b) for i, b in sorted(self.brokers.items())},
                "controllers": {
                    str(i): controller_text(c) for i, c in sorted(self.controllers.items())
                },
            },
            "topics": {
                "byName": {
                    t.name: _topic_node(t)
                    for t in sorted(self.topics.values(), key=lambda t: t.name)
                },
                "byId": {
                    t.id: _topic_node(t) for t in sorted(self.topics.values(), key=lambda t: t.id)
                },
            },
            "configs": {
                f"{CONFIG_RESOURCE_TYPES.get(rt, str(rt))}:{name}": {
                    k: ("[redacted]" if is_sensitive_config(k) else v)
                    for k, v in sorted(cfg.items())
                }
                for (rt, name), cfg in sorted(self.configs.items())
            },
            "clientQuotas": {
                _entity_name(e): {k: _num(v) for k, v in sorted(q.items())}
                for e, q in sorted(self.client_quotas.items(), key=lambda kv: str(kv[0]))
            },
            "producerIds": _producer_ids_text(self.producer_ids),
            "acls": {"byId": {i: acl_text(a) for i, a in sorted(self.acls.items())}},
            "scram": _scram_tree(self.scram),
            "delegationToken": {
                i: token_text(t) for i, t in sorted(self.delegation_tokens.items())
            },
        }
        if self.zk_migration_state is not None:
            image["zkMigrationState"] = ZK_MIGRATION_STATES.get(
                self.zk_migration_state, str(self.zk_migration_state)
            )
        local = {"version": version, "commitId": "kt"}
        return {"image": image, "local": local}

    def _provenance_text(self) -> str:
        p = self.provenance
        return f"offset {p.offset}, epoch {p.epoch}, time {format_time(p.timestamp)}"


def merge_partition_change(p: Partition, d: dict[str, Any]) -> None:
    """Apply a PartitionChangeRecord as Kafka's PartitionRegistration.merge does."""
    if d.get("Isr") is not None:
        p.isr = list(d["Isr"])
    if d.get("Leader", NO_LEADER_CHANGE) != NO_LEADER_CHANGE:
        p.leader = d["Leader"]
        p.leader_epoch += 1  # a leader set in the record starts a new leader epoch
    if d.get("Replicas") is not None:
        p.replicas = list(d["Replicas"])
    if d.get("RemovingReplicas") is not None:
        p.removing_replicas = list(d["RemovingReplicas"])
    if d.get("AddingReplicas") is not None:
        p.adding_replicas = list(d["AddingReplicas"])
    if d.get("LeaderRecoveryState", -1) != -1:
        p.leader_recovery_state = d["LeaderRecoveryState"]
    if d.get("Directories") is not None:
        p.directories = list(d["Directories"])
    if d.get("EligibleLeaderReplicas") is not None:
        p.elr = list(d["EligibleLeaderReplicas"])
    if d.get("LastKnownElr") is not None:
        p.last_known_elr = list(d["LastKnownElr"])
    p.partition_epoch += 1


def partition_record(topic_id: str, pid: int, p: Partition) -> dict[str, Any]:
    """A PartitionRecord (version 2) holding the partition's registration."""
    return {
        "PartitionId": pid,
        "TopicId": topic_id,
        "Replicas": list(p.replicas),
        "Isr": list(p.isr),
        "RemovingReplicas": list(p.removing_replicas),
        "AddingReplicas": list(p.adding_replicas),
        "Leader": p.leader,
        "LeaderRecoveryState": p.leader_recovery_state,
        "LeaderEpoch": p.leader_epoch,
        "PartitionEpoch": p.partition_epoch,
        "Directories": list(p.directories),
        "EligibleLeaderReplicas": list(p.elr) or None,
        "LastKnownElr": list(p.last_known_elr) or None,
    }


def replay(entries: Iterable[MetadataEntry], image: MetadataImage | None = None) -> MetadataImage:
    """Apply `entries` in order to `image` (a new one by default)."""
    img = image if image is not None else MetadataImage()
    for e in entries:
        img.apply(e)
    return img


def format_time(ms: int) -> str:
    """A record timestamp as ISO-8601 UTC with milliseconds ("-" when unknown)."""
    if ms < 0:
        return "-"
    return (
        datetime.fromtimestamp(ms / 1000, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def _opt(v: str | None) -> str:
    return "null" if v is None else v


def _num(v: float) -> str:
    return str(int(v)) if v == int(v) else repr(v)


def _ids(xs: Iterable[int]) -> str:
    return "[" + ", ".join(map(str, xs)) + "]"


def partition_text(p: Partition) -> str:
    """A partition registration, as kafka-metadata-shell prints one."""
    recovery = {0: "RECOVERED", 1: "RECOVERING"}.get(
        p.leader_recovery_state, str(p.leader_recovery_state)
    )
    parts = [
        f"replicas={_ids(p.replicas)}",
        f"directories={_ids_str(p.directories)}",
        f"isr={_ids(p.isr)}",
        f"removingReplicas={_ids(p.removing_replicas)}",
        f"addingReplicas={_ids(p.adding_replicas)}",
        f"elr={_ids(p.elr)}",
        f"lastKnownElr={_ids(p.last_known_elr)}",
        f"leader={p.leader}",
        f"leaderRecoveryState={recovery}",
        f"leaderEpoch={p.leader_epoch}",
        f"partitionEpoch={p.partition_epoch}",
    ]
    return "PartitionRegistration(" + ", ".join(parts) + ")"


def _ids_str(xs: Iterable[str]) -> str:
    return "[" + ", ".join(xs) + "]"


def _topic_node(t: Topic) -> dict[str, Any]:
    node: dict[str, Any] = {"name": t.name, "id": t.id}
    for pid, p in sorted(t.partitions.items()):
        node[str(pid)] = partition_text(p)
    return node


def _endpoints(eps: list[dict[str, Any]]) -> str:
    return (
        "["
        + ", ".join(
            f"{e['Name']}://{e['Host']}:{e['Port']}"
            + (
                f" ({SECURITY_PROTOCOLS.get(e['SecurityProtocol'], e['SecurityProtocol'])})"
                if "SecurityProtocol" in e
                else ""
            )
            for e in eps
        )
        + "]"
    )


def _features(fs: list[dict[str, Any]]) -> str:
    return (
        "{"
        + ", ".join(
            f"{f['Name']}: {f['MinSupportedVersion']}-{f['MaxSupportedVersion']}" for f in fs
        )
        + "}"
    )


def broker_text(b: dict[str, Any]) -> str:
    """A broker registration (Kafka's BrokerRegistration.toString, kt's wording)."""
    return (
        f"BrokerRegistration(id={b['BrokerId']}, epoch={b['BrokerEpoch']}, "
        f"incarnationId={b['IncarnationId']}, listeners={_endpoints(b['EndPoints'])}, "
        f"supportedFeatures={_features(b['Features'])}, rack={_opt(b['Rack'])}, "
        f"fenced={str(b['Fenced']).lower()}, "
        f"inControlledShutdown={str(b['InControlledShutdown']).lower()}, "
        f"isMigratingZkBroker={str(b['IsMigratingZkBroker']).lower()}, "
        f"directories={_ids_str(b['LogDirs'])})"
    )


def controller_text(c: dict[str, Any]) -> str:
    """A controller registration."""
    return (
        f"ControllerRegistration(id={c['ControllerId']}, incarnationId={c['IncarnationId']}, "
        f"zkMigrationReady={str(c['ZkMigrationReady']).lower()}, "
        f"listeners={_endpoints(c['EndPoints'])}, supportedFeatures={_features(c['Features'])})"
    )


def acl_text(a: dict[str, Any]) -> str:
    """An ACL (StandardAcl's fields by name)."""
    return (
        f"StandardAcl(resourceType={ACL_RESOURCE_TYPES.get(a['ResourceType'], a['ResourceType'])}, "
        f"resourceName={a['ResourceName']}, "
        f"patternType={ACL_PATTERN_TYPES.get(a['PatternType'], a['PatternType'])}, "
        f"principal={a['Principal']}, host={a['Host']}, "
        f"operation={ACL_OPERATIONS.get(a['Operation'], a['Operation'])}, "
        f"permissionType={ACL_PERMISSIONS.get(a['PermissionType'], a['PermissionType'])})"
    )


def token_text(t: dict[str, Any]) -> str:
    """A delegation token's public data (never its HMAC, which is not in the log)."""
    return (
        f"DelegationTokenData(tokenId={t['TokenId']}, owner={t['Owner']}, "
        f"requester={t['Requester']}, renewers={_ids_str(t['Renewers'])}, "
        f"issueTimestamp={t['IssueTimestamp']}, maxTimestamp={t['MaxTimestamp']}, "
        f"expirationTimestamp={t['ExpirationTimestamp']})"
    )


def _producer_ids_text(p: dict[str, int] | None) -> str:
    if p is None:
        return "ProducerIdsImage(nextProducerId=-1)"
    return (
        f"ProducerIdsImage(nextProducerId={p['NextProducerId']}, "
        f"lastBrokerId={p['BrokerId']}, lastBrokerEpoch={p['BrokerEpoch']})"
    )


def _scram_tree(scram: dict[tuple[int, str], dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for (mech, name), cred in sorted(scram.items()):
        out.setdefault(SCRAM_MECHANISMS.get(mech, str(mech)), {})[name] = (
            f"ScramCredentialData(salt=[redacted], storedKey=[redacted], "
            f"serverKey=[redacted], iterations={cred['Iterations']})"
        )
    return out


def _entity_name(entity: tuple[tuple[str, str | None], ...]) -> str:
    return ",".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)
