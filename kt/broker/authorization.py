"""Authorized operations as Kafka reports them without an authorizer.

Metadata (v8+: topics; v8-10: the cluster), DescribeCluster and DescribeGroups
(v3+) can ask for the operations the client may perform on each resource, as a
bitfield with bit `code` set for each AclOperation allowed. kt has no authorizer,
so, as Kafka's AuthHelper.authorizedOperations does then, every operation
applicable to the resource type is allowed. A response whose request did not ask
carries OPERATIONS_NOT_REQUESTED (Integer.MIN_VALUE).

The operation codes are Kafka's AclOperation; the operations applicable to each
resource type are Kafka's AclEntry.supportedOperations:

- TOPIC: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
- GROUP: READ, DELETE, DESCRIBE
- CLUSTER: CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
  IDEMPOTENT_WRITE
"""

from __future__ import annotations

import enum

#: What an operations field holds when the request did not ask for it.
OPERATIONS_NOT_REQUESTED = -(2**31)


class AclOperation(enum.IntEnum):
    """Kafka's AclOperation codes (UNKNOWN, ANY and ALL are never reported)."""

    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


def bitfield(operations: frozenset[AclOperation]) -> int:
    """Kafka's Utils.to32BitField: bit `code` set for each operation."""
    return sum(1 << op for op in operations)


_A = AclOperation
TOPIC_OPERATIONS = bitfield(
    frozenset({_A.READ, _A.WRITE, _A.CREATE, _A.DELETE, _A.ALTER, _A.DESCRIBE,
               _A.DESCRIBE_CONFIGS, _A.ALTER_CONFIGS})
)  # fmt: skip
GROUP_OPERATIONS = bitfield(frozenset({_A.READ, _A.DELETE, _A.DESCRIBE}))
CLUSTER_OPERATIONS = bitfield(
    frozenset({_A.CREATE, _A.ALTER, _A.DESCRIBE, _A.CLUSTER_ACTION, _A.DESCRIBE_CONFIGS,
               _A.ALTER_CONFIGS, _A.IDEMPOTENT_WRITE})
)  # fmt: skip
