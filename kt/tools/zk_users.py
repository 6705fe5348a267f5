"""SCRAM credentials written straight to ZooKeeper (`kt user scram ... --zookeeper`),
as `kafka-configs.sh --zookeeper ... --entity-type users` does: the way to create the
inter-broker user before the first broker starts (no broker to send
AlterUserScramCredentials to yet).

`/config/users/<sanitized user>` gets the user's config map with the credential in
Kafka's form (kt.cluster.scram_credentials, the broker's own codec), and
`/config/changes/config_change_<seq>` announces it in the same ZooKeeper
transaction, so brokers already running (kt's or Kafka's) reload the user. Other
keys of the user's config (quotas) are kept as they are.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Any

from kt.cluster import scram_credentials as sc
from kt.tools.console import fail

CHANGES = "/config/changes"
USERS = "/config/users"


def split_connect(connect: str) -> tuple[str, str]:
    """'h1:2181,h2:2181/kafka' -> ('h1:2181,h2:2181', '/kafka'); no chroot: ''."""
    hosts, sep, chroot = connect.partition("/")
    chroot = ("/" + chroot.strip("/")) if sep and chroot.strip("/") else ""
    return hosts, chroot


class ZkUsers:
    """A short ZooKeeper session over the users' config nodes under a chroot."""

    def __init__(self, connect: str, timeout: float) -> None:
        try:
            from kazoo.client import KazooClient  # type: ignore[import-untyped, unused-ignore]
            from kazoo.handlers.threading import (  # type: ignore[import-untyped, unused-ignore]
                KazooTimeoutError,
            )
        except ImportError:
            fail("--zookeeper needs kazoo (pip install kazoo; scripts/setup installs it)")
        hosts, self.chroot = split_connect(connect)
        if not hosts:
            fail(f"--zookeeper: expected HOST:PORT[,HOST:PORT...][/chroot], got {connect!r}")
        self.connect = connect
        # kazoo logs each refused connect and retry; the one line that matters is ours
        quiet = logging.getLogger("kt.tools.zk_users.kazoo")
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False
        self.zk: Any = KazooClient(hosts=hosts, timeout=timeout, logger=quiet)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.zk.start(timeout=timeout)
        except KazooTimeoutError:
            self.zk.stop()
            fail(f"cannot connect to ZooKeeper at {hosts} within {timeout:g}s")

    def close(self) -> None:
        """End the session."""
        self.zk.stop()
        self.zk.close()

    def _path(self, path: str) -> str:
        return self.chroot + path

    def config(self, user: str) -> tuple[dict[str, str], int]:
        """The user's config map and its znode version (-1: no node)."""
        from kazoo.exceptions import NoNodeError  # type: ignore[import-untyped, unused-ignore]

        try:
            data, stat = self.zk.get(self._path(sc.user_config_path(user)))
        except NoNodeError:
            return {}, -1
        try:
            return sc.decode_user_config(data), stat.version
        except ValueError as exc:
            fail(f"{self.connect}: {sc.user_config_path(user)}: {exc}")

    def users(self) -> list[str]:
        """Every user with a config node, sorted."""
        from kazoo.exceptions import NoNodeError  # type: ignore[import-untyped, unused-ignore]

        try:
            return sorted(sc.desanitize(n) for n in self.zk.get_children(self._path(USERS)))
        except NoNodeError:
            return []

    def change(self, user: str, edit: Callable[[dict[str, str]], dict[str, str]]) -> bool:
        """Apply `edit` to the user's config with its change notification in one
        transaction (retried when another writer got there first); False when
        nothing changed."""
        from kazoo.exceptions import (  # type: ignore[import-untyped, unused-ignore]
            BadVersionError,
            NodeExistsError,
            NoNodeError,
        )

        self.zk.ensure_path(self._path(USERS))
        self.zk.ensure_path(self._path(CHANGES))
        path = self._path(sc.user_config_path(user))
        for _ in range(20):
            config, version = self.config(user)
            new = edit(dict(config))
            if new == config:
                return False
            data = sc.encode_user_config(new)
            txn = self.zk.transaction()
            if version < 0:
                txn.create(path, data)
            else:
                txn.set_data(path, data, version=version)
            txn.create(self._path(f"{CHANGES}/config_change_"), sc.change_notification(user),
                       sequence=True)  # fmt: skip
            results = txn.commit()
            failures = [r for r in results if isinstance(r, Exception)]
            if not failures:
                return True
            if not all(
                isinstance(r, (BadVersionError, NodeExistsError, NoNodeError))
                or type(r).__name__ == "RolledBackError"
                for r in failures
            ):
                fail(f"{self.connect}: writing {sc.user_config_path(user)}: {failures[0]!r}")
        fail(f"{self.connect}: {sc.user_config_path(user)} kept changing under us; try again")
