"""Typed broker errors and the one table that turns any refusal into a Kafka error code.

Handlers and the ReplicaManager raise these (or let the storage core's errors
through); the code a client sees comes from `error_code_for`, which walks the
exception's class hierarchy (its MRO), so a subclass inherits its base's code
unless the table names it. Nothing is matched by class name.

`BrokerError.message` is the text for the response's `error_message` where the
API has one.

Some refusals get their code where they are raised (an answer relayed from another
broker, a code a coordinator's state machine chose): those are `CodedError`s,
whose subclasses name where they come from (`TopicError`, `CoordinatorError`,
`AppendError`, `ResourceError`, `LeaderEndpointError`). `error_code_for` reads
their code; they are not `BrokerError`s, so the handlers' `except BrokerError`
clauses keep their meaning.
"""

from __future__ import annotations

from kt.protocol import ErrorCode
from kt.storage import errors as storage_errors
from kt.storage import log as storage_log


class BrokerError(Exception):
    """A request (or one partition of it) refused with a Kafka error code."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message


class IllegalTransition(RuntimeError):
    """A state change a coordinator's state machine does not allow (a coordinator
    bug): the group and the transaction state machines raise it. It has no code
    in the table, so a request that meets it is answered UNKNOWN_SERVER_ERROR."""


class CloseConnection(Exception):
    """Raised by a handler to close the connection instead of answering: Kafka does
    so when a Produce with acks=0 fails, since that is the only way the producer can
    learn of the failure (it then refreshes its metadata)."""


class CodedError(Exception):
    """A refusal that carries its Kafka error code (`code`) and, where the response
    has one, its error message (`message`; None for a null message)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message if message is not None else "")
        self.code = code
        self.message = message


class TopicError(CodedError):
    """A topic operation refused (CreateTopics, DeleteTopics, CreatePartitions,
    topic configs; kt.broker.topic_admin)."""

    code: ErrorCode
    message: str

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(code, message)


class CoordinatorError(CodedError):
    """A group coordinator operation refused (kt.broker.groups); its message is the
    code's name."""

    code: ErrorCode

    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code, code.name)


class AppendError(CodedError):
    """A coordinator's write to its internal topic refused or failed, with the
    partition-level error (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS,
    REQUEST_TIMED_OUT, ...)."""

    code: ErrorCode
    message: str

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(code, message or code.name)


class ResourceError(CodedError):
    """A config resource (DescribeConfigs, AlterConfigs) answered with an error
    code and message."""

    code: ErrorCode

    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(code, message)


class LeaderEndpointError(CodedError):
    """A partition leader answered a follower's offsets request with an error code."""

    message: str

    def __init__(self, code: int, message: str) -> None:
        super().__init__(code, message)


class UnknownTopicOrPartitionError(BrokerError):
    """The topic or partition is not hosted by this broker."""


class UnknownTopicIdError(BrokerError):
    """No topic has the requested topic id."""


class InvalidTopicError(BrokerError):
    """The topic name is invalid, or the topic may not be written by clients."""


class NotLeaderOrFollowerError(BrokerError):
    """This broker is not the partition's leader (or, for replica requests, not a replica)."""


class KafkaStorageError(BrokerError):
    """The partition is offline: its log directory failed or its log is unusable."""


class LogDirNotFoundError(BrokerError):
    """A log directory named by a request is not one of this broker's log.dirs."""


class ReplicaNotAvailableError(BrokerError):
    """The replica is not hosted here (yet): e.g. a move between log directories
    asked for before the replica exists (its directory is remembered)."""


class FencedLeaderEpochError(BrokerError):
    """The client's leader epoch is older than the partition's."""


class UnknownLeaderEpochError(BrokerError):
    """The client's leader epoch is newer than the partition's (this broker lags)."""


class NotEnoughReplicasError(BrokerError):
    """acks=all with fewer in-sync replicas than min.insync.replicas: nothing written."""


class NotEnoughReplicasAfterAppendError(BrokerError):
    """acks=all: written, but the ISR shrank below min.insync.replicas before it was
    replicated."""


class RequestTimedOutError(BrokerError):
    """acks=all: the ISR did not replicate the write within the request's timeout_ms."""


class InvalidRecordError(BrokerError):
    """A produce refused before its batches reach the log (no records, or records a
    client may not write). The log's own refusals are the storage core's
    InvalidRecordError and RecordValidationError (which names the records)."""


class InvalidRequiredAcksError(BrokerError):
    """Produce acks other than -1, 0 or 1."""


class PolicyViolationError(BrokerError):
    """The request contradicts the topic's policy (e.g. DeleteRecords on a compacted topic)."""


class UnsupportedVersionError(BrokerError):
    """A request version this broker does not serve (for an API it serves)."""


class SecurityDisabledError(BrokerError):
    """A security request (ACLs) to a broker without an authorizer."""


class InvalidRequestError(BrokerError):
    """A well-formed request Kafka refuses as invalid (INVALID_REQUEST)."""


class InvalidConfigurationError(BrokerError):
    """A config value or operation Kafka refuses (INVALID_CONFIG)."""


class ProducerError(BrokerError):
    """A produce refused by the idempotent/transactional producer rules."""


class OutOfOrderSequenceError(ProducerError):
    """A batch's sequence number is not the next one expected for its producer."""


class InvalidProducerEpochError(ProducerError):
    """A batch from an older (fenced) producer epoch."""


class UnknownProducerIdError(ProducerError):
    """The broker has no state for the batch's producer id (expired or never seen)."""


class InvalidTxnStateError(ProducerError):
    """A batch that contradicts its producer's transaction state."""


