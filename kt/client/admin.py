"""Client helpers for administration: topics, partitions, configs, cluster, log dirs."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kt.client.core import (
    BrokerInfo,
    ClientCore,
    KafkaError,
    TopicInfo,
    check,
    gather_or_cancel,
)
from kt.protocol import apis
from kt.protocol.codec import Api
from kt.protocol.errors import ErrorCode, error_for_code
from kt.protocol.schema import Struct

#: DescribeConfigs / AlterConfigs resource types
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
RESOURCE_GROUP = 32

#: IncrementalAlterConfigs operations
OP_SET = 0
OP_DELETE = 1
OP_APPEND = 2
OP_SUBTRACT = 3

#: ElectLeaders election types (Kafka's ElectionType)
ELECTION_PREFERRED = 0
ELECTION_UNCLEAN = 1

#: config_source values and the names Kafka's tools print
CONFIG_SOURCES = {
    -1: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}


@dataclass
class NewTopic:
    """A topic to create. -1 partitions / replication factor: the broker's defaults."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    #: partition -> broker ids (then num_partitions and replication_factor must be -1)
    assignments: dict[int, list[int]] = field(default_factory=dict)
    configs: dict[str, str | None] = field(default_factory=dict)


@dataclass
class ConfigEntry:
    """One config of a resource as DescribeConfigs reports it."""

    name: str
    value: str | None
    source: int
    read_only: bool = False
    is_sensitive: bool = False
    is_default: bool = False
    synonyms: list[tuple[str, str | None, int]] = field(default_factory=list)
    documentation: str | None = None

    @property
    def source_name(self) -> str:
        """DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG..."""
        return CONFIG_SOURCES.get(self.source, str(self.source))


@dataclass
class ClusterDescription:
    """Cluster id, controller and brokers."""

    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerInfo]


@dataclass
class PartitionReassignment:
    """A reassignment in progress (ListPartitionReassignments): the full replica set
    while it runs, the replicas being added and those being removed."""

    topic: str
    partition: int
    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


@dataclass
class LogDirPartition:
    """One partition replica in a log directory."""

    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool


@dataclass
class LogDirInfo:
    """One log directory of a broker."""

    broker: int
    path: str
    error: ErrorCode
    partitions: list[LogDirPartition]
    total_bytes: int = -1
    usable_bytes: int = -1


