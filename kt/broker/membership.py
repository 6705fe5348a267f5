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
from typing import TYPE_CHECKING

from kt.broker.alter_partition import AlterPartitionManager
from kt.broker.config_manager import ConfigManager
from kt.broker.controller.channel import BrokerLink, ControllerChannel
from kt.broker.controller.controller import ControllerSettings, KafkaController
from kt.broker.controller.links import LoopbackLink, NetworkLink
from kt.broker.controller.zk import ZkControllerStore
from kt.broker.controller_link import ControllerLink, ControllerUnavailableError
from kt.broker.metadata import znodes
from kt.broker.metadata.cluster_store import BrokerIdInUseError, ClusterStore
from kt.broker.metadata.store import CoordinationStore, SessionEvent, StoreUnavailableError
from kt.broker.partition import Partition
from kt.broker.replication.fetcher import BrokerEndpoint, FetcherConfig, ReplicaFetcherManager
from kt.broker.topic_admin import TopicAdmin
from kt.protocol import ErrorCode, apis
from kt.storage.checkpoint import TopicPartition

if TYPE_CHECKING:
    from kt.broker.broker import Broker

log = logging.getLogger("kt.broker.membership")


class MembershipError(Exception):
    """The broker cannot join its cluster (one line for the operator)."""


class ClusterMembership:
    """The broker's registration, controller candidacy and session."""

    def __init__(self, broker: Broker, store: CoordinationStore) -> None:
        self.broker = broker
        self.store = store
        self.cluster = ClusterStore(store)
        self.controller: KafkaController | None = None
        self.config_manager: ConfigManager | None = None
        self.alter_partitions: AlterPartitionManager | None = None
        self.controller_link: ControllerLink | None = None
        self.fetchers: ReplicaFetcherManager | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None  # the broker's, once joined
        self._leaving = False

    # --- start -------------------------------------------------------------------

    async def connect(self, candidate_cluster_id: str) -> str:
        """Open the session and agree on the cluster id; returns it."""
        timeout_s = self.broker.config.zookeeper_connection_timeout_ms / 1000
        try:
            await self.store.start(timeout_s)
        except StoreUnavailableError as exc:
            raise MembershipError(str(exc)) from None
        await self.cluster.ensure_persistent_paths()
        return await self.cluster.get_or_create_cluster_id(candidate_cluster_id)

    async def load_dynamic_broker_configs(self) -> None:
        """Read and apply this broker's dynamic configs before its logs open, so they
        open with them (Kafka's DynamicBrokerConfig.initialize)."""
        await self._config_manager().apply_broker_configs()

    def _config_manager(self) -> ConfigManager:
        # Created on first use; join starts it following the change notifications.
        if self.config_manager is None:
            b = self.broker
            self.config_manager = ConfigManager(
                self.cluster, b.on_topic_config, b.node_id, b.apply_dynamic_configs
            )
        return self.config_manager

    async def topic_configs(self) -> dict[str, dict[str, str]]:
        """Every topic's config overrides."""
        return await self.cluster.get_all_entity_configs("topics")

    async def join(self) -> None:
        """Register, then run the controller candidate and the session's services."""
        b = self.broker
        rm = b.replica_manager
        # Fetchers first: once registered, the controller's LeaderAndIsr may arrive at
        # any await below, and followers it makes before the fetchers listen would
        # never be fetched (a restarted broker would not rejoin its ISRs).
        self._start_fetchers()
        await self._register()
        if self.fetchers is not None:
            self.fetchers.broker_epoch = b.broker_epoch
        rm.attach_cluster(
            rm.metadata_cache, lambda: b.broker_epoch, lambda t: b.metadata.configs.get(t, {})
        )
        known: set[str] = set()

        async def fetch_configs(topic: str) -> object:
            if topic not in known:
                known.add(topic)
                await b.refresh_topic_configs(topic)
            return None

        rm.fetch_topic_configs = fetch_configs
        b._admin = TopicAdmin(self.cluster, rm.metadata_cache, b.metadata, rm.metadata_changed)
        b.producer_ids.attach(lambda: self.cluster.allocate_producer_id_block(b.node_id))
        self.config_manager = self._config_manager()
        await self.config_manager.start()
        self.controller_link = ControllerLink(
            self._find_controller, client_id=f"broker-{b.node_id}"
        )
        self.alter_partitions = AlterPartitionManager(
            self.controller_link, b.node_id, lambda: b.broker_epoch
        )
        self.alter_partitions.start()
        rm.submit_isr_change = self.alter_partitions.submit
        self._loop = asyncio.get_running_loop()
        rm.dir_failure_listeners.append(self._announce_dir_failure)
        settings = ControllerSettings(
            unclean_leader_election_default=b.config.unclean_leader_election_enable,
            listener=b.listener_name,
            auto_leader_rebalance=b.config.get_bool("auto.leader.rebalance.enable"),
            leader_imbalance_percentage=b.config.get_int("leader.imbalance.per.broker.percentage"),
            # Kafka requires at least 1 second; a smaller value would spin the timer.
            leader_imbalance_check_interval_s=max(
                1, b.config.get_int("leader.imbalance.check.interval.seconds")
            ),
        )
        self.controller = KafkaController(
            b.node_id, ZkControllerStore(self.cluster), self._channel, settings
        )
        b.controller = self.controller
        self.store.on_session_event(self._on_session_event)
        await self.controller.startup()

    async def _register(self) -> None:
        """Create /brokers/ids/N. Our own previous registration (a restart faster than
        the session timeout: the znode names this broker's endpoints) is waited out;
        another live broker with our id is an error."""
        b = self.broker
        endpoints = tuple(
            znodes.Endpoint(lst.name, lst.host, lst.port, lst.protocol)
            for lst in b.advertised_listeners()
        )
        reg = znodes.BrokerRegistration(
            b.node_id, endpoints, int(time.time() * 1000), rack=b.config.rack
        )
        session_s = b.config.get_int("zookeeper.session.timeout.ms") / 1000
        deadline = time.monotonic() + session_s + 5
        announced = False
        while True:
            try:
                b.broker_epoch = await self.cluster.register_broker(reg)
                log.info("registered broker %d (epoch %d)", b.node_id, b.broker_epoch)
                return
            except BrokerIdInUseError as exc:
                existing = await self.cluster.get_broker(b.node_id)
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
                        b.node_id, session_s,
                    )  # fmt: skip
                    announced = True
                await asyncio.sleep(0.5)

    def _start_fetchers(self) -> None:
        """Followers fetch from their leaders: a LeaderAndIsr hands new followers to
        the fetchers and takes new leaders (and stopped replicas) from them."""
        b = self.broker
        rm = b.replica_manager
        config = FetcherConfig.from_props(b.config.props)
        addresses: dict[int, tuple[str, int]] = {}

        def address_for(leader_id: int) -> tuple[str, int] | None:
            live = b.metadata.cache.broker(leader_id)
            ep = live.endpoint(b.listener_name) or live.endpoint() if live else None
            return (ep.host, ep.port) if ep is not None else addresses.get(leader_id)

        def endpoint_for(leader_id: int) -> BrokerEndpoint:
            address = address_for(leader_id)
            if address is None:
                raise KeyError(f"no address known for broker {leader_id}")
            host, port = address
            return BrokerEndpoint(leader_id, host, port, local_broker_id=b.node_id, config=config)

        self.fetchers = fetchers = ReplicaFetcherManager(
            b.node_id, endpoint_for, config, broker_epoch=b.broker_epoch,
            on_partition_failed=lambda part, exc: rm.on_storage_error(part, exc),
            throttles=b.replication_throttles, address_for=address_for,
        )  # fmt: skip

        def on_leadership(
            leaders: list[Partition], followers: list[Partition], live: dict[int, tuple[str, int]]
        ) -> None:
            addresses.update(live)
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

    def _channel(self) -> ControllerChannel:
        b = self.broker

        def link(broker_id: int) -> BrokerLink:
            if broker_id == b.node_id:
                return LoopbackLink(b, client_id=f"controller-{b.node_id}")

            def address() -> tuple[str, int] | None:
                c = self.controller
                info = c.view.live.get(broker_id) if c is not None else None
                return info.endpoint(b.listener_name) or info.endpoint() if info else None

            return NetworkLink(address, broker_id=broker_id, client_id=f"controller-{b.node_id}")

        return ControllerChannel(link)

    async def _find_controller(self) -> tuple[int, str, int] | None:
        """The controller's id and endpoint: the metadata cache's, else /controller."""
        cache = self.broker.metadata.cache
        controller_id = cache.controller_id
        if controller_id is None or not cache.is_alive(controller_id):
            controller_id = await self.cluster.get_controller()
        if controller_id is None:
            return None
        if controller_id == self.broker.node_id:
            lst = self.broker.advertised_listeners()[0]
            return controller_id, lst.host, lst.port
        live = cache.broker(controller_id)
        if live is None:
            found = await self.cluster.get_broker(controller_id)
            if found is None or not found.registration.endpoints:
                return None
            ep = found.registration.endpoints[0]
            return controller_id, ep.host, ep.port
        endpoint = live.endpoint(self.broker.listener_name) or live.endpoint()
        return (controller_id, endpoint.host, endpoint.port) if endpoint else None

    # --- session -----------------------------------------------------------------

    def _announce_dir_failure(self, d: object) -> None:
        """A log dir failed: tell the controller (Kafka's propagateLogDirEvent), which
        asks this broker which replicas are gone and elects other leaders for them."""
        log.warning("announcing the failed log directory %s to the controller", d)

        async def announce() -> None:
            while not self._leaving:
                try:
                    await self.cluster.register_log_dir_event(self.broker.node_id)
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
        if self.controller is not None:
            await self.controller.session_expired()
        while not self._leaving:
            try:
                await self._register()
                break
            except Exception as exc:
                log.warning("cannot register again yet: %s", exc)
                await asyncio.sleep(1.0)
        if self.controller is not None and not self._leaving:
            self.controller.stand_for_election()

    # --- stop --------------------------------------------------------------------

    async def controlled_shutdown(self) -> None:
        """Ask the controller to move leadership off this broker (Kafka's
        controlled.shutdown.*: retried while partitions remain or no controller
        answers, then the broker stops regardless)."""
        b = self.broker
        if not b.config.get_bool("controlled.shutdown.enable") or self.controller_link is None:
            return
        if len(b.metadata.cache.alive_brokers()) <= 1:
            return  # nobody to hand leadership to
        retries = b.config.get_int("controlled.shutdown.max.retries")
        backoff = b.config.get_int("controlled.shutdown.retry.backoff.ms") / 1000
        body = {"broker_id": b.node_id, "broker_epoch": b.broker_epoch}
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
        for t in self._tasks:
            t.cancel()
        if self.controller is not None:
            await self.controller.shutdown()
        if self.fetchers is not None:
            await self.fetchers.shutdown()
        if self.alter_partitions is not None:
            await self.alter_partitions.stop()
        if self.config_manager is not None:
            self.config_manager.stop()
        if self.controller_link is not None:
            await self.controller_link.close()
        await self.store.close()
