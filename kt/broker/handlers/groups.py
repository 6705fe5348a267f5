"""Group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
ListGroups, DescribeGroups and DeleteGroups, served by the group coordinator.

This broker coordinates the groups of the `__consumer_offsets` partitions it
leads (the single node: every group); others are answered NOT_COORDINATOR, so
clients run FindCoordinator again. JoinGroup and SyncGroup park until the
rebalance they wait for completes (the connection's later requests wait behind
them, as Kafka mutes the channel).
"""

from __future__ import annotations

from typing import Any

from kt.broker.authorization import (
    OPERATIONS_NOT_REQUESTED,
    authorize,
    authorize_cluster,
    operations,
    require,
)
from kt.broker.groups import GroupCoordinator
from kt.broker.groups.coordinator import JoinRequest
from kt.broker.groups.offsets_log import partition_for
from kt.broker.handlers import RequestContext, handles
from kt.broker.handlers.readiness import NOT_READY_COORDINATOR, not_ready_message, ready
from kt.broker.metadata_store import CONSUMER_OFFSETS, TRANSACTION_STATE
from kt.broker.security.acl import AclOperation, ResourceType
from kt.protocol import ErrorCode, Struct, apis

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
# ListGroups v5's group type of every group this coordinator runs (Kafka's GroupType).
CLASSIC_GROUP_TYPE = "classic"


def require_group(ctx: RequestContext, op: AclOperation, group_id: str) -> None:
    """GROUP_AUTHORIZATION_FAILED for the whole request unless `op` on the group."""
    require(ctx, op, ResourceType.GROUP, group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)


def coordinator(ctx: RequestContext) -> GroupCoordinator:
    """The broker's group coordinator."""
    return ctx.services.groups


def client_host(ctx: RequestContext) -> str:
    """The client address as Kafka prints it (Java's InetAddress.toString)."""
    return "/" + ctx.client_host


@handles(apis.FIND_COORDINATOR.key, (0, 4))
async def find_coordinator(ctx: RequestContext, request: Struct) -> Any:
    """The leader of the group's `__consumer_offsets` partition, or of the
    transactional id's `__transaction_state` partition (creating the topic on first
    use)."""
    version = ctx.version
    key_type = request.key_type if version >= 1 else KEY_TYPE_GROUP
    keys = list(request.coordinator_keys) if version >= 4 else [request.key]
    answers = []
    for key in keys:
        entry: dict[str, Any] = {"key": key, "node_id": -1, "host": "", "port": -1,
                                 "error_code": ErrorCode.NONE, "error_message": None}  # fmt: skip
        if key_type == KEY_TYPE_GROUP and not authorize(
            ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key
        ):
            entry["error_code"] = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif key_type == KEY_TYPE_TRANSACTION and not authorize(
            ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
        ):
            entry["error_code"] = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not ready(ctx):
            # No view of the cluster yet: nobody known to lead the coordinator's
            # partition, and the internal topic must not be "created" again.
            entry.update(error_code=NOT_READY_COORDINATOR, error_message=not_ready_message(ctx))
        elif key_type == KEY_TYPE_GROUP:
            await coordinator(ctx).ensure_topic()
            entry.update(_group_coordinator(ctx, key))
        elif key_type == KEY_TYPE_TRANSACTION:
            await ctx.services.transactions.ensure_topic()
            entry.update(_coordinator_of(ctx, TRANSACTION_STATE, key))
        else:
            entry.update(error_code=ErrorCode.INVALID_REQUEST,
                         error_message=f"Unsupported key type {key_type}")  # fmt: skip
        answers.append(entry)
    if version >= 4:
        return apis.FIND_COORDINATOR.response(throttle_time_ms=0, coordinators=answers)
    a = answers[0]
    return apis.FIND_COORDINATOR.response(
        throttle_time_ms=0,
        error_code=a["error_code"],
        error_message=a["error_message"],
        node_id=a["node_id"],
        host=a["host"],
        port=a["port"],
    )


