"""Exceptions of the protocol core, and the table of Kafka's wire error codes.

Two unrelated things live here because both are "errors" a caller of the protocol
core has to handle: the Python exceptions our codec raises (`DecodeError` and
friends), and `ErrorCode`, the int16 error codes carried *inside* Kafka messages.

Decoding untrusted bytes may raise only `DecodeError` (or a subclass), so a broker
can wrap one `except DecodeError` around each request and close the connection.
"""

from __future__ import annotations

from enum import IntEnum


class ProtocolError(Exception):
    """Base class of every exception the protocol core raises on purpose."""


class DecodeError(ProtocolError):
    """Bytes that do not decode: truncated, bad lengths or varints, invalid UTF-8..."""


class FrameSizeError(DecodeError):
    """A frame's size prefix is negative or above the configured maximum.

    A subclass of DecodeError so a blanket handler still catches it, but distinct
    because the only sane reaction is to close the connection without reading on.
    """


class CorrelationIdMismatch(DecodeError):
    """A response arrived whose correlation id is not the oldest one in flight."""


class EncodeError(ProtocolError, ValueError):
    """A message object cannot be encoded in the requested version (wrong type,
    null in a non-nullable field, value out of range, unknown field...)."""


class UnsupportedVersionError(ProtocolError):
    """An API key or version this codec does not know was asked for."""


class ErrorCode(IntEnum):
    """Kafka's wire error codes (the int16 `error_code` fields).

    Members compare equal to plain ints, so `resp.error_code == ErrorCode.NONE`
    works on decoded messages and `ErrorCode.NOT_COORDINATOR` can be put into one.
    """

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132
    SHARE_SESSION_LIMIT_REACHED = 133

    @property
    def retriable(self) -> bool:
        """True when a client may retry the same request and expect it to succeed."""
        return self.value in _RETRIABLE

    @property
    def message(self) -> str:
        """A one-line human description of the error."""
        return _MESSAGES.get(self.value, self.name.replace("_", " ").lower())


# Mirrors which Java exceptions derive from RetriableException (directly or via
# InvalidMetadataException): clients rely on this to decide between retry and fail.
_RETRIABLE = frozenset(
    {
        2, 3, 5, 6, 7, 9, 13, 14, 15, 16, 19, 20, 41, 51, 56, 70, 71, 72, 74, 75, 78,
        80, 83, 84, 88, 89, 100, 103, 106, 122, 123, 129,
    }
)  # fmt: skip

