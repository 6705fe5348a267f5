"""The TUI's write actions, through kt's client library.

Each action comes in two halves: `describe_*` says exactly what the action will do
(the confirmation dialog's text) and whether the cluster would accept it, asking
the broker to validate where the protocol allows (`validate_only` on CreateTopics,
CreatePartitions and IncrementalAlterConfigs); the action itself then does it.
Both return an `ActionResult` and never raise for cluster-side problems: `ok` is
False and `message` says why, in one sentence a dialog can show.

Every call opens its own short-lived client, so actions work from any event loop
and never reuse a connection a broker restart left dead. Offsets are reset like
Kafka's `kafka-consumer-groups.sh --reset-offsets`: only for inactive groups
(state Empty or Dead), with new offsets clamped to each partition's log start
and end. Reassignments are started like `kafka-reassign-partitions.sh --execute`
(the same plan checks, refused while others run, optional throttle) and cancelled
like its `--cancel` (the throttles are cleared once nothing is left in progress);
preferred elections like `kafka-leader-election.sh --election-type PREFERRED`.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kt.admin.offset_reset import ResetPlan, ResetTarget, plan_moves
from kt.admin.reassign_plan import PlanError, check_plan
from kt.admin.reassignment import clear_throttles, set_throttles
from kt.client import (
    EARLIEST,
    ELECTION_PREFERRED,
    LATEST,
    OP_DELETE,
    OP_SET,
    RESOURCE_TOPIC,
    ConfigEntry,
    KafkaClient,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NewTopic,
    SecurityConfig,
    TopicInfo,
)
from kt.protocol.errors import ErrorCode

T = TypeVar("T")
TopicPartition = tuple[str, int]
#: a reassignment plan: target replicas per partition (kt.admin.reassign_plan.Plan)
PlanMap = Mapping[TopicPartition, Sequence[int]]

#: the reset targets the TUI offers (kt.admin.offset_reset has more)
RESET_TARGETS = ("earliest", "latest", "offset", "timestamp")


@dataclass(frozen=True, slots=True)
class ActionResult:
    """The outcome of an action, or of a `describe_*` (then `ok` tells whether the
    action would be accepted)."""

    ok: bool
    message: str


class _Refused(Exception):
    """An action the cluster would not accept, with the sentence saying why."""


class ClusterActions:
    """Topic and group actions against one cluster."""

    def __init__(
        self,
        bootstrap: str,
        *,
        request_timeout: float = 15.0,
        security: SecurityConfig | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.request_timeout = request_timeout
        self.security = security

    async def _with_client(self, fn: Callable[[KafkaClient], Awaitable[T]]) -> T:
        async with KafkaClient(
            self.bootstrap,
            client_id="kt-tui-actions",
            request_timeout=self.request_timeout,
            connect_timeout=self.request_timeout,
            retries=2,
            security=self.security,
        ) as client:
            return await fn(client)

    async def _result(self, fn: Callable[[KafkaClient], Awaitable[str]]) -> ActionResult:
        try:
            return ActionResult(True, await self._with_client(fn))
        except (_Refused, ValueError) as exc:
            return ActionResult(False, str(exc))
        except KafkaError as exc:
            return ActionResult(False, _kafka_message(exc))
        except (KafkaConnectionError, KafkaTimeoutError, OSError) as exc:
            return ActionResult(False, f"cannot reach the cluster: {exc}")

    # --- create topic --------------------------------------------------------------

    async def describe_create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
    ) -> ActionResult:
        """What creating the topic does; the broker validates it first."""
        configs = dict(configs or {})

        async def go(c: KafkaClient) -> str:
            topic = NewTopic(name, partitions, replication_factor, configs=dict(configs))
            err = (await c.create_topics([topic], validate_only=True)).get(name)
            if err is not None:
                raise _Refused(f"cannot create topic {name!r}: {_kafka_message(err)}")
            return _create_text(name, partitions, replication_factor, configs)

        return await self._result(go)

    async def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
    ) -> ActionResult:
        """Create a topic (-1: the broker's default partitions / replication)."""
        configs = dict(configs or {})

        async def go(c: KafkaClient) -> str:
            topic = NewTopic(name, partitions, replication_factor, configs=dict(configs))
            err = (await c.create_topics([topic])).get(name)
            if err is not None:
                raise _Refused(f"cannot create topic {name!r}: {_kafka_message(err)}")
            info = await c.topic(name, refresh=True)
            rf = max((len(p.replicas) for p in info.partitions.values()), default=0)
            count = _n(len(info.partitions), "partition")
            return f"Created topic {name!r} with {count}, replication factor {rf}."

        return await self._result(go)

    # --- delete topic --------------------------------------------------------------

    async def describe_delete_topic(self, name: str) -> ActionResult:
        """What deleting the topic destroys: its partitions, records and bytes."""

        async def go(c: KafkaClient) -> str:
            info = await _existing_topic(c, name)
            if info.is_internal:
                raise _Refused(f"{name!r} is an internal topic: kt will not delete it")
            tps = [(name, p) for p in sorted(info.partitions)]
            starts, ends = await asyncio.gather(
                c.list_offsets(tps, EARLIEST), c.list_offsets(tps, LATEST)
            )
            records = sum(max(0, ends[tp][0] - starts[tp][0]) for tp in tps)
            size = await _topic_size(c, name, info.partitions)
            return (
                f"Delete topic {name!r}: {_n(len(tps), 'partition')}, "
                f"{_n(records, 'record')}, {_bytes(size)} on disk. "
                "Its data is removed and cannot be recovered."
            )

        return await self._result(go)

    async def delete_topic(self, name: str) -> ActionResult:
        """Delete a topic and its data."""

        async def go(c: KafkaClient) -> str:
            info = await _existing_topic(c, name)
            if info.is_internal:
                raise _Refused(f"{name!r} is an internal topic: kt will not delete it")
            err = (await c.delete_topics([name])).get(name)
            if err is not None:
                raise _Refused(f"cannot delete topic {name!r}: {_kafka_message(err)}")
            return f"Deleted topic {name!r}."

        return await self._result(go)

    # --- add partitions ------------------------------------------------------------

    async def describe_add_partitions(self, topic: str, total: int) -> ActionResult:
        """What raising the partition count to `total` does (the broker validates)."""

        async def go(c: KafkaClient) -> str:
            info = await _existing_topic(c, topic)
            now = len(info.partitions)
            if total <= now:
                raise _Refused(
                    f"topic {topic!r} has {_n(now, 'partition')}: the count can only "
                    f"grow, so give more than {now}"
                )
            err = (await c.create_partitions({topic: total}, validate_only=True)).get(topic)
            if err is not None:
                raise _Refused(f"cannot add partitions to {topic!r}: {_kafka_message(err)}")
            new = list(range(now, total))
            shown = ", ".join(map(str, new)) if len(new) <= 8 else f"{new[0]}-{new[-1]}"
            return (
                f"Increase topic {topic!r} from {now} to {total} partitions "
                f"(new: {shown}). Partitions cannot be removed again, and keyed "
                "records will hash to different partitions from now on."
            )

        return await self._result(go)

    async def add_partitions(self, topic: str, total: int) -> ActionResult:
        """Raise a topic's partition count to `total`."""

        async def go(c: KafkaClient) -> str:
            info = await _existing_topic(c, topic)
            now = len(info.partitions)
            if total <= now:
                raise _Refused(
                    f"topic {topic!r} has {_n(now, 'partition')}: the count can only grow"
                )
            err = (await c.create_partitions({topic: total})).get(topic)
            if err is not None:
                raise _Refused(f"cannot add partitions to {topic!r}: {_kafka_message(err)}")
            return f"Topic {topic!r} now has {total} partitions (was {now})."

        return await self._result(go)

    # --- alter a topic config ------------------------------------------------------

    async def describe_alter_topic_config(
        self, topic: str, key: str, value: str | None
    ) -> ActionResult:
        """What setting `key` to `value` (None: removing the override) changes."""

        async def go(c: KafkaClient) -> str:
            await _existing_topic(c, topic)
            entry = await _config_entry(c, topic, key)
            await c.incremental_alter_configs(
                RESOURCE_TOPIC, topic, [_op(key, value)], validate_only=True
            )
            return _alter_text(topic, key, value, entry)

        return await self._result(go)

    async def alter_topic_config(self, topic: str, key: str, value: str | None) -> ActionResult:
        """Set a topic config override (IncrementalAlterConfigs); None removes it."""

        async def go(c: KafkaClient) -> str:
            await _existing_topic(c, topic)
            await c.incremental_alter_configs(RESOURCE_TOPIC, topic, [_op(key, value)])
            entry = await _config_entry(c, topic, key)
            now = entry.value if entry is not None else None
            if value is None:
                return f"Removed the override of {key} on topic {topic!r}; it is now {_shown(now)}."
            return f"Set {key}={_shown(now)} on topic {topic!r}."

        return await self._result(go)

    # --- reset a group's offsets ---------------------------------------------------

    async def plan_reset_offsets(
        self,
        group_id: str,
        to: str,
        value: int | None = None,
        topics: Sequence[str] | None = None,
    ) -> ResetPlan:
        """The offsets a reset would commit (raises KafkaError / ValueError)."""
        return await self._with_client(lambda c: _plan(c, group_id, to, value, topics))

    async def describe_reset_offsets(
        self,
        group_id: str,
        to: str,
        value: int | None = None,
        topics: Sequence[str] | None = None,
    ) -> ActionResult:
        """What resetting the group's offsets commits, partition by partition.

        `to`: "earliest", "latest", "offset" (`value` the offset) or "timestamp"
        (`value` in ms since the epoch: the first offset at or after it, else the
        log end). `topics`: the topics to reset (None: every topic the group has
        committed offsets for).
        """

        async def go(c: KafkaClient) -> str:
            plan = await _plan(c, group_id, to, value, topics)
            _refuse_active(plan)
            return _reset_text(plan, to, value)

        return await self._result(go)

    async def reset_offsets(
        self,
        group_id: str,
        to: str,
        value: int | None = None,
        topics: Sequence[str] | None = None,
    ) -> ActionResult:
        """Commit the reset `describe_reset_offsets` describes (computed anew: "latest"
        means the log end at this moment). Refused while the group has members."""

        async def go(c: KafkaClient) -> str:
            plan = await _plan(c, group_id, to, value, topics)
            _refuse_active(plan)
            if not plan.moves:
                raise _Refused(f"group {group_id!r} has no offsets to reset")
            await c.commit_offsets(group_id, plan.offsets())
            return (
                f"Reset group {group_id!r} to {_target(to, value)} on "
                f"{_n(len(plan.moves), 'partition')}."
            )

        return await self._result(go)

    # --- reassignments -------------------------------------------------------------

    async def describe_start_reassignment(
        self, plan: PlanMap, throttle: int = -1, source: str = ""
    ) -> ActionResult:
        """What starting the plan moves, checked against the cluster as `kt
        reassign-partitions --execute` checks it (nothing is sent on a bad plan)."""

        async def go(c: KafkaClient) -> str:
            current = await _checked_plan(c, plan)
            moves = [(tp, current[tp], list(rs)) for tp, rs in sorted(plan.items())]
            moved = sum(len(set(rs) - set(cur)) for _, cur, rs in moves)
            lines = [
                f"Reassign {_n(len(moves), 'partition')}"
                + (f" from {source}" if source else "")
                + f" ({_n(moved, 'replica')} to copy):"
            ]
            for (t, p), cur, rs in moves[:20]:
                same = " (unchanged)" if cur == rs else ""
                lines.append(f"  {t}-{p}: {_ids(cur)} -> {_ids(rs)}{same}")
            if len(moves) > 20:
                lines.append(f"  ... and {len(moves) - 20} more")
            if throttle >= 0:
                lines.append(
                    f"Replication throttled to {throttle:,} B/s on the brokers involved "
                    "(cancelling here, or kt reassign-partitions --verify once done, "
                    "clears it)."
                )
            else:
                lines.append("Not throttled: the new replicas copy at full speed.")
            return "\n".join(lines)

        return await self._result(go)

    async def start_reassignment(
        self, plan: PlanMap, throttle: int = -1, source: str = ""
    ) -> ActionResult:
        """Start the plan's reassignments (AlterPartitionReassignments), after
        setting the throttle when `throttle` >= 0 (bytes/s)."""

        async def go(c: KafkaClient) -> str:
            current = await _checked_plan(c, plan)
            target = {tp: list(rs) for tp, rs in plan.items()}
            if throttle >= 0:
                await set_throttles(c, current, target, throttle)
            errors = await c.alter_partition_reassignments(target)
            failed = {tp: e for tp, e in errors.items() if e is not None}
            started = [tp for tp in sorted(plan) if tp not in failed]
            if failed:
                raise _Refused(
                    f"started {_tps(started) or 'nothing'}; refused: "
                    + "; ".join(f"{t}-{p}: {_kafka_message(e)}" for (t, p), e in failed.items())
                )
            limit = f", throttled to {throttle:,} B/s" if throttle >= 0 else ""
            return f"Started the reassignment of {_tps(started)}{limit}."

        return await self._result(go)

    async def describe_cancel_reassignments(
        self, partitions: Sequence[TopicPartition] | None = None
    ) -> ActionResult:
        """What cancelling the reassignments of `partitions` (None: all in progress)
        puts back."""

        async def go(c: KafkaClient) -> str:
            running = await c.list_partition_reassignments()
            active = _active(running, partitions)
            lines = [f"Cancel {_n(len(active), 'reassignment')}; each partition goes back:"]
            for tp in active[:20]:
                r = running[tp]
                original = [b for b in r.replicas if b not in r.adding_replicas]
                dropped = f" (the copy on {_ids(r.adding_replicas)} is dropped)"
                lines.append(
                    f"  {tp[0]}-{tp[1]}: to {_ids(original)}"
                    + (dropped if r.adding_replicas else "")
                )
            if len(active) > 20:
                lines.append(f"  ... and {len(active) - 20} more")
            if len(active) == len(running):
                lines.append(
                    "Nothing is left in progress then: the replication throttles are "
                    "cleared (as kafka-reassign-partitions.sh --cancel does)."
                )
            else:
                left = len(running) - len(active)
                lines.append(f"{_n(left, 'other reassignment')} go on; the throttles stay.")
            return "\n".join(lines)

        return await self._result(go)

    async def cancel_reassignments(
        self, partitions: Sequence[TopicPartition] | None = None
    ) -> ActionResult:
        """Cancel reassignments in progress (None: all); clears the throttles when
        none is left."""

        async def go(c: KafkaClient) -> str:
            active = _active(await c.list_partition_reassignments(), partitions)
            errors = await c.alter_partition_reassignments({tp: None for tp in active})
            failed = {tp: e for tp, e in errors.items() if e is not None}
            done = [tp for tp in active if tp not in failed]
            if failed:
                raise _Refused(
                    f"cancelled {_tps(done) or 'nothing'}; failed: "
                    + "; ".join(f"{t}-{p}: {_kafka_message(e)}" for (t, p), e in failed.items())
                )
            text = f"Cancelled the reassignment of {_tps(done)}."
            if not await c.list_partition_reassignments():
                topics = sorted({t for t, _ in done})
                brokers = await clear_throttles(c, topics)
                text += f" Throttles cleared on brokers {_ids(brokers)}."
            return text

        return await self._result(go)

    # --- preferred leader election -----------------------------------------------------

    async def describe_elect_preferred_leaders(
        self, partitions: Sequence[TopicPartition] | None = None
    ) -> ActionResult:
        """Which partitions (of `partitions`, None: all) a preferred election moves,
        and which it cannot (preferred replica out of the ISR)."""

        async def go(c: KafkaClient) -> str:
            moves, stuck = await _election(c, partitions)
            lines = [
                f"Move leadership back to the preferred replica on {_n(len(moves), 'partition')}:"
            ]
            for (t, p), old, new in moves[:20]:
                lines.append(f"  {t}-{p}: leader {old} -> {new}")
            if len(moves) > 20:
                lines.append(f"  ... and {len(moves) - 20} more")
            if stuck:
                lines.append(
                    f"Not possible on {_n(len(stuck), 'partition')} (preferred replica "
                    "not in the ISR): " + ", ".join(f"{t}-{p}" for t, p in stuck[:10])
                )
            return "\n".join(lines)

        return await self._result(go)

    async def elect_preferred_leaders(
        self, partitions: Sequence[TopicPartition] | None = None
    ) -> ActionResult:
        """Run a preferred leader election (ElectLeaders) on `partitions` (None: the
        controller's answer covers every partition that needed one)."""

        async def go(c: KafkaClient) -> str:
            wanted = None if partitions is None else [(t, p) for t, p in partitions]
            results = await c.elect_leaders(ELECTION_PREFERRED, wanted)
            elected = sorted(tp for tp, e in results.items() if e is None)
            failed = {
                tp: e
                for tp, e in sorted(results.items())
                if e is not None and e.code != ErrorCode.ELECTION_NOT_NEEDED
            }
            if failed:
                raise _Refused(
                    f"elected {_n(len(elected), 'preferred leader')}; failed: "
                    + "; ".join(f"{t}-{p}: {_kafka_message(e)}" for (t, p), e in failed.items())
                )
            if not elected:
                return "Every partition was already led by its preferred replica."
            return f"Elected the preferred leader of {_tps(elected)}."

        return await self._result(go)


# --- helpers ------------------------------------------------------------------------


async def _checked_plan(c: KafkaClient, plan: PlanMap) -> dict[TopicPartition, list[int]]:
    """The plan's partitions' current replicas, after `kt reassign-partitions
    --execute`'s checks (partitions and brokers exist, nothing else in progress)."""
    if not plan:
        raise _Refused("the plan has no partitions")
    topics = await c.list_topics()
    try:
        check_plan(
            {tp: list(rs) for tp, rs in plan.items()},
            {t: list(i.partitions) for t, i in topics.items()},
            c.metadata.brokers,
        )
    except PlanError as exc:
        raise _Refused(str(exc)) from None
    running = await c.list_partition_reassignments()
    if running:
        raise _Refused(
            f"{_n(len(running), 'reassignment')} in progress ({_tps(sorted(running))}): "
            "cancel them or wait (kt reassign-partitions --execute --additional adds to them)"
        )
    return {(t, p): list(topics[t].partitions[p].replicas) for t, p in plan}


def _active(
    running: Mapping[TopicPartition, object], partitions: Sequence[TopicPartition] | None
) -> list[TopicPartition]:
    if not running:
        raise _Refused("no partition reassignment is in progress")
    if partitions is None:
        return sorted(running)
    wanted = [(t, p) for t, p in partitions]
    active = [tp for tp in wanted if tp in running]
    if not active:
        raise _Refused(f"{_tps(wanted)}: no reassignment in progress")
    return active


async def _election(
    c: KafkaClient, partitions: Sequence[TopicPartition] | None
) -> tuple[list[tuple[TopicPartition, int, int]], list[TopicPartition]]:
    """(partition, leader, preferred) where a preferred election moves the leader,
    and the partitions whose preferred replica cannot take over (not in the ISR)."""
    topics = await c.list_topics()
    infos = {(t, p): i for t, ti in topics.items() for p, i in ti.partitions.items()}
    if partitions is None:
        wanted = sorted(infos)
    else:
        wanted = [(t, p) for t, p in partitions]
        missing = [tp for tp in wanted if tp not in infos]
        if missing:
            raise _Refused(f"{_tps(missing)}: no such partition")
    moves, stuck = [], []
    for tp in wanted:
        info = infos[tp]
        if not info.replicas or info.leader == info.replicas[0]:
            continue
        if info.replicas[0] in info.isr:
            moves.append((tp, info.leader, info.replicas[0]))
        else:
            stuck.append(tp)
    if not moves:
        what = "every partition" if partitions is None else _tps(wanted)
        if stuck:
            raise _Refused(
                f"no election possible: the preferred replica of {_tps(stuck)} is not in the ISR"
            )
        raise _Refused(f"{what}: already led by the preferred replica, nothing to elect")
    return moves, stuck


def _tps(tps: Sequence[TopicPartition]) -> str:
    shown = ", ".join(f"{t}-{p}" for t, p in tps[:10])
    return shown + (f" and {len(tps) - 10} more" if len(tps) > 10 else "")


def _ids(brokers: Sequence[int]) -> str:
    return ",".join(map(str, brokers)) or "-"


async def _existing_topic(c: KafkaClient, name: str) -> TopicInfo:
    try:
        return await c.topic(name, refresh=True)
    except KafkaError as exc:
        if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise _Refused(f"topic {name!r} does not exist") from None
        raise


async def _topic_size(c: KafkaClient, name: str, partitions: Mapping[int, object]) -> int:
    try:
        dirs = await c.describe_log_dirs(topics={name: sorted(partitions)})
    except (KafkaError, KafkaConnectionError, KafkaTimeoutError):
        return -1
    return sum(p.size for d in dirs for p in d.partitions if not p.is_future)


async def _config_entry(c: KafkaClient, topic: str, key: str) -> ConfigEntry | None:
    entries = await c.describe_configs(RESOURCE_TOPIC, topic, [key], include_synonyms=True)
    return next((e for e in entries if e.name == key), None)


def _op(key: str, value: str | None) -> tuple[str, int, str | None]:
    return (key, OP_DELETE, None) if value is None else (key, OP_SET, value)


async def _plan(
    c: KafkaClient,
    group_id: str,
    to: str,
    value: int | None,
    topics: Sequence[str] | None,
) -> ResetPlan:
    if to not in RESET_TARGETS:
        raise ValueError(f"reset target must be one of {', '.join(RESET_TARGETS)}, not {to!r}")
    target = ResetTarget(to, value)
    desc, committed = await asyncio.gather(
        c.describe_groups([group_id]), c.fetch_committed(group_id)
    )
    d = desc[0]
    tps: list[TopicPartition]
    if topics is None:
        tps = sorted(committed)
    else:
        tps = []
        for name in dict.fromkeys(topics):
            info = await _existing_topic(c, name)
            tps.extend((name, p) for p in sorted(info.partitions))
    moves = await plan_moves(c, target, tps, committed)
    return ResetPlan(group_id, d.state, len(d.members), moves)


def _refuse_active(plan: ResetPlan) -> None:
    if not plan.inactive:
        raise _Refused(
            f"group {plan.group_id!r} is {plan.state} with {_n(plan.members, 'member')}: "
            "offsets can only be reset while it is inactive (stop its consumers first)"
        )


def _target(to: str, value: int | None) -> str:
    if to == "offset":
        return f"offset {value}"
    if to == "timestamp":
        assert value is not None
        when = datetime.datetime.fromtimestamp(value / 1000, datetime.UTC)
        return f"the first offset at or after {when.isoformat(timespec='milliseconds')}"
    return to


def _reset_text(plan: ResetPlan, to: str, value: int | None) -> str:
    if not plan.moves:
        return f"Group {plan.group_id!r} has no committed offsets: nothing to reset."
    lines = [
        f"Reset group {plan.group_id!r} to {_target(to, value)} on "
        f"{_n(len(plan.moves), 'partition')} (new offsets are clamped to each log):"
    ]
    for t, p, cur, new in plan.moves[:20]:
        before = "none" if cur < 0 else str(cur)
        lines.append(f"  {t}-{p}: {before} -> {new}")
    if len(plan.moves) > 20:
        lines.append(f"  ... and {len(plan.moves) - 20} more")
    return "\n".join(lines)


def _create_text(name: str, partitions: int, rf: int, configs: Mapping[str, str]) -> str:
    parts = (
        "the broker's default number of partitions"
        if partitions < 0
        else _n(partitions, "partition")
    )
    repl = "the broker's default replication factor" if rf < 0 else f"replication factor {rf}"
    text = f"Create topic {name!r} with {parts} and {repl}"
    if configs:
        text += ", configs " + ", ".join(f"{k}={v}" for k, v in sorted(configs.items()))
    return text + "."


def _alter_text(topic: str, key: str, value: str | None, entry: ConfigEntry | None) -> str:
    cur = entry.value if entry is not None else None
    overridden = entry is not None and entry.source_name == "DYNAMIC_TOPIC_CONFIG"
    state = "its override" if overridden else "the default"
    if value is None:
        if not overridden:
            return (
                f"{key} has no override on topic {topic!r}: nothing changes "
                f"(it stays {_shown(cur)})."
            )
        fallback = None
        if entry is not None:
            fallback = next((v for _, v, src in entry.synonyms if src != 1), None)
        after = f"the default {_shown(fallback)}" if fallback is not None else "its default"
        return (
            f"Remove the override of {key} on topic {topic!r} ({_shown(cur)}): "
            f"it reverts to {after}."
        )
    return f"Set {key} on topic {topic!r} from {_shown(cur)} ({state}) to {value}."


def _shown(v: str | None) -> str:
    return "(none)" if v is None else v


def _kafka_message(exc: KafkaError) -> str:
    return exc.detail or exc.code.message or exc.code.name


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _bytes(n: int) -> str:
    if n < 0:
        return "an unknown size"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover
