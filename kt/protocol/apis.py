"""The Kafka APIs we speak, each stated once in the schema notation of `schema.py`.

Every API covers its full version range; field names are the spec's names in
snake_case. Adding an API is a matter of stating its schema here and listing it in
`ALL_APIS`. Notation reminder: versions (``3+``, ``3-5``), ``?R`` nullable
versions, ``@N`` tag, ``=V`` default; ``[]`` / ``{}`` take indented children.
Structs that several fields share are stated once under ``common=`` (each may use
the ones listed before it) and referred to as ``[]Name`` or ``Name``.
"""

from __future__ import annotations

from kt.protocol.codec import Api

PRODUCE = Api(
    0, "Produce", "0-11", "9+",
    request="""
transactional_id string 3+ ?3+ =null
acks int16
timeout_ms int32
topic_data []
  name string
  partition_data []
    index int32
    records records ?0+
""",
    response="""
responses []
  name string
  partition_responses []
    index int32
    error_code int16
    base_offset int64
    log_append_time_ms int64 2+ =-1
    log_start_offset int64 5+ =-1
    record_errors [] 8+
      batch_index int32 8+
      batch_index_error_message string 8+ ?8+ =null
    error_message string 8+ ?8+ =null
    current_leader {} 10+ @0
      leader_id int32 10+ =-1
      leader_epoch int32 10+ =-1
throttle_time_ms int32 1+ =0
node_endpoints [] 10+ @0
  node_id int32 10+
  host string 10+
  port int32 10+
  rack string 10+ ?10+ =null
""",
)  # fmt: skip

FETCH = Api(
    1, "Fetch", "0-17", "12+",
    request="""
cluster_id string 12+ ?12+ @0 =null
replica_id int32 0-14 =-1
replica_state {} 15+ @1
  replica_id int32 15+ =-1
  replica_epoch int64 15+ =-1
max_wait_ms int32
min_bytes int32
max_bytes int32 3+ =0x7fffffff
isolation_level int8 4+ =0
session_id int32 7+ =0
session_epoch int32 7+ =-1
topics []
  topic string 0-12
  topic_id uuid 13+
  partitions []
    partition int32
    current_leader_epoch int32 9+ =-1
    fetch_offset int64
    last_fetched_epoch int32 12+ =-1
    log_start_offset int64 5+ =-1
    partition_max_bytes int32
    replica_directory_id uuid 17+ @0
forgotten_topics_data [] 7+
  topic string 7-12
  topic_id uuid 13+
  partitions []int32 7+
rack_id string 11+ =
""",
    response="""
throttle_time_ms int32 1+
error_code int16 7+
session_id int32 7+ =0
responses []
  topic string 0-12
  topic_id uuid 13+
  partitions []
    partition_index int32
    error_code int16
    high_watermark int64
    last_stable_offset int64 4+ =-1
    log_start_offset int64 5+ =-1
    diverging_epoch {} 12+ @0
      epoch int32 12+ =-1
      end_offset int64 12+ =-1
    current_leader {} 12+ @1
      leader_id int32 12+ =-1
      leader_epoch int32 12+ =-1
    snapshot_id {} 12+ @2
      end_offset int64 =-1
      epoch int32 =-1
    aborted_transactions [] 4+ ?4+
      producer_id int64 4+
      first_offset int64 4+
    preferred_read_replica int32 11+ =-1
    records records ?0+
node_endpoints [] 16+ @0
  node_id int32 16+
  host string 16+
  port int32 16+
  rack string 16+ ?16+ =null
""",
)  # fmt: skip

LIST_OFFSETS = Api(
    2, "ListOffsets", "0-10", "6+",
    request="""
replica_id int32
isolation_level int8 2+
topics []
  name string
  partitions []
    partition_index int32
    current_leader_epoch int32 4+ =-1
    timestamp int64
    max_num_offsets int32 0 =1
timeout_ms int32 10+
""",
    response="""
throttle_time_ms int32 2+
topics []
  name string
  partitions []
    partition_index int32
    error_code int16
    old_style_offsets []int64 0
    timestamp int64 1+ =-1
    offset int64 1+ =-1
    leader_epoch int32 4+ =-1
""",
)  # fmt: skip

