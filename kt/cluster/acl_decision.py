"""The ACL decision of Kafka's AclAuthorizer, as one pure function shared by the
broker's authorizer (kt.broker.security.authorizer) and `kt acl check`, which
explains a decision from the ACLs DescribeAcls returns.

Given the ACLs that apply to a resource (its literal name, the type's literal `*`
and the PREFIXED patterns that prefix the name), for one principal, client host and
operation (Kafka's codes):

1. no ACL at all (for anyone): `allow.everyone.if.no.acl.found` decides;
2. a matching DENY wins (principal equal or `User:*`, host equal or `*`, operation
   equal or ALL);
3. else a matching ALLOW allows, where ALLOW of READ, WRITE, DELETE or ALTER also
   allows DESCRIBE and ALLOW of ALTER_CONFIGS allows DESCRIBE_CONFIGS;
4. else denied.

Super users are decided before this, by whoever knows `super.users`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

ALL, READ, WRITE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 6, 7, 8
DESCRIBE_CONFIGS, ALTER_CONFIGS = 10, 11
DENY, ALLOW = 2, 3
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"

#: operation asked -> the ALLOWed operations that grant it (ALL grants everything)
IMPLIED: dict[int, frozenset[int]] = {
    DESCRIBE: frozenset({DESCRIBE, READ, WRITE, DELETE, ALTER}),
    DESCRIBE_CONFIGS: frozenset({DESCRIBE_CONFIGS, ALTER_CONFIGS}),
}


class Ace(Protocol):
    """What the decision reads of an access control entry (codes as ints)."""

    @property
    def principal(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def operation(self) -> int: ...
    @property
    def permission(self) -> int: ...


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Verdict(Generic[T]):
    """The decision and what made it: `by` is the deciding ACL (as the caller gave
    it), None when the default or the absence of a matching ALLOW decided."""

    allowed: bool
    reason: str
    by: T | None = None


def decide(
    candidates: Sequence[tuple[T, Ace]],
    principal: str,
    host: str,
    operation: int,
    allow_if_no_acls: bool,
) -> Verdict[T]:
    """Kafka's decision over the ACLs that apply to the resource; each candidate is
    (what to report it as, its entry)."""
    if not candidates:
        return Verdict(
            allow_if_no_acls,
            "no ACL applies to the resource, so allow.everyone.if.no.acl.found="
            f"{str(allow_if_no_acls).lower()} decides",
        )
    principals = {principal, WILDCARD_PRINCIPAL}
    hosts = {host, WILDCARD}
    for label, e in candidates:
        if (
            e.permission == DENY
            and e.principal in principals
            and e.host in hosts
            and e.operation in (operation, ALL)
        ):
            return Verdict(False, "a DENY ACL matches (DENY wins over ALLOW)", label)
    accepted = IMPLIED.get(operation, frozenset({operation})) | {ALL}
    for label, e in candidates:
        if (
            e.permission == ALLOW
            and e.principal in principals
            and e.host in hosts
            and e.operation in accepted
        ):
            return Verdict(True, "an ALLOW ACL matches", label)
    return Verdict(False, "ACLs exist on the resource but none allows this")