@handles(apis.JOIN_GROUP.key, (0, 9))
async def join_group(ctx: RequestContext, request: Struct) -> Any:
    """Join a group; answered when the rebalance completes."""
    require_group(ctx, AclOperation.READ, request.group_id)
    version = ctx.version
    req = JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id or "",
        group_instance_id=request.group_instance_id if version >= 5 else None,
        client_id=ctx.client_id,
        client_host=client_host(ctx),
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms
        if version >= 1
        else request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        require_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9,
    )
    result = await coordinator(ctx).join_group(req)
    ok = result.error == ErrorCode.NONE
    protocol_name = result.protocol_name if ok else None
    if protocol_name is None and version < 7:
        protocol_name = ""  # not nullable before v7
    return apis.JOIN_GROUP.response(
        throttle_time_ms=0,
        error_code=result.error,
        generation_id=result.generation if ok else -1,
        protocol_type=result.protocol_type if ok else None,
        protocol_name=protocol_name,
        leader=result.leader if ok else "",
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[
            {"member_id": mid, "group_instance_id": iid, "metadata": meta}
            for mid, iid, meta in result.members
        ],
    )


@handles(apis.SYNC_GROUP.key, (0, 5))
async def sync_group(ctx: RequestContext, request: Struct) -> Any:
    """The member's assignment (the leader's SyncGroup carries everyone's)."""
    require_group(ctx, AclOperation.READ, request.group_id)
    version = ctx.version
    assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
    result = await coordinator(ctx).sync_group(
        request.group_id,
        request.generation_id,
        request.member_id,
        request.group_instance_id if version >= 3 else None,
        request.protocol_type if version >= 5 else None,
        request.protocol_name if version >= 5 else None,
        assignments,
    )
    return apis.SYNC_GROUP.response(
        throttle_time_ms=0,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


@handles(apis.HEARTBEAT.key, (0, 4))
async def heartbeat(ctx: RequestContext, request: Struct) -> Any:
    """Keep the member's session alive; REBALANCE_IN_PROGRESS asks it to rejoin."""
    require_group(ctx, AclOperation.READ, request.group_id)
    error = coordinator(ctx).heartbeat(
        request.group_id,
        request.member_id,
        request.group_instance_id if ctx.version >= 3 else None,
        request.generation_id,
    )
    return apis.HEARTBEAT.response(throttle_time_ms=0, error_code=error)


@handles(apis.LEAVE_GROUP.key, (0, 5))
async def leave_group(ctx: RequestContext, request: Struct) -> Any:
    """Remove one member (v0-2) or a batch of members (v3+, also by instance id)."""
    require_group(ctx, AclOperation.READ, request.group_id)
    version = ctx.version
    if version >= 3:
        leaving = [(m.member_id or "", m.group_instance_id) for m in request.members]
    else:
        leaving = [(request.member_id or "", None)]
    top, errors = coordinator(ctx).leave_group(request.group_id, leaving)
    if version < 3:
        if top == ErrorCode.NONE and errors:
            top = errors[0]
        return apis.LEAVE_GROUP.response(throttle_time_ms=0, error_code=top)
    members = [
        {"member_id": mid, "group_instance_id": iid, "error_code": err}
        for (mid, iid), err in zip(leaving, errors)
    ]
    return apis.LEAVE_GROUP.response(throttle_time_ms=0, error_code=top, members=members)


@handles(apis.LIST_GROUPS.key, (0, 5))
async def list_groups(ctx: RequestContext, request: Struct) -> Any:
    """Every group with its protocol type (and state, v4+; type, v5+), optionally
    filtered by state (v4+) and type (v5+).

    Every group here is a classic group, as with Kafka 3.8's group coordinator
    (KIP-848's consumer groups are not served): a type filter without "classic"
    (compared case-insensitively) lists nothing.
    """
    states = list(request.states_filter) if ctx.version >= 4 else None
    types = {t.lower() for t in request.types_filter} if ctx.version >= 5 else set()
    coord = coordinator(ctx)
    groups = coord.list_groups(states)
    if not authorize_cluster(ctx, AclOperation.DESCRIBE, log_if_denied=False):
        # without DESCRIBE on the cluster, each group needs its own DESCRIBE
        groups = [g for g in groups if authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP,
                                                 g[0], log_if_denied=False)]  # fmt: skip
    if types and CLASSIC_GROUP_TYPE not in types:
        groups = []
    # Kafka lists what is loaded and says that more may follow; a broker with no
    # view of the cluster yet does not know which groups it will coordinate.
    error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if coord.loading else ErrorCode.NONE
    if not ready(ctx):
        error = NOT_READY_COORDINATOR
    return apis.LIST_GROUPS.response(
        throttle_time_ms=0,
        error_code=error,
        groups=[
            {
                "group_id": gid,
                "protocol_type": ptype,
                "group_state": state,
                "group_type": CLASSIC_GROUP_TYPE,
            }
            for gid, ptype, state in groups
        ],
    )