class AdminMixin(ClientCore):
    """Topic, config, cluster and log-dir administration."""

    async def list_topics(self, *, include_internal: bool = True) -> dict[str, TopicInfo]:
        """Every topic of the cluster, by name."""
        got = await self.fetch_topic_metadata(None)
        return {
            n: t
            for n, t in sorted(got.items())
            if (include_internal or not t.is_internal) and t.error == ErrorCode.NONE
        }

    async def describe_topics(self, names: Iterable[str]) -> dict[str, TopicInfo]:
        """Metadata of the named topics; KafkaError for the first that does not exist."""
        wanted = list(dict.fromkeys(names))
        got = await self.fetch_topic_metadata(wanted)
        for n in wanted:
            info = got.get(n)
            if info is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {n!r}")
            if info.error not in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE):
                raise KafkaError(info.error, f"topic {n!r}")
        return {n: got[n] for n in wanted}

    async def create_topics(
        self,
        topics: Sequence[NewTopic],
        *,
        validate_only: bool = False,
        timeout_ms: int = 30000,
    ) -> dict[str, KafkaError | None]:
        """Create topics through the controller; per topic None or its KafkaError."""
        body = apis.CREATE_TOPICS.request(
            topics=[
                {
                    "name": t.name,
                    "num_partitions": t.num_partitions,
                    "replication_factor": t.replication_factor,
                    "assignments": [
                        {"partition_index": p, "broker_ids": b}
                        for p, b in sorted(t.assignments.items())
                    ],
                    "configs": [{"name": k, "value": v} for k, v in t.configs.items()],
                }
                for t in topics
            ],
            timeout_ms=timeout_ms,
            validate_only=validate_only,
        )
        resp = await self._to_controller(apis.CREATE_TOPICS, body)
        out: dict[str, KafkaError | None] = {}
        for r in resp.topics:
            out[r.name] = (
                KafkaError(r.error_code, f"topic {r.name!r}", r.error_message)
                if r.error_code
                else None
            )
        await self.refresh_metadata([t.name for t in topics])
        return out

    async def delete_topics(
        self, names: Sequence[str], *, timeout_ms: int = 30000
    ) -> dict[str, KafkaError | None]:
        """Delete topics through the controller; per topic None or its KafkaError."""
        body = apis.DELETE_TOPICS.request(
            topics=[{"name": n, "topic_id": uuid.UUID(int=0)} for n in names],
            topic_names=list(names),
            timeout_ms=timeout_ms,
        )
        resp = await self._to_controller(apis.DELETE_TOPICS, body)
        out: dict[str, KafkaError | None] = {}
        for r in resp.responses:
            name = r.name or str(r.topic_id)
            out[name] = (
                KafkaError(r.error_code, f"topic {name!r}", getattr(r, "error_message", None))
                if r.error_code
                else None
            )
            self.metadata.topics.pop(name, None)
        return out

    async def create_partitions(
        self,
        counts: Mapping[str, int],
        *,
        assignments: Mapping[str, list[list[int]]] | None = None,
        validate_only: bool = False,
        timeout_ms: int = 30000,
    ) -> dict[str, KafkaError | None]:
        """Raise topics' partition counts to `counts` (new partitions' replicas in
        `assignments`, one broker list per new partition)."""
        assignments = assignments or {}
        body = apis.CREATE_PARTITIONS.request(
            topics=[
                {
                    "name": t,
                    "count": c,
                    "assignments": (
                        [{"broker_ids": b} for b in assignments[t]] if t in assignments else None
                    ),
                }
                for t, c in counts.items()
            ],
            timeout_ms=timeout_ms,
            validate_only=validate_only,
        )
        resp = await self._to_controller(apis.CREATE_PARTITIONS, body)
        out: dict[str, KafkaError | None] = {}
        for r in resp.results:
            out[r.name] = (
                KafkaError(r.error_code, f"topic {r.name!r}", r.error_message)
                if r.error_code
                else None
            )
        await self.refresh_metadata(list(counts))
        return out

    async def _to_controller(self, api: Api, body: object) -> Struct:
        async def attempt() -> Struct:
            node = await self.controller(api)
            resp = await self.send(api, body, node)
            if getattr(resp, "error_code", 0) == ErrorCode.NOT_CONTROLLER:
                await self.refresh_metadata([])
                raise KafkaError(ErrorCode.NOT_CONTROLLER, api.name)
            return resp

        return await self.retrying(attempt)

    # --- configs -----------------------------------------------------------------------

    async def describe_configs(
        self,
        resource_type: int,
        name: str,
        keys: Sequence[str] | None = None,
        *,
        include_synonyms: bool = True,
        include_documentation: bool = False,
    ) -> list[ConfigEntry]:
        """The configs of one resource (a topic, or a broker by its id)."""
        body = apis.DESCRIBE_CONFIGS.request(
            resources=[
                {
                    "resource_type": resource_type,
                    "resource_name": name,
                    "configuration_keys": None if keys is None else list(keys),
                }
            ],
            include_synonyms=include_synonyms,
            include_documentation=include_documentation,
        )
        node = _broker_node(resource_type, name)

        async def attempt() -> Struct:
            return await self.send(apis.DESCRIBE_CONFIGS, body, node)

        resp = await self.retrying(attempt)
        for r in resp.results:
            check(r.error_code, f"{_resource_label(resource_type)} {name!r}", r.error_message)
            entries = []
            for c in r.configs:
                source = c.config_source
                if source == -1:
                    # v0 has only is_default; map it the way Kafka's admin client does.
                    source = 5 if c.is_default else 1
                entries.append(
                    ConfigEntry(
                        c.name,
                        c.value,
                        source,
                        c.read_only,
                        c.is_sensitive,
                        source == 5,
                        [(s.name, s.value, s.source) for s in c.synonyms],
                        c.documentation,
                    )
                )
            return entries
        return []

    async def incremental_alter_configs(
        self,
        resource_type: int,
        name: str,
        ops: Sequence[tuple[str, int, str | None]],
        *,
        validate_only: bool = False,
    ) -> None:
        """Apply (config name, OP_SET/OP_DELETE/OP_APPEND/OP_SUBTRACT, value) changes.

        Falls back to AlterConfigs (describe, merge, replace the whole set) when
        the broker lacks IncrementalAlterConfigs and only SET/DELETE are asked.
        """
        node = _broker_node(resource_type, name)
        label = f"{_resource_label(resource_type)} {name!r}"
        if await self.supports(apis.INCREMENTAL_ALTER_CONFIGS, node):
            body = apis.INCREMENTAL_ALTER_CONFIGS.request(
                resources=[
                    {
                        "resource_type": resource_type,
                        "resource_name": name,
                        "configs": [
                            {"name": k, "config_operation": op, "value": v} for k, op, v in ops
                        ],
                    }
                ],
                validate_only=validate_only,
            )

            async def attempt() -> Struct:
                return await self.send(apis.INCREMENTAL_ALTER_CONFIGS, body, node)

            resp = await self.retrying(attempt)
            for r in resp.responses:
                check(r.error_code, label, r.error_message)
            return
        if any(op not in (OP_SET, OP_DELETE) for _, op, _ in ops):
            raise KafkaError(
                ErrorCode.UNSUPPORTED_VERSION, label, "the broker cannot APPEND/SUBTRACT configs"
            )
        current = await self.describe_configs(resource_type, name, include_synonyms=False)
        merged: dict[str, str | None] = {
            c.name: c.value
            for c in current
            if c.source in (1, 2, 3) and not c.is_sensitive and c.value is not None
        }
        for k, op, v in ops:
            if op == OP_SET:
                merged[k] = v
            else:
                merged.pop(k, None)
        await self.alter_configs(resource_type, name, merged, validate_only=validate_only)

    async def alter_configs(
        self,
        resource_type: int,
        name: str,
        configs: Mapping[str, str | None],
        *,
        validate_only: bool = False,
    ) -> None:
        """Replace a resource's dynamic configs with `configs` (AlterConfigs)."""
        node = _broker_node(resource_type, name)
        body = apis.ALTER_CONFIGS.request(
            resources=[
                {
                    "resource_type": resource_type,
                    "resource_name": name,
                    "configs": [{"name": k, "value": v} for k, v in configs.items()],
                }
            ],
            validate_only=validate_only,
        )

        async def attempt() -> Struct:
            return await self.send(apis.ALTER_CONFIGS, body, node)

        resp = await self.retrying(attempt)
        for r in resp.responses:
            check(r.error_code, f"{_resource_label(resource_type)} {name!r}", r.error_message)

    # --- cluster -----------------------------------------------------------------------

    async def describe_cluster(self) -> ClusterDescription:
        """Cluster id, controller and brokers (DescribeCluster, else Metadata)."""
        if await self.supports(apis.DESCRIBE_CLUSTER):

            async def attempt() -> Struct:
                resp = await self.send(
                    apis.DESCRIBE_CLUSTER,
                    apis.DESCRIBE_CLUSTER.request(include_cluster_authorized_operations=False),
                )
                # retriable errors (a broker still starting) are asked again
                check(resp.error_code, "describe cluster", resp.error_message)
                return resp

            resp = await self.retrying(attempt)
            return ClusterDescription(
                resp.cluster_id,
                resp.controller_id,
                sorted(
                    (BrokerInfo(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers),
                    key=lambda b: b.node_id,
                ),
            )
        md = await self.refresh_metadata([])
        return ClusterDescription(
            md.cluster_id, md.controller_id, [md.brokers[n] for n in sorted(md.brokers)]
        )

    async def alter_partition_reassignments(
        self, targets: Mapping[tuple[str, int], Sequence[int] | None]
    ) -> dict[tuple[str, int], KafkaError | None]:
        """Start (target replicas), change or cancel (None) partitions' reassignments
        through the controller (AlterPartitionReassignments); per partition None or
        its KafkaError."""
        by_topic: dict[str, list[dict[str, object]]] = {}
        for (t, p), replicas in targets.items():
            by_topic.setdefault(t, []).append(
                {"partition_index": p, "replicas": None if replicas is None else list(replicas)}
            )
        body = apis.ALTER_PARTITION_REASSIGNMENTS.request(
            timeout_ms=int(self.request_timeout * 1000),
            topics=[{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        )
        resp = await self._to_controller(apis.ALTER_PARTITION_REASSIGNMENTS, body)
        check(resp.error_code, "alter partition reassignments", resp.error_message)
        out: dict[tuple[str, int], KafkaError | None] = {}
        for r in resp.responses:
            for p in r.partitions:
                out[(r.name, p.partition_index)] = (
                    KafkaError(p.error_code, f"{r.name}-{p.partition_index}", p.error_message)
                    if p.error_code
                    else None
                )
        return out

    async def elect_leaders(
        self, election_type: int, partitions: Iterable[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], KafkaError | None]:
        """ElectLeaders (KIP-460): ELECTION_PREFERRED moves leadership back to each
        partition's preferred replica, ELECTION_UNCLEAN elects a leader for partitions
        without one, out-of-sync replicas included. `partitions` None means all: the
        answer then leaves out the partitions that needed no election. Per partition:
        None when elected, else the error (ELECTION_NOT_NEEDED when the leader is
        already right). Sent to the controller (any broker would forward it)."""
        requested = None if partitions is None else list(dict.fromkeys(partitions))
        node = await self.retrying(lambda: self.controller(apis.ELECT_LEADERS))
        version = await self.api_version(apis.ELECT_LEADERS, node)
        if election_type != ELECTION_PREFERRED and version < 1:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_VERSION,
                "elect leaders",
                "the broker supports only preferred elections (ElectLeaders v0)",
            )
        topics: dict[str, list[int]] = {}
        for topic, partition in requested or []:
            topics.setdefault(topic, []).append(partition)
        body = apis.ELECT_LEADERS.request(
            election_type=election_type,
            topic_partitions=None
            if requested is None
            else [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            timeout_ms=int(self.request_timeout * 1000),
        )
        resp = await self._to_controller(apis.ELECT_LEADERS, body)
        check(getattr(resp, "error_code", 0), "elect leaders")
        out: dict[tuple[str, int], KafkaError | None] = {}
        for r in resp.replica_election_results:
            for p in r.partition_result:
                out[(r.topic, p.partition_id)] = (
                    None
                    if p.error_code == ErrorCode.NONE
                    else KafkaError(p.error_code, f"{r.topic}-{p.partition_id}", p.error_message)
                )
        return out

    async def list_partition_reassignments(
        self, topics: Mapping[str, Sequence[int]] | None = None
    ) -> dict[tuple[str, int], PartitionReassignment]:
        """Reassignments in progress (of `topics`' partitions, or all), by (topic,
        partition); empty when the controller does not offer ListPartitionReassignments."""

        async def offered() -> bool:
            # retried like the request itself: the controller the metadata names may
            # have just died (a refused connection refreshes the metadata)
            node = await self.controller(apis.LIST_PARTITION_REASSIGNMENTS)
            return await self.supports(apis.LIST_PARTITION_REASSIGNMENTS, node)

        # A broker without the API says the cluster has none (an old Kafka, a
        # Kafka-compatible implementation): no controller needed to learn that.
        if not await self.supports(apis.LIST_PARTITION_REASSIGNMENTS):
            return {}
        if not await self.retrying(offered):
            return {}
        body = apis.LIST_PARTITION_REASSIGNMENTS.request(
            timeout_ms=int(self.request_timeout * 1000),
            topics=None
            if topics is None
            else [{"name": t, "partition_indexes": list(ps)} for t, ps in topics.items()],
        )
        resp = await self._to_controller(apis.LIST_PARTITION_REASSIGNMENTS, body)
        check(resp.error_code, "list partition reassignments", resp.error_message)
        return {
            (t.name, p.partition_index): PartitionReassignment(
                t.name,
                p.partition_index,
                list(p.replicas),
                list(p.adding_replicas),
                list(p.removing_replicas),
            )
            for t in resp.topics
            for p in t.partitions
        }

    async def describe_log_dirs(
        self,
        brokers: Iterable[int] | None = None,
        topics: Mapping[str, list[int]] | None = None,
    ) -> list[LogDirInfo]:
        """Log directories of `brokers` (all when None) with the partitions they
        hold (only `topics`' partitions when given)."""
        nodes = sorted(self.metadata.brokers) if brokers is None else list(brokers)
        body = apis.DESCRIBE_LOG_DIRS.request(
            topics=None
            if topics is None
            else [{"topic": t, "partitions": ps} for t, ps in topics.items()]
        )

        async def one(node: int) -> list[LogDirInfo]:
            resp = await self.retrying(lambda: self.send(apis.DESCRIBE_LOG_DIRS, body, node))
            check(getattr(resp, "error_code", 0), f"broker {node}")
            return log_dirs_of(node, resp.results)

        got = await gather_or_cancel(*(one(n) for n in nodes))
        return [d for ds in got for d in ds]

    async def alter_replica_log_dirs(
        self, moves: Mapping[tuple[str, int, int], str]
    ) -> dict[tuple[str, int, int], KafkaError | None]:
        """Move replicas between their brokers' log directories: (topic, partition,
        broker) -> absolute directory path (AlterReplicaLogDirs to each broker).
        Per replica None (the move started, or nothing was to do) or the error
        (REPLICA_NOT_AVAILABLE: not on that broker yet, LOG_DIR_NOT_FOUND, ...)."""
        by_broker: dict[int, dict[str, dict[str, list[int]]]] = {}
        for (t, p, b), path in moves.items():
            by_broker.setdefault(b, {}).setdefault(path, {}).setdefault(t, []).append(p)

        async def one(node: int) -> dict[tuple[str, int, int], KafkaError | None]:
            body = apis.ALTER_REPLICA_LOG_DIRS.request(
                dirs=[
                    {"path": path, "topics": [{"name": t, "partitions": ps}
                                              for t, ps in topics.items()]}
                    for path, topics in by_broker[node].items()
                ]
            )  # fmt: skip
            resp = await self.send(apis.ALTER_REPLICA_LOG_DIRS, body, node)
            return {
                (r.topic_name, p.partition_index, node): None
                if p.error_code == ErrorCode.NONE
                else KafkaError(p.error_code, f"{r.topic_name}-{p.partition_index}-{node}")
                for r in resp.results
                for p in r.partitions
            }

        out: dict[tuple[str, int, int], KafkaError | None] = {}
        for got in await gather_or_cancel(*(one(n) for n in sorted(by_broker))):
            out.update(got)
        return out

    async def delete_records(
        self, offsets: Mapping[tuple[str, int], int]
    ) -> dict[tuple[str, int], int]:
        """Move log start offsets up to `offsets` (-1: the high watermark); returns
        the new low watermark per partition."""
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for tp in offsets:
            by_leader.setdefault(await self.leader_for(*tp), []).append(tp)
        out: dict[tuple[str, int], int] = {}

        async def one(node: int, tps: list[tuple[str, int]]) -> None:
            topics: dict[str, list[int]] = {}
            for t, p in tps:
                topics.setdefault(t, []).append(p)
            body = apis.DELETE_RECORDS.request(
                topics=[
                    {
                        "name": t,
                        "partitions": [
                            {"partition_index": p, "offset": offsets[(t, p)]} for p in ps
                        ],
                    }
                    for t, ps in topics.items()
                ],
                timeout_ms=int(self.request_timeout * 1000),
            )
            resp = await self.send(apis.DELETE_RECORDS, body, node)
            for rt in resp.topics:
                for rp in rt.partitions:
                    check(rp.error_code, f"delete records of {rt.name}-{rp.partition_index}")
                    out[(rt.name, rp.partition_index)] = rp.low_watermark

        await gather_or_cancel(*(one(n, tps) for n, tps in by_leader.items()))
        return out


def log_dirs_of(node: int, results: Iterable[Struct]) -> list[LogDirInfo]:
    """Broker `node`'s log directories from its DescribeLogDirs results, each
    directory's partitions sorted (callers that send the request themselves, such
    as the TUI's sampler, shape its answer the same way)."""
    dirs = []
    for r in results:
        parts = [
            LogDirPartition(
                t.name, p.partition_index, p.partition_size, p.offset_lag, p.is_future_key
            )
            for t in r.topics
            for p in t.partitions
        ]
        parts.sort(key=lambda x: (x.topic, x.partition))
        dirs.append(
            LogDirInfo(
                node,
                r.log_dir,
                error_for_code(r.error_code),
                parts,
                r.total_bytes,
                r.usable_bytes,
            )
        )
    return dirs


def _broker_node(resource_type: int, name: str) -> int | None:
    # Broker configs are answered by the broker itself; an empty name means the
    # cluster-wide default, which any broker answers.
    if resource_type in (RESOURCE_BROKER, RESOURCE_BROKER_LOGGER) and name:
        try:
            return int(name)
        except ValueError:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"broker {name!r}", "broker names are node ids"
            ) from None
    return None


def _resource_label(resource_type: int) -> str:
    return {RESOURCE_TOPIC: "topic", RESOURCE_BROKER: "broker", RESOURCE_GROUP: "group"}.get(
        resource_type, "resource"
    )
