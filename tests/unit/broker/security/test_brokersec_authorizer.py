"""The ACL model and the authorizer: Kafka's AclAuthorizer semantics (literal, `*`,
prefixed, implied operations, DENY over ALLOW, hosts, super users, the no-ACL
default, authorizeByResourceType), its bitfields and its log line."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kt.broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    EntryFilter,
    KafkaPrincipal,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    check_supported,
    parse_enum,
    parse_operation_strict,
    validate_binding,
)
from kt.broker.security.authorizer import (
    AUDIT_LOGGER_NAME,
    TRACE,
    AclAuthorizer,
    parse_super_users,
)

Op, RT, PT, Perm = AclOperation, ResourceType, PatternType, PermissionType
ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.5"


def topic(name: str, ptype: PatternType = PT.LITERAL) -> ResourcePattern:
    return ResourcePattern(RT.TOPIC, name, ptype)


def ace(principal: str, op: AclOperation, perm: PermissionType = Perm.ALLOW,
        host: str = "*") -> AccessControlEntry:  # fmt: skip
    return AccessControlEntry(principal, host, op, perm)


def auth(*acls: tuple[ResourcePattern, AccessControlEntry], **kw: object) -> AclAuthorizer:
    a = AclAuthorizer(**kw)  # type: ignore[arg-type]
    by: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for pattern, entry in acls:
        by.setdefault(pattern, set()).add(entry)
    for pattern, entries in by.items():
        a.set_acls(pattern, entries)
    return a


def allowed(a: AclAuthorizer, principal: str, op: AclOperation, name: str = "orders",
            rtype: ResourceType = RT.TOPIC, host: str = HOST) -> bool:  # fmt: skip
    return a.explain(principal, host, op, rtype, name).allowed


def test_no_acls_denies_unless_allow_everyone() -> None:
    assert not allowed(auth(), ALICE, Op.READ)
    assert allowed(auth(allow_if_no_acls=True), ALICE, Op.READ)
    # any ACL on the resource, for anyone, switches the default off
    a = auth((topic("orders"), ace(BOB, Op.READ)), allow_if_no_acls=True)
    assert not allowed(a, ALICE, Op.READ)
    assert allowed(a, ALICE, Op.READ, name="other")


def test_literal_wildcard_and_prefixed_patterns_apply() -> None:
    a = auth((topic("orders"), ace(ALICE, Op.READ)), (topic("*"), ace(BOB, Op.WRITE)),
             (topic("pay-", PT.PREFIXED), ace(ALICE, Op.WRITE)))  # fmt: skip
    assert allowed(a, ALICE, Op.READ)
    assert not allowed(a, ALICE, Op.READ, name="orders2")
    assert allowed(a, BOB, Op.WRITE, name="anything")
    assert allowed(a, ALICE, Op.WRITE, name="pay-eu")
    assert allowed(a, ALICE, Op.WRITE, name="pay-")
    assert not allowed(a, ALICE, Op.WRITE, name="pay")
    # a topic literally named "*" is not a prefix pattern
    assert not allowed(a, ALICE, Op.WRITE, name="xpay-")


@pytest.mark.parametrize(
    ("granted", "asked", "result"),
    [
        (Op.READ, Op.DESCRIBE, True), (Op.WRITE, Op.DESCRIBE, True),
        (Op.DELETE, Op.DESCRIBE, True), (Op.ALTER, Op.DESCRIBE, True),
        (Op.CREATE, Op.DESCRIBE, False), (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, True),
        (Op.DESCRIBE, Op.READ, False), (Op.ALL, Op.ALTER_CONFIGS, True),
        (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, False),
    ],
)  # fmt: skip
def test_implied_operations(granted: AclOperation, asked: AclOperation, result: bool) -> None:
    assert allowed(auth((topic("orders"), ace(ALICE, granted))), ALICE, asked) is result


def test_deny_beats_allow_and_does_not_imply() -> None:
    a = auth((topic("orders"), ace(ALICE, Op.ALL)),
             (topic("ord", PT.PREFIXED), ace(ALICE, Op.WRITE, Perm.DENY)))  # fmt: skip
    d = a.explain(ALICE, HOST, Op.WRITE, RT.TOPIC, "orders")
    assert not d.allowed and d.binding is not None
    assert d.binding.pattern == topic("ord", PT.PREFIXED)
    assert allowed(a, ALICE, Op.READ)
    # DENY READ does not deny DESCRIBE (implication is for ALLOW only)
    b = auth(
        (topic("orders"), ace(ALICE, Op.WRITE)), (topic("orders"), ace(ALICE, Op.READ, Perm.DENY))
    )
    assert allowed(b, ALICE, Op.DESCRIBE) and not allowed(b, ALICE, Op.READ)


def test_wildcard_principal_and_hosts() -> None:
    a = auth((topic("orders"), ace("User:*", Op.READ, host="10.0.0.5")),
             (topic("orders"), ace("User:*", Op.READ, Perm.DENY, host="10.0.0.66")))  # fmt: skip
    assert allowed(a, ALICE, Op.READ)
    assert not allowed(a, ALICE, Op.READ, host="10.0.0.6")
    assert not allowed(a, BOB, Op.READ, host="10.0.0.66")
    # principal types are compared too
    assert not allowed(auth((topic("orders"), ace("Group:alice", Op.READ))), ALICE, Op.READ)


def test_super_users_bypass_deny() -> None:
    a = auth((topic("orders"), ace("User:*", Op.ALL, Perm.DENY)),
             super_users=parse_super_users(" User:admin ; User:CN=broker1,OU=kafka "))  # fmt: skip
    assert allowed(a, "User:admin", Op.DELETE)
    assert allowed(a, "User:CN=broker1,OU=kafka", Op.WRITE)
    assert not allowed(a, ALICE, Op.READ)
    d = a.explain("User:admin", HOST, Op.READ, RT.TOPIC, "orders")
    assert "super user" in d.reason
    with pytest.raises(ValueError, match="principalType:principalName"):
        parse_super_users("admin")


def test_authorize_by_resource_type() -> None:
    w = Op.WRITE
    assert not auth().authorize_by_resource_type(ALICE, HOST, w, RT.TOPIC, "InitProducerId")
    a = auth((topic("t1"), ace(ALICE, w)))
    assert a.authorize_by_resource_type(ALICE, HOST, w, RT.TOPIC, "InitProducerId")
    assert not a.authorize_by_resource_type(BOB, HOST, w, RT.TOPIC, "InitProducerId")
    # dominated by a literal deny on the same name / a prefixed deny on a prefix
    b = auth((topic("t1"), ace(ALICE, w)), (topic("t1"), ace(ALICE, w, Perm.DENY)))
    assert not b.authorize_by_resource_type(ALICE, HOST, w, RT.TOPIC, "x")
    c = auth((topic("pay-eu", PT.PREFIXED), ace(ALICE, w)),
             (topic("pay", PT.PREFIXED), ace("User:*", Op.ALL, Perm.DENY)))  # fmt: skip
    assert not c.authorize_by_resource_type(ALICE, HOST, w, RT.TOPIC, "x")
    # a literal * deny denies all, even with allow.everyone.if.no.acl.found
    d = auth((topic("*"), ace(ALICE, w, Perm.DENY)), allow_if_no_acls=True)
    assert not d.authorize_by_resource_type(ALICE, HOST, w, RT.TOPIC, "x")
    assert auth(allow_if_no_acls=True).authorize_by_resource_type(ALICE, HOST, w, RT.TOPIC, "x")
    # no implication: READ does not count for WRITE
    assert not auth((topic("t"), ace(ALICE, Op.READ))).authorize_by_resource_type(
        ALICE, HOST, w, RT.TOPIC, "x")  # fmt: skip


def test_authorized_operations_bitfields_are_kafkas_worked_values() -> None:
    everyone = auth(allow_if_no_acls=True)
    assert everyone.authorized_operations(ALICE, HOST, RT.TOPIC, "t") == 3576
    assert everyone.authorized_operations(ALICE, HOST, RT.GROUP, "g") == 328
    assert everyone.authorized_operations(ALICE, HOST, RT.CLUSTER, "kafka-cluster") == 8096
    read_only = auth((topic("t"), ace(ALICE, Op.READ)))
    assert read_only.authorized_operations(ALICE, HOST, RT.TOPIC, "t") == 264


def test_the_audit_line_is_kafkas(caplog: pytest.LogCaptureFixture) -> None:
    a = auth((topic("orders"), ace(ALICE, Op.READ)))
    caplog.set_level(TRACE, logger=AUDIT_LOGGER_NAME)
    assert not a.authorize(ALICE, "10.0.0.5", Op.WRITE, RT.TOPIC, "orders", "Produce")
    assert a.authorize(ALICE, "10.0.0.5", Op.READ, RT.TOPIC, "orders", "Fetch", ref_count=2)
    a.authorize(BOB, "10.0.0.5", Op.DESCRIBE, RT.TOPIC, "orders", "Metadata", log_if_denied=False)
    a.authorize_by_resource_type(BOB, "10.0.0.5", Op.WRITE, RT.TOPIC, "InitProducerId")
    lines = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert lines == [
        (AUDIT_LOGGER_NAME, logging.INFO,
         "Principal = User:alice is Denied Operation = Write from host = 10.0.0.5 on resource "
         "= Topic:LITERAL:orders for request = Produce with resourceRefCount = 1"),
        (AUDIT_LOGGER_NAME, logging.DEBUG,
         "Principal = User:alice is Allowed Operation = Read from host = 10.0.0.5 on resource "
         "= Topic:LITERAL:orders for request = Fetch with resourceRefCount = 2"),
        (AUDIT_LOGGER_NAME, TRACE,
         "Principal = User:bob is Denied Operation = Describe from host = 10.0.0.5 on "
         "resource = Topic:LITERAL:orders for request = Metadata with resourceRefCount = 1"),
        (AUDIT_LOGGER_NAME, logging.INFO,
         "Principal = User:bob is Denied Operation = Write from host = 10.0.0.5 on resource "
         "= Topic:UNKNOWN:NONE for request = InitProducerId with resourceRefCount = 0"),
    ]  # fmt: skip


def test_from_props() -> None:
    a = AclAuthorizer.from_props(
        {"super.users": "User:admin", "allow.everyone.if.no.acl.found": "TRUE"}
    )
    assert a.super_users == {"User:admin"} and a.allow_if_no_acls
    with pytest.raises(ValueError, match=r"super\.users"):
        AclAuthorizer.from_props({"super.users": "nobody"})
    with pytest.raises(ValueError, match=r"allow\.everyone"):
        AclAuthorizer.from_props({"allow.everyone.if.no.acl.found": "yes"})


# --- the model -------------------------------------------------------------------------


def test_kafka_strings() -> None:
    assert str(topic("orders")) == (
        "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
    )
    assert str(ace(ALICE, Op.READ)) == (
        "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
    )
    assert RT.TRANSACTIONAL_ID.pascal == "TransactionalId"
    assert Op.IDEMPOTENT_WRITE.pascal == "IdempotentWrite"
    assert str(KafkaPrincipal.parse("User:CN=a:b")) == "User:CN=a:b"


@pytest.mark.parametrize("text", ["Read", "READ", "read", "IdempotentWrite", "IDEMPOTENTWRITE"])
def test_operation_names_as_kafka_acls_takes_them(text: str) -> None:
    assert parse_operation_strict(text) in (Op.READ, Op.IDEMPOTENT_WRITE)


def test_operation_with_underscore_is_refused_by_the_cli_parser() -> None:
    with pytest.raises(ValueError):
        parse_operation_strict("IDEMPOTENT_WRITE")
    assert parse_enum(AclOperation, "IDEMPOTENT_WRITE") == Op.IDEMPOTENT_WRITE


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (AclBinding(ResourcePattern(RT.CLUSTER, "c", PT.LITERAL), ace(ALICE, Op.ALTER)),
         "The only valid name for the CLUSTER resource is kafka-cluster"),
        (AclBinding(topic(""), ace(ALICE, Op.READ)), "Invalid empty resource name"),
        (AclBinding(topic("a/b"), ace(ALICE, Op.READ)),
         "ACL binding contains invalid resource name: a/b"),
        (AclBinding(topic("t", PT.MATCH), ace(ALICE, Op.READ)), "Invalid pattern type MATCH"),
        (AclBinding(topic("t"), ace("alice", Op.READ)), "principalType:principalName"),
        (AclBinding(topic("t"), ace(ALICE, Op.ANY)), "Invalid operation ANY"),
    ],
)  # fmt: skip
def test_invalid_bindings(binding: AclBinding, message: str) -> None:
    with pytest.raises(ValueError) as info:
        validate_binding(binding)
    assert message in str(info.value)


def test_supported_operations_check() -> None:
    group_write = AclBinding(ResourcePattern(RT.GROUP, "g", PT.LITERAL), ace(ALICE, Op.WRITE))
    with pytest.raises(ValueError, match="ResourceType GROUP only supports operations"):
        check_supported(group_write)
    check_supported(AclBinding(topic("t"), ace(ALICE, Op.ALL)))


def test_filters_match_as_kafkas() -> None:
    lit, star, pre = topic("orders"), topic("*"), topic("ord", PT.PREFIXED)
    other = ResourcePattern(RT.GROUP, "orders", PT.LITERAL)
    f = ResourcePatternFilter
    match = f(RT.TOPIC, "orders", PT.MATCH)
    assert [match.matches(p) for p in (lit, star, pre, other)] == [True, True, True, False]
    anyf = f(RT.ANY, "orders", PT.ANY)
    assert [anyf.matches(p) for p in (lit, star, pre, other)] == [True, False, False, True]
    literal = f(RT.TOPIC, None, PT.LITERAL)
    assert [literal.matches(p) for p in (lit, star, pre)] == [True, True, False]
    assert f(RT.TOPIC, "ord", PT.PREFIXED).matches(pre)
    ef = EntryFilter(ALICE, None, Op.ANY, Perm.DENY)
    assert ef.matches(ace(ALICE, Op.READ, Perm.DENY)) and not ef.matches(ace(ALICE, Op.READ))
    a = auth((lit, ace(ALICE, Op.READ)), (pre, ace(BOB, Op.WRITE)))
    got = a.bindings(
        AclBindingFilter(f(RT.TOPIC, "orders", PT.MATCH), EntryFilter(BOB, None, Op.ANY, Perm.ANY))
    )
    assert got == [AclBinding(pre, ace(BOB, Op.WRITE))]
    assert len(a.bindings()) == 2


# --- a reference model, property-checked ------------------------------------------------

_names = st.sampled_from(["a", "ab", "abc", "b", "*"])
_ptypes = st.sampled_from([PT.LITERAL, PT.PREFIXED])
_ops = st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALL, Op.ALTER])
_principals = st.sampled_from([ALICE, BOB, "User:*"])
_acls = st.lists(st.tuples(_names, _ptypes, _principals, _ops,
                           st.sampled_from([Perm.ALLOW, Perm.DENY]),
                           st.sampled_from(["*", HOST, "10.9.9.9"])), max_size=8)  # fmt: skip


Acl = tuple[str, PatternType, str, AclOperation, PermissionType, str]


def _reference(
    acls: list[Acl], principal: str, op: AclOperation, name: str, allow_default: bool
) -> bool:
    def applies(n: str, pt: PatternType) -> bool:
        if pt == PT.LITERAL:
            return n in (name, "*")
        return name.startswith(n)  # a prefixed "*" is a plain prefix

    cands = [x for x in acls if applies(x[0], x[1])]
    if not cands:
        return allow_default

    def who(p: str, h: str) -> bool:
        return p in (principal, "User:*") and h in (HOST, "*")

    if any(x[4] == Perm.DENY and who(x[2], x[5]) and x[3] in (op, Op.ALL) for x in cands):
        return False
    implied = {Op.DESCRIBE: {Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}}.get(op, {op})
    return any(x[4] == Perm.ALLOW and who(x[2], x[5]) and (x[3] in implied or x[3] == Op.ALL)
               for x in cands)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(_acls, _principals.filter(lambda p: p != "User:*"), _ops.filter(lambda o: o != Op.ALL),
       st.sampled_from(["a", "ab", "abc", "b", "zz"]), st.booleans())  # fmt: skip
def test_authorizer_agrees_with_a_reference_model(
    acls: list[tuple[str, PatternType, str, AclOperation, PermissionType, str]],
    principal: str, op: AclOperation, name: str, allow_default: bool,
) -> None:  # fmt: skip
    a = auth(*[(ResourcePattern(RT.TOPIC, n, pt), ace(p, o, perm, h))
               for n, pt, p, o, perm, h in acls], allow_if_no_acls=allow_default)  # fmt: skip
    assert allowed(a, principal, op, name=name) == _reference(acls, principal, op, name,
                                                              allow_default)  # fmt: skip
