"""kafka-reassign-partitions.sh's JSON files and plans, pure (no I/O, no click).

- Topics file: `{"topics":[{"topic":"foo"}],"version":1}`.
- Plan file: `{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],
  "log_dirs":["any","any"]}]}`, written on one line, sorted by topic then partition,
  always with `log_dirs`; on input `log_dirs` is optional, and an entry other than
  "any" is the absolute log directory the replica on that broker moves to.

Errors are `PlanError`s whose text is the one line the tool prints.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kt.cluster.assignment import (
    AssignmentError,
    BrokerMetadata,
    assign_replicas_to_brokers,
)

Plan = dict[tuple[str, int], list[int]]


class PlanError(ValueError):
    """A malformed topics file or plan, or one that does not fit the cluster."""


def _load(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"{what} is not valid JSON: {exc}") from None


def parse_topics(text: str) -> list[str]:
    """The topic names of a --topics-to-move-json-file."""
    doc = _load(text, "topics file")
    if not isinstance(doc, dict) or not isinstance(doc.get("topics"), list):
        raise PlanError('topics file: expected {"topics":[{"topic":"name"}],"version":1}')
    version = doc.get("version", 1)
    if version != 1:
        raise PlanError(f"Not supported version field value {version}")
    names: list[str] = []
    for entry in doc["topics"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
            raise PlanError(f"topics file: bad entry {json.dumps(entry)}")
        if entry["topic"] not in names:
            names.append(entry["topic"])
    if not names:
        raise PlanError("List of topics to reassign contains no topics.")
    return names


def parse_plan(text: str) -> Plan:
    """A --reassignment-json-file: each partition's target replicas. Checks what the
    file alone can tell (Kafka's parseExecuteAssignmentArgs)."""
    doc = _load(text, "reassignment file")
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise PlanError(
            'reassignment file: expected {"version":1,"partitions":[{"topic":...,'
            '"partition":...,"replicas":[...]}]}'
        )
    version = doc.get("version", 1)
    if version != 1:
        raise PlanError(f"Not supported version field value {version}")
    plan: Plan = {}
    duplicates: list[str] = []
    for entry in doc["partitions"]:
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("topic"), str)
            and type(entry.get("partition")) is int
            and isinstance(entry.get("replicas"), list)
            and all(type(r) is int for r in entry["replicas"])
        ):
            raise PlanError(f"reassignment file: bad partition entry {json.dumps(entry)}")
        dirs = entry.get("log_dirs")
        if dirs is not None:
            if not isinstance(dirs, list) or len(dirs) != len(entry["replicas"]):
                raise PlanError(
                    f"reassignment file: log_dirs of {entry['topic']}-{entry['partition']} "
                    "must list one directory per replica"
                )
            if not all(isinstance(d, str) and d for d in dirs):
                raise PlanError(
                    f"reassignment file: log_dirs of {entry['topic']}-{entry['partition']} "
                    'must be directory paths or "any"'
                )
        key = (entry["topic"], entry["partition"])
        if key in plan:
            duplicates.append(f"{key[0]}-{key[1]}")
        plan[key] = list(entry["replicas"])
    if not plan:
        raise PlanError("Partition reassignment list cannot be empty")
    if duplicates:
        raise PlanError(
            "Partition reassignment contains duplicate topic partitions: " + ",".join(duplicates)
        )
    bad = [
        f"{t}-{p} contains {','.join(str(r) for r in sorted({r for r in rs if rs.count(r) > 1}))}"
        for (t, p), rs in sorted(plan.items())
        if len(set(rs)) != len(rs)
    ]
    if bad:
        raise PlanError(
            "Partition replica lists may not contain duplicate entries: " + ", ".join(bad)
        )
    empty = [f"{t}-{p}" for (t, p), rs in sorted(plan.items()) if not rs]
    if empty:
        raise PlanError(
            "Empty replica list specified in partition reassignment: " + ",".join(empty)
        )
    return plan


def parse_log_dirs(text: str) -> dict[tuple[str, int, int], str]:
    """The replica moves between log directories a plan asks for: (topic,
    partition, broker) -> directory, from each entry's `log_dirs` ("any" entries
    left out, as Kafka's parsePartitionReassignmentData). Call after parse_plan
    (which checks the file)."""
    doc = _load(text, "reassignment file")
    out: dict[tuple[str, int, int], str] = {}
    for entry in doc["partitions"]:
        dirs = entry.get("log_dirs") or ["any"] * len(entry["replicas"])
        for broker, d in zip(entry["replicas"], dirs, strict=True):
            if d != ANY_LOG_DIR:
                out[(entry["topic"], entry["partition"], broker)] = d
    return out


ANY_LOG_DIR = "any"


