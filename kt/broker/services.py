"""The services a request handler may use, as the composition root hands them over.

`RequestContext` (kt.broker.handlers) carries one `HandlerServices`: a frozen record
of the broker's services, each one narrow (a service object, or the one callable a
handler family needs), built once by the composition root (`kt.broker.broker`).
Handlers never see the broker: a handler family names what it reads from
`ctx.services`, and its unit tests build a `HandlerServices` with only those
fields; any other field is an `absent` placeholder that fails loudly when touched.

`NodeState` is what every handler may read about the broker it runs in (its id,
cluster id, listener, whether it is stopping); `ClusterAccess` is what joining the
cluster produced (topic changes, the controller, the controller link, the
coordination store), behind one gate until the broker has joined.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kt.broker.controller.controller import KafkaController
    from kt.broker.controller_link import ControllerLink
    from kt.broker.fetch_sessions import FetchSessionCache
    from kt.broker.groups.coordinator import GroupCoordinator
    from kt.broker.log_manager import LogManager
    from kt.broker.metadata.cluster_store import ClusterStore
    from kt.broker.metadata.topics import TopicsView
    from kt.broker.metadata_store import TopicInfo
    from kt.broker.replica_manager import ReplicaManager
    from kt.broker.replication.quota import ReplicationThrottles
    from kt.broker.security.authorizer import AclAuthorizer
    from kt.broker.security.listeners import Listeners
    from kt.broker.topic_admin import TopicAdmin
    from kt.broker.transactions.service import TransactionService


class NodeState:
    """This broker as handlers see it: fixed identity plus the few facts that change
    over its life (cluster id once the log dirs are locked, the broker epoch once
    registered, `stopping` at shutdown). One instance, owned by the composition
    root; services read it, only the root and the membership write it."""

    __slots__ = ("broker_epoch", "cluster_id", "listener_name", "node_id", "stopping")

    def __init__(self, node_id: int, listener_name: str) -> None:
        self.node_id = node_id
        self.listener_name = listener_name
        self.cluster_id = ""
        self.broker_epoch = -1
        self.stopping = False


class ClusterAccess(Protocol):
    """What handlers use of the cluster membership."""

    @property
    def cluster_store(self) -> ClusterStore:
        """The coordination store (ZooKeeper or the in-process store), open from start."""
        ...

    def admin(self) -> TopicAdmin:
        """Topic changes; raises TopicError(NOT_CONTROLLER) until the broker joined."""
        ...

    def active_controller(self) -> KafkaController | None:
        """This broker's controller when it is the active one, else None."""
        ...

    def active_controller_link(self) -> ControllerLink | None:
        """The link to the active controller (None until joined)."""
        ...


class TopicCreation(Protocol):
    """Topic creation on a client's behalf (auto-create, internal topics)."""

    async def maybe_auto_create(self, name: str, *, wait_s: float = 2.0) -> TopicInfo | None:
        """Create `name` if auto-creation is on; the topic, or None."""
        ...


class TopicConfigSync(Protocol):
    """Topic config overrides kept current from the coordination store."""

    async def refresh(self, name: str) -> dict[str, str]:
        """A topic's overrides as the store holds them now (applied if changed)."""
        ...


class BrokerConfigView(Protocol):
    """The broker's configuration as DescribeConfigs and the dynamic-config checks
    of (Incremental)AlterConfigs read it: its static settings and the dynamic layers
    this broker applies. Read-only; a running broker's view is replaced whole when
    its dynamic configs change (`HandlerServices.broker_config` returns the current
    one). `kt.broker.config.BrokerConfig` is one."""

    @property
    def props(self) -> Mapping[str, str]:
        """The static settings (kt's defaults, the config file, the overrides)."""
        ...

    @property
    def dynamic_defaults(self) -> Mapping[str, str]:
        """The cluster-wide dynamic layer (/config/brokers/<default>) as applied."""
        ...

    @property
    def dynamic_own(self) -> Mapping[str, str]:
        """This broker's dynamic layer (/config/brokers/<id>) as applied."""
        ...

    @property
    def listener_settings(self) -> Listeners | None:
        """The listeners and their security protocols."""
        ...

    def given(self) -> dict[str, str]:
        """Settings set explicitly (config file or overrides), not kt's defaults."""
        ...


@dataclass(frozen=True, slots=True)
class HandlerSettings:
    """The static settings request handlers read (built by the composition root)."""

    #: Metadata requests create missing topics (auto.create.topics.enable)
    auto_create_topics_enable: bool
    #: CreateTopics' defaults for -1 (num.partitions, default.replication.factor)
    num_partitions: int
    default_replication_factor: int
    #: DeleteTopics is allowed (delete.topic.enable)
    delete_topic_enable: bool
    #: how long a WriteTxnMarkers append waits for the ISR (request.timeout.ms)
    request_timeout_ms: int


class _Absent:
    """A service a test did not provide: any use names it."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        raise AssertionError(f"this handler used services.{self._name}.{attr}, not provided")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"this handler called services.{self._name}, not provided")

    def __repr__(self) -> str:
        return f"<absent {self._name}>"


def absent(name: str) -> Any:
    """A placeholder for a service not provided (typed Any so any field accepts it)."""
    return _Absent(name)


@dataclass(frozen=True, slots=True)
class HandlerServices:
    """Every service a request handler may use. The composition root fills all;
    a handler's unit test fills the ones that handler uses (`only`)."""

    node: NodeState
    settings: HandlerSettings
    #: the broker's configuration as it is now (DescribeConfigs, AlterConfigs' checks)
    broker_config: Callable[[], BrokerConfigView]
    replicas: ReplicaManager
    topics: TopicsView
    logs: LogManager
    fetch_sessions: FetchSessionCache
    throttles: ReplicationThrottles
    groups: GroupCoordinator
    transactions: TransactionService
    allocate_producer_id: Callable[[], Awaitable[int]]
    topic_creation: TopicCreation
    topic_configs: TopicConfigSync
    cluster: ClusterAccess
    #: The ACL authorizer (`authorizer.class.name`); None: every request is allowed.
    authorizer: AclAuthorizer | None = None

    @classmethod
    def only(cls, **given: Any) -> HandlerServices:
        """The services named, every other one `absent` (for handler unit tests)."""
        names = {f.name for f in fields(cls)}
        unknown = set(given) - names
        if unknown:
            raise TypeError(f"no such services: {sorted(unknown)}")
        defaults: dict[str, Any] = {"authorizer": None}
        return cls(
            **{name: given.get(name, defaults.get(name, absent(name))) for name in sorted(names)}
        )
