"""What a KRaft cluster did, in order: events derived from its metadata log.

Each metadata record is compared with the image just before it takes effect, so
an event says what changed and from what: a partition's leader 2 -> none (it went
offline), its ISR [1, 2, 3] -> [1, 3], a broker fenced, a config set, the quorum's
leader changing epoch. `summarize` folds the events into per-partition and
per-broker accounts (leader changes, offline intervals, fenced intervals) for an
incident review. Secrets never enter an event: SCRAM changes name the user and
mechanism, sensitive config values are "[redacted]".
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kt.storage.metadata_codec import is_sensitive_config
from kt.storage.metadata_image import (
    ACL_OPERATIONS,
    ACL_PERMISSIONS,
    ACL_RESOURCE_TYPES,
    CONFIG_RESOURCE_TYPES,
    NO_LEADER_CHANGE,
    SCRAM_MECHANISMS,
    ZK_MIGRATION_STATES,
    MetadataImage,
)
from kt.storage.metadata_log import MetadataEntry

#: Every event kind, for filters and documentation.
EVENT_KINDS = (
    "quorum_leader",
    "broker_registered",
    "broker_fenced",
    "broker_unfenced",
    "broker_controlled_shutdown",
    "broker_unregistered",
    "controller_registered",
    "controller_unregistered",
    "topic_created",
    "topic_deleted",
    "partition_created",
    "leader_changed",
    "isr_changed",
    "elr_changed",
    "replicas_changed",
    "config_set",
    "config_deleted",
    "quota_set",
    "quota_removed",
    "acl_created",
    "acl_deleted",
    "scram_user_set",
    "scram_user_deleted",
    "delegation_token_created",
    "delegation_token_removed",
    "feature_changed",
    "producer_ids_allocated",
    "zk_migration_state",
    "metadata_transaction_aborted",
    "decode_error",
)


@dataclass
class Event:
    """One thing the cluster did, at an offset of the metadata log."""

    offset: int
    timestamp: int
    epoch: int
    kind: str
    message: str
    topic: str | None = None
    partition: int | None = None
    broker: int | None = None
    controller: int | None = None  # a controller (quorum) event's node
    # Brokers the event involves besides its subject (old/new leaders, ISR members).
    brokers: tuple[int, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def subject(self) -> str:
        """What the event is about: topic-partition, topic, broker-N or cluster."""
        if self.topic is not None and self.partition is not None:
            return f"{self.topic}-{self.partition}"
        if self.topic is not None:
            return self.topic
        if self.broker is not None:
            return f"broker-{self.broker}"
        if self.controller is not None:
            return f"controller-{self.controller}"
        return "cluster"


def _ids(xs: Iterable[int]) -> str:
    return "[" + ", ".join(map(str, xs)) + "]"


def _leader(x: int) -> str:
    return "none" if x < 0 else str(x)


class TimelineBuilder:
    """Feeds entries into an image and collects the events each record causes."""

    def __init__(self, image: MetadataImage | None = None) -> None:
        self.image = image if image is not None else MetadataImage()
        self.events: list[Event] = []
        self.image.observer = self._observe

    def feed(self, entry: MetadataEntry) -> list[Event]:
        """Apply one entry; return the events it caused (in order)."""
        start = len(self.events)
        if entry.error is not None:
            self.events.append(
                Event(
                    entry.offset,
                    entry.timestamp,
                    entry.epoch,
                    "decode_error",
                    f"record does not decode: {entry.error}",
                )
            )
        elif entry.control_type == 2 and entry.control is not None:
            c = entry.control
            old = self.image.quorum_leader
            voters = [v["VoterId"] for v in c["Voters"]]
            granting = [v["VoterId"] for v in c["GrantingVoters"]]
            leader = c["LeaderId"]
            text = (
                f"metadata quorum leader {_leader(old) if old is not None else '?'} -> "
                f"{_leader(leader)} in epoch {entry.epoch} (voters {_ids(voters)}, "
                f"granted by {_ids(granting)})"
            )
            self.events.append(
                Event(
                    entry.offset,
                    entry.timestamp,
                    entry.epoch,
                    "quorum_leader",
                    text,
                    controller=leader if leader >= 0 else None,
                    brokers=tuple(voters),
                    details={
                        "leader": leader,
                        "previous_leader": old,
                        "voters": voters,
                        "granting_voters": granting,
                    },
                )
            )
        elif entry.record is not None and entry.record.api_key == 25:
            self.events.append(
                Event(
                    entry.offset,
                    entry.timestamp,
                    entry.epoch,
                    "metadata_transaction_aborted",
                    f"metadata transaction aborted: {entry.record.data.get('Reason')}",
                )
            )
        self.image.apply(entry)
        return self.events[start:]

    # --- the record observer: the image is still as before the record ---
    def _observe(self, k: int, v: int, d: dict[str, Any], off: int, ts: int, epoch: int) -> None:
        img = self.image

        def add(kind: str, message: str, **kw: Any) -> None:
            self.events.append(Event(off, ts, epoch, kind, message, **kw))

        if k == 0:
            b = d["BrokerId"]
            eps = ", ".join(f"{e['Name']}://{e['Host']}:{e['Port']}" for e in d["EndPoints"])
            again = " (re-registered)" if b in img.brokers else ""
            add(
                "broker_registered",
                f"broker {b} registered{again}: epoch {d['BrokerEpoch']}, rack {d['Rack']}, "
                f"{eps}{', fenced' if d['Fenced'] else ''}",
                broker=b,
                details={
                    "broker_epoch": d["BrokerEpoch"],
                    "rack": d["Rack"],
                    "incarnation_id": d["IncarnationId"],
                },
            )
        elif k == 1:
            add("broker_unregistered", f"broker {d['BrokerId']} unregistered", broker=d["BrokerId"])
        elif k in (7, 8):
            b = d["Id"]
            if k == 7:
                add("broker_fenced", f"broker {b} fenced (epoch {d['Epoch']})", broker=b)
            else:
                add("broker_unfenced", f"broker {b} unfenced (epoch {d['Epoch']})", broker=b)
        elif k == 17:
            b = d["BrokerId"]
            if d.get("Fenced", 0) == 1:
                add("broker_fenced", f"broker {b} fenced (epoch {d['BrokerEpoch']})", broker=b)
            elif d.get("Fenced", 0) == -1:
                add("broker_unfenced", f"broker {b} unfenced (epoch {d['BrokerEpoch']})", broker=b)
            if d.get("InControlledShutdown", 0) == 1:
                add("broker_controlled_shutdown", f"broker {b} in controlled shutdown", broker=b)
        elif k == 27:
            c = d["ControllerId"]
            add("controller_registered", f"controller {c} registered", controller=c)
        elif k == 29:
            c = d["ControllerId"]
            add("controller_unregistered", f"controller {c} unregistered", controller=c)
        elif k == 2:
            add(
                "topic_created",
                f"topic {d['Name']} created (id {d['TopicId']})",
                topic=d["Name"],
                details={"topic_id": d["TopicId"]},
            )
        elif k == 9:
            t = img.topics.get(d["TopicId"])
            name = t.name if t is not None else d["TopicId"]
            n = len(t.partitions) if t is not None else 0
            add(
                "topic_deleted",
                f"topic {name} deleted ({n} partition{'' if n == 1 else 's'})",
                topic=name,
                details={"topic_id": d["TopicId"]},
            )
        elif k == 3:
            t = img.topics.get(d["TopicId"])
            name = t.name if t is not None else d["TopicId"]
            add(
                "partition_created",
                f"partition created: replicas {_ids(d['Replicas'])}, isr {_ids(d['Isr'])}, "
                f"leader {_leader(d['Leader'])}, leader epoch {d['LeaderEpoch']}",
                topic=name,
                partition=d["PartitionId"],
                broker=None,
                brokers=tuple(d["Replicas"]),
                details={
                    "replicas": d["Replicas"],
                    "isr": d["Isr"],
                    "leader": d["Leader"],
                    "leader_epoch": d["LeaderEpoch"],
                },
            )
        elif k == 5:
            self._partition_change(d, add)
        elif k == 28:
            which = d["TopicName"] or "every topic"
            add("elr_changed", f"ELRs cleared for {which}", topic=d["TopicName"] or None)
        elif k == 4:
            rtype = CONFIG_RESOURCE_TYPES.get(d["ResourceType"], str(d["ResourceType"]))
            rname = d["ResourceName"]
            resource = f"{rtype.lower()} {rname}" if rname else f"{rtype.lower()} default"
            topic = rname if d["ResourceType"] == 2 else None
            broker = int(rname) if d["ResourceType"] == 4 and rname.isdigit() else None
            old = img.configs.get((d["ResourceType"], rname), {}).get(d["Name"])
            secret = is_sensitive_config(d["Name"])

            def show(x: str | None) -> str:
                return "(unset)" if x is None else "[redacted]" if secret else x

            if d["Value"] is None:
                add(
                    "config_deleted",
                    f"config {d['Name']} of {resource} deleted (was {show(old)})",
                    topic=topic,
                    broker=broker,
                    details={"resource_type": rtype, "resource": rname, "name": d["Name"]},
                )
            else:
                add(
                    "config_set",
                    f"config {d['Name']} of {resource}: {show(old)} -> {show(d['Value'])}",
                    topic=topic,
                    broker=broker,
                    details={
                        "resource_type": rtype,
                        "resource": rname,
                        "name": d["Name"],
                        "value": show(d["Value"]),
                        "previous": show(old),
                    },
                )
        elif k == 14:
            ent = ",".join(
                f"{e['EntityType']}={'<default>' if e['EntityName'] is None else e['EntityName']}"
                for e in d["Entity"]
            )
            if d["Remove"]:
                add("quota_removed", f"quota {d['Key']} of {ent} removed")
            else:
                add("quota_set", f"quota {d['Key']} of {ent} set to {d['Value']}")
        elif k == 18:
            add(
                "acl_created",
                f"ACL {d['Id']} created: {d['Principal']} from {d['Host']} "
                f"{ACL_PERMISSIONS.get(d['PermissionType'], d['PermissionType'])} "
                f"{ACL_OPERATIONS.get(d['Operation'], d['Operation'])} on "
                f"{ACL_RESOURCE_TYPES.get(d['ResourceType'], d['ResourceType'])} "
                f"{d['ResourceName']}",
            )
        elif k == 19:
            a = img.acls.get(d["Id"])
            who = f": {a['Principal']} on {a['ResourceName']}" if a is not None else ""
            add("acl_deleted", f"ACL {d['Id']} deleted{who}")
        elif k == 11:
            mech = SCRAM_MECHANISMS.get(d["Mechanism"], str(d["Mechanism"]))
            verb = "updated" if (d["Mechanism"], d["Name"]) in img.scram else "created"
            add(
                "scram_user_set",
                f"SCRAM credential of user {d['Name']} ({mech}) {verb}, "
                f"{d['Iterations']} iterations",
            )
        elif k == 22:
            mech = SCRAM_MECHANISMS.get(d["Mechanism"], str(d["Mechanism"]))
            add("scram_user_deleted", f"SCRAM credential of user {d['Name']} ({mech}) deleted")
        elif k == 10:
            add(
                "delegation_token_created",
                f"delegation token {d['TokenId']} for {d['Owner']} (requested by {d['Requester']})",
            )
        elif k == 26:
            add("delegation_token_removed", f"delegation token {d['TokenId']} removed")
        elif k == 12:
            old_level = img.features.get(d["Name"])
            add(
                "feature_changed",
                f"feature {d['Name']}: {'(unset)' if old_level is None else old_level} -> "
                f"{d['FeatureLevel'] if d['FeatureLevel'] else '(removed)'}",
                details={"feature": d["Name"], "level": d["FeatureLevel"], "previous": old_level},
            )
        elif k == 15:
            add(
                "producer_ids_allocated",
                f"producer ids up to {d['NextProducerId'] - 1} allocated to broker {d['BrokerId']}",
                broker=d["BrokerId"],
            )
        elif k == 21:
            state = ZK_MIGRATION_STATES.get(d["ZkMigrationState"], str(d["ZkMigrationState"]))
            add("zk_migration_state", f"ZooKeeper migration state {state}")

    def _partition_change(self, d: dict[str, Any], add: Any) -> None:
        t = self.image.topics.get(d["TopicId"])
        pid = d["PartitionId"]
        p = t.partitions.get(pid) if t is not None else None
        name = t.name if t is not None else d["TopicId"]
        if p is None:
            add("leader_changed", "change to an unknown partition", topic=name, partition=pid)
            return
        new_epoch = p.leader_epoch + (
            1 if d.get("Leader", NO_LEADER_CHANGE) != NO_LEADER_CHANGE else 0
        )
        leader = d.get("Leader", NO_LEADER_CHANGE)
        if leader != NO_LEADER_CHANGE:
            lrs = d.get("LeaderRecoveryState", -1)
            if leader < 0:
                reason = "no eligible leader: the partition is offline"
            elif lrs == 1:
                reason = "unclean leader election: the new leader is recovering"
            elif p.leader < 0:
                reason = "the partition is back online"
            elif leader == p.leader:
                reason = "same leader, new leader epoch"
            elif p.leader in self.image.brokers and self.image.brokers[p.leader].get("Fenced"):
                reason = f"the previous leader {p.leader} is fenced"
            elif d.get("Replicas") is not None or p.adding_replicas or p.removing_replicas:
                reason = "reassignment"
            elif p.replicas and leader == p.replicas[0]:
                reason = "preferred leader elected"
            else:
                reason = "leader moved"
            add(
                "leader_changed",
                f"leader {_leader(p.leader)} -> {_leader(leader)}, leader epoch {new_epoch} "
                f"({reason})",
                topic=name,
                partition=pid,
                broker=leader if leader >= 0 else None,
                brokers=tuple(x for x in (p.leader, leader) if x >= 0),
                details={
                    "leader": leader,
                    "previous_leader": p.leader,
                    "leader_epoch": new_epoch,
                    "reason": reason,
                    "leader_recovery_state": lrs,
                },
            )
        if d.get("Isr") is not None and list(d["Isr"]) != p.isr:
            new, old = list(d["Isr"]), p.isr
            gone = [x for x in old if x not in new]
            came = [x for x in new if x not in old]
            how = (
                ", ".join(
                    part
                    for part in (f"-{_ids(gone)}" if gone else "", f"+{_ids(came)}" if came else "")
                    if part
                )
                or "reordered"
            )
            add(
                "isr_changed",
                f"isr {_ids(old)} -> {_ids(new)} ({how}), leader epoch {new_epoch}",
                topic=name,
                partition=pid,
                brokers=tuple(sorted(set(old) | set(new))),
                details={
                    "isr": new,
                    "previous_isr": old,
                    "removed": gone,
                    "added": came,
                    "leader_epoch": new_epoch,
                },
            )
        elr = d.get("EligibleLeaderReplicas")
        if elr is not None and list(elr) != p.elr:
            add(
                "elr_changed",
                f"ELR {_ids(p.elr)} -> {_ids(elr)}",
                topic=name,
                partition=pid,
                brokers=tuple(sorted(set(p.elr) | set(elr))),
                details={"elr": list(elr), "previous_elr": p.elr},
            )
        reps = d.get("Replicas")
        adding, removing = d.get("AddingReplicas"), d.get("RemovingReplicas")
        if (reps is not None and list(reps) != p.replicas) or adding or removing:
            text = (
                f"replicas {_ids(p.replicas)} -> {_ids(reps if reps is not None else p.replicas)}"
            )
            if adding:
                text += f", adding {_ids(adding)}"
            if removing:
                text += f", removing {_ids(removing)}"
            add(
                "replicas_changed",
                text,
                topic=name,
                partition=pid,
                brokers=tuple(sorted(set(p.replicas) | set(reps or []))),
                details={
                    "replicas": reps,
                    "previous_replicas": p.replicas,
                    "adding": adding,
                    "removing": removing,
                },
            )


def timeline(
    entries: Iterable[MetadataEntry], image: MetadataImage | None = None
) -> Iterator[Event]:
    """The events of `entries`, starting from `image` (an empty cluster by default)."""
    builder = TimelineBuilder(image)
    for e in entries:
        yield from builder.feed(e)


# --- summaries --------------------------------------------------------------------


@dataclass
class Interval:
    """A span of time (ms) with its offsets; end None: still open at the end."""

    start: int
    start_offset: int
    end: int | None = None
    end_offset: int | None = None

    def duration(self, until: int) -> int:
        """Its length in ms, open intervals counted to `until`."""
        return (self.end if self.end is not None else until) - self.start


@dataclass
class PartitionSummary:
    """One partition's account: leader and ISR changes, offline intervals."""

    topic: str
    partition: int
    leader_changes: int = 0
    isr_changes: int = 0
    isr_shrinks: int = 0
    unclean_elections: int = 0
    last_leader: int | None = None
    last_leader_epoch: int | None = None
    offline: list[Interval] = field(default_factory=list)
    leaders: dict[int, int] = field(default_factory=dict)  # broker -> times elected