def check_plan(plan: Plan, partitions: Mapping[str, Iterable[int]], brokers: Iterable[int]) -> None:
    """The plan against the cluster: every partition exists, every broker is known."""
    missing = [
        f"{t}-{p}" for t, p in sorted(plan) if t not in partitions or p not in set(partitions[t])
    ]
    if missing:
        raise PlanError(
            "The proposed assignment contains non-existent partitions: " + ",".join(missing)
        )
    known = set(brokers)
    unknown = sorted({r for rs in plan.values() for r in rs if r not in known})
    if unknown:
        raise PlanError(
            "The proposed assignment contains non-existent brokerIDs: "
            + ",".join(map(str, unknown))
        )


def format_plan(plan: Mapping[tuple[str, int], Sequence[int]]) -> str:
    """Kafka's single-line plan JSON, sorted by topic then partition."""
    return json.dumps(plan_doc(plan), separators=(",", ":"))


def plan_doc(plan: Mapping[tuple[str, int], Sequence[int]]) -> dict[str, Any]:
    """The plan as Kafka's JSON document."""
    return {
        "version": 1,
        "partitions": [
            {"topic": t, "partition": p, "replicas": list(rs), "log_dirs": ["any"] * len(rs)}
            for (t, p), rs in sorted(plan.items())
        ],
    }


def generate(
    current: Mapping[tuple[str, int], Sequence[int]],
    brokers: Sequence[BrokerMetadata],
    *,
    start_index: int | None = None,
) -> Plan:
    """Kafka's --generate: each topic's partitions placed afresh over `brokers` (rack
    aware when they have racks), with the topic's current replication factor."""
    by_topic: dict[str, dict[int, Sequence[int]]] = {}
    for (t, p), rs in current.items():
        by_topic.setdefault(t, {})[p] = rs
    out: Plan = {}
    for t, parts in sorted(by_topic.items()):
        factor = len(parts[min(parts)])
        try:
            placed = assign_replicas_to_brokers(
                brokers, len(parts), factor, start_index=start_index
            )
        except AssignmentError as exc:
            raise PlanError(str(exc)) from None
        for i, p in enumerate(sorted(parts)):
            out[(t, p)] = placed[i]
    return out


def generate_minimal(
    current: Mapping[tuple[str, int], Sequence[int]],
    brokers: Sequence[BrokerMetadata],
) -> Plan:
    """A plan over `brokers` that moves as few replicas as possible: replicas already
    on a listed broker stay (in their order, so the leader stays when it can); the
    missing ones go to the least loaded listed brokers, preferring racks the
    partition does not use yet. Beyond Kafka (which reshuffles everything)."""
    allowed = {b.id: b.rack for b in brokers}
    if not allowed:
        raise PlanError("--broker-list names no brokers")
    load = {b: 0 for b in allowed}
    kept: dict[tuple[str, int], list[int]] = {}
    for tp, rs in sorted(current.items()):
        kept[tp] = [r for r in rs if r in allowed]
        for r in kept[tp]:
            load[r] += 1
    out: Plan = {}
    for tp, rs in sorted(current.items()):
        replicas = list(kept[tp])
        if len(rs) > len(allowed):
            raise PlanError(
                f"Replication factor: {len(rs)} larger than available brokers: {len(allowed)}."
            )
        while len(replicas) < len(rs):
            racks = {allowed[r] for r in replicas}
            candidates = [b for b in sorted(allowed) if b not in replicas]
            best = min(
                candidates,
                key=lambda b: (allowed[b] is not None and allowed[b] in racks, load[b], b),
            )
            replicas.append(best)
            load[best] += 1
        out[tp] = replicas
    return out


def moved_replicas(current: Mapping[tuple[str, int], Sequence[int]], plan: Plan) -> int:
    """How many replicas the plan puts on a broker that does not hold them yet."""
    return sum(len(set(rs) - set(current.get(tp, ()))) for tp, rs in plan.items())


def throttle_lists(
    current: Mapping[tuple[str, int], Sequence[int]], plan: Plan
) -> tuple[dict[str, dict[str, str]], list[int]]:
    """What --execute --throttle writes (Kafka's calculateLeaderThrottles /
    calculateFollowerThrottles): per topic, `leader.replication.throttled.replicas` =
    `P:B` for every existing replica of a moving partition and
    `follower.replication.throttled.replicas` = `P:B` for every new destination; and
    the brokers involved (both rates are set on each)."""
    topics: dict[str, dict[str, list[str]]] = {}
    brokers: set[int] = set()
    for (t, p), target in sorted(plan.items()):
        existing = list(current.get((t, p), []))
        if list(target) == existing:
            continue
        lists = topics.setdefault(t, {"leader": [], "follower": []})
        lists["leader"] += [f"{p}:{b}" for b in existing]
        lists["follower"] += [f"{p}:{b}" for b in target if b not in existing]
        brokers |= set(existing) | set(target)
    out = {
        t: {
            "leader.replication.throttled.replicas": ",".join(v["leader"]),
            "follower.replication.throttled.replicas": ",".join(v["follower"]),
        }
        for t, v in topics.items()
    }
    return out, sorted(brokers)
