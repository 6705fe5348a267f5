"""The one error path, per fix (issue 18 §3): whole-request refusals are raised and
answered by the dispatcher with the request kind's error response (Produce's
transactional-id and producer-id-mapping refusals, Fetch's unsupported versions);
per-item codes come from `error_code_for`; "the endpoint of broker N" is one rule;
the duplicates the issue named (an exception class defined twice, exception types
carrying their own `.code` outside the CodedError family, `__consumer_offsets`
spelled in more than one place) stay gone.

Each handler gets only the services it reads (`handler_harness`)."""

from __future__ import annotations

import ast
import logging
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from handler_harness import ReplicasOnly, call_with, dispatch_with

from kt.broker import errors
from kt.broker.errors import CloseConnection, error_code_for
from kt.broker.handlers import RequestContext
from kt.broker.metadata import znodes
from kt.broker.metadata.cache import Endpoint, LiveBroker, endpoint_on
from kt.broker.metadata.store import StoreError
from kt.broker.services import HandlerServices, NodeState
from kt.protocol import ErrorCode, RequestHeader, apis
from kt.storage import record_batch as v2

KT_BROKER = Path(errors.__file__).parent


def txn_batch(pid: int, epoch: int = 0) -> bytes:
    spec = v2.RecordSpec(b"k", b"v", timestamp=int(time.time() * 1000))
    return bytes(v2.build_batch([spec], producer_id=pid, producer_epoch=epoch,
                                base_sequence=0, is_transactional=True))  # fmt: skip


def produce_body(tid: str | None, acks: int, *batches: bytes) -> dict[str, Any]:
    parts = [{"index": i, "records": b} for i, b in enumerate(batches)]
    return {"transactional_id": tid, "acks": acks, "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": parts}]}  # fmt: skip


def partitions(resp: Any) -> list[tuple[int, int, int, str | None]]:
    return [(p.index, p.error_code, p.base_offset, p.error_message)
            for t in resp.responses for p in t.partition_responses]  # fmt: skip


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[ReplicasOnly]:
    b = ReplicasOnly(tmp_path, {"t": 2})
    yield b
    b.close()


# --- whole-request refusals: raised, answered by the dispatcher ----------------------


def test_transactional_batches_without_an_id_are_refused_whole() -> None:
    # Refused before any service is touched: none is given.
    body = produce_body(None, -1, txn_batch(7), txn_batch(7))
    resp = dispatch_with(HandlerServices.only(), apis.PRODUCE, 9, body)
    code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # Kafka's getErrorResponse: INVALID_OFFSET, and the exception's default message
    # (none of its own) is a null message.
    assert partitions(resp) == [(0, code, -1, None), (1, code, -1, None)]
    # acks=0: no response could tell the producer, the connection closes.
    with pytest.raises(CloseConnection):
        dispatch_with(HandlerServices.only(), apis.PRODUCE, 9, produce_body(None, 0, txn_batch(7)))


def test_several_producer_ids_are_refused_whole_and_nothing_is_written(
    replicas: ReplicasOnly,
) -> None:
    # Produce reads the replica manager (its verification guards) and the topics
    # view; the refusal comes before the transaction service would be asked.
    assert replicas.replica_manager.txn_verification_enabled
    services = replicas.only(topics=replicas.topics)
    body = produce_body("tx", -1, txn_batch(7), txn_batch(8))
    resp = dispatch_with(services, apis.PRODUCE, 9, body, replicas.loop)
    why = "Transactional records contained more than one producer ID"
    code = ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert partitions(resp) == [(0, code, -1, why), (1, code, -1, why)]
    for p in (0, 1):
        assert replicas.replica_manager.get_partition_or_error("t", p).log_end_offset == 0


