"""The TUI against a secured `kt broker` with ACLs (AclAuthorizer): the status line
says who the connections authenticate as (the SASL user, or the TLS client
certificate's subject), and a principal the ACLs deny cluster operations sees, per
view, what it may not see (CLUSTER_AUTHORIZATION_FAILED for the log directories and
reassignments) in a readable line, while the views it may see keep refreshing."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import tui_fakes as fakes
from broker_harness import BrokerProcess, free_port
from brokersec_certs import CA
from textual.widgets import DataTable, Static

from kt.client import KafkaClient, NewTopic
from kt.client.security import SecurityConfig
from kt.tui.app import KtApp
from kt.tui.sampler import ClusterSampler
from kt.tui.widgets.status import StatusBar

pytestmark = pytest.mark.integration

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-pw" user_bob="bob-pw";')  # fmt: skip


class Secured:
    """The broker, its listeners and the client certificate files."""

    def __init__(self, broker: BrokerProcess, ports: dict[str, int], files: dict[str, Path]):
        self.broker, self.ports, self.files = broker, ports, files

    def addr(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    tmp = tmp_path_factory.mktemp("tui-secured")
    ca = CA()
    sfiles = ca.write(tmp, "server", ca.issue("CN=broker1,O=kt", ("localhost", "127.0.0.1")))
    cfiles = ca.write(tmp, "client", ca.issue("CN=dave,OU=ServiceUsers,O=kt"))
    ports = {n: free_port() for n in ("PLAINTEXT", "SASL_PLAINTEXT", "SSL")}
    overrides = {
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(sfiles["p12"]),
        "ssl.keystore.password": "pw",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(sfiles["ca"]),
        "listener.name.ssl.ssl.client.auth": "required",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        # the PLAINTEXT listener (the tests' own setup) is anonymous and super
        "super.users": "User:admin;User:ANONYMOUS",
        "num.partitions": "1",
        "offsets.topic.num.partitions": "1",
        "offsets.topic.replication.factor": "1",
    }
    broker = BrokerProcess(tmp / "data", ports["PLAINTEXT"], overrides).start(timeout=60)
    try:
        yield Secured(broker, ports, {**{f"c_{k}": v for k, v in cfiles.items()},
                                      "ca": sfiles["ca"]})  # fmt: skip
    finally:
        assert broker.stop() == 0


def _app(bootstrap: str, security: SecurityConfig) -> KtApp:
    return KtApp(
        ClusterSampler(bootstrap, request_timeout=5.0, security=security),
        bootstrap=bootstrap,
        interval=0.5,
        principal=security.describe_principal(),
    )


async def _until(pilot: Any, cond: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def _text(widget: Static) -> str:
    return str(widget.render())


@fakes.run_async
async def test_a_denied_principal_sees_what_it_may_not_see(secured: Secured) -> None:
    async with KafkaClient(secured.addr("PLAINTEXT")) as c:
        await c.create_topics([NewTopic("orders", 1, 1)])
    bob = SecurityConfig.from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": "bob", "sasl.password": "bob-pw"})  # fmt: skip
    app = _app(secured.addr("SASL_PLAINTEXT"), bob)
    async with app.run_test(size=(120, 30)) as pilot:
        await _until(pilot, lambda: app.refreshes >= 1 and app.history.latest_ok is not None,
                     "a refresh")  # fmt: skip
        status = _text(app.screen.query_one(StatusBar))
        assert "as User:bob (PLAIN)" in status, status
        assert "bob-pw" not in status
        # the overview sums up every denial
        denied = app.screen.query_one("#denied", Static)
        assert denied.has_class("-shown")
        text = _text(denied)
        assert text.startswith("As User:bob (PLAIN): Not authorized:"), text
        assert "CLUSTER_AUTHORIZATION_FAILED" in text and "DescribeLogDirs" in text, text
        # log directories: one readable line instead of an empty table
        await pilot.press("4")
        await pilot.pause()
        denied = app.screen.query_one("#denied", Static)
        assert denied.has_class("-shown")
        assert "DescribeLogDirs" in _text(denied)
        assert "ListPartitionReassignments" not in _text(denied)
        assert app.screen.query_one("#logdirs", DataTable).row_count == 0
        # brokers: the reassignments it may not list; the broker table itself fills
        await pilot.press("6")
        await pilot.pause()
        denied = app.screen.query_one("#denied", Static)
        assert "ListPartitionReassignments" in _text(denied), _text(denied)
        assert "DescribeLogDirs" not in _text(denied)
        # topics: nothing denied there (Metadata just leaves out what bob may not see)
        await pilot.press("2")
        await pilot.pause()
        assert not app.screen.query_one("#denied", Static).has_class("-shown")
        # and the dashboard keeps refreshing
        seen = app.refreshes
        await _until(pilot, lambda: app.refreshes >= seen + 2, "two more refreshes")
        assert app.history.latest is not None and app.history.latest.error is None


@fakes.run_async
async def test_mutual_tls_shows_the_certificate_subject(secured: Secured) -> None:
    dave = SecurityConfig.from_properties({
        "security.protocol": "SSL", "ssl.ca.location": str(secured.files["ca"]),
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(secured.files["c_p12"]),
        "ssl.keystore.password": "pw"})  # fmt: skip
    app = _app(secured.addr("SSL"), dave)
    async with app.run_test(size=(140, 30)) as pilot:
        await _until(pilot, lambda: app.history.latest_ok is not None, "a refresh")
        status = _text(app.screen.query_one(StatusBar))
        assert "as CN=dave,OU=ServiceUsers,O=kt (TLS client certificate)" in status, status
        # the certificate's principal has no ACLs either: the same readable denial
        assert "CLUSTER_AUTHORIZATION_FAILED" in _text(app.screen.query_one("#denied", Static))


def test_the_principal_from_each_kind_of_settings(secured: Secured) -> None:
    pem = SecurityConfig.from_properties({
        "security.protocol": "SSL", "ssl.ca.location": str(secured.files["ca"]),
        "ssl.certificate.location": str(secured.files["c_chain"]),
        "ssl.key.location": str(secured.files["c_key"])})  # fmt: skip
    assert pem.describe_principal() == "CN=dave,OU=ServiceUsers,O=kt (TLS client certificate)"
    scram = SecurityConfig.from_properties({
        "security.protocol": "SASL_SSL", "ssl.ca.location": str(secured.files["ca"]),
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
        "sasl.password": "s3cret"})  # fmt: skip
    assert scram.describe_principal() == "User:alice (SCRAM-SHA-512)"
    assert SecurityConfig.from_properties({}).describe_principal() == "User:ANONYMOUS"
