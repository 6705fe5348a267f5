"""`kt topic create|list|describe|alter|delete`: kafka-topics.sh over kt's client."""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from typing import Any

import click

from kt.admin.describe import min_insync_replicas, offline, preferred_leader
from kt.client import (
    RESOURCE_TOPIC,
    ConfigEntry,
    ControllerUnknownError,
    KafkaClient,
    KafkaError,
    NewTopic,
    PartitionInfo,
    PartitionReassignment,
    TopicInfo,
)
from kt.protocol.apis import DESCRIBE_CONFIGS
from kt.protocol.errors import ErrorCode
from kt.tools.console import emit_json, fail, handle_errors, usage_error, warn
from kt.tools.wire import Wire, match_names, parse_kv, wire_options


def kafka_uuid(u: uuid.UUID) -> str:
    """Kafka's text form of a Uuid: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """'1:2,2:3,3:1' (kafka-topics.sh) -> {0: [1, 2], 1: [2, 3], 2: [3, 1]}."""
    out: dict[int, list[int]] = {}
    for i, part in enumerate(text.split(",")):
        try:
            brokers = [int(b) for b in part.split(":")]
        except ValueError:
            usage_error(f"--replica-assignment: bad broker list {part!r}")
        if len(set(brokers)) != len(brokers):
            usage_error(f"--replica-assignment: duplicate broker in {part!r}")
        out[i] = brokers
    sizes = {len(b) for b in out.values()}
    if len(sizes) > 1:
        usage_error("--replica-assignment: every partition needs the same number of replicas")
    return out


def _topic_or_option(argument: str | None, option: str | None, *, required: bool) -> str | None:
    """The topic given as an argument (as rpk and `kt produce TOPIC` take it) or with
    --topic (as kafka-topics.sh does): either, or both when they agree; a usage error
    when they differ, or when `required` and neither is given."""
    if argument is not None and option is not None and argument != option:
        usage_error(f"the topic is given twice and differs: {argument!r} and --topic {option!r}")
    name = argument if argument is not None else option
    if name is None and required:
        cmd = click.get_current_context().info_name
        usage_error(f"which topic? give it as an argument (kt topic {cmd} TOPIC) or with --topic")
    return name


@click.group()
def topic() -> None:
    """Create, list, describe, alter and delete topics (like kafka-topics.sh).

    \b
    Examples:
      kt topic create orders --partitions 6 --config retention.ms=86400000
      kt topic list --exclude-internal
      kt topic describe orders
      kt topic describe --under-replicated-partitions
      kt topic alter orders --partitions 12
      kt topic delete --topic orders --if-exists

    The topic of create, describe, alter and delete is an argument or --topic
    (kafka-topics.sh's spelling); giving both with different values is a usage error.

    Exit codes: 0 ok, 1 the operation failed (unknown topic, broker error,
    unreachable cluster), 2 usage error.
    """


@topic.command()
@wire_options
@click.argument("topic_arg", metavar="[TOPIC]", required=False)
@click.option("--topic", "-t", "name", help="The topic to create (or the TOPIC argument).")
@click.option("--partitions", type=click.IntRange(min=1), help="Partition count (broker default).")
@click.option("--replication-factor", type=click.IntRange(min=1), help="Replicas per partition.")
@click.option(
    "--replica-assignment",
    metavar="B:B,B:B,...",
    help="Replicas of each partition, partitions separated by commas: '1:2,2:3'.",
)
@click.option("--config", "configs", multiple=True, metavar="K=V", help="Topic config override.")
@click.option("--if-not-exists", is_flag=True, help="Succeed when the topic already exists.")
@click.option("--validate-only", is_flag=True, help="Check the request; create nothing.")
@handle_errors
def create(
    wire: Wire,
    topic_arg: str | None,
    name: str | None,
    partitions: int | None,
    replication_factor: int | None,
    replica_assignment: str | None,
    configs: tuple[str, ...],
    if_not_exists: bool,
    validate_only: bool,
) -> None:
    """Create a topic; prints "Created topic NAME."."""
    name = _topic_or_option(topic_arg, name, required=True)
    assert name is not None
    assignment = parse_replica_assignment(replica_assignment) if replica_assignment else {}
    if assignment and (partitions is not None or replication_factor is not None):
        usage_error("--replica-assignment excludes --partitions and --replication-factor")
    cfg: dict[str, str | None] = dict(parse_kv(c, "--config") for c in configs)
    new = NewTopic(
        name,
        -1 if partitions is None else partitions,
        -1 if replication_factor is None else replication_factor,
        assignment,
        cfg,
    )

    async def go(c: KafkaClient) -> KafkaError | None:
        return (await c.create_topics([new], validate_only=validate_only)).get(name)

    err = wire.run(go)
    if err is not None:
        if err.code == ErrorCode.TOPIC_ALREADY_EXISTS and if_not_exists:
            return
        fail(str(err))
    click.echo(f"Created topic {name}." if not validate_only else f"Topic {name} is valid.")


@topic.command("list")
@wire_options
@click.option("--topic", "-t", "pattern", help="Only topics matching this name or regex.")
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics.")
@click.option("--json", "as_json", is_flag=True, help="A JSON array of names.")
@handle_errors
def list_topics(wire: Wire, pattern: str | None, exclude_internal: bool, as_json: bool) -> None:
    """List topic names, one per line."""

    async def go(c: KafkaClient) -> dict[str, TopicInfo]:
        return await c.list_topics(include_internal=not exclude_internal)

    topics = wire.run(go)
    names = sorted(topics) if pattern is None else match_names(pattern, topics)
    if as_json:
        emit_json(names)
        return
    for n in names:
        click.echo(n)


def _ids(nodes: list[int]) -> str:
    return ",".join(map(str, nodes))


def reassigning(p: PartitionInfo, ra: PartitionReassignment | None) -> bool:
    """Whether a listed reassignment still touches the partition's replicas (it may
    have finished between the two requests; Kafka's isReassignmentInProgress)."""
    if ra is None:
        return False
    changing = set(ra.adding_replicas) | set(ra.removing_replicas)
    return any(r in changing for r in p.replicas)


def replication_factor(p: PartitionInfo, ra: PartitionReassignment | None) -> int:
    """Replicas of the partition, not counting those a reassignment is adding."""
    if ra is not None and reassigning(p, ra):
        return len(ra.replicas) - len(ra.adding_replicas)
    return len(p.replicas)


@dataclass(frozen=True)
class PartitionFilter:
    """kafka-topics.sh --describe's partition filters (a partition matching any is shown)."""

    under_replicated: bool = False
    under_min_isr: bool = False
    at_min_isr: bool = False
    unavailable: bool = False
    # Not in Kafka (KAFKA-12556 was not merged): the leader is not the first replica.
    under_preferred: bool = False

    @property
    def active(self) -> bool:
        """True when any filter is on (then only partition lines are printed)."""
        return (
            self.under_replicated
            or self.under_min_isr
            or self.at_min_isr
            or self.unavailable
            or self.under_preferred
        )

    def wanted(
        self, p: PartitionInfo, ra: PartitionReassignment | None, min_isr: int, live: set[int]
    ) -> bool:
        """Kafka's definitions: under-replicated RF - |ISR| > 0; under min ISR: no leader
        or |ISR| < min.insync.replicas; at min ISR: |ISR| = min.insync.replicas;
        unavailable: no leader, or a leader that is not a live broker; under preferred
        replica (kt's): the leader, or its absence, is not the first replica."""
        no_leader = offline(p)
        return (
            (self.under_replicated and replication_factor(p, ra) - len(p.isr) > 0)
            or (self.under_min_isr and (no_leader or len(p.isr) < min_isr))
            or (self.at_min_isr and len(p.isr) == min_isr)
            or (self.unavailable and (no_leader or p.leader not in live))
            or (self.under_preferred and bool(p.replicas) and p.leader != preferred_leader(p))
        )


def topic_line(t: TopicInfo, rf: int, overrides: list[ConfigEntry]) -> str:
    """`Topic: T\tTopicId: ID\tPartitionCount: N\tReplicationFactor: R\tConfigs: k=v,...`"""
    line = f"Topic: {t.name}"
    if t.topic_id.int:
        line += f"\tTopicId: {kafka_uuid(t.topic_id)}"
    line += f"\tPartitionCount: {len(t.partitions)}\tReplicationFactor: {rf}"
    return line + "\tConfigs: " + ",".join(f"{c.name}={c.value}" for c in overrides)


def partition_line(topic: str, p: PartitionInfo, ra: PartitionReassignment | None) -> str:
    """`\tTopic: T\tPartition: P\tLeader: L\tReplicas: ..\tIsr: ..` as Kafka 3.8 prints
    it: Adding/Removing Replicas while a reassignment is listed, then Elr and
    LastKnownElr, which are N/A on a ZooKeeper-mode cluster (no ELR there)."""
    leader = str(p.leader) if p.leader >= 0 else "none"
    line = (
        f"\tTopic: {topic}\tPartition: {p.partition}\tLeader: {leader}"
        f"\tReplicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}"
    )
    if ra is not None:
        line += (
            f"\tAdding Replicas: {_ids(ra.adding_replicas)}"
            f"\tRemoving Replicas: {_ids(ra.removing_replicas)}"
        )
    return line + "\tElr: N/A\tLastKnownElr: N/A"


def describe_topic(
    t: TopicInfo,
    configs: list[ConfigEntry],
    live: set[int],
    reassignments: dict[tuple[str, int], PartitionReassignment],
    flt: PartitionFilter,
    *,
    topics_with_overrides: bool = False,
) -> tuple[list[str], dict[str, Any] | None]:
    """The text lines and the JSON object (None: nothing to show) for one topic."""
    overrides = [c for c in configs if not c.is_default]
    min_isr = min_insync_replicas((c.name, c.value) for c in configs)
    parts = [t.partitions[p] for p in sorted(t.partitions)]

    def ra_of(p: PartitionInfo) -> PartitionReassignment | None:
        return reassignments.get((t.name, p.partition))

    rf = replication_factor(parts[0], ra_of(parts[0])) if parts else 0
    if topics_with_overrides:
        if not overrides or flt.active:
            return [], None
        shown: list[PartitionInfo] = []
    elif flt.active:
        shown = [p for p in parts if flt.wanted(p, ra_of(p), min_isr, live)]
        if not shown:
            return [], None
    else:
        shown = parts
    lines = [] if flt.active else [topic_line(t, rf, overrides)]
    lines += [partition_line(t.name, p, ra_of(p)) for p in shown]
    doc = {
        "topic": t.name,
        "topic_id": kafka_uuid(t.topic_id),
        "internal": t.is_internal,
        "partition_count": len(parts),
        "replication_factor": rf,
        "min_insync_replicas": min_isr,
        "configs": {c.name: c.value for c in overrides},
        "partitions": [
            {
                "partition": p.partition,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "replicas": p.replicas,
                "isr": p.isr,
                "offline_replicas": p.offline_replicas,
                "adding_replicas": ra.adding_replicas if (ra := ra_of(p)) else [],
                "removing_replicas": ra.removing_replicas if ra else [],
            }
            for p in shown
        ],
    }
    return lines, doc


@topic.command()
@wire_options
@click.argument("topic_arg", metavar="[TOPIC]", required=False)
@click.option("--topic", "-t", "pattern", help="Topic name, comma list or regex (default: all).")
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics.")
@click.option("--if-exists", is_flag=True, help="Succeed when the topic does not exist.")
@click.option(
    "--under-replicated-partitions",
    is_flag=True,
    help="Only partitions whose ISR is smaller than their replication factor.",
)
@click.option(
    "--under-min-isr-partitions",
    is_flag=True,
    help="Only partitions without a leader or with ISR < min.insync.replicas.",
)
@click.option(
    "--at-min-isr-partitions", is_flag=True, help="Only partitions with ISR = min.insync.replicas."
)
@click.option(
    "--unavailable-partitions",
    is_flag=True,
    help="Only partitions without a leader or whose leader is not a live broker.",
)
@click.option(
    "--under-preferred-replica-partitions",
    is_flag=True,
    help="Only partitions not led by their preferred (first) replica (not in Kafka).",
)
@click.option(
    "--topics-with-overrides",
    is_flag=True,
    help="Only topics with config overrides (no partitions).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per topic (NDJSON).")
@handle_errors
def describe(
    wire: Wire,
    topic_arg: str | None,
    pattern: str | None,
    exclude_internal: bool,
    if_exists: bool,
    under_replicated_partitions: bool,
    under_min_isr_partitions: bool,
    at_min_isr_partitions: bool,
    unavailable_partitions: bool,
    under_preferred_replica_partitions: bool,
    topics_with_overrides: bool,
    as_json: bool,
) -> None:
    """Describe topics in kafka-topics.sh --describe's format.

    As Kafka 3.8 prints it: fields are separated by tabs, partition lines start
    with one:

    \b
    Topic: T  TopicId: ID  PartitionCount: N  ReplicationFactor: R  Configs: k=v,...
      Topic: T  Partition: 0  Leader: 1  Replicas: 1,2,3  Isr: 1,2  Elr: N/A  LastKnownElr: N/A

    Leader is 'none' when the partition has none. While a partition is being
    reassigned its line also has Adding Replicas and Removing Replicas (before Elr),
    and ReplicationFactor leaves out the replicas being added. Configs lists the
    topic's non-default configs. The partition filters (a partition matching any is
    shown) print only partition lines, no topic lines; --topics-with-overrides prints
    only the topic lines of topics with overrides. min.insync.replicas comes from
    the topic's configs. --under-preferred-replica-partitions (kt's, not Kafka's)
    shows the partitions whose leader is not their first replica; `kt
    leader-election --election-type preferred` moves them back. --json: one object
    per topic shown, with its shown partitions.
    """
    pattern = _topic_or_option(topic_arg, pattern, required=False)
    flt = PartitionFilter(
        under_replicated_partitions,
        under_min_isr_partitions,
        at_min_isr_partitions,
        unavailable_partitions,
        under_preferred_replica_partitions,
    )

    async def go(
        c: KafkaClient,
    ) -> tuple[
        list[TopicInfo],
        dict[str, list[ConfigEntry]],
        set[int],
        dict[tuple[str, int], PartitionReassignment],
    ]:
        topics = await c.list_topics(include_internal=not exclude_internal)
        names = sorted(topics) if pattern is None else match_names(pattern, topics)
        if pattern is not None and not names and not if_exists:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"topic {pattern!r}",
                "does not exist",
            )
        configs: dict[str, list[ConfigEntry]] = {}
        if not await c.supports(DESCRIBE_CONFIGS):
            # Describe needs no configs to be useful (a Kafka-compatible service
            # without DescribeConfigs): the partitions, and a word on stderr.
            conn = await c.any_connection()
            warn(f"{conn.label} does not support the DescribeConfigs API: configs not shown")
        else:
            for n in names:
                try:
                    configs[n] = await c.describe_configs(RESOURCE_TOPIC, n, include_synonyms=False)
                except KafkaError as exc:
                    if exc.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        raise
        reassignments: dict[tuple[str, int], PartitionReassignment] = {}
        if names:
            try:
                reassignments = await c.list_partition_reassignments(
                    {n: sorted(topics[n].partitions) for n in names}
                )
            except ControllerUnknownError as exc:
                # Only the controller knows the reassignments; the rest needs none.
                warn(f"{exc.detail}: reassignments in progress not shown")
        return [topics[n] for n in names], configs, set(c.metadata.brokers), reassignments

    infos, configs, live, reassignments = wire.run(go)
    for t in infos:
        lines, doc = describe_topic(
            t,
            configs.get(t.name, []),
            live,
            reassignments,
            flt,
            topics_with_overrides=topics_with_overrides,
        )
        if as_json:
            if doc is not None:
                emit_json(doc)
            continue
        for line in lines:
            click.echo(line)