@pytest.mark.parametrize("version", [0, 3])
def test_fetch_before_v4_is_unsupported_for_every_partition(version: int) -> None:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "topics": [
        {"topic": "t", "partitions": [{"partition": 2, "fetch_offset": 0,
                                        "partition_max_bytes": 100}]}]}  # fmt: skip
    resp = dispatch_with(HandlerServices.only(), apis.FETCH, version, body)
    assert resp is not None
    [(topic, [part])] = [(t.topic, t.partitions) for t in resp.responses]
    assert topic == "t" and part.partition_index == 2
    assert (part.error_code, part.high_watermark) == (ErrorCode.UNSUPPORTED_VERSION, -1)
    assert part.records in (b"", None) and not part.records


# --- per-item codes come from the table ----------------------------------------------


def test_describe_producers_of_a_partition_not_hosted(replicas: ReplicasOnly) -> None:
    body = {"topics": [{"name": "t", "partition_indexes": [0, 5]}]}
    resp = replicas.call(apis.DESCRIBE_PRODUCERS, 0, body)  # the replica manager only
    assert resp is not None
    got = [(p.partition_index, p.error_code, p.error_message) for p in resp.topics[0].partitions]
    assert got == [
        (0, ErrorCode.NONE, None),
        (5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
         "This server does not host this topic-partition."),
    ]  # fmt: skip


def test_describe_log_dirs_a_dir_that_is_gone_is_a_storage_error(tmp_path: Path) -> None:
    dirs = [(tmp_path / "a").resolve(), (tmp_path / "b").resolve()]
    b = ReplicasOnly(tmp_path, {"t": 1}, **{"log.dirs": ",".join(map(str, dirs))})
    try:
        # The directory without the partition is replaced by a file.
        gone = next(d for d in dirs if d not in b.logs.dir_of.values())
        shutil.rmtree(gone)
        gone.write_text("not a directory any more")
        # DescribeLogDirs reads the log manager and the replica manager.
        resp = call_with(b.only(logs=b.logs), apis.DESCRIBE_LOG_DIRS, 4, {"topics": None}, b.loop)
        assert resp is not None
        by_dir = {r.log_dir: (r.error_code, r.total_bytes) for r in resp.results}
        assert by_dir[str(gone)] == (ErrorCode.KAFKA_STORAGE_ERROR, -1)
        here = next(d for d in dirs if d != gone)
        assert by_dir[str(here)][0] == ErrorCode.NONE and by_dir[str(here)][1] > 0
    finally:
        b.close()


# --- the endpoint of broker N: one rule ----------------------------------------------


def _ctx(listener: str) -> RequestContext:
    header = RequestHeader(apis.METADATA.key, 12, 1, "c")
    services = HandlerServices.only(node=NodeState(1, "INTERNAL"))
    return RequestContext(services, header, "127.0.0.1", 1, listener=listener)


def test_endpoint_of_broker_n() -> None:
    internal = Endpoint("INTERNAL", "10.0.0.1", 9093)
    client = Endpoint("CLIENT", "example.org", 9092)
    both, only_client = LiveBroker(2, (client, internal)), LiveBroker(3, (client,))
    # From a client's connection: that listener's endpoint, or none (left out).
    assert _ctx("CLIENT").endpoint_of(both) == client
    assert _ctx("INTERNAL").endpoint_of(both) == internal
    assert _ctx("OTHER").endpoint_of(both) is None
    # Over the loopback link: the inter-broker listener, else the first endpoint.
    assert _ctx("").endpoint_of(both) == internal
    assert _ctx("").endpoint_of(only_client) == client
    assert _ctx("").endpoint_of(LiveBroker(4, ())) is None
    # The same rule for a broker's registration (the controller's address).
    registered = (znodes.Endpoint("CLIENT", "h", 1), znodes.Endpoint("INTERNAL", "h", 2))
    assert endpoint_on(registered, "INTERNAL") == registered[1]
    assert endpoint_on(registered, "OTHER") == registered[0]
    assert endpoint_on((), "INTERNAL") is None


# --- the duplicates stay gone ----------------------------------------------------------


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(KT_BROKER.rglob("*.py")):
        yield path, ast.parse(path.read_text(), str(path))