@handles(apis.DESCRIBE_GROUPS.key, (0, 5))
async def describe_groups(ctx: RequestContext, request: Struct) -> Any:
    """State, protocol and members of each group (unknown groups are Dead)."""
    coord = coordinator(ctx)
    want_ops = ctx.version >= 3 and request.include_authorized_operations
    out = []
    for gid in request.groups:
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
            out.append({"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "group_id": gid,
                        "group_state": "", "protocol_type": "", "protocol_data": "",
                        "members": [],
                        "authorized_operations": OPERATIONS_NOT_REQUESTED})  # fmt: skip
            continue
        d = coord.describe_group(gid)
        ops = OPERATIONS_NOT_REQUESTED
        if want_ops and d.error == ErrorCode.NONE:
            ops = operations(ctx, ResourceType.GROUP, gid)
        out.append(
            {
                "error_code": d.error,
                "group_id": d.group_id,
                "group_state": d.state,
                "protocol_type": d.protocol_type,
                "protocol_data": d.protocol,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata,
                        "member_assignment": m.assignment,
                    }
                    for m in d.members
                ],
                "authorized_operations": ops,
            }
        )
    return apis.DESCRIBE_GROUPS.response(throttle_time_ms=0, groups=out)


@handles(apis.DELETE_GROUPS.key, (0, 2))
async def delete_groups(ctx: RequestContext, request: Struct) -> Any:
    """Delete empty groups and their offsets (NON_EMPTY_GROUP while members remain)."""
    names = list(request.groups_names)
    allowed = [g for g in dict.fromkeys(names)
               if authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, g)]  # fmt: skip
    results = coordinator(ctx).delete_groups(allowed)
    for g in names:
        results.setdefault(g, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return apis.DELETE_GROUPS.response(
        throttle_time_ms=0,
        results=[{"group_id": g, "error_code": results[g]} for g in dict.fromkeys(names)],
    )


def _group_coordinator(ctx: RequestContext, group_id: str) -> dict[str, Any]:
    """Where the group's coordinator is: the live leader of its partition."""
    return _coordinator_of(ctx, CONSUMER_OFFSETS, group_id)


def _coordinator_of(ctx: RequestContext, topic: str, key: str) -> dict[str, Any]:
    """The live leader of `key`'s partition of an internal topic."""
    cache = ctx.services.topics.cache
    count = cache.num_partitions(topic)
    if not count:
        return _not_available()
    view = cache.partition(topic, partition_for(key, count))
    leader = cache.broker(view.leader) if view is not None and view.leader >= 0 else None
    ep = ctx.endpoint_of(leader) if leader is not None else None
    if leader is None or ep is None:
        return _not_available()
    return {"node_id": leader.broker_id, "host": ep.host, "port": ep.port}


def _not_available() -> dict[str, Any]:
    return {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
            "error_message": "The coordinator is not available."}  # fmt: skip
