"""KafkaController: the cluster's controller, as Kafka runs it in ZooKeeper mode.

Every broker runs one; the one that wins the `/controller` election is active.
The active controller

- keeps its view of the cluster (live brokers with their epochs, assignments,
  partition leadership) loaded from ZooKeeper at failover and kept current by
  watches on `/brokers/ids`, `/brokers/topics` and `/admin/delete_topics`;
- elects leaders (offline partitions when their leader dies, new partitions,
  controlled shutdown, preferred), writing each partition's state znode
  conditionally on its version (the partition epoch), inside a multi that checks
  `/controller_epoch` so a deposed controller can never write (ControllerMoved);
- tells brokers what changed: LeaderAndIsr to the replicas of changed partitions,
  UpdateMetadata to every live broker, StopReplica to replicas going away;
- answers ControlledShutdown and AlterPartition.

Events are processed one at a time by one task (Kafka's ControllerEventManager):
watches, requests and timers only enqueue. That serialization is what keeps the
view consistent; nothing here is touched from outside the event task except
through `submit`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from kt.broker import timeline
from kt.broker.controller import requests as rq
from kt.broker.controller.channel import ControllerChannel
from kt.broker.controller.context import ControllerContext, ReplicaAssignment
from kt.broker.controller.reassignment import ReassignmentResult, Reassignments
from kt.broker.controller.requests import BrokerEndpointInfo, TopicReplicas
from kt.broker.metadata.cluster_store import ControllerMovedError
from kt.broker.metadata.store import BadVersionError
from kt.cluster import election, rebalance
from kt.cluster.election import ElectionType, LeaderAndIsr, LeaderRecoveryState
from kt.protocol import ErrorCode, Struct, apis
from kt.storage.checkpoint import TopicPartition

log = logging.getLogger("kt.broker.controller")

# The store's own errors are the controller's, one class each wherever caught: a
# fenced write found another controller (ControllerMovedError); a conditional
# partition-state write lost a race, re-read and retry (BadVersionError).

NO_LEADER = -1


class ControllerZk(Protocol):
    """What the controller needs from ZooKeeper (ClusterStore adapts to it)."""

    async def try_elect_controller(self, broker_id: int) -> tuple[int, int] | None:
        """Win /controller (returns (epoch, epoch zk version)) or None."""
        ...

    async def get_controller(self) -> int | None:
        """The id in /controller, or None."""
        ...

    async def resign_controller(self, broker_id: int) -> None:
        """Delete /controller when it is ours (a controlled resignation)."""
        ...

    async def get_brokers(self) -> dict[int, BrokerEndpointInfo]:
        """Every registered broker."""
        ...

    async def get_topics(self) -> list[str]:
        """Children of /brokers/topics."""
        ...

    async def get_topic(self, topic: str) -> TopicReplicas | None:
        """/brokers/topics/T."""
        ...

    async def set_topic(self, topic: str, replicas: TopicReplicas, epoch_zk_version: int) -> None:
        """Replace /brokers/topics/T (fenced): a reassignment's RS, AR and RR."""
        ...

    async def get_partition_states(
        self, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderAndIsr]:
        """The existing state znodes among `tps`."""
        ...

    async def create_partition_states(
        self, states: dict[TopicPartition, LeaderAndIsr], epoch_zk_version: int
    ) -> dict[TopicPartition, LeaderAndIsr]:
        """Create state znodes (fenced); returns them with their versions."""
        ...

    async def update_partition_states(
        self, states: dict[TopicPartition, LeaderAndIsr], epoch_zk_version: int
    ) -> dict[TopicPartition, LeaderAndIsr | BadVersionError]:
        """Conditional writes on each state's zk_version (fenced): new versions, or
        BadVersionError per partition that lost a race."""
        ...

    async def topic_config(self, topic: str) -> dict[str, str]:
        """/config/topics/T (empty when absent)."""
        ...

    async def topics_marked_for_deletion(self) -> list[str]:
        """Children of /admin/delete_topics."""
        ...

    async def delete_topic(self, topic: str, epoch_zk_version: int) -> None:
        """Remove the topic's znodes and its deletion marker (fenced)."""
        ...

    async def unmark_topic_for_deletion(self, topic: str) -> None:
        """Drop a deletion marker of a topic that does not exist."""
        ...

    async def log_dir_events(self) -> dict[str, int]:
        """Pending /log_dir_event_notification children: name -> broker id."""
        ...

    async def delete_log_dir_events(self, names: list[str], epoch_zk_version: int) -> None:
        """Delete processed log dir event notifications (fenced)."""
        ...

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> Cancellable:
        """Persistent child watch, called on the loop."""
        ...

    def watch_data(self, path: str, callback: Callable[[bytes | None], None]) -> Cancellable:
        """Persistent data watch, called on the loop."""
        ...


class Cancellable(Protocol):
    """A watch that can be stopped."""

    def cancel(self) -> None:
        """Stop calling the callback."""
        ...


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    """The broker settings the controller reads (a snapshot: a dynamic change of the
    unclean-election default arrives as a new one, through `KafkaController.reconfigure`)."""

    unclean_leader_election_default: bool = False
    listener: str | None = None  # the inter-broker listener
    # Kafka's auto.leader.rebalance.enable, leader.imbalance.per.broker.percentage and
    # leader.imbalance.check.interval.seconds.
    auto_leader_rebalance: bool = True
    leader_imbalance_percentage: int = 10
    leader_imbalance_check_interval_s: float = 300.0
    # Kafka schedules the first check 5 seconds after failover.
    leader_imbalance_first_check_s: float = 5.0