class InvalidProducerIdMappingError(ProducerError):
    """The transaction coordinator does not know the producer id under the
    transactional id (answered to a produce whose verification it refused)."""


class TransactionAbortableError(ProducerError):
    """The transaction coordinator asks the producer to abort its transaction
    (KIP-890; produce v11+ clients know it)."""


class TransactionCoordinatorFencedError(ProducerError):
    """A transaction marker from a coordinator epoch older than the last marker's
    (a zombie coordinator)."""


class TransactionalIdAuthorizationFailedError(BrokerError):
    """A produce of transactional batches without a transactional id (Kafka refuses
    the whole request so; with an authorizer also an unauthorized id)."""


# The one mapping from exception classes to Kafka error codes. `error_code_for`
# looks an exception's classes up most-derived first, so the storage core's
# subclasses of CorruptRecordError get their specific codes and any other
# CorruptRecordError is CORRUPT_MESSAGE; any other storage problem or I/O error
# means the log is unusable (KAFKA_STORAGE_ERROR).
ERROR_CODES: dict[type[BaseException], ErrorCode] = {
    # Broker errors.
    UnknownTopicOrPartitionError: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    UnknownTopicIdError: ErrorCode.UNKNOWN_TOPIC_ID,
    InvalidTopicError: ErrorCode.INVALID_TOPIC_EXCEPTION,
    NotLeaderOrFollowerError: ErrorCode.NOT_LEADER_OR_FOLLOWER,
    KafkaStorageError: ErrorCode.KAFKA_STORAGE_ERROR,
    LogDirNotFoundError: ErrorCode.LOG_DIR_NOT_FOUND,
    ReplicaNotAvailableError: ErrorCode.REPLICA_NOT_AVAILABLE,
    FencedLeaderEpochError: ErrorCode.FENCED_LEADER_EPOCH,
    UnknownLeaderEpochError: ErrorCode.UNKNOWN_LEADER_EPOCH,
    NotEnoughReplicasError: ErrorCode.NOT_ENOUGH_REPLICAS,
    NotEnoughReplicasAfterAppendError: ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    RequestTimedOutError: ErrorCode.REQUEST_TIMED_OUT,
    InvalidRecordError: ErrorCode.INVALID_RECORD,
    InvalidRequiredAcksError: ErrorCode.INVALID_REQUIRED_ACKS,
    PolicyViolationError: ErrorCode.POLICY_VIOLATION,
    InvalidRequestError: ErrorCode.INVALID_REQUEST,
    UnsupportedVersionError: ErrorCode.UNSUPPORTED_VERSION,
    SecurityDisabledError: ErrorCode.SECURITY_DISABLED,
    InvalidConfigurationError: ErrorCode.INVALID_CONFIG,
    # Producer-state errors.
    OutOfOrderSequenceError: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    InvalidProducerEpochError: ErrorCode.INVALID_PRODUCER_EPOCH,
    UnknownProducerIdError: ErrorCode.UNKNOWN_PRODUCER_ID,
    InvalidTxnStateError: ErrorCode.INVALID_TXN_STATE,
    InvalidProducerIdMappingError: ErrorCode.INVALID_PRODUCER_ID_MAPPING,
    TransactionAbortableError: ErrorCode.TRANSACTION_ABORTABLE,
    TransactionCoordinatorFencedError: ErrorCode.TRANSACTION_COORDINATOR_FENCED,
    TransactionalIdAuthorizationFailedError: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    # The storage core's errors.
    storage_log.RecordTooLargeError: ErrorCode.MESSAGE_TOO_LARGE,
    storage_log.RecordBatchTooLargeError: ErrorCode.RECORD_LIST_TOO_LARGE,
    storage_log.InvalidRecordError: ErrorCode.INVALID_RECORD,
    storage_log.InvalidTimestampError: ErrorCode.INVALID_TIMESTAMP,
    storage_log.UnsupportedCompressionError: ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
    storage_errors.OffsetOutOfRangeError: ErrorCode.OFFSET_OUT_OF_RANGE,
    storage_errors.CorruptRecordError: ErrorCode.CORRUPT_MESSAGE,
    storage_errors.StorageError: ErrorCode.KAFKA_STORAGE_ERROR,
    OSError: ErrorCode.KAFKA_STORAGE_ERROR,
}


def error_code_for(exc: BaseException) -> ErrorCode:
    """Kafka's error code for `exc`: its own for a CodedError, else the table entry
    of its most derived listed class, UNKNOWN_SERVER_ERROR when none is listed."""
    if isinstance(exc, CodedError):
        try:
            return ErrorCode(exc.code)
        except ValueError:
            return ErrorCode.UNKNOWN_SERVER_ERROR
    for cls in type(exc).__mro__:
        code = ERROR_CODES.get(cls)
        if code is not None:
            return code
    return ErrorCode.UNKNOWN_SERVER_ERROR


def is_storage_failure(exc: BaseException) -> bool:
    """Whether `exc` means the partition's log itself failed (it must go offline), as
    opposed to a refused request."""
    return error_code_for(exc) == ErrorCode.KAFKA_STORAGE_ERROR and not isinstance(exc, BrokerError)


def broker_error(code: int, message: str) -> BrokerError:
    """The typed broker error for an error code reported as a number (a producer-state
    verdict, a partition's replication refusal), read from the table so the two never
    disagree. Each broker error class has its own code."""
    for cls, mapped in ERROR_CODES.items():
        if mapped == code and issubclass(cls, BrokerError):
            return cls(message)
    raise ValueError(f"no broker error for code {code}")
