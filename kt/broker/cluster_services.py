"""The services a broker runs as a member of its cluster, built together.

The composition root (kt.broker.broker) calls `build_cluster_services` once; the
membership (kt.broker.membership) starts them when the broker joins and stops them
when it leaves. The single-node broker gets the same services over its in-process
coordination store.

- the config manager follows `/config/changes` (topic and broker configs);
- the topic admin changes topics through the coordination store;
- the controller link reaches the active controller (ISR proposals, forwarded
  elections, controlled shutdown), found from the metadata cache, else
  `/controller`;
- the ISR proposals (AlterPartition) go out through it;
- the replica fetchers fetch for the followers hosted here;
- the controller candidate, whose channel reaches this broker through the loopback
  link and the others at the endpoints its view has.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kt.broker.alter_partition import AlterPartitionManager
from kt.broker.config_manager import ConfigManager
from kt.broker.controller.channel import BrokerLink, ControllerChannel
from kt.broker.controller.controller import ControllerSettings, KafkaController
from kt.broker.controller.links import NetworkLink
from kt.broker.controller.zk import ZkControllerStore
from kt.broker.controller_link import ControllerLink, ControllerLookup
from kt.broker.metadata.cache import endpoint_on
from kt.broker.metadata.cluster_store import ClusterStore
from kt.broker.replication.fetcher import BrokerEndpoint, FetcherConfig, ReplicaFetcherManager
from kt.broker.topic_admin import TopicAdmin

if TYPE_CHECKING:
    from kt.broker.config import Listener
    from kt.broker.controller.links import PeerLinks
    from kt.broker.metadata.cache import MetadataCache
    from kt.broker.metadata.store import CoordinationStore
    from kt.broker.metadata.topics import TopicsView
    from kt.broker.replica_manager import ReplicaManager
    from kt.broker.replication.quota import ReplicationThrottles
    from kt.broker.services import NodeState
    from kt.broker.topic_config_sync import TopicConfigs
    from kt.client.security import SecurityConfig


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """The settings the cluster services read (built by the composition root)."""

    controller: ControllerSettings
    fetcher: FetcherConfig
    #: the security of this broker's connections to its peers (its inter-broker
    #: listener as a client); None: plaintext
    inter_broker: SecurityConfig | None


@dataclass(frozen=True, slots=True)
class ClusterServices:
    """What being a cluster member takes (see the module docstring)."""

    cluster: ClusterStore
    config_manager: ConfigManager
    topic_admin: TopicAdmin
    controller_link: ControllerLink
    alter_partitions: AlterPartitionManager
    fetchers: ReplicaFetcherManager
    controller: KafkaController
    #: live leaders' endpoints a LeaderAndIsr named (the fetchers' fallback)
    fetcher_addresses: dict[int, tuple[str, int]] = field(default_factory=dict)


def build_cluster_services(
    store: CoordinationStore,
    *,
    settings: ClusterSettings,
    node: NodeState,
    replicas: ReplicaManager,
    topics: TopicsView,
    topic_configs: TopicConfigs,
    throttles: ReplicationThrottles,
    peers: PeerLinks,
    advertised_listeners: Callable[[], list[Listener]],
    apply_dynamic_configs: Callable[[dict[str, str], dict[str, str]], None],
) -> ClusterServices:
    """Every cluster service, each with what it uses."""
    node_id = node.node_id
    cluster = ClusterStore(store)
    link = ControllerLink(
        _controller_finder(cluster, topics.cache, node, advertised_listeners),
        client_id=f"broker-{node_id}",
        security=settings.inter_broker,
    )
    addresses: dict[int, tuple[str, int]] = {}
    controller: KafkaController | None = None

    def channel() -> ControllerChannel:
        def to(broker_id: int) -> BrokerLink:
            client_id = f"controller-{node_id}"
            if broker_id == node_id:
                return peers.link(broker_id, client_id)

            def address() -> tuple[str, int] | None:
                assert controller is not None  # the controller makes its channel
                info = controller.view.live.get(broker_id)
                return info.endpoint_for(node.listener_name) if info else None

            return NetworkLink(address, broker_id=broker_id, client_id=client_id,
                               security=settings.inter_broker)  # fmt: skip

        return ControllerChannel(to)

    controller = KafkaController(node_id, ZkControllerStore(cluster), channel, settings.controller)
    return ClusterServices(
        cluster=cluster,
        config_manager=ConfigManager(cluster, topic_configs.apply, node_id, apply_dynamic_configs),
        topic_admin=TopicAdmin(cluster, topics.cache, topics, replicas.metadata_changed),
        controller_link=link,
        alter_partitions=AlterPartitionManager(link, node_id, lambda: node.broker_epoch),
        fetchers=_fetchers(settings, node, topics.cache, replicas, throttles, addresses),
        controller=controller,
        fetcher_addresses=addresses,
    )


def _fetchers(
    settings: ClusterSettings,
    node: NodeState,
    cache: MetadataCache,
    replicas: ReplicaManager,
    throttles: ReplicationThrottles,
    addresses: dict[int, tuple[str, int]],
) -> ReplicaFetcherManager:
    """The replica fetchers: followers fetch from their leaders, addressed from the
    metadata cache, else from the live leaders' endpoints a LeaderAndIsr named."""
    node_id, listener = node.node_id, node.listener_name
    fetch_config = settings.fetcher

    def address_for(leader_id: int) -> tuple[str, int] | None:
        live = cache.broker(leader_id)
        ep = live.endpoint_for(listener) if live else None
        return (ep.host, ep.port) if ep is not None else addresses.get(leader_id)

    def endpoint_for(leader_id: int) -> BrokerEndpoint:
        address = address_for(leader_id)
        if address is None:
            raise KeyError(f"no address known for broker {leader_id}")
        host, port = address
        return BrokerEndpoint(leader_id, host, port, local_broker_id=node_id, config=fetch_config,
                              security=settings.inter_broker)  # fmt: skip

    return ReplicaFetcherManager(
        node_id, endpoint_for, fetch_config, broker_epoch=node.broker_epoch,
        on_partition_failed=lambda part, exc: replicas.on_storage_error(part, exc),
        throttles=throttles, address_for=address_for,
    )  # fmt: skip


def _controller_finder(
    cluster: ClusterStore,
    cache: MetadataCache,
    node: NodeState,
    advertised_listeners: Callable[[], list[Listener]],
) -> ControllerLookup:
    async def find_controller() -> tuple[int, str, int] | None:
        """The controller's id and endpoint: the metadata cache's, else /controller."""
        controller_id = cache.controller_id
        if controller_id is None or not cache.is_alive(controller_id):
            controller_id = await cluster.get_controller()
        if controller_id is None:
            return None
        if controller_id == node.node_id:
            # itself, through its inter-broker listener (the one the link is secured for)
            own = advertised_listeners()
            lst = next((x for x in own if x.name == node.listener_name), own[0])
            return controller_id, lst.host, lst.port
        live = cache.broker(controller_id)
        if live is None:
            found = await cluster.get_broker(controller_id)
            ep = endpoint_on(found.registration.endpoints, node.listener_name) if found else None
            return (controller_id, ep.host, ep.port) if ep is not None else None
        endpoint = live.endpoint_for(node.listener_name)
        return (controller_id, endpoint.host, endpoint.port) if endpoint else None

    return find_controller
