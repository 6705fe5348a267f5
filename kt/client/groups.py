"""Client helpers for consumer groups: administration through the group coordinator,
and `GroupMember`, the classic join / sync / heartbeat / commit protocol with the
range assignor, as a consumer in a group runs it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kt.client.core import ClientCore, KafkaError, check, gather_or_cancel
from kt.protocol import apis
from kt.protocol.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kt.protocol.errors import DecodeError, ErrorCode, error_for_code
from kt.protocol.schema import Struct

TopicPartition = tuple[str, int]

#: group states in which offsets may be reset (no live members)
INACTIVE_STATES = frozenset({"Empty", "Dead"})


@dataclass
class GroupListing:
    """A group as ListGroups reports it."""

    group_id: str
    protocol_type: str
    state: str = ""
    group_type: str = ""
    coordinator: int = -1


@dataclass
class MemberDescription:
    """A live member of a group."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: list[TopicPartition] = field(default_factory=list)


@dataclass
class GroupDescription:
    """A group as DescribeGroups reports it."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]
    coordinator: int
    error: ErrorCode = ErrorCode.NONE


@dataclass
class CommittedOffset:
    """A committed offset (-1: none) and its metadata string."""

    offset: int
    metadata: str | None = None
    leader_epoch: int = -1


def range_assign(
    subscriptions: Mapping[str, Sequence[str]], partitions: Mapping[str, Sequence[int]]
) -> dict[str, list[TopicPartition]]:
    """Kafka's RangeAssignor: per topic, the members subscribed to it (sorted by
    member id) take consecutive ranges of its sorted partitions, the first
    `count % members` of them one partition more."""
    out: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
    topics = sorted({t for ts in subscriptions.values() for t in ts})
    for topic in topics:
        members = sorted(m for m, ts in subscriptions.items() if topic in ts)
        parts = sorted(partitions.get(topic, []))
        if not members or not parts:
            continue
        per, extra = divmod(len(parts), len(members))
        start = 0
        for i, m in enumerate(members):
            n = per + (1 if i < extra else 0)
            out[m].extend((topic, p) for p in parts[start : start + n])
            start += n
    return out


def assignment_pairs(blob: bytes | None) -> list[TopicPartition]:
    """The sorted (topic, partition) pairs of a consumer-protocol assignment (a
    DescribeGroups member's or SyncGroup's); none when empty or undecodable."""
    if not blob:
        return []
    try:
        a = decode_assignment(blob)
    except DecodeError:
        return []
    return sorted((t, p) for t, ps in a.partitions for p in ps)


class GroupsMixin(ClientCore):
    """Group administration: list, describe, delete, offsets."""

    async def list_groups(self) -> list[GroupListing]:
        """Every group of every broker, sorted by id."""
        await self.refresh_metadata([])

        async def one(node: int) -> list[GroupListing]:
            resp = await self.retrying(
                lambda: self.send(apis.LIST_GROUPS, apis.LIST_GROUPS.request(), node)
            )
            check(resp.error_code, f"list groups on broker {node}")
            return [
                GroupListing(
                    g.group_id, g.protocol_type, g.group_state, g.group_type, coordinator=node
                )
                for g in resp.groups
            ]

        got = await gather_or_cancel(*(one(n) for n in sorted(self.metadata.brokers)))
        seen: dict[str, GroupListing] = {}
        for gs in got:
            for g in gs:
                seen.setdefault(g.group_id, g)
        return [seen[k] for k in sorted(seen)]

    async def describe_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        """Describe groups (a group that does not exist comes back in state Dead)."""
        out: list[GroupDescription] = []
        for gid in group_ids:
            body = apis.DESCRIBE_GROUPS.request(groups=[gid], include_authorized_operations=False)
            resp = await self.send_to_coordinator(
                gid, apis.DESCRIBE_GROUPS, body, lambda r: int(r.groups[0].error_code)
            )
            g = resp.groups[0]
            node = await self.coordinator(gid)
            members = [
                MemberDescription(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    assignment_pairs(m.member_assignment)
                    if g.protocol_type in ("consumer", "")
                    else [],
                )
                for m in g.members
            ]
            out.append(
                GroupDescription(
                    g.group_id,
                    g.group_state,
                    g.protocol_type,
                    g.protocol_data,
                    members,
                    node,
                    error_for_code(g.error_code),
                )
            )
        return out

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, KafkaError | None]:
        """Delete groups (they must be empty); per group None or its KafkaError."""
        out: dict[str, KafkaError | None] = {}
        for gid in group_ids:
            body = apis.DELETE_GROUPS.request(groups_names=[gid])
            resp = await self.send_to_coordinator(
                gid, apis.DELETE_GROUPS, body, lambda r: int(r.results[0].error_code)
            )
            r = resp.results[0]
            out[gid] = KafkaError(r.error_code, f"group {gid!r}") if r.error_code else None
        return out

    async def fetch_committed(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, CommittedOffset]:
        """The group's committed offsets (all of them when `partitions` is None)."""
        topics: list[dict[str, object]] | None = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for t, p in partitions:
                by_topic.setdefault(t, []).append(p)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        body = apis.OFFSET_FETCH.request(
            group_id=group_id,
            topics=topics,
            groups=[{"group_id": group_id, "topics": topics}],
            require_stable=False,
        )

        def err(r: Struct) -> int:
            if r.groups:
                return int(r.groups[0].error_code)
            return int(r.error_code)

        resp = await self.send_to_coordinator(group_id, apis.OFFSET_FETCH, body, err)
        check(err(resp), f"group {group_id!r}")
        rtopics = resp.groups[0].topics if resp.groups else resp.topics
        out: dict[TopicPartition, CommittedOffset] = {}
        for t in rtopics:
            for p in t.partitions:
                check(p.error_code, f"offsets of {group_id!r} for {t.name}-{p.partition_index}")
                out[(t.name, p.partition_index)] = CommittedOffset(
                    p.committed_offset, p.metadata, p.committed_leader_epoch
                )
        return out

    async def commit_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        *,
        member_id: str = "",
        generation_id: int = -1,
        group_instance_id: str | None = None,
        metadata: str = "",
    ) -> None:
        """Commit offsets (as a member of `generation_id`, or as an admin with -1,
        which the coordinator accepts only while the group has no members)."""
        by_topic: dict[str, list[int]] = {}
        for t, p in offsets:
            by_topic.setdefault(t, []).append(p)
        body = apis.OFFSET_COMMIT.request(
            group_id=group_id,
            generation_id_or_member_epoch=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            topics=[
                {
                    "name": t,
                    "partitions": [
                        {
                            "partition_index": p,
                            "committed_offset": offsets[(t, p)],
                            "committed_metadata": metadata,
                        }
                        for p in sorted(ps)
                    ],
                }
                for t, ps in by_topic.items()
            ],
        )

        def err(r: Struct) -> int:
            for t in r.topics:
                for p in t.partitions:
                    if p.error_code:
                        return int(p.error_code)
            return 0

        resp = await self.send_to_coordinator(group_id, apis.OFFSET_COMMIT, body, err)
        for t in resp.topics:
            for p in t.partitions:
                check(p.error_code, f"commit for {group_id!r} {t.name}-{p.partition_index}")

    async def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """Delete committed offsets of partitions the group no longer consumes."""
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        body = apis.OFFSET_DELETE.request(
            group_id=group_id,
            topics=[
                {"name": t, "partitions": [{"partition_index": p} for p in ps]}
                for t, ps in by_topic.items()
            ],
        )
        resp = await self.send_to_coordinator(
            group_id, apis.OFFSET_DELETE, body, lambda r: int(r.error_code)
        )
        check(resp.error_code, f"group {group_id!r}")
        for t in resp.topics:
            for p in t.partitions:
                check(p.error_code, f"offset of {group_id!r} for {t.name}-{p.partition_index}")

    def group_member(
        self,
        group_id: str,
        topics: Sequence[str],
        *,
        session_timeout_ms: int = 10000,
        rebalance_timeout_ms: int = 30000,
        heartbeat_interval_ms: int = 3000,
        group_instance_id: str | None = None,
    ) -> GroupMember:
        """A consumer-group member for `topics` (join it with `await m.join()`)."""
        return GroupMember(
            self,
            group_id,
            list(topics),
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            group_instance_id=group_instance_id,
        )