def _exception_classes() -> dict[str, list[str]]:
    """Class names under kt/broker whose bases look like exceptions -> where."""
    found: dict[str, list[str]] = {}
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                (isinstance(b, ast.Name) and (b.id.endswith(("Error", "Exception"))
                                              or b.id in errors.__dict__))
                or (isinstance(b, ast.Attribute) and b.attr.endswith(("Error", "Exception")))
                for b in node.bases
            ):  # fmt: skip
                found.setdefault(node.name, []).append(str(path.relative_to(KT_BROKER)))
    return found


def test_no_exception_class_is_defined_twice() -> None:
    twice = {name: where for name, where in _exception_classes().items() if len(where) > 1}
    assert twice == {}
    # The coordinators' state machines share one IllegalTransition (a bug: no code).
    from kt.broker.groups import group
    from kt.broker.transactions import metadata

    assert group.IllegalTransition is metadata.IllegalTransition is errors.IllegalTransition
    assert error_code_for(errors.IllegalTransition("x")) == ErrorCode.UNKNOWN_SERVER_ERROR


def test_only_the_coded_error_family_carries_a_code() -> None:
    # An exception's code comes from the table, or from CodedError's `code`.
    assigned = [
        f"{path.relative_to(KT_BROKER)}:{node.lineno}"
        for path, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Attribute) and t.attr == "code"
                and isinstance(t.value, ast.Name) and t.value.id == "self" for t in node.targets)
    ]  # fmt: skip
    assert len(assigned) == 1 and assigned[0].startswith("errors.py:"), assigned  # CodedError


def test_internal_topic_names_are_spelled_once() -> None:
    kt_root = KT_BROKER.parent
    for name in ("__consumer_offsets", "__transaction_state"):
        spelled = [
            str(path.relative_to(kt_root))
            for path in sorted(kt_root.rglob("*.py"))
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and node.value == name
        ]
        assert spelled == ["broker/metadata_store.py"], (name, spelled)


def test_a_handler_touching_a_service_not_given_fails_the_test() -> None:
    # Through the harness's dispatcher too: never answered as UNKNOWN_SERVER_ERROR.
    body = {"replica_id": -1, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "timestamp": -1}]}]}  # fmt: skip
    with pytest.raises(AssertionError, match=r"services\.replicas"):
        dispatch_with(HandlerServices.only(), apis.LIST_OFFSETS, 7, body)


# --- InitProducerId: every refusal raised, answered with no id and epoch --------------


def _init(services: HandlerServices, version: int, tid: str | None = None,
          pid: int = -1, epoch: int = -1) -> tuple[int, int, int]:  # fmt: skip
    body = {"transactional_id": tid, "transaction_timeout_ms": 60000, "producer_id": pid,
            "producer_epoch": epoch}  # fmt: skip
    resp = dispatch_with(services, apis.INIT_PRODUCER_ID, version, body)
    assert resp is not None
    return resp.error_code, resp.producer_id, resp.producer_epoch


def test_init_producer_id_idempotent_and_no_block_yet(caplog: pytest.LogCaptureFixture) -> None:
    async def allocate() -> int:
        return 42

    async def no_block() -> int:
        raise StoreError("the metadata store is unreachable")

    # An idempotent producer's id comes from the allocator alone.
    assert _init(HandlerServices.only(allocate_producer_id=allocate), 4) == (0, 42, 0)
    with caplog.at_level(logging.WARNING, logger="kt.broker"):
        got = _init(HandlerServices.only(allocate_producer_id=no_block), 4, pid=7, epoch=3)
    assert got == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, -1, -1)
    assert "cannot hand out a producer id" in caplog.text