_MESSAGES: dict[int, str] = {
    -1: "unexpected error on the server",
    0: "no error",
    1: "offset is outside the range the partition holds",
    2: "message failed its CRC check or is otherwise corrupt",
    3: "topic or partition is not hosted by this broker",
    4: "requested fetch size is invalid",
    5: "partition has no leader right now (election under way)",
    6: "this broker is not the leader (or follower) for the partition",
    7: "request timed out",
    8: "broker is not available",
    9: "replica is not available for the partition",
    10: "request or record batch is larger than the server accepts",
    11: "controller moved to another broker",
    12: "offset commit metadata string is too large",
    13: "server disconnected before a response was received",
    14: "coordinator is still loading its state",
    15: "coordinator is not available",
    16: "this broker is not the coordinator for that key",
    17: "operation on an invalid topic",
    18: "record batch is larger than the segment size",
    19: "too few in-sync replicas to accept the write",
    20: "written, but to fewer in-sync replicas than required",
    21: "invalid value for required acks",
    22: "group generation id is not valid",
    23: "member's protocols are incompatible with the group's",
    24: "group id is invalid",
    25: "coordinator does not know this member",
    26: "session timeout is outside the broker's allowed range",
    27: "group is rebalancing; rejoin needed",
    28: "offset commit data size is invalid",
    29: "not authorized to access the topic",
    30: "not authorized to access the group",
    31: "not authorized for cluster operation",
    32: "timestamp is out of the acceptable range",
    33: "SASL mechanism not supported by the broker",
    34: "request not valid in the current SASL state",
    35: "API version not supported",
    36: "topic already exists",
    37: "number of partitions is invalid",
    38: "replication factor is invalid",
    39: "replica assignment is invalid",
    40: "configuration is invalid",
    41: "this broker is not the controller",
    42: "request is malformed or sent to an incompatible broker",
    43: "message format on the broker does not support the request",
    44: "request violates the configured policy",
    45: "out-of-order sequence number from the producer",
    46: "duplicate sequence number from the producer",
    47: "producer epoch is stale (fenced or expired)",
    48: "transactional operation in an invalid state",
    49: "producer id is not assigned to this transactional id",
    50: "transaction timeout exceeds the broker maximum",
    51: "another operation on the same transaction is in progress",
    52: "transaction coordinator sending markers has been fenced",
    53: "not authorized for the transactional id",
    54: "security features are disabled",
    55: "operation not attempted because others in the batch failed",
    56: "disk error while accessing the log",
    57: "log directory not found",
    58: "SASL authentication failed",
    59: "producer id unknown to the broker",
    60: "a partition reassignment is in progress",
    61: "delegation tokens are disabled",
    62: "delegation token not found",
    63: "principal is not the token owner or renewer",
    64: "delegation token requests not allowed on this channel",
    65: "delegation token authorization failed",
    66: "delegation token expired",
    67: "principal type not supported",
    68: "group is not empty",
    69: "group id does not exist",
    70: "fetch session id not found",
    71: "fetch session epoch is invalid",
    72: "no matching listener on the leader",
    73: "topic deletion is disabled",
    74: "leader epoch in the request is older than the broker's",
    75: "leader epoch in the request is newer than the broker's",
    76: "client does not support the partition's compression type",
    77: "broker epoch has changed",
    78: "offset not available yet after a leader change",
    79: "member id required before joining",
    80: "preferred leader not available",
    81: "group has reached its maximum size",
    82: "another member with the same group.instance.id fenced this one",
    83: "no eligible leaders available",
    84: "leader election not needed",
    85: "no partition reassignment in progress",
    86: "group is subscribed to the topic whose offsets would be deleted",
    87: "record failed broker-side validation",
    88: "unstable offsets pending; retry later",
    89: "throttling quota exceeded",
    90: "a newer producer with the same transactional id fenced this one",
    91: "resource not found",
    92: "resource referenced twice",
    93: "credential does not meet acceptability criteria",
    94: "sender or receiver is not in the expected voter set",
    95: "update version is invalid",
    96: "finalized feature update failed",
    97: "principal deserialization failed while forwarding",
    98: "snapshot not found",
    99: "snapshot position out of range",
    100: "topic id not hosted by this broker",
    101: "broker id already registered",
    102: "broker id not registered",
    103: "topic id in the log does not match the request",
    104: "cluster id does not match",
    105: "transactional id not found",
    106: "fetch session used topic ids inconsistently",
    107: "new ISR contains an ineligible replica",
    108: "partition updated but the leader changed",
    109: "offset moved to tiered storage",
    110: "member epoch fenced by the group coordinator",
    111: "instance id still used by another member",
    112: "assignor not supported by the group",
    113: "member epoch is stale",
    114: "request sent to an endpoint of the wrong type",
    115: "endpoint type not supported",
    116: "controller id unknown",
    117: "telemetry subscription id unknown or outdated",
    118: "telemetry push too large",
    119: "broker registration considered invalid",
    120: "transaction failed; abort it to continue",
    121: "record state invalid for acknowledgement",
    122: "share session not found",
    123: "share session epoch invalid",
    124: "share-group state epoch mismatch",
    125: "voter key does not match",
    126: "voter already in the voter set",
    127: "voter not in the voter set",
    128: "regular expression is invalid",
    129: "client metadata is stale; rebootstrap",
    130: "streams topology is invalid",
    131: "streams topology epoch is invalid",
    132: "streams topology epoch is outdated",
    133: "share session limit reached",
}


def error_for_code(code: int) -> ErrorCode:
    """The ErrorCode for a wire value; codes we do not know map to UNKNOWN_SERVER_ERROR,
    which is also what Java clients do with them."""
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def error_for_name(name: str) -> ErrorCode:
    """The ErrorCode called `name` (case-insensitive); KeyError when there is none."""
    return ErrorCode[name.upper()]