METADATA = Api(
    3, "Metadata", "0-12", "9+",
    request="""
topics [] ?1+
  topic_id uuid 10+
  name string ?10+
allow_auto_topic_creation bool 4+ =true
include_cluster_authorized_operations bool 8-10
include_topic_authorized_operations bool 8+
""",
    response="""
throttle_time_ms int32 3+
brokers []
  node_id int32
  host string
  port int32
  rack string 1+ ?1+ =null
cluster_id string 2+ ?2+ =null
controller_id int32 1+ =-1
topics []
  error_code int16
  name string ?12+
  topic_id uuid 10+
  is_internal bool 1+ =false
  partitions []
    error_code int16
    partition_index int32
    leader_id int32
    leader_epoch int32 7+ =-1
    replica_nodes []int32
    isr_nodes []int32
    offline_replicas []int32 5+
  topic_authorized_operations int32 8+ =-2147483648
cluster_authorized_operations int32 8-10 =-2147483648
""",
)  # fmt: skip

LEADER_AND_ISR = Api(
    4, "LeaderAndIsr", "0-7", "4+",
    request="""
controller_id int32
is_kraft_controller bool 7+ =false
controller_epoch int32
broker_epoch int64 2+ =-1
type int8 5+
ungrouped_partition_states []LeaderAndIsrPartitionState 0-1
topic_states [] 2+
  topic_name string 2+
  topic_id uuid 5+
  partition_states []LeaderAndIsrPartitionState 2+
live_leaders []
  broker_id int32
  host_name string
  port int32
""",
    response="""
error_code int16
partition_errors []LeaderAndIsrPartitionError 0-4
topics [] 5+
  topic_id uuid 5+
  partition_errors []LeaderAndIsrPartitionError 5+
""",
    common={
        "LeaderAndIsrPartitionState": """
topic_name string 0-1
partition_index int32
controller_epoch int32
leader int32
leader_epoch int32
isr []int32
partition_epoch int32
replicas []int32
adding_replicas []int32 3+
removing_replicas []int32 3+
is_new bool 1+ =false
leader_recovery_state int8 6+ =0
""",
        "LeaderAndIsrPartitionError": """
topic_name string 0-4
partition_index int32
error_code int16
""",
    },
)  # fmt: skip

STOP_REPLICA = Api(
    5, "StopReplica", "0-4", "2+",
    request="""
controller_id int32
is_kraft_controller bool 4+ =false
controller_epoch int32
broker_epoch int64 1+ =-1
delete_partitions bool 0-2
ungrouped_partitions [] 0
  topic_name string 0
  partition_index int32 0
topics [] 1-2
  name string 1-2
  partition_indexes []int32 1-2
topic_states [] 3+
  topic_name string 3+
  partition_states [] 3+
    partition_index int32 3+
    leader_epoch int32 3+ =-1
    delete_partition bool 3+
""",
    response="""
error_code int16
partition_errors []
  topic_name string
  partition_index int32
  error_code int16
""",
)  # fmt: skip

UPDATE_METADATA = Api(
    6, "UpdateMetadata", "0-8", "6+",
    request="""
controller_id int32
is_kraft_controller bool 8+ =false
type int8 8+ @0 =0
controller_epoch int32
broker_epoch int64 5+ =-1
ungrouped_partition_states []UpdateMetadataPartitionState 0-4
topic_states [] 5+
  topic_name string 5+
  topic_id uuid 7+
  partition_states []UpdateMetadataPartitionState 5+
live_brokers []
  id int32
  v0_host string 0
  v0_port int32 0
  endpoints [] 1+
    port int32 1+
    host string 1+
    listener string 3+
    security_protocol int16 1+
  rack string 2+ ?0+
""",
    response="""
error_code int16
""",
    common={
        "UpdateMetadataPartitionState": """
topic_name string 0-4
partition_index int32
controller_epoch int32
leader int32
leader_epoch int32
isr []int32
zk_version int32
replicas []int32
offline_replicas []int32 4+
""",
    },
)  # fmt: skip

