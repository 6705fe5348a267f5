"""The ReplicaManager: the partitions this broker hosts, and the one place that resolves
a request's partition or its error.

Kafka's ReplicaManager, reduced to what kt's broker needs today: it owns the
`Partition` objects (created when a topic is made or loaded, removed when it is
deleted), turns a (topic, partition) of a request into a usable partition or a
typed error (`kt.broker.errors`), and runs the operations requests make on
partitions: appends, reads, offset lookups, DeleteRecords. A failure of a
partition's log takes the partition (or its whole log directory, for an I/O
error) offline here, so every request path reacts to it the same way.

On a single node this broker leads every partition it hosts; in a cluster the
controller's LeaderAndIsr makes some of them followers, and requests meant for
the leader get NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kt.broker import timeline
from kt.broker.alter_partition import IsrProposal, IsrResult
from kt.broker.errors import (
    BrokerError,
    FencedLeaderEpochError,
    InvalidRecordError,
    InvalidTopicError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    PolicyViolationError,
    ProducerError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
    error_code_for,
    is_storage_failure,
)
from kt.broker.log_manager import LogManager
from kt.broker.metadata.cache import LiveBroker, MetadataCache, PartitionView
from kt.broker.metadata_store import CONSUMER_OFFSETS, INTERNAL_TOPICS
from kt.broker.partition import Partition
from kt.broker.purgatory import DelayedOperationPurgatory, DelayedProduce
from kt.broker.transactions.verification import VerificationGuard
from kt.protocol import ErrorCode
from kt.storage.checkpoint import TopicPartition
from kt.storage.errors import OffsetOutOfRangeError, StorageError
from kt.storage.log import AppendOrigin, AppendResult, FetchSlice, PartitionLog
from kt.storage.txn_index import AbortedTxn

#: Moves `tp`'s replica to log directory `path` (AlterReplicaLogDirs;
#: kt.broker.replication.alter_log_dirs does it), raising the typed broker errors.
LogDirMove = Callable[[TopicPartition, str], Awaitable[None]]


log = logging.getLogger("kt.broker.replica_manager")

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class PartitionStateChange:
    """One partition of a LeaderAndIsr request."""

    tp: TopicPartition
    topic_id: bytes
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    is_new: bool = False
    leader_recovery_state: int = 0

    @property
    def adding_replicas(self) -> tuple[int, ...]:
        """As Partition.make_leader reads it."""
        return self.adding

    @property
    def removing_replicas(self) -> tuple[int, ...]:
        """As Partition.make_leader reads it."""
        return self.removing


@dataclass(frozen=True, slots=True)
class StopReplicaChange:
    """One partition of a StopReplica request (leader epoch -2: deleting)."""

    tp: TopicPartition
    leader_epoch: int
    delete: bool


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One marker of a WriteTxnMarkers request: end `producer_id`'s transaction on
    `partitions` (commit or abort), as transaction coordinator epoch
    `coordinator_epoch` decided."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]


#: Told, after a marker was written and replicated on a `__consumer_offsets`
#: partition, (that partition, the producer id, whether it committed): the group
#: coordinator materialises (or drops) the producer's transactional offset commits.
TxnCompletionListener = Callable[[TopicPartition, int, bool], None]

LeadershipListener = Callable[[list[Partition], list[Partition], dict[int, tuple[str, int]]], None]

#: DeleteRecords' offset meaning "up to the high watermark".
HIGH_WATERMARK = -1

# ListOffsets' special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


class ReplicaManager:
    """The partitions hosted by one broker and the operations requests make on them."""

    def __init__(
        self,
        node_id: int,
        logs: LogManager,
        *,
        cache: MetadataCache | None = None,
        broker_epoch: Callable[[], int] = lambda: -1,
        topic_configs: Callable[[str], dict[str, str]] = lambda _topic: {},
        fetch_topic_configs: Callable[[str], Awaitable[object]] | None = None,
        submit_isr_change: Callable[[IsrProposal, Callable[[IsrResult], None]], bool] | None = None,
        replica_lag_time_max_ms: int = 30_000,
        txn_verification_enabled: bool = True,
        topic_deleted: Callable[[str], None] = lambda _topic: None,
        move_replica: LogDirMove | None = None,
    ) -> None:
        """`broker_epoch` is our registration's epoch (-1 until registered);
        `topic_configs` gives a topic's overrides for logs this broker creates as a
        new replica, `fetch_topic_configs` reads them from the coordination store
        first; `submit_isr_change` sends an ISR proposal to the controller (None, or
        False from it: not sent, the change is abandoned); `topic_deleted(topic)` is
        called once an UpdateMetadata removed a topic's partitions (the controller
        deleted it), as Kafka's KafkaApis tells its GroupCoordinator
        (onPartitionsDeleted); `move_replica(tp, path)` moves a replica between
        this broker's log directories (None: this broker does not)."""
        self.node_id = node_id
        self.logs = logs
        self._partitions: dict[TopicPartition, Partition] = {}
        # What the controller said (roles, live brokers); a single node too.
        self.metadata_cache = cache if cache is not None else MetadataCache()
        self.controller_epoch = -1
        self._broker_epoch = broker_epoch
        self._topic_configs = topic_configs
        self.fetch_topic_configs = fetch_topic_configs or _no_configs
        self._metadata_event = asyncio.Event()
        # acks=all produces waiting for their partitions' high watermarks.
        self.produce_purgatory: DelayedOperationPurgatory[TopicPartition] = (
            DelayedOperationPurgatory("produce")
        )
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        # (new leaders, new followers, live leaders' endpoints) after a LeaderAndIsr.
        self.leadership_listeners: list[LeadershipListener] = []
        # Partitions a StopReplica stopped (fetchers drop them).
        self.stop_listeners: list[Callable[[list[TopicPartition]], None]] = []
        # Sends an ISR proposal to the controller (None: a broker that is alone).
        self.submit_isr_change = submit_isr_change
        # Told after an ISR change was committed (e.g. produces waiting on the ISR).
        self.isr_listeners: list[Callable[[Partition], None]] = []
        # (partition, follower) whose expansion the controller refused as ineligible
        # (shutting down, or not live to it) -> the metadata version then: not proposed
        # again until the metadata changes, instead of after every fetch.
        self._ineligible: dict[tuple[TopicPartition, int], int] = {}
        # Told of transactions ended on __consumer_offsets partitions (see
        # TxnCompletionListener and write_txn_markers).
        self.offsets_txn_listeners: list[TxnCompletionListener] = []
        # Moves between this broker's log directories.
        self._move_replica = move_replica
        # Told when a log directory newly failed (the cluster member announces it to
        # the controller, which moves leadership away).
        self.dir_failure_listeners: list[Callable[[Path], None]] = []
        # transaction.partition.verification.enable (KIP-890), kept current by the
        # broker's reconfigure() as dynamic configs change.
        self.txn_verification_enabled = txn_verification_enabled
        self._topic_deleted = topic_deleted

    def reconfigure(self, *, txn_verification_enabled: bool) -> None:
        """The dynamic broker configs changed: take the settings this manager follows
        (transaction.partition.verification.enable; new appends use it)."""
        self.txn_verification_enabled = txn_verification_enabled

    # --- the hosted partitions -------------------------------------------------

    def get(self, tp: TopicPartition) -> Partition | None:
        """The hosted partition `tp` in whatever state (online or offline), if any."""
        return self._partitions.get(tp)

    def __contains__(self, tp: object) -> bool:
        return tp in self._partitions

    def __len__(self) -> int:
        return len(self._partitions)

    def __iter__(self) -> Iterator[Partition]:
        # A copy: callers may create or delete partitions while iterating.
        return iter(list(self._partitions.values()))

    def create_partition(
        self, tp: TopicPartition, topic_id: bytes, plog: PartitionLog
    ) -> Partition:
        """Host `tp` over its log, as its leader at the log's latest epoch (a single
        broker leads everything it hosts; LeaderAndIsr will say otherwise in a
        cluster), with its producer state rebuilt."""
        epoch = plog.leader_epoch_cache.latest_epoch or 0
        part = Partition(
            tp, topic_id, plog, self.node_id, epoch, [self.node_id], [self.node_id],
            local_broker_id=self.node_id,
        )  # fmt: skip
        part.load_producer_state()
        self._partitions[tp] = part
        return part

    def remove_partition(self, tp: TopicPartition) -> Partition | None:
        """Stop hosting `tp` (its topic was deleted): waiting fetches wake up and find
        it gone, waiting produces fail. The log itself is the log manager's to delete."""
        part = self._partitions.pop(tp, None)
        if part is not None:
            part.offline = True
            part.notify()
        self.produce_purgatory.check_and_complete(tp)
        return part

    def wake_all(self) -> None:
        """Wake every waiting fetch (shutdown)."""
        for part in self:
            part.notify()

    def close(self) -> None:
        """Snapshot every partition's producer state (clean shutdown)."""
        for part in self:
            try:
                part.close()
            except OSError as exc:
                log.error("%s: cannot snapshot producer state at shutdown: %s", part.tp, exc)

    # --- resolution ------------------------------------------------------------

    def get_partition_or_error(
        self, topic: str, index: int, *, require_leader: bool = True
    ) -> Partition:
        """The partition a request names, usable: KafkaStorageError when offline,
        NotLeaderOrFollowerError when `require_leader` and another broker leads it.
        One not hosted here is UnknownTopicOrPartitionError only when the controller's
        view (the metadata cache) lacks it too; else NotLeaderOrFollowerError, which
        sends clients to refresh their metadata: as Kafka's getPartitionOrError for a
        partition its metadata knows, and before this broker has any view (just
        started), when it cannot tell (never "unknown" for a topic that exists).
        Messages as Kafka's ReplicaManager.getPartitionOrException and
        Partition.leaderLogIfLocal."""
        tp = TopicPartition(topic, index)
        part = self._partitions.get(tp)
        if part is None:
            cache = self.metadata_cache
            if not cache.ready:
                raise NotLeaderOrFollowerError(
                    f"Broker {self.node_id} has no metadata yet for partition {_name(tp)}"
                )
            if cache.partition(topic, index) is not None:
                raise NotLeaderOrFollowerError(
                    f"Partition {_name(tp)} is not hosted on broker {self.node_id}"
                )
            raise UnknownTopicOrPartitionError(
                f"Error while fetching partition state for {_name(tp)}"
            )
        if part.offline:
            raise KafkaStorageError(f"Partition {_name(tp)} is in an offline log directory")
        if require_leader and part.leader_id != self.node_id:
            raise NotLeaderOrFollowerError(
                f"Leader not local for partition {_name(tp)} on broker {self.node_id}"
            )
        return part

    @staticmethod
    def check_current_leader_epoch(part: Partition, current_leader_epoch: int) -> None:
        """A request's current_leader_epoch against the partition's (-1: not checked):
        older is FencedLeaderEpochError, newer UnknownLeaderEpochError (KIP-320)."""
        if current_leader_epoch < 0 or current_leader_epoch == part.leader_epoch:
            return
        if current_leader_epoch < part.leader_epoch:
            raise FencedLeaderEpochError(
                f"The leader epoch in the request {current_leader_epoch} is smaller than "
                f"the current leader epoch {part.leader_epoch} of {_name(part.tp)}"
            )
        raise UnknownLeaderEpochError(
            f"The leader epoch in the request {current_leader_epoch} is larger than the "
            f"current leader epoch {part.leader_epoch} of {_name(part.tp)}"
        )

    # --- operations ------------------------------------------------------------

    def maybe_start_txn_verification(
        self, topic: str, index: int, producer_id: int, sequence: int, epoch: int
    ) -> VerificationGuard | None:
        """For a transactional batch a produce brings (verification enabled): the
        guard to carry to `append_records` once the coordinator verified the
        partition, or None when the producer has a transaction open here already
        (Kafka's maybeStartTransactionVerificationForPartition). Raises the typed
        errors of a partition we cannot append to."""
        part = self.get_partition_or_error(topic, index)
        return part.maybe_start_txn_verification(producer_id, sequence, epoch)

    def append_records(
        self,
        topic: str,
        index: int,
        records: bytes | bytearray | memoryview | None,
        *,
        now_ms: int,
        acks: int = 1,
        internal_topics_allowed: bool = False,
        verification_guard: VerificationGuard | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> AppendResult:
        """Append a producer's batches to the partition it leads. With acks=-1 the ISR
        must have min.insync.replicas members first (NotEnoughReplicasError, nothing
        written). With verification enabled, a transactional batch opening a
        transaction needs the `verification_guard` of its verification
        (InvalidTxnStateError otherwise). The group and transaction coordinators
        append their internal topics here too (`internal_topics_allowed`, `origin`
        COORDINATOR). Raises the typed broker errors, the storage core's validation
        errors, or its storage errors (after taking the log offline)."""
        if topic in INTERNAL_TOPICS and not internal_topics_allowed:
            raise InvalidTopicError(f"Cannot append to internal topic {topic}")
        part = self.get_partition_or_error(topic, index)
        if records is None or len(records) == 0:
            raise InvalidRecordError("produce request has no records")
        refusal = part.check_enough_replicas_for_append(acks)
        if refusal is not None:
            raise refusal
        try:
            # `records` may be a view into the request frame: the log patches it in place.
            return part.append_records(
                records,
                now_ms=now_ms,
                verification_guard=verification_guard,
                require_verification=self.txn_verification_enabled,
                origin=origin,
            )
        except (StorageError, OSError) as exc:
            self._maybe_fail(part, exc)
            raise

    async def write_txn_markers(
        self, markers: list[TxnMarker], timeout_ms: int
    ) -> list[dict[TopicPartition, ErrorCode]]:
        """WriteTxnMarkers (Kafka's KafkaApis.handleWriteTxnMarkersRequest): for each
        marker and partition, append a COMMIT/ABORT control batch as leader
        (COORDINATOR origin), then wait, as an acks=all produce, for the ISR to have
        it. Per marker, each partition's error: UNKNOWN_TOPIC_OR_PARTITION when not
        hosted here or offline, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
        INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, CORRUPT_MESSAGE or
        KAFKA_STORAGE_ERROR, REQUEST_TIMED_OUT. Once a marker is replicated on a
        `__consumer_offsets` partition, `offsets_txn_listeners` are told; a listener
        failing turns that partition's answer into UNKNOWN_SERVER_ERROR, as Kafka."""
        now = int(time.time() * 1000)
        results: list[dict[TopicPartition, ErrorCode]] = []
        required: dict[TopicPartition, int] = {}
        for marker in markers:
            out: dict[TopicPartition, ErrorCode] = {}
            for tp in marker.partitions:
                code, next_offset = self._append_marker(marker, tp, now)
                out[tp] = code
                if next_offset is not None:
                    required[tp] = max(required.get(tp, 0), next_offset)
            results.append(out)
        waited = await self.wait_for_replication(required, timeout_ms) if required else {}
        for marker, out in zip(markers, results, strict=True):
            for tp, code in out.items():
                if code != ErrorCode.NONE or tp not in waited:
                    continue
                err = waited[tp]
                if err is not None:
                    out[tp] = error_code_for(err)
                elif tp.topic == CONSUMER_OFFSETS:
                    out[tp] = self._tell_offsets_txn_listeners(tp, marker)
        return results

    def _append_marker(
        self, marker: TxnMarker, tp: TopicPartition, now_ms: int
    ) -> tuple[ErrorCode, int | None]:
        """One partition's marker append: (error code, offset after the marker)."""
        part = self._partitions.get(tp)
        if part is None or part.offline:
            # Kafka's onlinePartition: neither hosted nor online is "unknown" here.
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        refusal = part.check_enough_replicas_for_append(-1)
        if refusal is not None:
            return error_code_for(refusal), None
        try:
            result = part.append_txn_marker(
                marker.producer_id,
                marker.producer_epoch,
                marker.coordinator_epoch,
                marker.commit,
                now_ms=now_ms,
            )
        except ProducerError as exc:
            log.info("%s: refused %s marker of producer %d: %s", _name(tp),
                     "COMMIT" if marker.commit else "ABORT", marker.producer_id,
                     exc.message)  # fmt: skip
            return error_code_for(exc), None
        except (BrokerError, StorageError, OSError) as exc:
            self._maybe_fail(part, exc)
            return error_code_for(exc), None
        return ErrorCode.NONE, result.last_offset + 1

    def _tell_offsets_txn_listeners(self, tp: TopicPartition, marker: TxnMarker) -> ErrorCode:
        for listener in self.offsets_txn_listeners:
            try:
                listener(tp, marker.producer_id, marker.commit)
            except Exception:
                log.exception("%s: offsets transaction listener failed", _name(tp))
                return ErrorCode.UNKNOWN_SERVER_ERROR
        return ErrorCode.NONE

    def read(
        self,
        part: Partition,
        fetch_offset: int,
        max_bytes: int,
        *,
        upper_bound: int,
        min_one_message: bool,
    ) -> FetchSlice | None:
        """Bytes of `part` from `fetch_offset` (see PartitionLog.read). Raises the
        storage core's OffsetOutOfRangeError, or KafkaStorageError after taking the
        log offline when it fails."""
        try:
            return part.log.read(
                fetch_offset, max_bytes, upper_bound=upper_bound, min_one_message=min_one_message
            )
        except OffsetOutOfRangeError:
            raise
        except (StorageError, OSError) as exc:
            self.on_storage_error(part, exc)
            raise KafkaStorageError(str(exc)) from exc

    def aborted_transactions(
        self, part: Partition, fetch_offset: int, upper_bound: int
    ) -> list[AbortedTxn]:
        """The aborted transactions a READ_COMMITTED fetch of `part` from
        `fetch_offset` (bounded by `upper_bound`, the LSO) reports, from the
        `.txnindex` files. KafkaStorageError after taking the log offline when
        they cannot be read."""
        try:
            return part.aborted_transactions(fetch_offset, upper_bound)
        except (StorageError, OSError) as exc:
            self.on_storage_error(part, exc)
            raise KafkaStorageError(str(exc)) from exc

    def fetch_offset_for_timestamp(
        self,
        topic: str,
        index: int,
        timestamp: int,
        *,
        current_leader_epoch: int = -1,
        read_committed: bool = False,
        require_leader: bool = True,
    ) -> tuple[int, int, int]:
        """ListOffsets for one partition: (offset, timestamp, leader epoch), offset -1
        when nothing matches. Special timestamps: LATEST (the high watermark, or the
        last stable offset for read_committed), EARLIEST, MAX_TIMESTAMP (the record
        with the largest timestamp); otherwise the first record at or after
        `timestamp`. Offsets at or above the fetchable bound are not answered.
        Raises the resolution and leader-epoch errors."""
        part = self.get_partition_or_error(topic, index, require_leader=require_leader)
        self.check_current_leader_epoch(part, current_leader_epoch)
        plog = part.log
        upper = part.last_stable_offset() if read_committed else part.high_watermark
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            off = plog.log_start_offset
            return off, -1, _epoch_for(part, off)
        if timestamp in (LATEST_TIMESTAMP, LATEST_TIERED_TIMESTAMP):
            return upper, -1, _epoch_for(part, upper)
        if timestamp == MAX_TIMESTAMP:
            # The record holding the largest timestamp, with its batch's epoch (Kafka 3.8).
            found = plog.max_timestamp_and_offset()
            if found is None or found[1] >= upper:
                return -1, -1, -1
            ts, off, epoch = found
            return off, ts, epoch
        by_time = plog.fetch_offset_by_timestamp(timestamp)
        if by_time is None or by_time[0] >= upper:
            return -1, -1, -1
        return by_time[0], by_time[1], _epoch_for(part, by_time[0])

    def last_offset_for_leader_epoch(
        self, topic: str, index: int, leader_epoch: int, *, current_leader_epoch: int = -1
    ) -> tuple[int, int]:
        """OffsetForLeaderEpoch for one partition (led here): (the largest epoch <=
        `leader_epoch` known, its end offset); (-1, -1) when undefined. Raises the
        resolution and leader-epoch errors."""
        part = self.get_partition_or_error(topic, index)
        self.check_current_leader_epoch(part, current_leader_epoch)
        return part.end_offset_for_epoch(leader_epoch)

    def delete_records(self, topic: str, index: int, offset: int) -> int:
        """DeleteRecords for one partition: move its log start offset to `offset`
        (HIGH_WATERMARK: to the high watermark); returns the new low watermark.
        PolicyViolationError unless cleanup.policy includes delete;
        OffsetOutOfRangeError above the high watermark or below -1."""
        part = self.get_partition_or_error(topic, index)
        plog = part.log
        if not plog.config.delete:
            raise PolicyViolationError(
                f"Records of partition {_name(part.tp)} can not be deleted due to the "
                "configured policy"
            )
        target = part.high_watermark if offset == HIGH_WATERMARK else offset
        if target < 0 or target > part.high_watermark:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {target} of partition "
                f"{_name(part.tp)} since it is larger than the high watermark "
                f"{part.high_watermark}"
            )
        try:
            if plog.maybe_increment_log_start_offset(target) and part.producer_state is not None:
                part.producer_state.on_log_start_offset_incremented(plog.log_start_offset)
        except OSError as exc:
            self.on_storage_error(part, exc)
            raise KafkaStorageError(str(exc)) from exc
        return plog.log_start_offset

    async def alter_replica_log_dir(self, tp: TopicPartition, path: str) -> None:
        """AlterReplicaLogDirs for one partition: move its replica to log directory
        `path` (see kt.broker.replication.alter_log_dirs). Raises the typed errors
        (LogDirNotFoundError, KafkaStorageError, ReplicaNotAvailableError, ...)."""
        if self._move_replica is None:
            raise KafkaStorageError("this broker does not move replicas between log dirs")
        await self._move_replica(tp, path)

    # --- failures --------------------------------------------------------------

    def _maybe_fail(self, part: Partition, exc: BaseException) -> None:
        """Take `part` offline when `exc` means its log failed (not a refused batch)."""
        if is_storage_failure(exc):
            self.on_storage_error(part, exc)

    def on_storage_error(self, part: Partition, exc: BaseException) -> None:
        """An error in a partition's log. An I/O error (OSError) fails the partition's
        whole log directory, as in Kafka (see fail_log_dir); any other storage error
        takes just this partition offline. The rest keeps serving."""
        d = self.logs.dir_of.get(part.tp)
        if isinstance(exc, OSError) and d is not None:
            self.fail_log_dir(d, exc)
            return
        log.error("storage error on %s, taking it offline: %s", part.tp, exc)
        part.offline = True
        part.notify()

    def fail_log_dir(self, d: Path, exc: BaseException | str) -> None:
        """Kafka's LogDirFailureHandler: take log directory `d` offline with all its
        partitions (clients get KAFKA_STORAGE_ERROR for them), keep serving the other
        directories; the log manager halts the broker when none is left."""
        newly = d not in self.logs.offline_dirs
        for tp in self.logs.handle_dir_failure(d, exc):
            part = self._partitions.get(tp)
            if part is not None:
                part.offline = True
                part.notify()
        if newly:
            for listener in self.dir_failure_listeners:
                listener(d)

    # --- the controller's requests ---------------------------------------------------

    def _stale(self, controller_epoch: int, broker_epoch: int) -> int:
        """Kafka's checks on every controller request: an older controller epoch
        (a deposed controller) or a request meant for an earlier registration of
        this broker id is refused."""
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if 0 <= broker_epoch < self._broker_epoch():
            return ErrorCode.STALE_BROKER_EPOCH
        return ErrorCode.NONE

    async def become_leader_or_follower(
        self,
        controller_id: int,
        controller_epoch: int,
        broker_epoch: int,
        changes: list[PartitionStateChange],
        live_leaders: dict[int, tuple[str, int]],
        *,
        full: bool = False,
    ) -> tuple[int, dict[TopicPartition, int]]:
        """LeaderAndIsr: for each partition with a newer leader epoch (the same epoch
        updates only the replica set and ISR), create the replica if it is new here,
        then make it leader or follower. Followers are handed to the fetchers,
        leaders taken from them; `leadership_listeners` hear of both. A `full` request
        (KIP-516's type FULL: every partition this broker should host) also deletes
        the stray replicas it leaves out (see `_delete_strays`)."""
        stale = self._stale(controller_epoch, broker_epoch)
        if stale:
            log.warning("refusing LeaderAndIsr from controller %d (epoch %d): error %d",
                        controller_id, controller_epoch, stale)  # fmt: skip
            return stale, {}
        self.controller_epoch = controller_epoch
        results: dict[TopicPartition, int] = {}
        new_leaders: list[Partition] = []
        new_followers: list[Partition] = []
        now = int(time.time() * 1000)
        for ch in changes:
            tp = ch.tp
            if self.node_id not in ch.replicas:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            part = self._partitions.get(tp)
            if part is None:
                try:
                    # A new replica's log is made with the topic's own config (Kafka
                    # reads it from ZooKeeper when it creates the log).
                    await self.fetch_topic_configs(tp.topic)
                    part = self._new_replica(ch)
                except (OSError, StorageError) as exc:
                    log.error("cannot create replica %s: %s", _name(tp), exc)
                    results[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                    continue
            if part.offline:
                results[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            if any(ch.topic_id) and any(part.topic_id) and ch.topic_id != part.topic_id:
                results[tp] = ErrorCode.INCONSISTENT_TOPIC_ID
                continue
            if ch.leader_epoch < part.leader_epoch:
                results[tp] = ErrorCode.STALE_CONTROLLER_EPOCH
                continue
            results[tp] = ErrorCode.NONE
            if ch.leader_epoch == part.leader_epoch:
                # Same epoch: a resend (controller failover) or a replica-set update.
                part.replicas = list(ch.replicas)
                part.isr = list(ch.isr)
                part.partition_epoch = max(part.partition_epoch, ch.partition_epoch)
                continue
            if ch.leader == self.node_id:
                part.make_leader(ch, now_ms=now)
                new_leaders.append(part)
                timeline.arm(_name(tp), timeline.LEADER_EVENTS)
                timeline.mark("lai_leader", tp=_name(tp), epoch=ch.leader_epoch,
                              isr=",".join(map(str, ch.isr)), leo=part.log_end_offset,
                              hw=part.high_watermark)  # fmt: skip
            else:
                part.make_follower(ch)
                new_followers.append(part)
                timeline.arm(_name(tp), timeline.FOLLOWER_EVENTS)
                timeline.mark("lai_follower", tp=_name(tp), epoch=ch.leader_epoch,
                              leader=ch.leader, leo=part.log_end_offset)  # fmt: skip
        for listener in self.leadership_listeners:
            try:
                listener(new_leaders, new_followers, live_leaders)
            except Exception:
                log.exception("leadership listener failed")
        if new_leaders or new_followers:
            log.info(
                "LeaderAndIsr from controller %d (epoch %d): leading %d, following %d",
                controller_id, controller_epoch, len(new_leaders), len(new_followers),
            )  # fmt: skip
        if full:
            self._delete_strays({ch.tp for ch in changes})
        return ErrorCode.NONE, results

    def _delete_strays(self, named: set[TopicPartition]) -> None:
        """Delete the replicas hosted here that a full LeaderAndIsr left out and whose
        partition the controller's metadata assigns elsewhere: a replica removed by a
        reassignment that completed while this broker was down never got its
        StopReplica(delete) (Kafka's KRaft brokers delete such strays at startup; its
        ZooKeeper brokers kept them, KAFKA-7362). A topic the metadata does not know
        (or a partition it does not list) is left alone: only the controller's word
        that another broker holds the partition makes a replica stray."""
        strays = []
        for part in list(self._partitions.values()):
            view = self.metadata_cache.partition(part.tp.topic, part.tp.partition)
            if part.tp in named or view is None or self.node_id in view.replicas:
                continue
            log.warning("deleting stray replica %s: the controller assigns it to %s, "
                        "not to this broker", _name(part.tp), list(view.replicas))  # fmt: skip
            strays.append(part.tp)
        if not strays:
            return
        for listener in self.stop_listeners:
            listener(strays)
        for tp in strays:
            self.remove_partition(tp)
            try:
                self.logs.delete(tp)
            except OSError as exc:
                log.error("cannot delete %s: %s", _name(tp), exc)

    def _new_replica(self, ch: PartitionStateChange) -> Partition:
        """A replica this broker did not host: open its log if it is on disk (a
        restart), else create it empty; it has no role until the caller gives it one."""
        plog = self.logs.get(ch.tp)
        if plog is None:
            plog = self.logs.create(ch.tp, ch.topic_id, self._topic_configs(ch.tp.topic))
        return self.host(ch.tp, ch.topic_id, plog)

    def host(self, tp: TopicPartition, topic_id: bytes, plog: PartitionLog) -> Partition:
        """Host a replica with no role yet (leader -1, epoch -1): a LeaderAndIsr makes
        it leader or follower. Producer state is rebuilt from its log."""
        part = Partition(tp, topic_id, plog, NO_LEADER, -1, [], [], local_broker_id=self.node_id)
        part.offsets_listener = self._offsets_moved
        part.replica_eligible = self._replica_eligible
        part.replica_lag_time_max_ms = self.replica_lag_time_max_ms
        part.load_producer_state()
        self._partitions[tp] = part
        return part

    async def stop_replicas(
        self,
        controller_id: int,
        controller_epoch: int,
        broker_epoch: int,
        changes: list[StopReplicaChange],
    ) -> tuple[int, dict[TopicPartition, int]]:
        """StopReplica: stop following (and delete, when asked) each partition. A
        partition whose leader epoch is newer than the request's is left alone
        (FENCED_LEADER_EPOCH), except for deletions (epoch -2)."""
        stale = self._stale(controller_epoch, broker_epoch)
        if stale:
            log.warning("refusing StopReplica from controller %d (epoch %d): error %d",
                        controller_id, controller_epoch, stale)  # fmt: skip
            return stale, {}
        self.controller_epoch = controller_epoch
        results: dict[TopicPartition, int] = {}
        stopped: list[TopicPartition] = []
        for ch in changes:
            part = self._partitions.get(ch.tp)
            if part is None:
                if ch.delete and self.logs.get(ch.tp) is not None:
                    self.logs.delete(ch.tp)
                results[ch.tp] = ErrorCode.NONE
                continue
            if ch.leader_epoch >= 0 and ch.leader_epoch < part.leader_epoch:
                results[ch.tp] = ErrorCode.FENCED_LEADER_EPOCH
                continue
            stopped.append(ch.tp)
            results[ch.tp] = ErrorCode.NONE
        for listener in self.stop_listeners:
            listener(stopped)
        for ch in changes:
            if ch.tp not in stopped:
                continue
            if ch.delete:
                self.remove_partition(ch.tp)
                try:
                    self.logs.delete(ch.tp)
                except OSError as exc:
                    log.error("cannot delete %s: %s", _name(ch.tp), exc)
                    results[ch.tp] = ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NONE, results

    def update_metadata(
        self,
        controller_id: int,
        controller_epoch: int,
        broker_epoch: int,
        brokers: list[LiveBroker],
        partitions: list[tuple[str, bytes | None, int, PartitionView]],
    ) -> int:
        """UpdateMetadata: refresh the metadata cache (and wake whoever waits on it)."""
        stale = self._stale(controller_epoch, broker_epoch)
        if stale:
            log.warning("refusing UpdateMetadata from controller %d (epoch %d): error %d",
                        controller_id, controller_epoch, stale)  # fmt: skip
            return stale
        self.controller_epoch = controller_epoch
        deleted = self.metadata_cache.update(
            controller_id=controller_id,
            controller_epoch=controller_epoch,
            brokers=brokers,
            partitions=partitions,
        )
        event, self._metadata_event = self._metadata_event, asyncio.Event()
        event.set()
        # A partition count never shrinks: a deleted partition is a deleted topic.
        for topic in dict.fromkeys(topic for topic, _ in deleted):
            self._topic_deleted(topic)
        timeline.mark("update_metadata", partitions=len(partitions))
        return ErrorCode.NONE

    # --- acks=all ------------------------------------------------------------------

    def _replica_eligible(self, broker_id: int) -> bool:
        # Alive per the controller's last UpdateMetadata; before any (single node,
        # or a broker just started) nobody is known, so nobody is excluded.
        cache = self.metadata_cache
        return cache.is_alive(broker_id) or not cache.alive_brokers()

    def _offsets_moved(self, part: Partition) -> None:
        # A partition's LEO, HW, ISR or role changed: waiting produces may complete.
        self.produce_purgatory.check_and_complete(part.tp)

    def watch_replication(
        self, required: dict[TopicPartition, int], timeout_ms: int
    ) -> DelayedProduce[TopicPartition]:
        """acks=all: the delayed produce that completes when each partition's high
        watermark reaches its required offset (its last appended offset + 1), or when
        `timeout_ms` passes (Kafka's DelayedProduce); already completed when it
        could at once. Read its outcome with :func:`replication_errors`."""

        def lookup(tp: TopicPartition) -> Partition:
            return self.get_partition_or_error(tp.topic, tp.partition)

        op: DelayedProduce[TopicPartition] = DelayedProduce(max(0, timeout_ms), required, lookup)
        self.produce_purgatory.try_complete_else_watch(op, list(required))
        return op

    async def wait_for_replication(
        self, required: dict[TopicPartition, int], timeout_ms: int
    ) -> dict[TopicPartition, BrokerError | None]:
        """:meth:`watch_replication`, waited for: per partition None (replicated), or
        the error (REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        NOT_LEADER_OR_FOLLOWER)."""
        op = self.watch_replication(required, timeout_ms)
        await op.wait()
        return replication_errors(op)

    # --- ISR changes (leaders propose, the controller decides) -----------------------

    def maybe_shrink_isrs(self, now_ms: int, lag_max_ms: int) -> None:
        """Kafka's isr-expiration task: every led partition drops followers that
        have not caught up within `lag_max_ms` (one proposal in flight at a time)."""
        for part in self:
            if part.offline or not part.is_leader:
                continue
            new_isr = part.isr_shrink_candidates(now_ms, lag_max_ms)
            if new_isr is not None:
                log.info("%s: shrinking ISR from %s to %s", _name(part.tp), part.isr, new_isr)
                self._propose_isr(part, new_isr)

    def maybe_expand_isr(self, part: Partition, replica_id: int) -> None:
        """After a follower's fetch: propose it back into the ISR once it caught up
        (unless the controller refused it as ineligible and nothing changed since)."""
        refused_at = self._ineligible.get((part.tp, replica_id))
        if refused_at is not None:
            if refused_at == self.metadata_cache.version:
                return
            del self._ineligible[(part.tp, replica_id)]
        new_isr = part.isr_expand_candidate(replica_id)
        if new_isr is not None:
            log.info("%s: expanding ISR from %s to %s", _name(part.tp), part.isr, new_isr)
            self._propose_isr(part, new_isr)

    def _propose_isr(self, part: Partition, new_isr: list[int]) -> None:
        submit = self.submit_isr_change
        if submit is None:
            part.abandon_pending_isr()
            return
        proposal = IsrProposal(part.tp, part.topic_id, part.leader_epoch, tuple(new_isr),
                               part.partition_epoch)  # fmt: skip
        added = [r for r in new_isr if r not in part.isr]

        def answered(result: IsrResult) -> None:
            if result.error == ErrorCode.NONE:
                if part.on_isr_committed(result.isr, result.partition_epoch, result.leader_epoch):
                    log.info("%s: ISR is now %s (partition epoch %d)", _name(part.tp),
                             list(result.isr), result.partition_epoch)  # fmt: skip
                    for listener in self.isr_listeners:
                        listener(part)
                else:
                    part.abandon_pending_isr()
            else:
                part.abandon_pending_isr()
                if result.error == ErrorCode.INELIGIBLE_REPLICA:
                    for r in added:
                        self._ineligible[(part.tp, r)] = self.metadata_cache.version
                log.info("%s: ISR change to %s refused (error %d)", _name(part.tp),
                         new_isr, result.error)  # fmt: skip

        if not submit(proposal, answered):
            part.abandon_pending_isr()

    async def metadata_changed(self, timeout_s: float) -> bool:
        """Wait for the next UpdateMetadata; False on timeout."""
        try:
            await asyncio.wait_for(self._metadata_event.wait(), timeout_s)
        except TimeoutError:
            return False
        return True


def _epoch_for(part: Partition, offset: int) -> int:
    # The epoch of the batch holding `offset`; the current one past the cached epochs.
    epoch = part.log.leader_epoch_cache.epoch_for_offset(offset)
    return part.leader_epoch if epoch is None else epoch


async def _no_configs(_topic: str) -> object:
    return None


def replication_errors(
    op: DelayedProduce[TopicPartition],
) -> dict[TopicPartition, BrokerError | None]:
    """A completed delayed produce's outcome per partition: None (replicated) or
    the error."""
    return {tp: _as_broker_error(err) for tp, err in op.result.items()}


def _as_broker_error(err: BaseException | None) -> BrokerError | None:
    if err is None or isinstance(err, BrokerError):
        return err
    return KafkaStorageError(str(err))


def _name(tp: TopicPartition) -> str:
    # Kafka's TopicPartition.toString, which its messages embed.
    return f"{tp.topic}-{tp.partition}"
