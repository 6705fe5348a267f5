"""Kafka's ACL model: resource types, operations, pattern and permission types,
principals, resource patterns, access control entries, and the filters that
DescribeAcls/DeleteAcls and `kafka-acls.sh --list/--remove` match them with.

Codes are Kafka's (`ResourceType`, `AclOperation`, `PatternType`,
`AclPermissionType`); `str()` of patterns and entries is Kafka's `toString`, which
kafka-acls.sh prints.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypeVar

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"


class ResourceType(enum.IntEnum):
    """Kafka's ResourceType codes."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7

    @property
    def pascal(self) -> str:
        """The Pascal-case name ZooKeeper paths and the authorizer log use (`Topic`)."""
        return _pascal(self.name)


class AclOperation(enum.IntEnum):
    """Kafka's AclOperation codes."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
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

    @property
    def pascal(self) -> str:
        """`ClusterAction`, as ACL znodes and the authorizer log write it."""
        return _pascal(self.name)


class PatternType(enum.IntEnum):
    """Kafka's PatternType codes."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class PermissionType(enum.IntEnum):
    """Kafka's AclPermissionType codes."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3

    @property
    def pascal(self) -> str:
        """`Allow`/`Deny`."""
        return _pascal(self.name)


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


_E = TypeVar("_E", bound=enum.IntEnum)


def parse_enum(cls: type[_E], text: str) -> _E:
    """A Kafka enum from its name as SecurityUtils reads it: any case, Pascal or upper
    case without underscores (`IdempotentWrite`, `IDEMPOTENTWRITE`, `read`), or the
    enum name itself (`IDEMPOTENT_WRITE`, which kafka-acls.sh does not take). Raises
    ValueError naming the valid values."""
    key = text.strip().upper().replace("_", "")
    for member in cls:
        if member.name.replace("_", "") == key:
            return member
    raise ValueError(f"unknown {cls.__name__} {text!r}")


def parse_operation_strict(text: str) -> AclOperation:
    """An operation as kafka-acls.sh takes it (`SecurityUtils.operation`): Pascal or
    upper case without underscores; `IDEMPOTENT_WRITE` is refused."""
    if "_" in text:
        raise ValueError(f"unknown AclOperation {text!r}")
    return parse_enum(AclOperation, text)


#: Kafka's AclEntry.supportedOperations (ALL is valid on every type too).
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
        AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE,
                                   AclOperation.DELETE}),
    ResourceType.CLUSTER: frozenset({
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
        AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}  # fmt: skip

#: The error code a denial on each resource type gives (Kafka's AclEntry.authorizationError).
AUTHORIZATION_ERROR: dict[ResourceType, int] = {
    ResourceType.TOPIC: 29,
    ResourceType.GROUP: 30,
    ResourceType.CLUSTER: 31,
    ResourceType.TRANSACTIONAL_ID: 53,
    ResourceType.DELEGATION_TOKEN: 65,
}


@dataclass(frozen=True, slots=True, order=True)
class KafkaPrincipal:
    """`Type:name`, e.g. `User:alice` (the type is case-sensitive, as in Kafka)."""

    type: str
    name: str

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """SecurityUtils.parseKafkaPrincipal: split on the first `:`."""
        kind, sep, name = text.partition(":")
        if not sep or not kind or not name:
            raise ValueError(
                f"expected a string in format principalType:principalName but got {text}"
            )
        return cls(kind, name)

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")
WILDCARD_PRINCIPAL = KafkaPrincipal("User", WILDCARD)


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    """A resource (or set of resources, PREFIXED) ACLs are attached to."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )

    def validate(self) -> None:
        """Kafka's checks on a pattern ACLs are created on (ValueError)."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError(f"Invalid resource type {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise ValueError(f"Invalid pattern type {self.pattern_type.name}")
        if not self.name:
            raise ValueError("Invalid empty resource name")
        if self.resource_type == ResourceType.CLUSTER and self.name != CLUSTER_NAME:
            raise ValueError("The only valid name for the CLUSTER resource is kafka-cluster")
        if "/" in self.name:
            raise ValueError(f"ACL binding contains invalid resource name: {self.name}")


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    """Who may (or may not) do what, from where."""

    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
            f"permissionType={self.permission.name})"
        )


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """An entry attached to a pattern."""

    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Which patterns a DescribeAcls/DeleteAcls filter selects (Kafka's
    ResourcePatternFilter.matches): ANY type, a null name matching every name, pattern
    type ANY (the exact name under any type) or MATCH (the patterns that would apply
    to the name: the literal name, the literal `*` and the prefixes of it)."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def matches(self, pattern: ResourcePattern) -> bool:
        """Whether `pattern` is selected."""
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if (
            self.pattern_type not in (PatternType.ANY, PatternType.MATCH)
            and self.pattern_type != pattern.pattern_type
        ):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if self.pattern_type == PatternType.MATCH:
            if pattern.pattern_type == PatternType.LITERAL:
                return self.name == pattern.name or pattern.name == WILDCARD
            if pattern.pattern_type == PatternType.PREFIXED:
                return self.name.startswith(pattern.name)
        return False


@dataclass(frozen=True, slots=True)
class EntryFilter:
    """Which entries a filter selects: None/ANY fields match everything."""

    principal: str | None
    host: str | None
    operation: AclOperation
    permission: PermissionType

    def matches(self, entry: AccessControlEntry) -> bool:
        """Whether `entry` is selected."""
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission in (PermissionType.ANY, entry.permission)
        )


ANY_ENTRY = EntryFilter(None, None, AclOperation.ANY, PermissionType.ANY)


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """A pattern filter and an entry filter."""

    pattern: ResourcePatternFilter
    entry: EntryFilter = ANY_ENTRY

    def matches(self, binding: AclBinding) -> bool:
        """Whether `binding` is selected."""
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)


def validate_binding(binding: AclBinding) -> None:
    """Kafka's checks before an ACL is created (ValueError with Kafka's message)."""
    binding.pattern.validate()
    entry = binding.entry
    if entry.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise ValueError(f"Invalid operation {entry.operation.name}")
    if entry.permission not in (PermissionType.ALLOW, PermissionType.DENY):
        raise ValueError(f"Invalid permission type {entry.permission.name}")
    KafkaPrincipal.parse(entry.principal)
    if not entry.host:
        raise ValueError("Invalid empty host")


def check_supported(binding: AclBinding) -> None:
    """kafka-acls.sh's check that the operation applies to the resource type."""
    entry = binding.entry
    supported = SUPPORTED_OPERATIONS.get(binding.pattern.resource_type, frozenset())
    if entry.operation != AclOperation.ALL and entry.operation not in supported:
        names = ", ".join(op.pascal for op in sorted(supported))
        raise ValueError(
            f"ResourceType {binding.pattern.resource_type.name} only supports operations {names}"
        )