CONTROLLED_SHUTDOWN = Api(
    7, "ControlledShutdown", "0-3", "3+",
    request="""
broker_id int32
broker_epoch int64 2+ =-1
""",
    response="""
error_code int16
remaining_partitions []
  topic_name string
  partition_index int32
""",
)  # fmt: skip

OFFSET_COMMIT = Api(
    8, "OffsetCommit", "0-9", "8+",
    request="""
group_id string
generation_id_or_member_epoch int32 1+ =-1
member_id string 1+
group_instance_id string 7+ ?7+ =null
retention_time_ms int64 2-4 =-1
topics []
  name string
  partitions []
    partition_index int32
    committed_offset int64
    committed_leader_epoch int32 6+ =-1
    commit_timestamp int64 1 =-1
    committed_metadata string ?0+
""",
    response="""
throttle_time_ms int32 3+
topics []
  name string
  partitions []
    partition_index int32
    error_code int16
""",
)  # fmt: skip

OFFSET_FETCH = Api(
    9, "OffsetFetch", "0-9", "6+",
    request="""
group_id string 0-7
topics [] 0-7 ?2-7
  name string 0-7
  partition_indexes []int32 0-7
groups [] 8+
  group_id string 8+
  member_id string 9+ ?9+ =null
  member_epoch int32 9+ =-1
  topics [] 8+ ?8+
    name string 8+
    partition_indexes []int32 8+
require_stable bool 7+ =false
""",
    response="""
throttle_time_ms int32 3+
topics [] 0-7
  name string 0-7
  partitions [] 0-7
    partition_index int32 0-7
    committed_offset int64 0-7
    committed_leader_epoch int32 5-7 =-1
    metadata string 0-7 ?0-7
    error_code int16 0-7
error_code int16 2-7 =0
groups [] 8+
  group_id string 8+
  topics [] 8+
    name string 8+
    partitions [] 8+
      partition_index int32 8+
      committed_offset int64 8+
      committed_leader_epoch int32 8+ =-1
      metadata string 8+ ?8+
      error_code int16 8+
  error_code int16 8+ =0
""",
)  # fmt: skip

FIND_COORDINATOR = Api(
    10, "FindCoordinator", "0-6", "3+",
    request="""
key string 0-3
key_type int8 1+ =0
coordinator_keys []string 4+
""",
    response="""
throttle_time_ms int32 1+
error_code int16 0-3
error_message string 1-3 ?1-3
node_id int32 0-3
host string 0-3
port int32 0-3
coordinators [] 4+
  key string 4+
  node_id int32 4+
  host string 4+
  port int32 4+
  error_code int16 4+
  error_message string 4+ ?4+
""",
)  # fmt: skip

JOIN_GROUP = Api(
    11, "JoinGroup", "0-9", "6+",
    request="""
group_id string
session_timeout_ms int32
rebalance_timeout_ms int32 1+ =-1
member_id string
group_instance_id string 5+ ?5+ =null
protocol_type string
protocols []
  name string
  metadata bytes
reason string 8+ ?8+ =null
""",
    response="""
throttle_time_ms int32 2+
error_code int16
generation_id int32 =-1
protocol_type string 7+ ?7+ =null
protocol_name string ?7+
leader string
skip_assignment bool 9+ =false
member_id string
members []
  member_id string
  group_instance_id string 5+ ?5+ =null
  metadata bytes
""",
)  # fmt: skip

HEARTBEAT = Api(
    12, "Heartbeat", "0-4", "4+",
    request="""
group_id string
generation_id int32
member_id string
group_instance_id string 3+ ?3+ =null
""",
    response="""
throttle_time_ms int32 1+
error_code int16
""",
)  # fmt: skip

LEAVE_GROUP = Api(
    13, "LeaveGroup", "0-5", "4+",
    request="""
group_id string
member_id string 0-2
members [] 3+
  member_id string 3+
  group_instance_id string 3+ ?3+ =null
  reason string 5+ ?5+ =null
""",
    response="""
throttle_time_ms int32 1+
error_code int16
members [] 3+
  member_id string 3+
  group_instance_id string 3+ ?3+
  error_code int16 3+
""",
)  # fmt: skip

