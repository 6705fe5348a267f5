"""Shared pytest fixtures."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
# The project's own copy: a clone passes its tests with nothing beside it.
REAL_KAFKA = REPO_ROOT / "tests" / "fixtures" / "real-kafka"
# Test helpers importable by bare name (broker_harness, ...).
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """The read-only directory of files written by real Apache Kafka brokers."""
    if not REAL_KAFKA.is_dir():
        pytest.fail(f"real Kafka fixtures not found at {REAL_KAFKA}")
    return REAL_KAFKA


@pytest.fixture
def fixture_copy(tmp_path: Path, fixtures_dir: Path):
    """Copy a fixture (file or directory, relative to real-kafka/) into tmp_path."""

    def copy(rel: str) -> Path:
        src = fixtures_dir / rel
        dst = tmp_path / Path(rel).name
        if src.is_dir():
            shutil.copytree(src, dst)
        else:
            shutil.copy2(src, dst)
        return dst

    return copy


@pytest.fixture
def kt_broker(tmp_path: Path):
    """A running `kt broker` on a free port with its data in tmp_path (stopped after)."""
    from broker_harness import BrokerProcess, free_port

    broker = BrokerProcess(tmp_path / "data", free_port()).start()
    yield broker
    broker.kill()


@pytest.fixture
def broker_factory(tmp_path: Path):
    """Make brokers with overrides: `broker_factory(**{"num.partitions": "3"})`."""
    from broker_harness import BrokerProcess, free_port

    made = []

    def make(**overrides: str) -> Any:
        b = BrokerProcess(tmp_path / f"data{len(made)}", free_port(), overrides).start()
        made.append(b)
        return b

    yield make
    for b in made:
        b.kill()


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory):
    """One real standalone ZooKeeper shared by the session's tests (zk_harness)."""
    from zk_harness import ZooKeeperServer, zookeeper_available

    if not zookeeper_available():
        pytest.fail("ZooKeeper not installed (/usr/share/java/zookeeper.jar, java)")
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    yield server
    server.stop()


@pytest.fixture
def zookeeper(zookeeper_server: Any) -> str:
    """A connect string to the shared ZooKeeper with a fresh chroot for this test."""
    return str(zookeeper_server.chroot_connect())


@pytest.fixture(scope="session")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory):
    """One ZooKeeper and three `kt broker` processes (racks r1..r3) shared by the
    cluster test modules (tests/cluster_harness.py); stopped at the end."""
    from cluster_harness import start_cluster

    c = start_cluster(tmp_path_factory.mktemp("kt-cluster") / "c")
    yield c
    c.stop(kill=True)


@pytest.fixture
def cluster(shared_cluster: Any):
    """The shared 3-broker cluster, whole again (every broker running and registered,
    a controller elected) before each test, whatever the previous test did to it."""
    from cluster_harness import heal

    heal(shared_cluster)
    return shared_cluster


@pytest.fixture(autouse=True)
def _no_user_connection_settings(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Online commands read the user's profiles and find ./kt-cluster by themselves;
    tests must not: a developer's current profile would send them elsewhere."""
    monkeypatch.setenv("KT_CONFIG", str(tmp_path_factory.getbasetemp() / "no-profiles.json"))
    monkeypatch.delenv("KT_PROFILE", raising=False)
    monkeypatch.delenv("KT_CLUSTER_DIR", raising=False)


@pytest.fixture(scope="session")
def tls_pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA and certificates made for this test session (tests/tls_harness.py)."""
    from tls_harness import make_pki

    return make_pki(tmp_path_factory.mktemp("pki"))
