"""ClusterMembership: this broker as a member of its cluster.

It owns the broker's session with the coordination store (ZooKeeper, or the
in-process store of the single-node default) and everything tied to it:

- at start: connect (a clear error after zookeeper.connection.timeout.ms), create
  Kafka's persistent paths, agree on the cluster id (`/cluster/id`, first creator
  wins), read the topic configs;
- join: register `/brokers/ids/N` (the broker epoch is its czxid), start the
  controller candidate, follow config changes, send ISR proposals to the
  controller;
- session expiry: the controller resigns, the broker registers again with a new
  epoch and stands for election again (Kafka's ZooKeeper session handling);
- controlled shutdown: ask the controller to move leadership away first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kt.broker.alter_partition import IsrCallback, IsrProposal
from kt.broker.controller.controller import KafkaController
from kt.broker.controller_link import ControllerLink, ControllerUnavailableError
from kt.broker.errors import TopicError
from kt.broker.metadata import znodes
from kt.broker.metadata.cluster_store import BrokerIdInUseError, ClusterStore
from kt.broker.metadata.store import CoordinationStore, SessionEvent, StoreUnavailableError
from kt.broker.partition import Partition
from kt.broker.topic_admin import TopicAdmin
from kt.protocol import ErrorCode, apis
from kt.storage.checkpoint import TopicPartition

if TYPE_CHECKING:
    from kt.broker.cluster_services import ClusterServices
    from kt.broker.config import Listener
    from kt.broker.metadata.topics import TopicsView
    from kt.broker.producer_ids import ProducerIdManager
    from kt.broker.replica_manager import ReplicaManager
    from kt.broker.services import NodeState

log = logging.getLogger("kt.broker.membership")


@dataclass(frozen=True, slots=True)
class MembershipSettings:
    """The settings the membership reads (built by the composition root)."""

    #: how long to wait for the coordination store at start (Kafka's
    #: zookeeper.connection.timeout.ms, else zookeeper.session.timeout.ms)
    connection_timeout_ms: int
    #: zookeeper.session.timeout.ms: how long a previous registration may linger
    session_timeout_ms: int
    #: broker.rack, registered with the broker (None: unset)
    rack: str | None
    controlled_shutdown_enable: bool
    controlled_shutdown_max_retries: int
    controlled_shutdown_retry_backoff_ms: int


class MembershipError(Exception):
    """The broker cannot join its cluster (one line for the operator)."""


class ClusterMembership:
    """The broker's registration, controller candidacy and session.

    The cluster services (config manager, controller link, ISR proposals, replica
    fetchers, topic admin, controller) come built, as one `ClusterServices`
    (kt.broker.cluster_services), and `join` starts them; until then `admin()`
    refuses and `active_controller()` is None. The single-node broker is a member
    of its one-broker cluster the same way.
    """

    def __init__(
        self,
        store: CoordinationStore,
        services: ClusterServices,
        *,
        settings: MembershipSettings,
        node: NodeState,
        replicas: ReplicaManager,
        topics: TopicsView,
        producer_ids: ProducerIdManager,
        advertised_listeners: Callable[[], list[Listener]],
    ) -> None:
        self.store = store
        self.cluster = services.cluster
        self._settings = settings
        self._node = node
        self._replicas = replicas
        self._topics = topics
        self._producer_ids = producer_ids
        self._advertised_listeners = advertised_listeners
        self._fetcher_addresses = services.fetcher_addresses
        self.config_manager = services.config_manager
        self.topic_admin = services.topic_admin
        self.controller_link = services.controller_link
        self.alter_partitions = services.alter_partitions
        self.fetchers = services.fetchers
        self.controller = services.controller
        self._connecting = False  # connect() was called: leave() closes the session
        self._joined = False
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None  # the broker's, once joined
        self._leaving = False

    # --- what handlers use (kt.broker.services.ClusterAccess) ----------------------

    @property
    def cluster_store(self) -> ClusterStore:
        """The coordination store's cluster view (open from `connect` on)."""
        return self.cluster

    def admin(self) -> TopicAdmin:
        """Topic changes; refused (NOT_CONTROLLER) until the broker joined and the
        controller's view reached it: the admin's checks and placements read the
        metadata cache, and on an empty one they would refuse or misplace, and
        auto-creation would create topics that exist (docs/design/restart-metadata.md)."""
        if not self._joined or not self._topics.cache.ready:
            raise TopicError(ErrorCode.NOT_CONTROLLER, "the broker is not ready yet")
        return self.topic_admin

    def active_controller(self) -> KafkaController | None:
        """This broker's controller while it is the active one."""
        return self.controller if self._joined and self.controller.active else None

    def joined_controller(self) -> KafkaController | None:
        """This broker's controller once joined, active or not."""
        return self.controller if self._joined else None

    def active_controller_link(self) -> ControllerLink | None:
        """The link to the active controller, once joined."""
        return self.controller_link if self._joined else None

    def submit_isr_change(self, proposal: IsrProposal, callback: IsrCallback) -> bool:
        """Send a leader's ISR proposal to the controller (False: not sent, e.g.
        before joining, or one for the partition is already out)."""
        return self._joined and self.alter_partitions.submit(proposal, callback)

    # --- start -------------------------------------------------------------------

    async def connect(self, candidate_cluster_id: str) -> str:
        """Open the session and agree on the cluster id; returns it."""
        self._connecting = True
        timeout_s = self._settings.connection_timeout_ms / 1000
        try:
            await self.store.start(timeout_s)
        except StoreUnavailableError as exc:
            raise MembershipError(str(exc)) from None
        await self.cluster.ensure_persistent_paths()
        return await self.cluster.get_or_create_cluster_id(candidate_cluster_id)

    async def load_dynamic_broker_configs(self) -> None:
        """Read and apply this broker's dynamic configs before its logs open, so they
        open with them (Kafka's DynamicBrokerConfig.initialize)."""
        await self.config_manager.apply_broker_configs()

    async def topic_configs(self) -> dict[str, dict[str, str]]:
        """Every topic's config overrides."""
        return await self.cluster.get_all_entity_configs("topics")

    async def join(self) -> None:
        """Register, then run the controller candidate and the session's services."""
        node = self._node
        # Fetchers first: once registered, the controller's LeaderAndIsr may arrive at
        # any await below, and followers it makes before the fetchers listen would
        # never be fetched (a restarted broker would not rejoin its ISRs).
        self._follow_leadership()
        await self._register()
        self.fetchers.broker_epoch = node.broker_epoch
        self._producer_ids.attach(lambda: self.cluster.allocate_producer_id_block(node.node_id))
        self._joined = True
        await self.config_manager.start()
        self.alter_partitions.start()
        self._loop = asyncio.get_running_loop()
        self._replicas.dir_failure_listeners.append(self._announce_dir_failure)
        self.store.on_session_event(self._on_session_event)
        await self.controller.startup()

    async def _register(self) -> None:
        """Create /brokers/ids/N. Our own previous registration (a restart faster than
        the session timeout: the znode names this broker's endpoints) is waited out;
        another live broker with our id is an error."""
        node, settings = self._node, self._settings
        endpoints = tuple(
            znodes.Endpoint(lst.name, lst.host, lst.port, lst.protocol)
            for lst in self._advertised_listeners()
        )
        reg = znodes.BrokerRegistration(
            node.node_id, endpoints, int(time.time() * 1000), rack=settings.rack
        )
        session_s = settings.session_timeout_ms / 1000
        deadline = time.monotonic() + session_s + 5
        announced = False
        while True:
            try:
                node.broker_epoch = await self.cluster.register_broker(reg)
                log.info("registered broker %d (epoch %d)", node.node_id, node.broker_epoch)
                return
            except BrokerIdInUseError as exc:
                existing = await self.cluster.get_broker(node.node_id)
                if existing is None:
                    # The other session's node expired between our create and this
                    # read (the fault campaign caught a restart failing here).
                    continue
                ours = set(existing.registration.endpoints) == set(endpoints)
                if not ours or time.monotonic() > deadline:
                    raise MembershipError(str(exc)) from None
                if not announced:
                    log.warning(
                        "broker id %d is still registered by this broker's previous run; "
                        "waiting for that session to expire (up to %.0fs)",
                        node.node_id, session_s,
                    )  # fmt: skip
                    announced = True
                await asyncio.sleep(0.5)

    def _follow_leadership(self) -> None:
        """A LeaderAndIsr hands new followers to the fetchers and takes new leaders
        (and stopped replicas) from them."""
        fetchers, rm = self.fetchers, self._replicas

        def on_leadership(
            leaders: list[Partition], followers: list[Partition], live: dict[int, tuple[str, int]]
        ) -> None:
            self._fetcher_addresses.update(live)
            if leaders:
                fetchers.remove_partitions([p.tp for p in leaders])
            if followers:
                fetchers.add_partitions(followers)
            fetchers.retire_idle_fetchers()

        rm.leadership_listeners.append(on_leadership)

        def on_stopped(tps: list[TopicPartition]) -> None:
            fetchers.remove_partitions(tps)
            fetchers.retire_idle_fetchers()

        rm.stop_listeners.append(on_stopped)

    # --- session -----------------------------------------------------------------

    def _announce_dir_failure(self, d: object) -> None:
        """A log dir failed: tell the controller (Kafka's propagateLogDirEvent), which
        asks this broker which replicas are gone and elects other leaders for them."""
        log.warning("announcing the failed log directory %s to the controller", d)

        async def announce() -> None:
            while not self._leaving:
                try:
                    await self.cluster.register_log_dir_event(self._node.node_id)
                    return
                except Exception as exc:  # store unreachable: retry, the event matters
                    log.warning("cannot announce the failed log directory yet: %s", exc)
                    await asyncio.sleep(1.0)

        loop = self._loop
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or loop.is_closed():
            return  # not joined (or already stopped): no controller to tell
        if running is loop:
            self._tasks.append(loop.create_task(announce()))
        else:  # a failure found off the broker's loop (a checkpoint thread)
            asyncio.run_coroutine_threadsafe(announce(), loop)

    def _on_session_event(self, event: SessionEvent) -> None:
        if self._leaving:
            return
        if event is SessionEvent.EXPIRED:
            log.error("the coordination session expired: re-registering")
            self._tasks.append(asyncio.get_running_loop().create_task(self._renew()))
        elif event is SessionEvent.SUSPENDED:
            log.warning("lost the connection to the coordination store; serving on")
        elif event is SessionEvent.RECONNECTED:
            log.info("reconnected to the coordination store")

    async def _renew(self) -> None:
        """After an expiry: resign as controller, register again, stand again."""
        await self.controller.session_expired()
        while not self._leaving:
            try:
                await self._register()
                break
            except Exception as exc:
                log.warning("cannot register again yet: %s", exc)
                await asyncio.sleep(1.0)
        if not self._leaving:
            self.controller.stand_for_election()

    # --- stop --------------------------------------------------------------------

    async def controlled_shutdown(self) -> None:
        """Ask the controller to move leadership off this broker (Kafka's
        controlled.shutdown.*: retried while partitions remain or no controller
        answers, then the broker stops regardless)."""
        settings, node = self._settings, self._node
        if not settings.controlled_shutdown_enable or not self._joined:
            return
        if len(self._topics.cache.alive_brokers()) <= 1:
            return  # nobody to hand leadership to
        retries = settings.controlled_shutdown_max_retries
        backoff = settings.controlled_shutdown_retry_backoff_ms / 1000
        body = {"broker_id": node.node_id, "broker_epoch": node.broker_epoch}
        for attempt in range(1, retries + 1):
            try:
                resp = await self.controller_link.send(apis.CONTROLLED_SHUTDOWN, body,
                                                       timeout_s=10.0)  # fmt: skip
            except ControllerUnavailableError as exc:
                log.warning("controlled shutdown attempt %d: %s", attempt, exc)
            else:
                if resp.error_code == ErrorCode.NONE and not resp.remaining_partitions:
                    log.info("controlled shutdown complete: no partitions led here")
                    return
                log.info("controlled shutdown attempt %d: error %d, %d partitions still led",
                         attempt, resp.error_code, len(resp.remaining_partitions))  # fmt: skip
            if attempt < retries:
                await asyncio.sleep(backoff)
        log.warning("controlled shutdown did not complete; stopping anyway")

    async def leave(self) -> None:
        """Stop the controller and the services, then close the session (our
        registration disappears with it)."""
        self._leaving = True
        if not self._connecting:
            return  # the start failed before reaching the store: nothing to undo
        for t in self._tasks:
            t.cancel()
        # Each stops harmlessly when it never started (a join that failed early).
        await self.controller.shutdown()
        await self.fetchers.shutdown()
        await self.alter_partitions.stop()
        self.config_manager.stop()
        await self.controller_link.close()
        await self.store.close()