SYNC_GROUP = Api(
    14, "SyncGroup", "0-5", "4+",
    request="""
group_id string
generation_id int32
member_id string
group_instance_id string 3+ ?3+ =null
protocol_type string 5+ ?5+ =null
protocol_name string 5+ ?5+ =null
assignments []
  member_id string
  assignment bytes
""",
    response="""
throttle_time_ms int32 1+
error_code int16
protocol_type string 5+ ?5+ =null
protocol_name string 5+ ?5+ =null
assignment bytes
""",
)  # fmt: skip

DESCRIBE_GROUPS = Api(
    15, "DescribeGroups", "0-5", "5+",
    request="""
groups []string
include_authorized_operations bool 3+
""",
    response="""
throttle_time_ms int32 1+
groups []
  error_code int16
  group_id string
  group_state string
  protocol_type string
  protocol_data string
  members []
    member_id string
    group_instance_id string 4+ ?4+ =null
    client_id string
    client_host string
    member_metadata bytes
    member_assignment bytes
  authorized_operations int32 3+ =-2147483648
""",
)  # fmt: skip

LIST_GROUPS = Api(
    16, "ListGroups", "0-5", "3+",
    request="""
states_filter []string 4+
types_filter []string 5+
""",
    response="""
throttle_time_ms int32 1+
error_code int16
groups []
  group_id string
  protocol_type string
  group_state string 4+
  group_type string 5+
""",
)  # fmt: skip

SASL_HANDSHAKE = Api(
    17, "SaslHandshake", "0-1", "none",
    request="""
mechanism string
""",
    response="""
error_code int16
mechanisms []string
""",
)  # fmt: skip

API_VERSIONS = Api(
    18, "ApiVersions", "0-4", "3+",
    request="""
client_software_name string 3+
client_software_version string 3+
""",
    response="""
error_code int16
api_keys []
  api_key int16
  min_version int16
  max_version int16
throttle_time_ms int32 1+
supported_features [] 3+ @0
  name string 3+
  min_version int16 3+
  max_version int16 3+
finalized_features_epoch int64 3+ @1 =-1
finalized_features [] 3+ @2
  name string 3+
  max_version_level int16 3+
  min_version_level int16 3+
zk_migration_ready bool 3+ @3 =false
""",
)  # fmt: skip

CREATE_TOPICS = Api(
    19, "CreateTopics", "0-7", "5+",
    request="""
topics []
  name string
  num_partitions int32
  replication_factor int16
  assignments []
    partition_index int32
    broker_ids []int32
  configs []
    name string
    value string ?0+
timeout_ms int32 =60000
validate_only bool 1+ =false
""",
    response="""
throttle_time_ms int32 2+
topics []
  name string
  topic_id uuid 7+
  error_code int16
  error_message string 1+ ?0+
  topic_config_error_code int16 5+ @0
  num_partitions int32 5+ =-1
  replication_factor int16 5+ =-1
  configs [] 5+ ?5+
    name string 5+
    value string 5+ ?5+
    read_only bool 5+
    config_source int8 5+ =-1
    is_sensitive bool 5+
""",
)  # fmt: skip

DELETE_TOPICS = Api(
    20, "DeleteTopics", "0-6", "4+",
    request="""
topics [] 6+
  name string 6+ ?6+ =null
  topic_id uuid 6+
topic_names []string 0-5
timeout_ms int32
""",
    response="""
throttle_time_ms int32 1+
responses []
  name string ?6+
  topic_id uuid 6+
  error_code int16
  error_message string 5+ ?5+ =null
""",
)  # fmt: skip

DELETE_RECORDS = Api(
    21, "DeleteRecords", "0-2", "2+",
    request="""
topics []
  name string
  partitions []
    partition_index int32
    offset int64
timeout_ms int32
""",
    response="""
throttle_time_ms int32
topics []
  name string
  partitions []
    partition_index int32
    low_watermark int64
    error_code int16
""",
)  # fmt: skip