def test_init_producer_id_transactional_refusals() -> None:
    seen: list[Any] = []

    async def init_producer_id(tid: str, timeout_ms: int, expected: Any) -> Any:
        seen.append((tid, timeout_ms, expected))
        return SimpleNamespace(error=ErrorCode.PRODUCER_FENCED, producer_id=5, producer_epoch=2)

    coordinator = SimpleNamespace(init_producer_id=init_producer_id)
    services = HandlerServices.only(transactions=SimpleNamespace(coordinator=coordinator))
    # the id and epoch: both or neither (the coordinator is not asked)
    assert _init(services, 3, "tx", pid=5, epoch=-1) == (ErrorCode.INVALID_REQUEST, -1, -1)
    assert seen == []
    # the coordinator's refusal, never the id and epoch the request carried
    assert _init(services, 4, "tx", pid=5, epoch=2) == (ErrorCode.PRODUCER_FENCED, -1, -1)
    # KIP-588: clients before v4 know only INVALID_PRODUCER_EPOCH
    assert _init(services, 3, "tx", pid=5, epoch=2) == (ErrorCode.INVALID_PRODUCER_EPOCH, -1, -1)
    assert seen == [("tx", 60000, (5, 2))] * 2


# --- ACLs: without an authorizer, or not authorized, refused whole -------------------

CREATION = {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3,
            "principal": "User:alice", "host": "*", "operation": 3,
            "permission_type": 3}  # fmt: skip
FILTER = {"resource_type_filter": 2, "resource_name_filter": "t", "pattern_type_filter": 3,
          "principal_filter": None, "host_filter": None, "operation": 1,
          "permission_type": 1}  # fmt: skip


def _acl_calls(services: HandlerServices, **connection: str) -> tuple[Any, Any, Any]:
    create = dispatch_with(services, apis.CREATE_ACLS, 3,
                           {"creations": [CREATION, CREATION]}, **connection)  # fmt: skip
    delete = dispatch_with(services, apis.DELETE_ACLS, 3, {"filters": [FILTER, FILTER]},
                           **connection)  # fmt: skip
    describe = dispatch_with(services, apis.DESCRIBE_ACLS, 3, FILTER, **connection)
    return create, delete, describe


def test_acl_requests_without_an_authorizer_are_security_disabled() -> None:
    create, delete, describe = _acl_calls(HandlerServices.only())
    disabled = ErrorCode.SECURITY_DISABLED
    assert [(r.error_code, r.error_message) for r in create.results] == [
        (disabled, "No Authorizer is configured.")] * 2  # fmt: skip
    assert [(r.error_code, r.error_message, r.matching_acls) for r in delete.filter_results] == [
        (disabled, "No Authorizer is configured.", [])] * 2  # fmt: skip
    assert (describe.error_code, describe.error_message, describe.resources) == (
        disabled, "No Authorizer is configured on the broker", [])  # fmt: skip


def test_acl_requests_need_the_cluster_operation() -> None:
    from kt.broker.security.authorizer import AclAuthorizer

    # The authorizer alone (no ACLs: everyone but the super user is denied).
    services = HandlerServices.only(authorizer=AclAuthorizer(super_users=["User:admin"]))
    create, delete, describe = _acl_calls(services, principal="User:bob", listener="CLIENT")
    denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert [(r.error_code, r.error_message) for r in create.results] == [
        (denied, "Request CreateAcls is not authorized.")] * 2  # fmt: skip
    assert [(r.error_code, r.error_message) for r in delete.filter_results] == [
        (denied, "Request DeleteAcls is not authorized.")] * 2  # fmt: skip
    assert (describe.error_code, describe.resources) == (denied, [])
    # An invalid filter is an invalid request (the super user may ask).
    bad = {**FILTER, "operation": 0}  # UNKNOWN
    got = dispatch_with(services, apis.DESCRIBE_ACLS, 3, bad, principal="User:admin",
                        listener="CLIENT")  # fmt: skip
    assert got is not None
    assert (got.error_code, got.error_message, got.resources) == (
        ErrorCode.INVALID_REQUEST, "The filter contains UNKNOWN elements", [])  # fmt: skip
