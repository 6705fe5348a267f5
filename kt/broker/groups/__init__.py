"""The classic consumer-group protocol, as Apache Kafka's group coordinator serves it.

`group.py` holds the state of one group (members, generation, state machine),
`coordinator.py` the operations behind JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, the offset APIs and the group admin APIs, with their timers, and
`offsets_log.py` the `__consumer_offsets` topic that persists them.
"""

from kt.broker.groups.coordinator import CoordinatorSettings, GroupCoordinator
from kt.broker.groups.group import Group, GroupState, Member
from kt.broker.groups.offsets_log import java_string_hash, partition_for

__all__ = [
    "CoordinatorSettings",
    "Group",
    "GroupCoordinator",
    "GroupState",
    "Member",
    "java_string_hash",
    "partition_for",
]