INIT_PRODUCER_ID = Api(
    22, "InitProducerId", "0-5", "2+",
    request="""
transactional_id string ?0+
transaction_timeout_ms int32
producer_id int64 3+ =-1
producer_epoch int16 3+ =-1
""",
    response="""
throttle_time_ms int32
error_code int16
producer_id int64 =-1
producer_epoch int16
""",
)  # fmt: skip

OFFSET_FOR_LEADER_EPOCH = Api(
    23, "OffsetForLeaderEpoch", "0-4", "4+",
    request="""
replica_id int32 3+ =-2
topics []
  topic string
  partitions []
    partition int32
    current_leader_epoch int32 2+ =-1
    leader_epoch int32
""",
    response="""
throttle_time_ms int32 2+
topics []
  topic string
  partitions []
    error_code int16
    partition int32
    leader_epoch int32 1+ =-1
    end_offset int64 =-1
""",
)  # fmt: skip

ADD_PARTITIONS_TO_TXN = Api(
    24, "AddPartitionsToTxn", "0-5", "3+",
    request="""
transactions [] 4+
  transactional_id string 4+
  producer_id int64 4+
  producer_epoch int16 4+
  verify_only bool 4+ =false
  topics []AddPartitionsToTxnTopic 4+
v3_and_below_transactional_id string 0-3
v3_and_below_producer_id int64 0-3
v3_and_below_producer_epoch int16 0-3
v3_and_below_topics []AddPartitionsToTxnTopic 0-3
""",
    response="""
throttle_time_ms int32
error_code int16 4+
results_by_transaction [] 4+
  transactional_id string 4+
  topic_results []AddPartitionsToTxnTopicResult 4+
results_by_topic_v3_and_below []AddPartitionsToTxnTopicResult 0-3
""",
    common={
        "AddPartitionsToTxnTopic": """
name string
partitions []int32
""",
        "AddPartitionsToTxnPartitionResult": """
partition_index int32
partition_error_code int16
""",
        "AddPartitionsToTxnTopicResult": """
name string
results_by_partition []AddPartitionsToTxnPartitionResult
""",
    },
)  # fmt: skip

ADD_OFFSETS_TO_TXN = Api(
    25, "AddOffsetsToTxn", "0-4", "3+",
    request="""
transactional_id string
producer_id int64
producer_epoch int16
group_id string
""",
    response="""
throttle_time_ms int32
error_code int16
""",
)  # fmt: skip

END_TXN = Api(
    26, "EndTxn", "0-5", "3+",
    request="""
transactional_id string
producer_id int64
producer_epoch int16
committed bool
""",
    response="""
throttle_time_ms int32
error_code int16
producer_id int64 5+ =-1
producer_epoch int16 5+ =-1
""",
)  # fmt: skip

WRITE_TXN_MARKERS = Api(
    27, "WriteTxnMarkers", "0-1", "1+",
    request="""
markers []
  producer_id int64
  producer_epoch int16
  transaction_result bool
  topics []
    name string
    partition_indexes []int32
  coordinator_epoch int32
""",
    response="""
markers []
  producer_id int64
  topics []
    name string
    partitions []
      partition_index int32
      error_code int16
""",
)  # fmt: skip

TXN_OFFSET_COMMIT = Api(
    28, "TxnOffsetCommit", "0-4", "3+",
    request="""
transactional_id string
group_id string
producer_id int64
producer_epoch int16
generation_id int32 3+ =-1
member_id string 3+ =
group_instance_id string 3+ ?3+ =null
topics []
  name string
  partitions []
    partition_index int32
    committed_offset int64
    committed_leader_epoch int32 2+ =-1
    committed_metadata string ?0+
""",
    response="""
throttle_time_ms int32
topics []
  name string
  partitions []
    partition_index int32
    error_code int16
""",
)  # fmt: skip