Event = Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class IsrChange:
    """One partition of an AlterPartition request."""

    tp: TopicPartition
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int
    leader_recovery_state: int = 0


@dataclass(frozen=True, slots=True)
class IsrAnswer:
    """The controller's answer for one partition: an error, or the state written."""

    error: int
    state: LeaderAndIsr | None = None


class KafkaController:
    """One broker's controller: candidate always, active when elected."""

    def __init__(
        self,
        broker_id: int,
        zk: ControllerZk,
        channel_factory: Callable[[], ControllerChannel],
        settings: ControllerSettings | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.settings = settings or ControllerSettings()
        self._channel_factory = channel_factory
        self.channel: ControllerChannel | None = None
        self.view = ControllerContext()
        self.active = False
        # Bumped at every resignation so watch callbacks of an older term are ignored.
        self._term = 0
        self._events: asyncio.Queue[Event | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._started = False
        # The active term's watches, cancelled when it resigns.
        self._watches: list[Cancellable] = []
        self.reassignments = Reassignments(self)
        # The active term's auto leader rebalance timer.
        self._rebalance_timer: asyncio.Task[None] | None = None

    # --- lifecycle -----------------------------------------------------------

    async def startup(self) -> None:
        """Start the event task, watch /controller and try to become controller."""
        self._task = asyncio.get_running_loop().create_task(self._run())
        self._started = True
        self.zk.watch_data("/controller", lambda data: self.submit(self._on_controller_change))
        self.submit(self._elect)

    async def shutdown(self) -> None:
        """Resign (if active) and stop the event task."""
        self._events.put_nowait(None)
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, 10)
            except (TimeoutError, asyncio.CancelledError):
                self._task.cancel()
        if self.active:
            await self._resign(delete_znode=True)

    async def session_expired(self) -> None:
        """Our ZooKeeper session expired: /controller (if ours) is gone with it."""

        async def resign() -> None:
            if self.active:
                log.warning("controller %d: session expired; resigning", self.broker_id)
                await self._resign()

        await self.call(resign)

    def stand_for_election(self) -> None:
        """Try to become controller again (after re-registering)."""
        self.submit(self._elect)

    def submit(self, event: Event) -> None:
        """Queue an event for the event task."""
        self._events.put_nowait(event)

    async def call(self, fn: Callable[[], Awaitable[Any]], moved: Any = None) -> Any:
        """Run `fn` as an event and return its result (requests from handlers). When
        a write finds another broker controlling (ControllerMovedError), the caller
        gets `moved` (its "not the controller" answer) and the error still reaches the
        event loop, which resigns, as for any other event (Kafka's maybeResign)."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        async def event() -> None:
            try:
                fut.set_result(await fn())
            except ControllerMovedError:
                fut.set_result(moved)
                raise
            except BaseException as exc:  # handed to the caller
                fut.set_exception(exc)

        self.submit(event)
        return await fut

    async def _run(self) -> None:
        while True:
            event = await self._events.get()
            if event is None:
                return
            try:
                await event()
            except ControllerMovedError:
                log.warning("controller %d: another broker is controller now", self.broker_id)
                await self._resign()
                self.submit(self._elect)
            except Exception:
                log.exception("controller %d: event failed", self.broker_id)

    # --- election ------------------------------------------------------------

    async def _on_controller_change(self) -> None:
        current = await self.zk.get_controller()
        if self.active and current != self.broker_id:
            log.info("controller %d: /controller is now %s; resigning", self.broker_id, current)
            await self._resign()
        if current is None:
            await self._elect()

    async def _elect(self) -> None:
        if self.active:
            return
        won = await self.zk.try_elect_controller(self.broker_id)
        if won is None:
            return
        self.view = ControllerContext(epoch=won[0], epoch_zk_version=won[1])
        self.active = True
        log.info("broker %d is the controller (epoch %d)", self.broker_id, won[0])
        timeline.mark("ctl_elected", epoch=won[0])
        await self._on_failover()
        timeline.mark("ctl_failover_done", epoch=won[0])

    async def _resign(self, *, delete_znode: bool = False) -> None:
        self.active = False
        self._term += 1
        if self.channel is not None:
            await self.channel.close()
            self.channel = None
        for w in self._watches:
            w.cancel()
        self._watches.clear()
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
            self._rebalance_timer = None
        self.view = ControllerContext()
        self.reassignments.reset()
        if delete_znode:
            try:
                await self.zk.resign_controller(self.broker_id)
            except Exception as exc:
                log.warning("controller %d: cannot delete /controller: %s", self.broker_id, exc)

    def _watch(self, fn: Callable[[list[str]], Awaitable[None]]) -> Callable[[list[str]], None]:
        """A child-watch callback that enqueues `fn` while this term lasts."""
        term = self._term

        def callback(children: list[str]) -> None:
            if self.active and self._term == term:
                self.submit(self._in_term(term, lambda: fn(children)))

        return callback

    def _in_term(self, term: int, fn: Callable[[], Awaitable[None]]) -> Event:
        """An event that runs only if the term it was queued in still lasts: one
        queued just before a resignation (a session expiry, another controller)
        must not act on the emptied view of a controller that is no longer active."""

        async def event() -> None:
            if self.active and self._term == term:
                await fn()

        return event

    async def _on_failover(self) -> None:
        """Kafka's onControllerFailover, in its order."""
        v = self.view
        v.live = await self.zk.get_brokers()
        for name in await self.zk.get_topics():
            t = await self.zk.get_topic(name)
            if t is not None:
                v.topics[name] = t
        v.leadership = await self.zk.get_partition_states(v.all_partitions())
        self.channel = self._channel_factory()
        for b in v.live:
            self.channel.add_broker(b)
        self._send_update_metadata(list(v.live), v.all_partitions(), full=True)
        # Partitions never given a leader (their creator's controller died) are new;
        # those whose leader is gone are offline.
        new = [tp for tp in v.all_partitions() if tp not in v.leadership]
        await self._elect_new(new)
        await self._elect_offline(
            [tp for tp, lead in v.leadership.items() if lead.leader not in v.live]
        )
        # Replicas on brokers that died while no controller watched leave the ISRs
        # (Kafka's ReplicaStateMachine startup: OfflineReplica). The leader cannot
        # always do it: a dead follower that was caught up never lags.
        stale = [tp for tp, lead in v.leadership.items()
                 if lead.leader in v.live and any(r not in v.live for r in lead.isr)]  # fmt: skip
        if stale:
            gone = {r for tp in stale for r in v.leadership[tp].isr if r not in v.live}
            await self._remove_from_isr(stale, gone)
        # Every live replica learns its role, whatever it had before (it may have
        # restarted while no controller was there); replicas on failed directories
        # answer KAFKA_STORAGE_ERROR, so pending log dir events need no reading
        # (Kafka deletes them at failover too).
        await self.zk.delete_log_dir_events(
            list(await self.zk.log_dir_events()), v.epoch_zk_version
        )
        self._send_leader_and_isr(v.all_partitions(), full=True)
        await self.reassignments.resume()
        v.to_delete = self.reassignments.defer_deletions(
            set(await self.zk.topics_marked_for_deletion())
        )
        await self._resume_deletions()
        self._watches += [
            self.zk.watch_children("/brokers/ids", self._watch(self._on_broker_change)),
            self.zk.watch_children("/brokers/topics", self._watch(self._on_topic_change)),
            self.zk.watch_children("/admin/delete_topics", self._watch(self._on_delete_topics)),
            self.zk.watch_children(
                "/log_dir_event_notification", self._watch(self._on_log_dir_events)
            ),
        ]
        for name in v.topics:
            self._watches.append(
                self.zk.watch_data(f"/brokers/topics/{name}", self._topic_data_watch(name))
            )
        if self.settings.auto_leader_rebalance:
            self._rebalance_timer = asyncio.get_running_loop().create_task(
                self._rebalance_ticks(self._term)
            )

    # --- broker membership ---------------------------------------------------

    async def _on_broker_change(self, children: list[str]) -> None:
        v = self.view
        registered = await self.zk.get_brokers()
        dead = [b for b in v.live if b not in registered]
        bounced = [b for b, info in registered.items()
                   if b in v.live and info.epoch != v.live[b].epoch]  # fmt: skip
        new = [b for b in registered if b not in v.live]
        if dead or bounced:
            timeline.mark("ctl_brokers_gone", ids=",".join(map(str, dead + bounced)))
            log.info("controller: brokers gone %s, bounced %s", dead, bounced)
            await self._on_brokers_failed(dead + bounced)
        if new or bounced:
            log.info("controller: brokers joined %s", sorted(new + bounced))
            for b in new + bounced:
                v.live[b] = registered[b]
            await self._on_brokers_started(sorted(new + bounced))

    async def _on_brokers_failed(self, ids: list[int]) -> None:
        v = self.view
        gone = set(ids)
        for b in ids:
            v.live.pop(b, None)
            v.shutting_down.discard(b)
            v.offline_dirs.pop(b, None)  # a restarted broker has its dirs back
            if self.channel is not None:
                await self.channel.remove_broker(b)
        led = [tp for tp, lead in v.leadership.items() if lead.leader in gone]
        await self._elect_offline(led)
        # Followers on the dead brokers leave the ISR (never emptying it).
        shrink = [tp for tp, lead in v.leadership.items()
                  if gone & set(lead.isr) and lead.leader not in gone]  # fmt: skip
        await self._remove_from_isr(shrink, gone)
        self._send_update_metadata(list(v.live), v.all_partitions())

    async def _on_brokers_started(self, ids: list[int]) -> None:
        v = self.view
        assert self.channel is not None
        for b in ids:
            self.channel.add_broker(b)
        others = [b for b in v.live if b not in ids]
        self._send_update_metadata(ids, v.all_partitions(), full=True)
        hosted = [tp for tp in v.all_partitions() if set(ids) & set(v.replicas(tp))]
        # The partitions they host, again: their offline replicas no longer name them
        # (Kafka's OnlineReplica transition), even where leadership and ISR stay put.
        self._send_update_metadata(others, hosted)
        # Full: every partition each of them should host, so a replica removed while
        # it was down (a reassignment completed without it) is known to be stray.
        self._send_leader_and_isr(hosted, only=set(ids), full=True)
        offline = [tp for tp, lead in v.leadership.items() if lead.leader not in v.live]
        await self._elect_offline(offline)
        await self.reassignments.on_brokers_started(ids)
        await self._resume_deletions()

    # --- topics --------------------------------------------------------------

    async def _on_topic_change(self, children: list[str]) -> None:
        v = self.view
        added = [t for t in children if t not in v.topics]
        for name in set(v.topics) - set(children):
            v.topics.pop(name, None)
        new: list[TopicPartition] = []
        for name in added:
            t = await self.zk.get_topic(name)
            if t is None:
                continue
            v.topics[name] = t
            new += [TopicPartition(name, p) for p in sorted(t.partitions)]
            self.zk.watch_data(f"/brokers/topics/{name}", self._topic_data_watch(name))
        if new:
            log.info("controller: new topics %s", added)
            await self._elect_new(new)

    def _topic_data_watch(self, name: str) -> Callable[[bytes | None], None]:
        term = self._term

        def callback(data: bytes | None) -> None:
            if data is not None and self.active and self._term == term:
                self.submit(self._in_term(term, lambda: self._on_partitions_modified(name)))

        return callback

    async def _on_partitions_modified(self, name: str) -> None:
        """New partitions added to an existing topic (CreatePartitions)."""
        v = self.view
        t = await self.zk.get_topic(name)
        old = v.topics.get(name)
        if t is None or old is None:
            return
        added = [p for p in t.partitions if p not in old.partitions]
        v.topics[name] = t
        if added:
            log.info("controller: %d new partitions of %s", len(added), name)
            await self._elect_new([TopicPartition(name, p) for p in sorted(added)])

    async def _on_delete_topics(self, children: list[str]) -> None:
        v = self.view
        for name in children:
            if name not in v.topics:
                await self.zk.unmark_topic_for_deletion(name)
            else:
                v.to_delete |= self.reassignments.defer_deletions({name})
        await self._resume_deletions()

    async def _resume_deletions(self) -> None:
        """Stop and delete every replica of the topics queued for deletion; a topic's
        znodes go once all its replicas acknowledged (a dead replica's broker gets
        StopReplica when it comes back)."""
        v = self.view
        for name in sorted(v.to_delete):
            t = v.topics.get(name)
            if t is None:
                await self.zk.unmark_topic_for_deletion(name)
                v.to_delete.discard(name)
                continue
            tps = [TopicPartition(name, p) for p in sorted(t.partitions)]
            self._send_update_metadata(list(v.live), tps, deleting=True)
            acked = v.deleted_by.setdefault(name, set())
            for b in sorted({r for tp in tps for r in v.replicas(tp)}):
                if b not in v.live:
                    continue
                mine = {tp: -2 for tp in tps if b in v.replicas(tp)
                        and (b, tp.partition) not in acked}  # fmt: skip
                if mine:
                    done = self._deletion_acked(name, b, mine)
                    self._send_stop_replica(b, mine, delete=True, on_done=done)
            await self._maybe_complete_deletion(name)

    def _deletion_acked(
        self, name: str, broker_id: int, tps: dict[TopicPartition, int]
    ) -> Callable[[Struct], None]:
        term = self._term

        def done(response: Struct) -> None:
            if not self.active or self._term != term:
                return
            errors = _stop_replica_errors(response)
            acked = self.view.deleted_by.setdefault(name, set())
            for tp in tps:
                if errors.get(tp, ErrorCode.NONE) == ErrorCode.NONE:
                    acked.add((broker_id, tp.partition))
            self.submit(lambda: self._maybe_complete_deletion(name))

        return done

    async def _maybe_complete_deletion(self, name: str) -> None:
        v = self.view
        t = v.topics.get(name)
        if t is None or name not in v.to_delete:
            return
        acked = v.deleted_by.get(name, set())
        needed = {(r, p) for p, rs in t.partitions.items() for r in rs}
        if not needed <= acked:
            return
        await self.zk.delete_topic(name, v.epoch_zk_version)
        v.to_delete.discard(name)
        v.deleted_by.pop(name, None)
        v.topics.pop(name, None)
        for tp in [tp for tp in v.leadership if tp.topic == name]:
            del v.leadership[tp]
        log.info("controller: deleted topic %s", name)

    # --- elections -------------------------------------------------------------

    async def _unclean_allowed(self, topic: str) -> bool:
        cfg = await self.zk.topic_config(topic)
        value = cfg.get("unclean.leader.election.enable")
        if value is None:
            return self.settings.unclean_leader_election_default
        return value.strip().lower() == "true"

    async def _elect_new(self, tps: list[TopicPartition]) -> None:
        """Kafka's NewPartition -> OnlinePartition: the first live replica leads, the
        live replicas are the ISR; state znodes created, replicas told (is_new)."""
        v = self.view
        states: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in tps:
            if tp.topic in v.to_delete:
                continue
            elected = election.new_partition_election(v.replicas(tp), v.online())
            if elected is None:
                log.warning("controller: new partition %s has no live replica", tp)
                continue
            states[tp] = LeaderAndIsr.initial(elected, v.epoch)
        if not states:
            return
        created = await self.zk.create_partition_states(states, v.epoch_zk_version)
        v.leadership.update(created)
        self._send_leader_and_isr(list(created), is_new=True)
        self._send_update_metadata(list(v.live), list(created))

    def reconfigure(self, settings: ControllerSettings) -> None:
        """The broker's dynamic configs changed: take the new settings. When
        unclean.leader.election.enable became true and this broker is the
        controller, elect leaders for the offline partitions now (Kafka's
        UncleanLeaderElectionEnable event)."""
        enabled = (
            settings.unclean_leader_election_default
            and not self.settings.unclean_leader_election_default
        )
        self.settings = settings
        if enabled:
            self.submit(self._unclean_enabled_event)

    async def _unclean_enabled_event(self) -> None:
        if not self.active:
            return
        v = self.view
        offline = [tp for tp, lead in v.leadership.items() if lead.leader not in v.live]
        if offline:
            await self._elect_offline(offline)

    async def _elect_offline(self, tps: list[TopicPartition]) -> None:
        """OfflinePartition -> OnlinePartition: the first live in-ISR replica in
        assignment order; else, when the topic allows it, the first live replica
        (unclean: the ISR becomes just the leader). A partition that cannot get a
        leader keeps leader -1 with its last ISR member."""
        v = self.view

        async def choose(tp: TopicPartition, lead: LeaderAndIsr) -> LeaderAndIsr:
            replicas, online = v.replicas(tp), v.online_for(tp)
            elected = election.offline_election(replicas, lead.isr, online, unclean_allowed=False)
            if elected is None and await self._unclean_allowed(tp.topic):
                elected = election.offline_election(
                    replicas, lead.isr, online, unclean_allowed=True
                )
            if elected is not None:
                if elected.unclean:
                    log.warning(
                        "controller: unclean leader election for %s: %d leads, out of sync "
                        "(records it does not have are lost)", tp, elected.leader,
                    )  # fmt: skip
                return lead.elect(elected, v.epoch)
            if lead.leader == NO_LEADER:
                return lead
            log.error("controller: %s", election.failure_message(
                f"{tp.topic}-{tp.partition}", election.Strategy.OFFLINE))  # fmt: skip
            return lead.with_leader_and_isr(NO_LEADER, lead.isr, v.epoch)

        await self._change_states(tps, choose)

    async def _remove_from_isr(self, tps: list[TopicPartition], gone: set[int]) -> None:
        """OfflineReplica: take `gone` out of each ISR (leader epoch + 1), never
        emptying it; a removed leader leaves leader -1."""
        v = self.view

        async def shrink(tp: TopicPartition, lead: LeaderAndIsr) -> LeaderAndIsr:
            return election.remove_replicas_from_isr(lead, sorted(gone), v.epoch) or lead

        await self._change_states(tps, shrink)

    async def _change_states(
        self,
        tps: list[TopicPartition],
        choose: Callable[[TopicPartition, LeaderAndIsr], Awaitable[LeaderAndIsr]],
    ) -> list[TopicPartition]:
        """Compute new states, write the changed ones conditionally (re-reading and
        retrying the ones that lost a race), then tell the replicas and every broker.
        Returns the partitions whose new state was written."""
        v = self.view
        todo = [tp for tp in tps if tp in v.leadership and tp.topic not in v.to_delete]
        changed: list[TopicPartition] = []
        for _ in range(5):
            if not todo:
                break
            proposed: dict[TopicPartition, LeaderAndIsr] = {}
            for tp in todo:
                new = await choose(tp, v.leadership[tp])
                if new != v.leadership[tp]:
                    proposed[tp] = new
            if not proposed:
                break
            results = await self.zk.update_partition_states(proposed, v.epoch_zk_version)
            todo = []
            for tp, res in results.items():
                if isinstance(res, BadVersionError):
                    todo.append(tp)
                else:
                    v.leadership[tp] = res
                    changed.append(tp)
                    timeline.mark("ctl_state_written", tp=f"{tp.topic}-{tp.partition}",
                                  leader=res.leader, epoch=res.leader_epoch)  # fmt: skip
            if todo:
                v.leadership.update(await self.zk.get_partition_states(todo))
        if changed:
            self._send_leader_and_isr(changed)
            self._send_update_metadata(list(v.live), changed)
        return changed

    # --- leader elections on request, and the auto rebalance ---------------------

    async def elect_leaders(
        self, election_type: ElectionType, tps: list[TopicPartition] | None
    ) -> tuple[int, dict[TopicPartition, tuple[int, str | None]]]:
        """ElectLeaders: a top-level error (NOT_CONTROLLER when not active) and, per
        partition, an error code and message. `tps` None means every partition, and
        then the partitions that need no election are left out (as Kafka answers)."""
        result: tuple[int, dict[TopicPartition, tuple[int, str | None]]] = await self.call(
            lambda: self._elect_leaders(election_type, tps), (ErrorCode.NOT_CONTROLLER, {})
        )
        return result

    async def _elect_leaders(
        self, election_type: ElectionType, tps: list[TopicPartition] | None
    ) -> tuple[int, dict[TopicPartition, tuple[int, str | None]]]:
        """Kafka's processReplicaLeaderElection for an admin request (or the auto
        rebalance): unknown partitions and topics being deleted are answered without
        an election; the others are elected, written and announced in one batch."""
        v = self.view
        if not self.active:
            return ErrorCode.NOT_CONTROLLER, {}
        wanted = v.all_partitions() if tps is None else list(dict.fromkeys(tps))
        results: dict[TopicPartition, tuple[int, str | None]] = {}
        electable: list[TopicPartition] = []
        for tp in wanted:
            name = f"{tp.topic}-{tp.partition}"
            if tp.partition not in (t.partitions if (t := v.topics.get(tp.topic)) else {}):
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                               "The partition does not exist.")  # fmt: skip
            elif tp.topic in v.to_delete:
                results[tp] = (ErrorCode.INVALID_TOPIC_EXCEPTION,
                               f"Deletion of topic {tp.topic} is in progress")  # fmt: skip
            elif tp not in v.leadership:
                # Never elected (no replica was live when it was created): no state
                # znode to elect from; it gets its leader when a replica starts.
                results[tp] = self._election_failure(election_type, name)
            else:
                electable.append(tp)
        outcome: dict[TopicPartition, election.ElectLeadersResult] = {}

        async def choose(tp: TopicPartition, lead: LeaderAndIsr) -> LeaderAndIsr:
            # Called again with the re-read state when a write lost a race.
            res = election.elect_leaders(
                election_type, f"{tp.topic}-{tp.partition}", v.replicas(tp), lead, v.online_for(tp)
            )
            outcome[tp] = res
            if res.elected is None:
                return lead
            if res.elected.unclean:
                log.warning(
                    "controller: unclean leader election for %s requested: %d leads, out "
                    "of sync (records it does not have are lost)", tp, res.elected.leader,
                )  # fmt: skip
            return lead.elect(res.elected, v.epoch)

        written = set(await self._change_states(electable, choose))
        for tp in electable:
            res = outcome.get(tp)
            if res is not None and res.error != ErrorCode.NONE:
                results[tp] = (res.error, res.message)
            elif tp in written:
                results[tp] = (ErrorCode.NONE, None)
            else:
                # The write kept losing races (or the topic went meanwhile).
                results[tp] = self._election_failure(election_type, f"{tp.topic}-{tp.partition}")
        if tps is None:
            results = {tp: r for tp, r in results.items()
                       if r[0] != ErrorCode.ELECTION_NOT_NEEDED}  # fmt: skip
        elected = sorted(f"{tp.topic}-{tp.partition}" for tp, r in results.items() if r[0] == 0)
        if elected:
            log.info("controller: %s leader election for %s", election_type.name, elected)
        return ErrorCode.NONE, results

    @staticmethod
    def _election_failure(election_type: ElectionType, partition: str) -> tuple[int, str]:
        if election_type is ElectionType.PREFERRED:
            return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, election.failure_message(
                partition, election.Strategy.PREFERRED
            )
        return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, election.failure_message(
            partition, election.Strategy.OFFLINE, unclean_allowed=True
        )

    async def _rebalance_ticks(self, term: int) -> None:
        """The auto rebalance timer of one term: a check soon after failover, then one
        per interval, each queued as an event (the term's end cancels the timer)."""
        delay = self.settings.leader_imbalance_first_check_s
        while self.active and self._term == term:
            await asyncio.sleep(delay)
            if self.active and self._term == term:
                self.submit(self._auto_rebalance_event)
            delay = self.settings.leader_imbalance_check_interval_s

    async def _auto_rebalance_event(self) -> None:
        await self.auto_rebalance()

    async def auto_rebalance(self) -> list[TopicPartition]:
        """Kafka's checkAndTriggerAutoLeaderRebalance, run as an event: preferred
        elections for the partitions of every broker whose leader imbalance exceeds
        leader.imbalance.per.broker.percentage, where the preferred replica is online
        and in the ISR; nothing while a reassignment runs. Returns the partitions
        whose leadership moved. Runs inside the event task (tests:
        `controller.call(controller.auto_rebalance)`)."""
        v = self.view
        if not self.active:
            return []
        if self.reassignments.targets:
            # Kafka checks partitionsBeingReassigned.isEmpty: no preferred elections
            # while any reassignment runs (it moves leaders itself, and an election
            # against RS = TRS ++ ORS would fight it).
            log.debug("controller: auto leader rebalance skipped: %d partitions being "
                      "reassigned", len(self.reassignments.targets))  # fmt: skip
            return []
        imbalance = rebalance.preferred_replica_imbalance(
            v.all_partitions(), v.replicas, v.leadership, v.to_delete
        )
        for broker_id, measure in imbalance.items():
            log.debug("controller: leader imbalance of broker %d: %.1f%% (%d of %d)",
                      broker_id, 100 * measure.ratio, len(measure.not_led),
                      len(measure.preferred))  # fmt: skip
        candidates = rebalance.rebalance_candidates(
            imbalance, v.leadership, v.online(), self.settings.leader_imbalance_percentage
        )
        if not candidates:
            return []
        log.info("controller: auto leader rebalance: %d partitions back to their preferred "
                 "replica", len(candidates))  # fmt: skip
        _, results = await self._elect_leaders(ElectionType.PREFERRED, candidates)
        return [tp for tp in candidates if results.get(tp, (-1, None))[0] == ErrorCode.NONE]

    # --- requests from brokers -------------------------------------------------

    async def controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> tuple[int, list[TopicPartition]]:
        """ControlledShutdown: move leadership off `broker_id`, shrink it out of the
        ISRs it follows; answer the replicated partitions it still leads."""
        result: tuple[int, list[TopicPartition]] = await self.call(
            lambda: self._controlled_shutdown(broker_id, broker_epoch),
            (ErrorCode.NOT_CONTROLLER, []),
        )
        return result

    async def _controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> tuple[int, list[TopicPartition]]:
        v = self.view
        if not self.active:
            return ErrorCode.NOT_CONTROLLER, []
        info = v.live.get(broker_id)
        if info is None:
            return ErrorCode.BROKER_NOT_AVAILABLE, []
        if broker_epoch >= 0 and broker_epoch < info.epoch:
            return ErrorCode.STALE_BROKER_EPOCH, []
        v.shutting_down.add(broker_id)
        replicated = [tp for tp in v.partitions_on(broker_id)
                      if len(v.replicas(tp)) > 1 and tp in v.leadership
                      and tp.topic not in v.to_delete]  # fmt: skip
        led = [tp for tp in replicated if v.leadership[tp].leader == broker_id]
        followed = [tp for tp in replicated if v.leadership[tp].leader != broker_id]

        async def move(tp: TopicPartition, lead: LeaderAndIsr) -> LeaderAndIsr:
            elected = election.controlled_shutdown_election(
                v.replicas(tp), lead.isr, set(v.live), v.shutting_down
            )
            return lead if elected is None else lead.elect(elected, v.epoch)

        await self._change_states(led, move)
        self._send_stop_replica(broker_id, {tp: v.leadership[tp].leader_epoch
                                            for tp in followed}, delete=False)  # fmt: skip
        await self._remove_from_isr(followed, {broker_id})
        remaining = [tp for tp in replicated if v.leadership[tp].leader == broker_id]
        log.info("controller: controlled shutdown of %d: %d partitions still led",
                 broker_id, len(remaining))  # fmt: skip
        return ErrorCode.NONE, remaining

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: list[IsrChange]
    ) -> tuple[int, dict[TopicPartition, IsrAnswer]]:
        """AlterPartition from a leader: validate its epochs, write the new ISRs, and
        answer each partition's state as written (or its error)."""
        result: tuple[int, dict[TopicPartition, IsrAnswer]] = await self.call(
            lambda: self._alter_partition(broker_id, broker_epoch, changes),
            (ErrorCode.NOT_CONTROLLER, {}),
        )
        return result

    async def _alter_partition(
        self, broker_id: int, broker_epoch: int, changes: list[IsrChange]
    ) -> tuple[int, dict[TopicPartition, IsrAnswer]]:
        v = self.view
        if not self.active:
            return ErrorCode.NOT_CONTROLLER, {}
        info = v.live.get(broker_id)
        if info is None or (broker_epoch >= 0 and broker_epoch != info.epoch):
            return ErrorCode.STALE_BROKER_EPOCH, {}
        answers: dict[TopicPartition, IsrAnswer] = {}
        proposed: dict[TopicPartition, LeaderAndIsr] = {}
        for change in changes:
            tp = change.tp
            lead = v.leadership.get(tp)
            err = self._isr_change_problem(broker_id, change, lead)
            if err != ErrorCode.NONE or lead is None:
                answers[tp] = IsrAnswer(err or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif change.new_isr == lead.isr:
                answers[tp] = IsrAnswer(ErrorCode.NONE, lead)
            else:
                # An ISR change by the leader keeps the leader epoch (only the
                # controller's own changes bump it).
                proposed[tp] = replace(
                    lead,
                    isr=change.new_isr,
                    controller_epoch=v.epoch,
                    leader_recovery_state=LeaderRecoveryState(change.leader_recovery_state),
                )
        if proposed:
            results = await self.zk.update_partition_states(proposed, v.epoch_zk_version)
            for tp, res in results.items():
                if isinstance(res, BadVersionError):
                    answers[tp] = IsrAnswer(ErrorCode.INVALID_UPDATE_VERSION)
                    v.leadership.update(await self.zk.get_partition_states([tp]))
                else:
                    v.leadership[tp] = res
                    answers[tp] = IsrAnswer(ErrorCode.NONE, res)
            changed = [tp for tp, a in answers.items() if tp in proposed and a.state is not None]
            self._send_update_metadata(list(v.live), changed)
            await self.reassignments.on_isr_changed(changed)
        return ErrorCode.NONE, answers

    def _isr_change_problem(
        self, broker_id: int, change: IsrChange, lead: LeaderAndIsr | None
    ) -> int:
        """Kafka's checks of one AlterPartition item, in its order."""
        v = self.view
        if lead is None or change.tp.topic in v.to_delete:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if change.leader_epoch < lead.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if change.leader_epoch > lead.leader_epoch or change.partition_epoch > lead.zk_version:
            # The leader knows a newer state than ours: we are not the controller it
            # thinks (or not yet caught up); it retries.
            return ErrorCode.NOT_CONTROLLER
        if lead.leader != broker_id:
            return ErrorCode.INVALID_REQUEST
        if change.partition_epoch < lead.zk_version:
            return ErrorCode.INVALID_UPDATE_VERSION
        if not change.new_isr or lead.leader not in change.new_isr:
            return ErrorCode.INVALID_REQUEST
        added = [r for r in change.new_isr if r not in lead.isr]
        if any(r not in v.online_for(change.tp) for r in added):
            return ErrorCode.INELIGIBLE_REPLICA
        return ErrorCode.NONE

    # --- reassignment requests (the logic is in reassignment.py) ----------------

    async def alter_partition_reassignments(
        self, requested: dict[TopicPartition, list[int] | None]
    ) -> dict[TopicPartition, ReassignmentResult] | None:
        """AlterPartitionReassignments: each partition's result, or None when this
        broker is not (or no longer) the controller."""

        async def go() -> dict[TopicPartition, ReassignmentResult] | None:
            return await self.reassignments.alter(requested) if self.active else None

        result: dict[TopicPartition, ReassignmentResult] | None = await self.call(go)
        return result

    async def list_partition_reassignments(
        self, tps: list[TopicPartition] | None
    ) -> dict[TopicPartition, ReplicaAssignment] | None:
        """ListPartitionReassignments: the partitions being reassigned, or None when
        this broker is not the controller."""

        async def go() -> dict[TopicPartition, ReplicaAssignment] | None:
            return self.reassignments.listing(tps) if self.active else None

        result: dict[TopicPartition, ReplicaAssignment] | None = await self.call(go)
        return result

    # --- log directory failures ------------------------------------------------

    async def _on_log_dir_events(self, children: list[str]) -> None:
        """Kafka's LogDirEventNotification: a broker announced a failed log dir. It is
        sent LeaderAndIsr for every replica it hosts; those it answers with
        KAFKA_STORAGE_ERROR are on the failed dir (`_on_replicas_offline`)."""
        v = self.view
        events = await self.zk.log_dir_events()
        if not events:
            return
        await self.zk.delete_log_dir_events(list(events), v.epoch_zk_version)
        for b in sorted(set(events.values())):
            if b in v.live:
                log.info("controller: broker %d reports a failed log directory", b)
                self._send_leader_and_isr(v.partitions_on(b), only={b})

    def _leader_and_isr_answered(self, broker_id: int) -> Callable[[Struct], None]:
        """Kafka's onLeaderAndIsrResponseReceived: partitions answered with
        KAFKA_STORAGE_ERROR are replicas on a failed log dir of that broker."""
        term = self._term
        log_top = self._log_errors(broker_id, "LeaderAndIsr")

        def done(response: Struct) -> None:
            log_top(response)
            failed = _storage_errors(response, self.view.topics)
            if failed:
                self.submit(
                    self._in_term(term, lambda: self._on_replicas_offline(broker_id, failed))
                )

        return done

    async def _on_replicas_offline(self, broker_id: int, tps: set[TopicPartition]) -> None:
        """Replicas on a failed dir go offline (Kafka's onReplicasBecomeOffline): the
        partitions they lead elect another leader among the rest of the ISR, the
        others drop them from the ISR, and every broker learns they are offline."""
        v = self.view
        if broker_id not in v.live:
            return
        known = v.offline_dirs.setdefault(broker_id, set())
        new = sorted(tp for tp in tps if tp in v.leadership and tp not in known)
        if not new:
            return
        known.update(new)
        log.warning(
            "controller: %d replicas on a failed log dir of broker %d go offline",
            len(new), broker_id,
        )  # fmt: skip
        led = [tp for tp in new if v.leadership[tp].leader == broker_id]
        await self._elect_offline(led)
        followed = [tp for tp in new if broker_id in v.leadership[tp].isr
                    and v.leadership[tp].leader != broker_id]  # fmt: skip
        await self._remove_from_isr(followed, {broker_id})
        self._send_update_metadata(list(v.live), new)

    # --- sending -------------------------------------------------------------

    def _send_leader_and_isr(
        self,
        tps: list[TopicPartition],
        *,
        is_new: bool = False,
        full: bool = False,
        only: set[int] | None = None,
    ) -> None:
        v = self.view
        if self.channel is None:
            return
        per_broker: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            if tp not in v.leadership or tp.topic in v.to_delete:
                continue
            for r in v.replicas(tp):
                if r in v.live and (only is None or r in only):
                    per_broker.setdefault(r, []).append(tp)
        if full and only is not None:
            # a full request says "host exactly these": a broker that should host
            # nothing gets an empty one, or it would keep a stray replica for good
            for b in only:
                if b in v.live:
                    per_broker.setdefault(b, [])
        for b, mine in per_broker.items():
            leaders = {v.leadership[tp].leader for tp in mine}
            body = rq.leader_and_isr(
                controller_id=self.broker_id,
                controller_epoch=v.epoch,
                broker_epoch=v.live[b].epoch,
                partitions=[(tp, v.leadership[tp], v.topics[tp.topic], is_new) for tp in mine],
                live_leaders=[v.live[x] for x in leaders if x in v.live],
                full=full,
                listener=self.settings.listener,
            )
            self.channel.send(b, apis.LEADER_AND_ISR, body, self._leader_and_isr_answered(b))

    def _send_update_metadata(
        self,
        brokers: list[int],
        tps: list[TopicPartition],
        *,
        full: bool = False,
        deleting: bool = False,
    ) -> None:
        v = self.view
        if self.channel is None:
            return
        parts = [(tp, v.leadership.get(tp), v.topics[tp.topic]) for tp in tps
                 if tp.topic in v.topics]  # fmt: skip
        for b in brokers:
            if b not in v.live:
                continue
            body = rq.update_metadata(
                controller_id=self.broker_id,
                controller_epoch=v.epoch,
                broker_epoch=v.live[b].epoch,
                partitions=parts,
                live_brokers=[v.live[x] for x in sorted(v.live)],
                offline=v.offline_replicas(),
                deleting=deleting,
                full=full,
            )
            self.channel.send(b, apis.UPDATE_METADATA, body, self._log_errors(b, "UpdateMetadata"))

    def _send_stop_replica(
        self,
        broker_id: int,
        tps: dict[TopicPartition, int],
        *,
        delete: bool,
        on_done: Callable[[Struct], None] | None = None,
    ) -> None:
        v = self.view
        if self.channel is None or not tps or broker_id not in v.live:
            return
        body = rq.stop_replica(
            controller_id=self.broker_id,
            controller_epoch=v.epoch,
            broker_epoch=v.live[broker_id].epoch,
            partitions=tps,
            delete=delete,
        )
        self.channel.send(
            broker_id,
            apis.STOP_REPLICA,
            body,
            on_done or self._log_errors(broker_id, "StopReplica"),
        )

    def _log_errors(self, broker_id: int, what: str) -> Callable[[Struct], None]:
        def check(response: Struct) -> None:
            code = getattr(response, "error_code", 0)
            if code:
                log.warning("controller: %s to broker %d answered error %d", what, broker_id, code)

        return check

    # --- views for tools ---------------------------------------------------------

    def partition_leadership(self, tp: TopicPartition) -> LeaderAndIsr | None:
        """The active controller's state of a partition."""
        return self.view.leadership.get(tp)


def _storage_errors(response: Struct, topics: dict[str, TopicReplicas]) -> set[TopicPartition]:
    """The partitions a LeaderAndIsr response answers with KAFKA_STORAGE_ERROR (v0-4
    name topics in each entry, v5+ group them by topic id)."""
    out: set[TopicPartition] = set()
    storage = ErrorCode.KAFKA_STORAGE_ERROR
    for p in getattr(response, "partition_errors", None) or []:
        if p.error_code == storage:
            out.add(TopicPartition(p.topic_name, p.partition_index))
    by_id = {t.topic_id: name for name, t in topics.items()}
    for t in getattr(response, "topics", None) or []:
        name = by_id.get(t.topic_id.bytes) if t.topic_id is not None else None
        for p in t.partition_errors:
            if p.error_code == storage and name is not None:
                out.add(TopicPartition(name, p.partition_index))
    return out


def _stop_replica_errors(response: Struct) -> dict[TopicPartition, int]:
    out: dict[TopicPartition, int] = {}
    top = getattr(response, "error_code", 0)
    for p in getattr(response, "partition_errors", []) or []:
        out[TopicPartition(p.topic_name, p.partition_index)] = p.error_code or top
    return out