_REJOIN_CODES = frozenset(
    {
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.FENCED_INSTANCE_ID,
    }
)


class GroupMember:
    """One member of a classic consumer group ("consumer" protocol, range assignor).

    `join()` runs JoinGroup (repeating it when the coordinator asks for a member
    id) and SyncGroup (computing the assignment when elected leader), then starts
    a heartbeat task. When a heartbeat learns that the group rebalances,
    `rejoin_needed` turns True: the consumer commits what it has processed and
    calls `join()` again. `commit()` commits as this generation; `leave()` ends
    the membership. Use as an async context manager to always leave.
    """

    def __init__(
        self,
        client: GroupsMixin,
        group_id: str,
        topics: list[str],
        *,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        heartbeat_interval_ms: int,
        group_instance_id: str | None,
    ) -> None:
        self.client = client
        self.group_id = group_id
        self.topics = topics
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval = heartbeat_interval_ms / 1000
        self.group_instance_id = group_instance_id
        self.member_id = ""
        self.generation_id = -1
        self.leader_id = ""
        self.assignment: list[TopicPartition] = []
        self.rejoin_needed = True
        self._heartbeat: asyncio.Task[None] | None = None
        self.heartbeat_error: KafkaError | None = None

    @property
    def is_leader(self) -> bool:
        """Whether this member computed the group's assignment."""
        return bool(self.member_id) and self.member_id == self.leader_id

    async def __aenter__(self) -> GroupMember:
        await self.join()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.leave()

    async def join(self) -> list[TopicPartition]:
        """(Re)join the group; returns this member's assigned partitions."""
        await self._stop_heartbeat()
        backoff = self.client.retry_backoff
        for _ in range(50):
            try:
                done = await self._join_once()
            except KafkaError as exc:
                if not exc.retriable and exc.code not in _REJOIN_CODES:
                    raise
                done = False
            if done:
                self.rejoin_needed = False
                self.heartbeat_error = None
                self._heartbeat = asyncio.create_task(self._heartbeat_loop())
                return self.assignment
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.client.max_retry_backoff)
        raise KafkaError(ErrorCode.REBALANCE_IN_PROGRESS, f"group {self.group_id!r}",
                         "could not complete a rebalance")  # fmt: skip

    async def _join_once(self) -> bool:
        sub = encode_subscription(Subscription(topics=list(self.topics)), 1)
        join_timeout = (self.rebalance_timeout_ms + 5000) / 1000
        body = apis.JOIN_GROUP.request(
            group_id=self.group_id,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type="consumer",
            protocols=[{"name": "range", "metadata": sub}],
            reason=None,
        )
        resp = await self.client.send_to_coordinator(
            self.group_id,
            apis.JOIN_GROUP,
            body,
            lambda r: int(r.error_code),
            timeout=join_timeout,
        )
        code = error_for_code(resp.error_code)
        if code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = resp.member_id
            return False
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            self.member_id = ""
            return False
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            return False
        check(resp.error_code, f"join group {self.group_id!r}")
        self.member_id = resp.member_id
        self.generation_id = resp.generation_id
        self.leader_id = resp.leader
        assignments: list[dict[str, object]] = []
        if self.is_leader and not resp.skip_assignment:
            assignments = await self._assign(resp.members)
        sync = apis.SYNC_GROUP.request(
            group_id=self.group_id,
            generation_id=self.generation_id,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type="consumer",
            protocol_name="range",
            assignments=assignments,
        )
        sresp = await self.client.send_to_coordinator(
            self.group_id,
            apis.SYNC_GROUP,
            sync,
            lambda r: int(r.error_code),
            timeout=join_timeout,
        )
        scode = error_for_code(sresp.error_code)
        if scode in _REJOIN_CODES:
            if scode != ErrorCode.REBALANCE_IN_PROGRESS:
                self.member_id = ""
            return False
        check(sresp.error_code, f"sync group {self.group_id!r}")
        self.assignment = assignment_pairs(sresp.assignment)
        return True

    async def _assign(self, members: Sequence[Struct]) -> list[dict[str, object]]:
        subs: dict[str, list[str]] = {}
        for m in members:
            try:
                subs[m.member_id] = decode_subscription(m.metadata).topics
            except DecodeError:
                subs[m.member_id] = []
        wanted = sorted({t for ts in subs.values() for t in ts})
        infos = await self.client.fetch_topic_metadata(wanted)
        partitions = {
            t: sorted(i.partitions) for t, i in infos.items() if i.error == ErrorCode.NONE
        }
        plan = range_assign(subs, partitions)
        out: list[dict[str, object]] = []
        for member, tps in plan.items():
            by_topic: dict[str, list[int]] = {}
            for t, p in tps:
                by_topic.setdefault(t, []).append(p)
            blob = encode_assignment(Assignment(partitions=sorted(by_topic.items())), 1)
            out.append({"member_id": member, "assignment": blob})
        return out

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            body = apis.HEARTBEAT.request(
                group_id=self.group_id,
                generation_id=self.generation_id,
                member_id=self.member_id,
                group_instance_id=self.group_instance_id,
            )
            try:
                resp = await self.client.send_to_coordinator(
                    self.group_id, apis.HEARTBEAT, body, lambda r: int(r.error_code),
                    retry=False,
                )  # fmt: skip
            except KafkaError as exc:
                if exc.code in _REJOIN_CODES:
                    self.rejoin_needed = True
                    return
                continue  # retriable: try again next interval
            except Exception:
                continue
            code = error_for_code(resp.error_code)
            if code in _REJOIN_CODES:
                self.rejoin_needed = True
                if code != ErrorCode.REBALANCE_IN_PROGRESS:
                    self.member_id = ""
                return
            if code != ErrorCode.NONE:
                self.heartbeat_error = KafkaError(code, f"heartbeat in {self.group_id!r}")
                self.rejoin_needed = True
                return

    async def _stop_heartbeat(self) -> None:
        task, self._heartbeat = self._heartbeat, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit offsets (the next offset to read per partition) as this generation."""
        if not offsets:
            return
        await self.client.commit_offsets(
            self.group_id,
            offsets,
            member_id=self.member_id,
            generation_id=self.generation_id,
            group_instance_id=self.group_instance_id,
        )

    async def committed(self) -> dict[TopicPartition, int]:
        """Committed offsets of the assigned partitions (-1: none)."""
        got = await self.client.fetch_committed(self.group_id, self.assignment)
        return {tp: got[tp].offset if tp in got else -1 for tp in self.assignment}

    async def leave(self) -> None:
        """Stop heartbeating and leave the group (errors are ignored: the session
        times out anyway)."""
        await self._stop_heartbeat()
        if not self.member_id:
            return
        body = apis.LEAVE_GROUP.request(
            group_id=self.group_id,
            member_id=self.member_id,
            members=[{"member_id": self.member_id, "group_instance_id": self.group_instance_id}],
        )
        with contextlib.suppress(Exception):
            await self.client.send_to_coordinator(
                self.group_id, apis.LEAVE_GROUP, body, lambda r: int(r.error_code), retry=False
            )
        self.member_id = ""
        self.generation_id = -1