DESCRIBE_CONFIGS = Api(
    32, "DescribeConfigs", "0-4", "4+",
    request="""
resources []
  resource_type int8
  resource_name string
  configuration_keys []string ?0+
include_synonyms bool 1+ =false
include_documentation bool 3+ =false
""",
    response="""
throttle_time_ms int32
results []
  error_code int16
  error_message string ?0+
  resource_type int8
  resource_name string
  configs []
    name string
    value string ?0+
    read_only bool
    is_default bool 0
    config_source int8 1+ =-1
    is_sensitive bool
    synonyms [] 1+
      name string 1+
      value string 1+ ?0+
      source int8 1+
    config_type int8 3+ =0
    documentation string 3+ ?0+
""",
)  # fmt: skip

ALTER_CONFIGS = Api(
    33, "AlterConfigs", "0-2", "2+",
    request="""
resources []
  resource_type int8
  resource_name string
  configs []
    name string
    value string ?0+
validate_only bool
""",
    response="""
throttle_time_ms int32
responses []
  error_code int16
  error_message string ?0+
  resource_type int8
  resource_name string
""",
)  # fmt: skip

ALTER_REPLICA_LOG_DIRS = Api(
    34, "AlterReplicaLogDirs", "0-2", "2+",
    request="""
dirs []
  path string
  topics []
    name string
    partitions []int32
""",
    response="""
throttle_time_ms int32
results []
  topic_name string
  partitions []
    partition_index int32
    error_code int16
""",
)  # fmt: skip

DESCRIBE_LOG_DIRS = Api(
    35, "DescribeLogDirs", "0-4", "2+",
    request="""
topics [] ?0+
  topic string
  partitions []int32
""",
    response="""
throttle_time_ms int32
error_code int16 3+
results []
  error_code int16
  log_dir string
  topics []
    name string
    partitions []
      partition_index int32
      partition_size int64
      offset_lag int64
      is_future_key bool
  total_bytes int64 4+ =-1
  usable_bytes int64 4+ =-1
""",
)  # fmt: skip

DESCRIBE_ACLS = Api(
    29, "DescribeAcls", "0-3", "2+",
    request="""
resource_type_filter int8
resource_name_filter string ?0+
pattern_type_filter int8 1+ =3
principal_filter string ?0+
host_filter string ?0+
operation int8
permission_type int8
""",
    response="""
throttle_time_ms int32
error_code int16
error_message string ?0+
resources []
  resource_type int8
  resource_name string
  pattern_type int8 1+ =3
  acls []
    principal string
    host string
    operation int8
    permission_type int8
""",
)  # fmt: skip

CREATE_ACLS = Api(
    30, "CreateAcls", "0-3", "2+",
    request="""
creations []
  resource_type int8
  resource_name string
  resource_pattern_type int8 1+ =3
  principal string
  host string
  operation int8
  permission_type int8
""",
    response="""
throttle_time_ms int32
results []
  error_code int16
  error_message string ?0+
""",
)  # fmt: skip

DELETE_ACLS = Api(
    31, "DeleteAcls", "0-3", "2+",
    request="""
filters []
  resource_type_filter int8
  resource_name_filter string ?0+
  pattern_type_filter int8 1+ =3
  principal_filter string ?0+
  host_filter string ?0+
  operation int8
  permission_type int8
""",
    response="""
throttle_time_ms int32
filter_results []
  error_code int16
  error_message string ?0+
  matching_acls []
    error_code int16
    error_message string ?0+
    resource_type int8
    resource_name string
    pattern_type int8 1+ =3
    principal string
    host string
    operation int8
    permission_type int8
""",
)  # fmt: skip

SASL_AUTHENTICATE = Api(
    36, "SaslAuthenticate", "0-2", "2+",
    request="""
auth_bytes bytes
""",
    response="""
error_code int16
error_message string ?0+
auth_bytes bytes
session_lifetime_ms int64 1+ =0
""",
)  # fmt: skip

CREATE_PARTITIONS = Api(
    37, "CreatePartitions", "0-3", "2+",
    request="""
topics []
  name string
  count int32
  assignments [] ?0+
    broker_ids []int32
timeout_ms int32
validate_only bool
""",
    response="""
throttle_time_ms int32
results []
  name string
  error_code int16
  error_message string ?0+ =null
""",
)  # fmt: skip

