"""DescribeCluster: the brokers, the controller and the cluster id (KIP-700).

The brokers and the controller are the metadata cache's (what the controller last
told this broker). Only the BROKER endpoint type
is served (v1's endpoint_type 2 asks a KRaft controller, which kt has no
separate listener for): as Kafka's brokers, a controller request is
MISMATCHED_ENDPOINT_TYPE and an unknown type UNSUPPORTED_ENDPOINT_TYPE (both
INVALID_REQUEST in v0). Without an authorizer every cluster operation is allowed.
"""

from __future__ import annotations

from typing import Any

from kt.broker.authorization import OPERATIONS_NOT_REQUESTED, authorize_cluster, operations
from kt.broker.handlers import RequestContext, handles
from kt.broker.handlers.readiness import NOT_READY_TOPIC, not_ready_message
from kt.broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from kt.protocol import ErrorCode, Struct, apis

BROKERS = 1
CONTROLLERS = 2
_ENDPOINT_NAMES = {BROKERS: "BROKER", CONTROLLERS: "CONTROLLER"}


@handles(apis.DESCRIBE_CLUSTER.key, (0, 1))
async def describe_cluster(ctx: RequestContext, request: Struct) -> Any:
    """The live brokers and the controller."""
    s = ctx.services
    endpoint = request.endpoint_type if ctx.version >= 1 else BROKERS
    if endpoint != BROKERS:
        if endpoint not in _ENDPOINT_NAMES:
            code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
            message = f"Unsupported endpoint type {endpoint}"
        else:
            code = ErrorCode.MISMATCHED_ENDPOINT_TYPE
            message = (
                "The request was sent to an endpoint of type BROKER, but we wanted an "
                f"endpoint of type {_ENDPOINT_NAMES[endpoint]}"
            )
        if ctx.version == 0:
            code = ErrorCode.INVALID_REQUEST
        return apis.DESCRIBE_CLUSTER.response(
            throttle_time_ms=0, error_code=code, error_message=message,
            endpoint_type=endpoint, cluster_id=s.node.cluster_id, controller_id=-1,
            brokers=[], cluster_authorized_operations=OPERATIONS_NOT_REQUESTED,
        )  # fmt: skip
    ops = OPERATIONS_NOT_REQUESTED
    if request.include_cluster_authorized_operations:
        ops = (
            operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
            if authorize_cluster(ctx, AclOperation.DESCRIBE)
            else 0
        )
    cache = s.topics.cache
    if not cache.ready:
        # No view of the cluster yet: a retriable error, not an empty cluster.
        return apis.DESCRIBE_CLUSTER.response(
            throttle_time_ms=0, error_code=NOT_READY_TOPIC,
            error_message=not_ready_message(ctx), endpoint_type=BROKERS,
            cluster_id=s.node.cluster_id, controller_id=-1, brokers=[],
            cluster_authorized_operations=OPERATIONS_NOT_REQUESTED,
        )  # fmt: skip
    brokers = []
    for b in cache.alive_brokers():
        ep = ctx.endpoint_of(b)
        if ep is not None:
            brokers.append({"broker_id": b.broker_id, "host": ep.host, "port": ep.port,
                            "rack": b.rack})  # fmt: skip
    return apis.DESCRIBE_CLUSTER.response(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=BROKERS,
        cluster_id=s.node.cluster_id,
        controller_id=cache.controller_id if cache.controller_id is not None else -1,
        brokers=brokers,
        cluster_authorized_operations=ops,
    )