@topic.command()
@wire_options
@click.argument("topic_arg", metavar="[TOPIC]", required=False)
@click.option("--topic", "-t", "pattern", help="Topic name, comma list or regex (or TOPIC).")
@click.option(
    "--partitions", type=click.IntRange(min=1), required=True, help="The new partition count."
)
@click.option(
    "--replica-assignment",
    metavar="B:B,B:B,...",
    help="Replicas of every partition (existing ones first, as kafka-topics.sh takes it).",
)
@click.option("--if-exists", is_flag=True, help="Succeed when the topic does not exist.")
@handle_errors
def alter(
    wire: Wire,
    topic_arg: str | None,
    pattern: str | None,
    partitions: int,
    replica_assignment: str | None,
    if_exists: bool,
) -> None:
    """Raise a topic's partition count (topic configs: `kt configs alter`)."""
    chosen = _topic_or_option(topic_arg, pattern, required=True)
    assert chosen is not None
    pattern = chosen
    assignment = parse_replica_assignment(replica_assignment) if replica_assignment else {}

    async def go(c: KafkaClient) -> list[str]:
        topics = await c.list_topics()
        names = match_names(pattern, topics)
        if not names:
            if if_exists:
                return []
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {pattern!r}", "does not exist"
            )
        new_assign = {}
        for n in names:
            have = len(topics[n].partitions)
            if assignment:
                new_assign[n] = [assignment[i] for i in sorted(assignment) if i >= have]
        errors = await c.create_partitions(
            {n: partitions for n in names}, assignments=new_assign or None
        )
        for err in errors.values():
            if err is not None:
                raise err
        return names

    for n in wire.run(go):
        click.echo(f"Altered topic {n}: {partitions} partitions.")


@topic.command()
@wire_options
@click.argument("topic_arg", metavar="[TOPIC]", required=False)
@click.option("--topic", "-t", "pattern", help="Topic name, comma list or regex (or TOPIC).")
@click.option("--if-exists", is_flag=True, help="Succeed when the topic does not exist.")
@handle_errors
def delete(wire: Wire, topic_arg: str | None, pattern: str | None, if_exists: bool) -> None:
    """Delete topics."""
    chosen = _topic_or_option(topic_arg, pattern, required=True)
    assert chosen is not None
    pattern = chosen

    async def go(c: KafkaClient) -> list[str]:
        topics = await c.list_topics()
        names = match_names(pattern, topics)
        if not names:
            if if_exists:
                return []
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {pattern!r}", "does not exist"
            )
        errors = await c.delete_topics(names)
        for err in errors.values():
            if err is not None:
                raise err
        return names

    for n in wire.run(go):
        click.echo(f"Deleted topic {n}.")