DELETE_GROUPS = Api(
    42, "DeleteGroups", "0-2", "2+",
    request="""
groups_names []string
""",
    response="""
throttle_time_ms int32
results []
  group_id string
  error_code int16
""",
)  # fmt: skip

ELECT_LEADERS = Api(
    43, "ElectLeaders", "0-2", "2+",
    request="""
election_type int8 1+
topic_partitions [] ?0+
  topic string
  partitions []int32
timeout_ms int32 =60000
""",
    response="""
throttle_time_ms int32
error_code int16 1+
replica_election_results []
  topic string
  partition_result []
    partition_id int32
    error_code int16
    error_message string ?0+
""",
)  # fmt: skip

INCREMENTAL_ALTER_CONFIGS = Api(
    44, "IncrementalAlterConfigs", "0-1", "1+",
    request="""
resources []
  resource_type int8
  resource_name string
  configs []
    name string
    config_operation int8
    value string ?0+
validate_only bool
""",
    response="""
throttle_time_ms int32
responses []
  error_code int16
  error_message string ?0+
  resource_type int8
  resource_name string
""",
)  # fmt: skip

ALTER_PARTITION_REASSIGNMENTS = Api(
    45, "AlterPartitionReassignments", "0", "0+",
    request="""
timeout_ms int32 =60000
topics []
  name string
  partitions []
    partition_index int32
    replicas []int32 ?0+ =null
""",
    response="""
throttle_time_ms int32
error_code int16
error_message string ?0+
responses []
  name string
  partitions []
    partition_index int32
    error_code int16
    error_message string ?0+
""",
)  # fmt: skip

LIST_PARTITION_REASSIGNMENTS = Api(
    46, "ListPartitionReassignments", "0", "0+",
    request="""
timeout_ms int32 =60000
topics [] ?0+ =null
  name string
  partition_indexes []int32
""",
    response="""
throttle_time_ms int32
error_code int16
error_message string ?0+
topics []
  name string
  partitions []
    partition_index int32
    replicas []int32
    adding_replicas []int32
    removing_replicas []int32
""",
)  # fmt: skip

OFFSET_DELETE = Api(
    47, "OffsetDelete", "0", "none",
    request="""
group_id string
topics []
  name string
  partitions []
    partition_index int32
""",
    response="""
error_code int16
throttle_time_ms int32
topics []
  name string
  partitions []
    partition_index int32
    error_code int16
""",
)  # fmt: skip

ALTER_PARTITION = Api(
    56, "AlterPartition", "0-3", "0+",
    request="""
broker_id int32
broker_epoch int64 =-1
topics []
  topic_name string 0-1
  topic_id uuid 2+
  partitions []
    partition_index int32
    leader_epoch int32
    new_isr []int32 0-2
    new_isr_with_epochs [] 3+
      broker_id int32 3+
      broker_epoch int64 3+ =-1
    leader_recovery_state int8 1+ =0
    partition_epoch int32
""",
    response="""
throttle_time_ms int32
error_code int16
topics []
  topic_name string 0-1
  topic_id uuid 2+
  partitions []
    partition_index int32
    error_code int16
    leader_id int32
    leader_epoch int32
    isr []int32
    leader_recovery_state int8 1+ =0
    partition_epoch int32
""",
)  # fmt: skip

DESCRIBE_CLUSTER = Api(
    60, "DescribeCluster", "0-1", "0+",
    request="""
include_cluster_authorized_operations bool
endpoint_type int8 1+ =1
""",
    response="""
throttle_time_ms int32
error_code int16
error_message string ?0+ =null
endpoint_type int8 1+ =1
cluster_id string
controller_id int32 =-1
brokers []
  broker_id int32
  host string
  port int32
  rack string ?0+ =null
cluster_authorized_operations int32 =-2147483648
""",
)  # fmt: skip

