"""An authorizer with the semantics of Kafka's ZooKeeper-mode AclAuthorizer.

A request is authorized for a principal, the client's address and an operation on
one resource (always named literally). The decision (`AclAuthorizer.explain`, which
also says *why*, for `kt acl check`):

1. a super user (`super.users`) is allowed, whatever the ACLs say;
2. the candidate ACLs are those on the literal name, on the literal `*` of the
   type, and on every PREFIXED pattern that is a prefix of the name; with none at
   all (for any principal) the answer is `allow.everyone.if.no.acl.found`;
3. a matching DENY wins (principal equal or `User:*`, host equal or `*`, operation
   equal or ALL);
4. else a matching ALLOW allows, where an ALLOW of READ, WRITE, DELETE or ALTER also
   allows DESCRIBE and one of ALTER_CONFIGS allows DESCRIBE_CONFIGS (DENY does not
   imply);
5. else denied.

Every decision is logged as Kafka's authorizer logs it, in its own logger
`kafka.authorizer.logger` (denied at INFO, allowed at DEBUG, the checks a handler
makes only to filter or probe at TRACE), so "who tried what" can be answered after
an incident.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kt.broker.security.acl import (
    SUPPORTED_OPERATIONS,
    WILDCARD,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    KafkaPrincipal,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from kt.cluster.acl_decision import decide

AUDIT_LOGGER_NAME = "kafka.authorizer.logger"
audit_log = logging.getLogger(AUDIT_LOGGER_NAME)
#: Kafka logs the checks nobody asked to see at TRACE, below DEBUG.
TRACE = 5
logging.addLevelName(TRACE, "TRACE")

#: `authorizer.class.name` values that mean this authorizer (Kafka's class names).
AUTHORIZER_ALIASES = frozenset({
    "kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer",
    "AclAuthorizer", "kt",
})  # fmt: skip

_IMPLIED: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ,
                                      AclOperation.WRITE, AclOperation.DELETE,
                                      AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS,
                                              AclOperation.ALTER_CONFIGS}),
}  # fmt: skip


def make_authorizer(props: Mapping[str, str]) -> AclAuthorizer | None:
    """The authorizer `authorizer.class.name` asks for: none when empty (Kafka's
    default: everything allowed), the ACL authorizer for Kafka's class names; any
    other class is a ValueError naming the key."""
    name = props.get("authorizer.class.name", "").strip()
    if not name:
        return None
    if name not in AUTHORIZER_ALIASES:
        raise ValueError(
            f"authorizer.class.name={name}: kt's broker has the ACL authorizer only "
            "(kafka.security.authorizer.AclAuthorizer)"
        )
    return AclAuthorizer.from_props(props)


@dataclass(frozen=True, slots=True)
class Decision:
    """An authorization result and what decided it: `binding` is the ACL that did,
    if one did; `reason` says it in words."""

    allowed: bool
    reason: str
    binding: AclBinding | None = None


def parse_super_users(value: str) -> frozenset[str]:
    """`super.users`: `;`-separated principals, each trimmed (ValueError if one is
    not `Type:name`)."""
    out = set()
    for part in value.split(";"):
        part = part.strip()
        if part:
            out.add(str(KafkaPrincipal.parse(part)))
    return frozenset(out)


class AclAuthorizer:
    """ACL matching over an in-memory cache of every pattern's entries (the cache
    follows the store: see `acl_store`)."""

    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acls: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acls = allow_if_no_acls
        # type -> name -> entries, for LITERAL and PREFIXED patterns apart
        self._literal: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {}
        self._prefixed: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {}

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> AclAuthorizer:
        """The authorizer a broker's `super.users` and `allow.everyone.if.no.acl.found`
        configure (ValueError naming the key when malformed)."""
        try:
            supers = parse_super_users(props.get("super.users", ""))
        except ValueError as exc:
            raise ValueError(f"super.users: {exc}") from None
        allow = props.get("allow.everyone.if.no.acl.found", "false").strip().lower()
        if allow not in ("true", "false"):
            raise ValueError(f"allow.everyone.if.no.acl.found={allow!r} is not true or false")
        return cls(supers, allow == "true")

    # --- the cache ----------------------------------------------------------------

    def set_acls(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """Replace the entries of `pattern` (none: the pattern is forgotten)."""
        table = self._literal if pattern.pattern_type == PatternType.LITERAL else self._prefixed
        by_name = table.setdefault(pattern.resource_type, {})
        frozen = frozenset(entries)
        if frozen:
            by_name[pattern.name] = frozen
        else:
            by_name.pop(pattern.name, None)

    def acls(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        """The entries of exactly `pattern`."""
        table = self._literal if pattern.pattern_type == PatternType.LITERAL else self._prefixed
        return table.get(pattern.resource_type, {}).get(pattern.name, frozenset())

    def bindings(self, flt: AclBindingFilter | None = None) -> list[AclBinding]:
        """Every ACL `flt` selects (all without a filter), sorted."""
        out = []
        for pattern_type, table in ((PatternType.LITERAL, self._literal),
                                    (PatternType.PREFIXED, self._prefixed)):  # fmt: skip
            for rtype, by_name in table.items():
                for name, entries in by_name.items():
                    pattern = ResourcePattern(rtype, name, pattern_type)
                    for entry in entries:
                        binding = AclBinding(pattern, entry)
                        if flt is None or flt.matches(binding):
                            out.append(binding)
        return sorted(out)

    def _candidates(self, rtype: ResourceType, name: str) -> list[AclBinding]:
        out: list[AclBinding] = []
        literal = self._literal.get(rtype, {})
        for lit in {name, WILDCARD}:
            for entry in literal.get(lit, ()):
                out.append(AclBinding(ResourcePattern(rtype, lit, PatternType.LITERAL), entry))
        prefixed = self._prefixed.get(rtype, {})
        if prefixed:
            for end in range(1, len(name) + 1):
                for entry in prefixed.get(name[:end], ()):
                    pat = ResourcePattern(rtype, name[:end], PatternType.PREFIXED)
                    out.append(AclBinding(pat, entry))
        return sorted(out)

    # --- decisions ----------------------------------------------------------------

    def explain(
        self, principal: str, host: str, operation: AclOperation, rtype: ResourceType, name: str
    ) -> Decision:
        """Whether `principal` from `host` may perform `operation` on the resource,
        and which ACL (or default) decided."""
        if principal in self.super_users:
            return Decision(True, f"{principal} is a super user")
        candidates = self._candidates(rtype, name)
        verdict = decide(
            [(b, b.entry) for b in candidates], principal, host, operation, self.allow_if_no_acls
        )
        return Decision(verdict.allowed, verdict.reason, verdict.by)

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        rtype: ResourceType,
        name: str,
        request: str,
        *,
        ref_count: int = 1,
        log_if_allowed: bool = True,
        log_if_denied: bool = True,
    ) -> bool:
        """Decide and log as Kafka's authorizer does."""
        allowed = self.explain(principal, host, operation, rtype, name).allowed
        resource = f"{rtype.pascal}:{PatternType.LITERAL.name}:{name}"
        _audit(principal, allowed, operation, host, resource, request, ref_count,
               log_if_allowed, log_if_denied)  # fmt: skip
        return allowed

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, rtype: ResourceType,
        request: str,
    ) -> bool:  # fmt: skip
        """Whether the principal may perform `operation` on *some* resource of the type
        (Kafka's authorizeByResourceType, used by InitProducerId for idempotence): an
        ALLOW (literal or prefixed; no implication) not dominated by a DENY on the same
        literal name or on a prefix of it; a literal `*` DENY denies everything."""
        allowed = self._by_resource_type(principal, host, operation, rtype)
        resource = f"{rtype.pascal}:{PatternType.UNKNOWN.name}:NONE"
        _audit(principal, allowed, operation, host, resource, request, 0, True, True)
        return allowed

    def _by_resource_type(
        self, principal: str, host: str, operation: AclOperation, rtype: ResourceType
    ) -> bool:
        if principal in self.super_users:
            return True
        principals = {principal, str(KafkaPrincipal("User", WILDCARD))}
        hosts = {host, WILDCARD}
        ops = {operation, AclOperation.ALL}

        def matching(entries: Iterable[AccessControlEntry], perm: PermissionType) -> bool:
            return any(e.permission == perm and e.principal in principals and e.host in hosts
                       and e.operation in ops for e in entries)  # fmt: skip

        literal = self._literal.get(rtype, {})
        prefixed = self._prefixed.get(rtype, {})
        if matching(literal.get(WILDCARD, ()), PermissionType.DENY):
            return False
        if self.allow_if_no_acls:
            return True
        deny_literal = {n for n, es in literal.items() if matching(es, PermissionType.DENY)}
        deny_prefixed = {n for n, es in prefixed.items() if matching(es, PermissionType.DENY)}
        allows = [(n, True) for n, es in literal.items() if matching(es, PermissionType.ALLOW)]
        allows += [(n, False) for n, es in prefixed.items() if matching(es, PermissionType.ALLOW)]
        for name, is_literal in allows:
            if is_literal and name in deny_literal:
                continue
            if any(name[:end] in deny_prefixed for end in range(1, len(name) + 1)):
                continue
            return True
        return False

    def authorized_operations(
        self, principal: str, host: str, rtype: ResourceType, name: str
    ) -> int:
        """Kafka's authorized-operations bitfield: bit `code` for each operation of the
        type the principal may perform (checked without logging above TRACE)."""
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(rtype, frozenset()):
            allowed = self.explain(principal, host, op, rtype, name).allowed
            if allowed:
                bits |= 1 << op
        return bits


def _audit(principal: str, allowed: bool, operation: AclOperation, host: str, resource: str,
           request: str, ref_count: int, log_if_allowed: bool,
           log_if_denied: bool) -> None:  # fmt: skip
    if allowed:
        level = logging.DEBUG if log_if_allowed else TRACE
    else:
        level = logging.INFO if log_if_denied else TRACE
    if audit_log.isEnabledFor(level):
        audit_log.log(
            level,
            "Principal = %s is %s Operation = %s from host = %s on resource = %s for request "
            "= %s with resourceRefCount = %d",
            principal, "Allowed" if allowed else "Denied", operation.pascal, host, resource,
            request, ref_count,
        )  # fmt: skip
