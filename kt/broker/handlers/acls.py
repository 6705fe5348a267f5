"""CreateAcls (30), DescribeAcls (29) and DeleteAcls (31), as Kafka's AclApis.

ACLs are stored in Kafka's ZooKeeper layout (kt.broker.security.acl_store): every
broker's authorizer follows the change notifications, and this broker's own cache
takes the change at once. ALTER on the cluster creates and deletes, DESCRIBE
describes; without an authorizer the answer is SECURITY_DISABLED.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kt.broker.authorization import require_cluster
from kt.broker.errors import InvalidRequestError, SecurityDisabledError, error_code_for
from kt.broker.handlers import RequestContext, handles
from kt.broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    EntryFilter,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    validate_binding,
)
from kt.broker.security.acl_store import AclUpdateError, CoordinationAclStore
from kt.broker.security.authorizer import AclAuthorizer
from kt.protocol import ErrorCode, Struct, apis

_NO_AUTHORIZER = "No Authorizer is configured."


def _authorizer(ctx: RequestContext, message: str = _NO_AUTHORIZER) -> AclAuthorizer:
    """The authorizer; SECURITY_DISABLED for the whole request without one (the
    dispatcher answers it: every creation or filter gets it, as Kafka's)."""
    authorizer: AclAuthorizer | None = ctx.services.authorizer
    if authorizer is None:
        raise SecurityDisabledError(message)
    return authorizer


def _store(ctx: RequestContext) -> CoordinationAclStore:
    return CoordinationAclStore(ctx.services.cluster.cluster_store.store)


def _enum(cls: Any, value: int) -> Any:
    try:
        return cls(value)
    except ValueError:
        return cls.UNKNOWN


def _filter(ctx: RequestContext, f: Struct) -> AclBindingFilter:
    ptype = _enum(PatternType, f.pattern_type_filter) if ctx.version >= 1 else PatternType.LITERAL
    return AclBindingFilter(
        ResourcePatternFilter(_enum(ResourceType, f.resource_type_filter),
                              f.resource_name_filter, ptype),
        EntryFilter(f.principal_filter, f.host_filter, _enum(AclOperation, f.operation),
                    _enum(PermissionType, f.permission_type)),
    )  # fmt: skip


def _filter_problem(flt: AclBindingFilter) -> str | None:
    unknown = (
        flt.pattern.resource_type == ResourceType.UNKNOWN
        or flt.pattern.pattern_type == PatternType.UNKNOWN
        or flt.entry.operation == AclOperation.UNKNOWN
        or flt.entry.permission == PermissionType.UNKNOWN
    )
    return "The filter contains UNKNOWN elements" if unknown else None


Entries = frozenset[AccessControlEntry]


def _adding(entry: AccessControlEntry) -> Callable[[Entries], Entries]:
    return lambda current: current | {entry}


def _removing(gone: Entries) -> Callable[[Entries], Entries]:
    return lambda current: current - gone


@handles(apis.CREATE_ACLS.key, (0, 3))
async def create_acls(ctx: RequestContext, request: Struct) -> Any:
    """Create each ACL; one result per creation, in order."""
    authorizer = _authorizer(ctx)
    # Kafka's error response: one result per creation.
    require_cluster(ctx, AclOperation.ALTER)
    store = _store(ctx)
    results = []
    for c in request.creations:
        ptype = (_enum(PatternType, c.resource_pattern_type) if ctx.version >= 1
                 else PatternType.LITERAL)  # fmt: skip
        binding = AclBinding(
            ResourcePattern(_enum(ResourceType, c.resource_type), c.resource_name, ptype),
            AccessControlEntry(c.principal, c.host, _enum(AclOperation, c.operation),
                               _enum(PermissionType, c.permission_type)),
        )  # fmt: skip
        try:
            validate_binding(binding)
        except ValueError as exc:
            # Kafka's checks, with Kafka's message: an invalid request.
            invalid = InvalidRequestError(str(exc))
            results.append(
                {"error_code": error_code_for(invalid), "error_message": invalid.message}
            )
            continue
        try:
            await store.update(binding.pattern, _adding(binding.entry))
        except AclUpdateError as exc:
            # kept racing other writers: no code of its own (UNKNOWN_SERVER_ERROR)
            results.append({"error_code": error_code_for(exc), "error_message": str(exc)})
            continue
        authorizer.set_acls(binding.pattern, await store.read(binding.pattern))
        results.append({"error_code": ErrorCode.NONE, "error_message": None})
    return apis.CREATE_ACLS.response(throttle_time_ms=0, results=results)


@handles(apis.DESCRIBE_ACLS.key, (0, 3))
async def describe_acls(ctx: RequestContext, request: Struct) -> Any:
    """The ACLs the filter selects, grouped by resource pattern."""
    authorizer = _authorizer(ctx, "No Authorizer is configured on the broker")
    require_cluster(ctx, AclOperation.DESCRIBE)
    flt = _filter(ctx, request)
    problem = _filter_problem(flt)
    if problem is not None:
        raise InvalidRequestError(problem)
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in authorizer.bindings(flt):
        grouped.setdefault(b.pattern, []).append(b.entry)
    resources = [
        {"resource_type": p.resource_type, "resource_name": p.name,
         "pattern_type": p.pattern_type,
         "acls": [{"principal": e.principal, "host": e.host, "operation": e.operation,
                   "permission_type": e.permission} for e in entries]}
        for p, entries in grouped.items()
    ]  # fmt: skip
    return apis.DESCRIBE_ACLS.response(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                       error_message=None, resources=resources)  # fmt: skip


@handles(apis.DELETE_ACLS.key, (0, 3))
async def delete_acls(ctx: RequestContext, request: Struct) -> Any:
    """Delete what each filter selects; each filter lists the ACLs it deleted."""
    authorizer = _authorizer(ctx)
    # Kafka's error response: one result per filter.
    require_cluster(ctx, AclOperation.ALTER)
    store = _store(ctx)
    out = []
    for f in request.filters:
        flt = _filter(ctx, f)
        problem = _filter_problem(flt)
        if problem is not None:
            out.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": problem,
                        "matching_acls": []})  # fmt: skip
            continue
        matched = authorizer.bindings(flt)
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for b in matched:
            by_pattern.setdefault(b.pattern, set()).add(b.entry)
        for pattern, gone in by_pattern.items():
            await store.update(pattern, _removing(frozenset(gone)))
            authorizer.set_acls(pattern, await store.read(pattern))
        out.append({
            "error_code": ErrorCode.NONE, "error_message": None,
            "matching_acls": [
                {"error_code": ErrorCode.NONE, "error_message": None,
                 "resource_type": b.pattern.resource_type, "resource_name": b.pattern.name,
                 "pattern_type": b.pattern.pattern_type, "principal": b.entry.principal,
                 "host": b.entry.host, "operation": b.entry.operation,
                 "permission_type": b.entry.permission}
                for b in matched
            ],
        })  # fmt: skip
    return apis.DELETE_ACLS.response(throttle_time_ms=0, filter_results=out)