@dataclass
class BrokerSummary:
    """One broker's account: registrations, fencing, leadership won and lost."""

    broker: int
    registrations: int = 0
    fenced: list[Interval] = field(default_factory=list)
    leaderships_gained: int = 0
    leaderships_lost: int = 0
    controlled_shutdowns: int = 0
    unregistered: int | None = None  # when it was last unregistered


@dataclass
class Summary:
    """The whole account over a range of the log."""

    first_time: int | None = None
    last_time: int | None = None
    first_offset: int | None = None
    last_offset: int | None = None
    events: int = 0
    partitions: dict[tuple[str, int], PartitionSummary] = field(default_factory=dict)
    brokers: dict[int, BrokerSummary] = field(default_factory=dict)
    quorum_leaders: list[tuple[int, int, int]] = field(default_factory=list)  # time, epoch, id


def summarize(events: Iterable[Event]) -> Summary:
    """Fold events (in log order) into per-partition and per-broker accounts."""
    s = Summary()
    for e in events:
        s.events += 1
        if e.timestamp >= 0:
            s.first_time = e.timestamp if s.first_time is None else s.first_time
            s.last_time = e.timestamp
        if e.offset >= 0:
            s.first_offset = e.offset if s.first_offset is None else s.first_offset
            s.last_offset = e.offset
        if e.kind == "quorum_leader":
            s.quorum_leaders.append((e.timestamp, e.epoch, e.details["leader"]))
            continue
        if e.topic is not None and e.partition is not None:
            key = (e.topic, e.partition)
            ps = s.partitions.get(key)
            if ps is None:
                ps = s.partitions[key] = PartitionSummary(e.topic, e.partition)
            if e.kind == "partition_created":
                ps.last_leader = e.details["leader"]
                ps.last_leader_epoch = e.details["leader_epoch"]
                if ps.last_leader is not None and ps.last_leader < 0:
                    ps.offline.append(Interval(e.timestamp, e.offset))
            elif e.kind == "leader_changed":
                new, old = e.details["leader"], e.details["previous_leader"]
                if new != old:
                    ps.leader_changes += 1
                ps.last_leader = new
                ps.last_leader_epoch = e.details["leader_epoch"]
                if e.details["leader_recovery_state"] == 1:
                    ps.unclean_elections += 1
                if new >= 0:
                    ps.leaders[new] = ps.leaders.get(new, 0) + 1
                    _broker(s, new).leaderships_gained += int(new != old)
                if old >= 0 and new != old:
                    _broker(s, old).leaderships_lost += 1
                if new < 0 <= old:
                    ps.offline.append(Interval(e.timestamp, e.offset))
                elif new >= 0 > old and ps.offline and ps.offline[-1].end is None:
                    ps.offline[-1].end = e.timestamp
                    ps.offline[-1].end_offset = e.offset
            elif e.kind == "isr_changed":
                ps.isr_changes += 1
                ps.isr_shrinks += int(bool(e.details["removed"]))
        if e.broker is not None and e.kind.startswith("broker_"):
            bs = _broker(s, e.broker)
            if e.kind == "broker_registered":
                bs.registrations += 1
            elif e.kind == "broker_fenced":
                if not bs.fenced or bs.fenced[-1].end is not None:
                    bs.fenced.append(Interval(e.timestamp, e.offset))
            elif e.kind == "broker_unfenced":
                if bs.fenced and bs.fenced[-1].end is None:
                    bs.fenced[-1].end = e.timestamp
                    bs.fenced[-1].end_offset = e.offset
            elif e.kind == "broker_controlled_shutdown":
                bs.controlled_shutdowns += 1
            elif e.kind == "broker_unregistered":
                bs.unregistered = e.timestamp
                if bs.fenced and bs.fenced[-1].end is None:
                    # Gone, not fenced: the interval ends with the registration.
                    bs.fenced[-1].end = e.timestamp
                    bs.fenced[-1].end_offset = e.offset
        if e.kind == "topic_deleted":
            for key, ps in s.partitions.items():
                if key[0] == e.topic and ps.offline and ps.offline[-1].end is None:
                    ps.offline[-1].end = e.timestamp
                    ps.offline[-1].end_offset = e.offset
    return s


def _broker(s: Summary, b: int) -> BrokerSummary:
    bs = s.brokers.get(b)
    if bs is None:
        bs = s.brokers[b] = BrokerSummary(b)
    return bs
