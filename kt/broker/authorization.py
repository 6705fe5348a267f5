"""Authorized operations as Kafka reports them without an authorizer.

Metadata (v8+: topics; v8-10: the cluster), DescribeCluster and DescribeGroups
(v3+) can ask for the operations the client may perform on each resource, as a
bitfield with bit `code` set for each AclOperation allowed. Without an authorizer,
as Kafka's AuthHelper.authorizedOperations does then, every operation applicable
to the resource type is allowed; with one, the authorizer decides each. A response
whose request did not ask carries OPERATIONS_NOT_REQUESTED (Integer.MIN_VALUE).

The operation codes are Kafka's AclOperation (`kt.broker.security.acl`); the
operations applicable to each resource type are Kafka's AclEntry.supportedOperations:

- TOPIC: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
- GROUP: READ, DELETE, DESCRIBE
- CLUSTER: CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
  IDEMPOTENT_WRITE
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kt.broker.errors import CodedError
from kt.broker.security.acl import CLUSTER_NAME, ResourceType
from kt.broker.security.acl import AclOperation as AclOp
from kt.protocol import ErrorCode, apis

if TYPE_CHECKING:
    from kt.broker.handlers import RequestContext
    from kt.broker.security.authorizer import AclAuthorizer

#: What an operations field holds when the request did not ask for it.
OPERATIONS_NOT_REQUESTED = -(2**31)


def bitfield(operations: frozenset[AclOp]) -> int:
    """Kafka's Utils.to32BitField: bit `code` set for each operation."""
    return sum(1 << op for op in operations)


_A = AclOp
TOPIC_OPERATIONS = bitfield(
    frozenset({_A.READ, _A.WRITE, _A.CREATE, _A.DELETE, _A.ALTER, _A.DESCRIBE,
               _A.DESCRIBE_CONFIGS, _A.ALTER_CONFIGS})
)  # fmt: skip
GROUP_OPERATIONS = bitfield(frozenset({_A.READ, _A.DELETE, _A.DESCRIBE}))
CLUSTER_OPERATIONS = bitfield(
    frozenset({_A.CREATE, _A.ALTER, _A.DESCRIBE, _A.CLUSTER_ACTION, _A.DESCRIBE_CONFIGS,
               _A.ALTER_CONFIGS, _A.IDEMPOTENT_WRITE})
)  # fmt: skip


# --- authorizing requests ------------------------------------------------------------
#
# With `authorizer.class.name` set, every request is checked as Kafka's KafkaApis
# checks it (kt.broker.security.authorizer has the ACL semantics). The helpers below
# are what handlers call; without an authorizer everything is allowed, as in Kafka.
# Requests of the loopback link (the controller and coordinators talking to their
# own broker, no listener) are the broker's own and are not checked.


class AuthorizationError(CodedError):
    """A request (or the part of it that makes it fail whole) is not authorized."""


def _acl(ctx: RequestContext) -> AclAuthorizer | None:
    if not ctx.listener:
        return None
    authorizer: AclAuthorizer | None = ctx.services.authorizer
    return authorizer


def _request_name(ctx: RequestContext) -> str:
    api = apis.APIS_BY_KEY.get(ctx.header.api_key)
    return api.name if api is not None else str(ctx.header.api_key)


def authorize(
    ctx: RequestContext,
    op: AclOp,
    rtype: ResourceType,
    name: str,
    *,
    log_if_allowed: bool = True,
    log_if_denied: bool = True,
    ref_count: int = 1,
) -> bool:
    """Whether the request's principal may perform `op` on the resource (logged in
    kafka.authorizer.logger as Kafka logs it)."""
    acl = _acl(ctx)
    if acl is None:
        return True
    return acl.authorize(
        ctx.principal, ctx.client_host, op, rtype, name, _request_name(ctx),
        ref_count=ref_count, log_if_allowed=log_if_allowed, log_if_denied=log_if_denied,
    )  # fmt: skip


def authorize_cluster(ctx: RequestContext, op: AclOp, *, log_if_denied: bool = True) -> bool:
    """`op` on the cluster resource."""
    return authorize(ctx, op, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=log_if_denied)


def require_cluster(ctx: RequestContext, op: AclOp) -> None:
    """Kafka's authorizeClusterOperation: raise CLUSTER_AUTHORIZATION_FAILED for the
    whole request when `op` on the cluster is denied."""
    if not authorize_cluster(ctx, op):
        raise AuthorizationError(
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            f"Request {_request_name(ctx)} is not authorized.",
        )


def require(
    ctx: RequestContext, op: AclOp, rtype: ResourceType, name: str, code: ErrorCode
) -> None:
    """Raise `code` for the whole request when `op` on the resource is denied."""
    if not authorize(ctx, op, rtype, name):
        raise AuthorizationError(code, None)


def authorize_by_resource_type(ctx: RequestContext, op: AclOp, rtype: ResourceType) -> bool:
    """Whether `op` is allowed on some resource of the type (KIP-679's idempotence)."""
    acl = _acl(ctx)
    if acl is None:
        return True
    return acl.authorize_by_resource_type(
        ctx.principal, ctx.client_host, op, rtype, _request_name(ctx)
    )


def operations(ctx: RequestContext, rtype: ResourceType, name: str) -> int:
    """The authorized-operations bitfield of a resource (every supported operation
    without an authorizer)."""
    acl = _acl(ctx)
    if acl is None:
        return {ResourceType.TOPIC: TOPIC_OPERATIONS, ResourceType.GROUP: GROUP_OPERATIONS,
                ResourceType.CLUSTER: CLUSTER_OPERATIONS}.get(rtype, 0)  # fmt: skip
    return acl.authorized_operations(ctx.principal, ctx.client_host, rtype, name)
