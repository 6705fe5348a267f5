"""The bodies of the controller's requests to brokers (LeaderAndIsr, UpdateMetadata,
StopReplica), built from the controller's view.

Kafka's ControllerBrokerRequestBatch collects a state change's requests per broker
and sends them together; these functions build one request body each, in the field
names of kt's schemas (the spec's names in snake_case). The controller always
speaks the newest versions kt's brokers serve: the brokers of a kt cluster run the
same code, and a mixed cluster with JVM brokers is not a goal.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kt.cluster.election import LeaderAndIsr
from kt.storage.checkpoint import TopicPartition

# LeaderAndIsr / UpdateMetadata request types (v5+): full on controller failover and
# broker startup, incremental otherwise (Kafka's AbstractControlRequest.Type).
TYPE_INCREMENTAL = 1
TYPE_FULL = 2
# UpdateMetadata's security protocol ids (Kafka's SecurityProtocol.id).
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


@dataclass(frozen=True, slots=True)
class BrokerEndpointInfo:
    """A live broker as the controller knows it from /brokers/ids/N."""

    broker_id: int
    epoch: int  # the registration znode's czxid
    endpoints: tuple[tuple[str, str, int], ...]  # (listener, host, port)
    rack: str | None = None
    #: listener name -> security protocol, from the registration's
    #: listener_security_protocol_map (a listener missing here is named after its
    #: protocol, as PLAINTEXT://... is)
    protocols: tuple[tuple[str, str], ...] = ()

    def protocol(self, listener: str) -> str:
        """The security protocol of `listener` on this broker."""
        return dict(self.protocols).get(listener, listener)

    def endpoint(self, listener: str | None = None) -> tuple[str, int] | None:
        """(host, port) of a listener (the first when None)."""
        for name, host, port in self.endpoints:
            if listener is None or name == listener:
                return host, port
        return None

    def endpoint_for(self, listener: str) -> tuple[str, int] | None:
        """(host, port) of `listener`, else of the first listener (as
        `LiveBroker.endpoint_for`)."""
        return self.endpoint(listener) or self.endpoint()


@dataclass(slots=True)
class TopicReplicas:
    """A topic's replica assignment from /brokers/topics/T."""

    topic_id: bytes
    partitions: dict[int, list[int]]
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)


def _uuid(topic_id: bytes) -> uuid.UUID:
    return uuid.UUID(bytes=topic_id if len(topic_id) == 16 else bytes(16))


def leader_and_isr(
    *,
    controller_id: int,
    controller_epoch: int,
    broker_epoch: int,
    partitions: Iterable[tuple[TopicPartition, LeaderAndIsr, TopicReplicas, bool]],
    live_leaders: Iterable[BrokerEndpointInfo],
    full: bool = False,
    listener: str | None = None,
) -> dict[str, Any]:
    """A LeaderAndIsr body: (partition, leadership, assignment, is_new) entries."""
    by_topic: dict[str, dict[str, Any]] = {}
    for tp, lead, topic, is_new in partitions:
        entry = by_topic.setdefault(
            tp.topic,
            {"topic_name": tp.topic, "topic_id": _uuid(topic.topic_id), "partition_states": []},
        )
        entry["partition_states"].append(
            {
                "topic_name": tp.topic,
                "partition_index": tp.partition,
                "controller_epoch": lead.controller_epoch,
                "leader": lead.leader,
                "leader_epoch": lead.leader_epoch,
                "isr": list(lead.isr),
                "partition_epoch": lead.zk_version,
                "replicas": list(topic.partitions.get(tp.partition, [])),
                "adding_replicas": list(topic.adding.get(tp.partition, [])),
                "removing_replicas": list(topic.removing.get(tp.partition, [])),
                "is_new": is_new,
                "leader_recovery_state": int(lead.leader_recovery_state),
            }
        )
    leaders = []
    for b in live_leaders:
        ep = b.endpoint(listener)
        if ep is not None:
            leaders.append({"broker_id": b.broker_id, "host_name": ep[0], "port": ep[1]})
    return {
        "controller_id": controller_id,
        "is_kraft_controller": False,
        "type": TYPE_FULL if full else TYPE_INCREMENTAL,
        "controller_epoch": controller_epoch,
        "broker_epoch": broker_epoch,
        "topic_states": list(by_topic.values()),
        "live_leaders": leaders,
    }


