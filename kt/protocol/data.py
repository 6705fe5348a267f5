"""Versioned data schemas that are not API messages.

Each is encoded as an int16 version followed by the struct in that version
(`DataSchema.encode_versioned` / `decode_versioned`):

* the consumer protocol's subscription and assignment, carried as opaque bytes
  inside JoinGroup/SyncGroup and the group metadata record;
* the records of `__consumer_offsets` (offset commits, group metadata) and of
  `__transaction_state` (transaction log), whose key version says which kind of
  record it is.

`coordinator_records.py` and `consumer_protocol.py` give these typed front ends.
"""

from __future__ import annotations

from kt.protocol.codec import DataSchema

CONSUMER_PROTOCOL_SUBSCRIPTION = DataSchema(
    "ConsumerProtocolSubscription", "0-3", "none", """
topics []string
user_data bytes ?0+ =null
owned_partitions [] 1+
  topic string 1+
  partitions []int32 1+
generation_id int32 2+ =-1
rack_id string 3+ ?3+ =null
""")  # fmt: skip

CONSUMER_PROTOCOL_ASSIGNMENT = DataSchema(
    "ConsumerProtocolAssignment", "0-3", "none", """
assigned_partitions []
  topic string
  partitions []int32
user_data bytes ?0+ =null
""")  # fmt: skip

OFFSET_COMMIT_KEY = DataSchema(
    "OffsetCommitKey", "0-1", "none", """
group string 0-1
topic string 0-1
partition int32 0-1
""")  # fmt: skip

OFFSET_COMMIT_VALUE = DataSchema(
    "OffsetCommitValue", "0-4", "4+", """
offset int64
leader_epoch int32 3+ =-1
metadata string
commit_timestamp int64
expire_timestamp int64 1 =-1
""")  # fmt: skip

GROUP_METADATA_KEY = DataSchema(
    "GroupMetadataKey", "2", "none", """
group string 2
""")  # fmt: skip

GROUP_METADATA_VALUE = DataSchema(
    "GroupMetadataValue", "0-4", "4+", """
protocol_type string
generation int32
protocol string ?0+
leader string ?0+
current_state_timestamp int64 2+ =-1
members []MemberMetadata
""",
    common={"MemberMetadata": """
member_id string
group_instance_id string 3+ ?3+ =null
client_id string
client_host string
rebalance_timeout int32 1+ =-1
session_timeout int32
subscription bytes
assignment bytes
"""},
)  # fmt: skip

TRANSACTION_LOG_KEY = DataSchema(
    "TransactionLogKey", "0", "none", """
transactional_id string 0
""")  # fmt: skip

TRANSACTION_LOG_VALUE = DataSchema(
    "TransactionLogValue", "0-1", "1+", """
producer_id int64
previous_producer_id int64 1+ @0 =-1
next_producer_id int64 1+ @1 =-1
producer_epoch int16
transaction_timeout_ms int32
transaction_status int8
transaction_partitions [] ?0+
  topic string
  partition_ids []int32
transaction_last_update_timestamp_ms int64
transaction_start_timestamp_ms int64
client_transaction_version int16 1+ @2 =0
""")  # fmt: skip

ALL_DATA_SCHEMAS: tuple[DataSchema, ...] = (
    CONSUMER_PROTOCOL_SUBSCRIPTION,
    CONSUMER_PROTOCOL_ASSIGNMENT,
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
    GROUP_METADATA_KEY,
    GROUP_METADATA_VALUE,
    TRANSACTION_LOG_KEY,
    TRANSACTION_LOG_VALUE,
)