DESCRIBE_PRODUCERS = Api(
    61, "DescribeProducers", "0", "0+",
    request="""
topics []
  name string
  partition_indexes []int32
""",
    response="""
throttle_time_ms int32
topics []
  name string
  partitions []
    partition_index int32
    error_code int16
    error_message string ?0+ =null
    active_producers []
      producer_id int64
      producer_epoch int32
      last_sequence int32 =-1
      last_timestamp int64 =-1
      coordinator_epoch int32
      current_txn_start_offset int64 =-1
""",
)  # fmt: skip

DESCRIBE_TRANSACTIONS = Api(
    65, "DescribeTransactions", "0", "0+",
    request="""
transactional_ids []string
""",
    response="""
throttle_time_ms int32
transaction_states []
  error_code int16
  transactional_id string
  transaction_state string
  transaction_timeout_ms int32
  transaction_start_time_ms int64
  producer_id int64
  producer_epoch int16
  topics []
    topic string
    partitions []int32
""",
)  # fmt: skip

LIST_TRANSACTIONS = Api(
    66, "ListTransactions", "0-1", "0+",
    request="""
state_filters []string
producer_id_filters []int64
duration_filter int64 1+ =-1
""",
    response="""
throttle_time_ms int32
error_code int16
unknown_state_filters []string
transaction_states []
  transactional_id string
  producer_id int64
  transaction_state string
""",
)  # fmt: skip

DESCRIBE_USER_SCRAM_CREDENTIALS = Api(
    50, "DescribeUserScramCredentials", "0", "0+",
    request="""
users [] ?0+
  name string
""",
    response="""
throttle_time_ms int32
error_code int16
error_message string ?0+
results []
  user string
  error_code int16
  error_message string ?0+
  credential_infos []
    mechanism int8
    iterations int32
""",
)  # fmt: skip

ALTER_USER_SCRAM_CREDENTIALS = Api(
    51, "AlterUserScramCredentials", "0", "0+",
    request="""
deletions []
  name string
  mechanism int8
upsertions []
  name string
  mechanism int8
  iterations int32
  salt bytes
  salted_password bytes
""",
    response="""
throttle_time_ms int32
results []
  user string
  error_code int16
  error_message string ?0+
""",
)  # fmt: skip

ALL_APIS: tuple[Api, ...] = (
    PRODUCE,
    FETCH,
    LIST_OFFSETS,
    METADATA,
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    CONTROLLED_SHUTDOWN,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    FIND_COORDINATOR,
    JOIN_GROUP,
    HEARTBEAT,
    LEAVE_GROUP,
    SYNC_GROUP,
    DESCRIBE_GROUPS,
    LIST_GROUPS,
    SASL_HANDSHAKE,
    API_VERSIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    DELETE_RECORDS,
    INIT_PRODUCER_ID,
    OFFSET_FOR_LEADER_EPOCH,
    ADD_PARTITIONS_TO_TXN,
    ADD_OFFSETS_TO_TXN,
    END_TXN,
    WRITE_TXN_MARKERS,
    TXN_OFFSET_COMMIT,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    ALTER_REPLICA_LOG_DIRS,
    DESCRIBE_LOG_DIRS,
    DESCRIBE_ACLS,
    CREATE_ACLS,
    DELETE_ACLS,
    SASL_AUTHENTICATE,
    CREATE_PARTITIONS,
    DELETE_GROUPS,
    ELECT_LEADERS,
    INCREMENTAL_ALTER_CONFIGS,
    ALTER_PARTITION_REASSIGNMENTS,
    LIST_PARTITION_REASSIGNMENTS,
    OFFSET_DELETE,
    ALTER_PARTITION,
    DESCRIBE_CLUSTER,
    DESCRIBE_PRODUCERS,
    DESCRIBE_TRANSACTIONS,
    LIST_TRANSACTIONS,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    ALTER_USER_SCRAM_CREDENTIALS,
)

#: API key -> Api
APIS_BY_KEY: dict[int, Api] = {api.key: api for api in ALL_APIS}
#: API name ("Metadata") -> Api
APIS_BY_NAME: dict[str, Api] = {api.name: api for api in ALL_APIS}


def api_for_key(key: int) -> Api | None:
    """The Api with this key, or None when we do not implement it."""
    return APIS_BY_KEY.get(key)