def update_metadata(
    *,
    controller_id: int,
    controller_epoch: int,
    broker_epoch: int,
    partitions: Iterable[tuple[TopicPartition, LeaderAndIsr | None, TopicReplicas]],
    live_brokers: Iterable[BrokerEndpointInfo],
    offline: Mapping[TopicPartition, Collection[int]] | None = None,
    deleting: bool = False,
    full: bool = False,
) -> dict[str, Any]:
    """An UpdateMetadata body. A None leadership (or `deleting`) sends leader -2: the
    partition is being deleted. Offline replicas are those on dead brokers and those
    `offline` names (on a failed log dir of a live broker)."""
    live = list(live_brokers)
    live_ids = {b.broker_id for b in live}
    by_topic: dict[str, dict[str, Any]] = {}
    for tp, lead, topic in partitions:
        entry = by_topic.setdefault(
            tp.topic,
            {"topic_name": tp.topic, "topic_id": _uuid(topic.topic_id), "partition_states": []},
        )
        replicas = list(topic.partitions.get(tp.partition, []))
        if lead is None or deleting:
            state = {"leader": -2, "leader_epoch": lead.leader_epoch if lead else 0,
                     "isr": list(lead.isr) if lead else [], "zk_version": -1,
                     "controller_epoch": controller_epoch}  # fmt: skip
        else:
            state = {"leader": lead.leader, "leader_epoch": lead.leader_epoch,
                     "isr": list(lead.isr), "zk_version": lead.zk_version,
                     "controller_epoch": lead.controller_epoch}  # fmt: skip
        entry["partition_states"].append(
            {
                "topic_name": tp.topic,
                "partition_index": tp.partition,
                **state,
                "replicas": replicas,
                "offline_replicas": [
                    r
                    for r in replicas
                    if r not in live_ids or (offline and r in offline.get(tp, ()))
                ],
            }
        )
    brokers = []
    for b in live:
        brokers.append(
            {
                "id": b.broker_id,
                "v0_host": b.endpoints[0][1] if b.endpoints else "",
                "v0_port": b.endpoints[0][2] if b.endpoints else -1,
                "endpoints": [
                    {
                        "port": port,
                        "host": host,
                        "listener": name,
                        # the listener's protocol from the broker's protocol map,
                        # not its name (e.g. INTERNAL -> SASL_SSL), as Kafka sends it
                        "security_protocol": SECURITY_PROTOCOL_IDS.get(b.protocol(name), 0),
                    }
                    for name, host, port in b.endpoints
                ],
                "rack": b.rack,
            }
        )
    return {
        "controller_id": controller_id,
        "is_kraft_controller": False,
        "type": TYPE_FULL if full else TYPE_INCREMENTAL,
        "controller_epoch": controller_epoch,
        "broker_epoch": broker_epoch,
        "topic_states": list(by_topic.values()),
        "live_brokers": brokers,
    }


def stop_replica(
    *,
    controller_id: int,
    controller_epoch: int,
    broker_epoch: int,
    partitions: Mapping[TopicPartition, int],
    delete: bool,
) -> dict[str, Any]:
    """A StopReplica body for partitions -> their leader epoch (-2 when deleting, which
    Kafka uses to say "delete whatever the epoch")."""
    by_topic: dict[str, dict[str, Any]] = {}
    for tp, epoch in partitions.items():
        entry = by_topic.setdefault(tp.topic, {"topic_name": tp.topic, "partition_states": []})
        entry["partition_states"].append(
            {"partition_index": tp.partition, "leader_epoch": epoch, "delete_partition": delete}
        )
    return {
        "controller_id": controller_id,
        "is_kraft_controller": False,
        "controller_epoch": controller_epoch,
        "broker_epoch": broker_epoch,
        "delete_partitions": delete,
        "topic_states": list(by_topic.values()),
    }
