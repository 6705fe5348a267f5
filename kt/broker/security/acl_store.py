"""ACLs stored as Kafka's AclAuthorizer stores them in ZooKeeper, and a cache that
follows them.

Layout (Kafka 3.8, `ZkData.scala`):

- LITERAL patterns: `/kafka-acl/<Type>/<name>` (`Topic`, `Group`, `Cluster`,
  `TransactionalId`, `DelegationToken`, `User`); change notifications
  `/kafka-acl-changes/acl_changes_<seq>` holding `TOPIC:<name>`;
- PREFIXED patterns: `/kafka-acl-extended/prefixed/<Type>/<name>`; notifications
  `/kafka-acl-extended-changes/acl_changes_<seq>` holding
  `{"version":1,"resourceType":"TOPIC","name":"orders-","patternType":"PREFIXED"}`;
- a node holds `{"version":1,"acls":[{"principal":"User:alice","permissionType":
  "Allow","operation":"Read","host":"*"}]}`.

Updates are versioned conditional writes retried on a race (Kafka: up to 10 times,
100-150 ms apart), so brokers and `kafka-acls.sh --authorizer-properties` writing at
once lose nothing; every real change writes a notification, and every broker's
cache re-reads the pattern a notification names. `CoordinationAclStore` works on any
`CoordinationStore`: a real ZooKeeper ensemble, or the in-process store of the
single node, so both run the same code.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from kt.broker.metadata.store import (
    BadVersionError,
    CoordinationStore,
    NodeExistsError,
    NoNodeError,
    Watch,
)
from kt.broker.security.acl import (
    AccessControlEntry,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    parse_enum,
)

log = logging.getLogger("kt.broker.security.acl_store")

LITERAL_ROOT = "/kafka-acl"
EXTENDED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
MAX_UPDATE_RETRIES = 10
#: Kafka's ZkNodeChangeNotificationListener deletes notifications this old.
NOTIFICATION_EXPIRY_S = 15 * 60.0
#: The types that get a child node under each root at start (Kafka's createAclPaths).
STORED_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN,
                ResourceType.USER)  # fmt: skip


class AclUpdateError(Exception):
    """An ACL update that kept racing other writers."""


# --- codecs ----------------------------------------------------------------------------


def acl_path(pattern: ResourcePattern) -> str:
    """The znode of a pattern's ACLs."""
    root = LITERAL_ROOT if pattern.pattern_type == PatternType.LITERAL else EXTENDED_ROOT
    return f"{root}/{pattern.resource_type.pascal}/{pattern.name}"


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """A pattern node's content (entries sorted, so equal sets give equal bytes)."""
    acls = [
        {"principal": e.principal, "permissionType": e.permission.pascal,
         "operation": e.operation.pascal, "host": e.host}
        for e in sorted(entries)
    ]  # fmt: skip
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(data: bytes | None) -> frozenset[AccessControlEntry]:
    """A pattern node's entries (ValueError when malformed; empty node: none). Values
    may be Pascal case or upper case without underscores, as Kafka reads them."""
    if not data:
        return frozenset()
    doc = json.loads(data)
    if not isinstance(doc, dict) or doc.get("version") != 1:
        raise ValueError("ACL node is not version 1")
    out = set()
    for item in doc.get("acls", []):
        out.add(
            AccessControlEntry(
                str(item["principal"]),
                str(item["host"]),
                parse_enum(AclOperation, str(item["operation"])),
                parse_enum(PermissionType, str(item["permissionType"])),
            )
        )
    return frozenset(out)


def change_payload(pattern: ResourcePattern) -> tuple[str, bytes]:
    """The notification root and payload announcing a change of `pattern`."""
    if pattern.pattern_type == PatternType.LITERAL:
        return LITERAL_CHANGES, f"{pattern.resource_type.name}:{pattern.name}".encode()
    doc = {"version": 1, "resourceType": pattern.resource_type.name, "name": pattern.name,
           "patternType": pattern.pattern_type.name}  # fmt: skip
    return EXTENDED_CHANGES, json.dumps(doc, separators=(",", ":")).encode()


def decode_change(root: str, data: bytes) -> ResourcePattern:
    """The pattern a notification under `root` names (ValueError when malformed)."""
    if root == LITERAL_CHANGES:
        kind, sep, name = data.decode("utf-8").partition(":")
        if not sep:
            raise ValueError(f"malformed ACL change notification {data!r}")
        return ResourcePattern(parse_enum(ResourceType, kind), name, PatternType.LITERAL)
    doc = json.loads(data)
    return ResourcePattern(
        parse_enum(ResourceType, str(doc["resourceType"])),
        str(doc["name"]),
        parse_enum(PatternType, str(doc["patternType"])),
    )


# --- the store -------------------------------------------------------------------------

Change = Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]]


class AclStore(Protocol):
    """Where a broker's ACLs live."""

    async def start(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Create the layout if needed and return every pattern's entries."""
        ...

    async def read(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        """One pattern's entries."""
        ...

    async def update(self, pattern: ResourcePattern, change: Change) -> bool:
        """Apply `change` to the pattern's entries atomically; True when they changed
        (a notification is then written)."""
        ...

    def watch(self, callback: Callable[[ResourcePattern], None]) -> None:
        """Call `callback(pattern)` for every change notification from now on."""
        ...

    def close(self) -> None:
        """Stop watching."""
        ...


class CoordinationAclStore:
    """AclStore on a CoordinationStore (ZooKeeper or the in-process store)."""

    def __init__(self, store: CoordinationStore, *, clock: Callable[[], float] = time.monotonic):
        self.store = store
        self._clock = clock
        self._watches: list[Watch] = []
        self._seen: dict[str, dict[str, float]] = {LITERAL_CHANGES: {}, EXTENDED_CHANGES: {}}
        self._tasks: set[asyncio.Task[None]] = set()

    async def _ensure(self, path: str) -> None:
        try:
            await self.store.create(path, b"", make_parents=True)
        except NodeExistsError:
            pass

    async def start(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Create Kafka's ACL paths (createAclPaths) and read every pattern."""
        for root in (LITERAL_ROOT, EXTENDED_ROOT):
            for rtype in STORED_TYPES:
                await self._ensure(f"{root}/{rtype.pascal}")
        for root in (LITERAL_CHANGES, EXTENDED_CHANGES):
            await self._ensure(root)
            # the notifications there now are history (what follows is read fresh);
            # a later one is news for the watch
            now = self._clock()
            for child in await self.store.children(root):
                self._seen[root].setdefault(child, now)
        out: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        for root, ptype in ((LITERAL_ROOT, PatternType.LITERAL),
                            (EXTENDED_ROOT, PatternType.PREFIXED)):  # fmt: skip
            for type_node in await self.store.children(root):
                try:
                    rtype = parse_enum(ResourceType, type_node)
                except ValueError:
                    log.warning("ignoring unknown ACL resource type node %s/%s", root, type_node)
                    continue
                for name in await self.store.children(f"{root}/{type_node}"):
                    pattern = ResourcePattern(rtype, name, ptype)
                    entries = await self.read(pattern)
                    if entries:
                        out[pattern] = entries
        return out

    async def _read_versioned(
        self, pattern: ResourcePattern
    ) -> tuple[frozenset[AccessControlEntry], int]:
        try:
            data, stat = await self.store.get(acl_path(pattern))
        except NoNodeError:
            return frozenset(), -1
        return decode_acls(data), stat.version

    async def read(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        """One pattern's entries (none when the node is absent)."""
        return (await self._read_versioned(pattern))[0]

    async def update(self, pattern: ResourcePattern, change: Change) -> bool:
        """Kafka's updateResourceAcls: read, change, write conditionally on the
        version (create when absent, delete when emptied), retry on a race."""
        path = acl_path(pattern)
        for attempt in range(MAX_UPDATE_RETRIES + 1):
            current, version = await self._read_versioned(pattern)
            new = change(current)
            if new == current:
                return False
            try:
                if version < 0:
                    await self.store.create(path, encode_acls(new), make_parents=True)
                elif new:
                    await self.store.set(path, encode_acls(new), version)
                else:
                    await self.store.delete(path, version)
            except (BadVersionError, NoNodeError, NodeExistsError):
                if attempt < MAX_UPDATE_RETRIES:
                    await asyncio.sleep(0.1 + random.random() * 0.05)
                continue
            root, payload = change_payload(pattern)
            await self.store.create(f"{root}/{CHANGE_PREFIX}", payload, sequential=True,
                                    make_parents=True)  # fmt: skip
            return True
        raise AclUpdateError(
            f"Failed to update ACLs for {pattern} after trying a maximum of "
            f"{MAX_UPDATE_RETRIES} times"
        )

    def watch(self, callback: Callable[[ResourcePattern], None]) -> None:
        """Follow both notification roots: each notification not seen before (start()
        marks those already there) passes its pattern to `callback`; notifications
        older than 15 minutes (by when this broker first saw them) are deleted, as
        Kafka's listener purges them."""
        for root in (LITERAL_CHANGES, EXTENDED_CHANGES):

            def on_children(children: list[str], root: str = root) -> None:
                task = asyncio.get_running_loop().create_task(
                    self._process(root, children, callback)
                )
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

            self._watches.append(self.store.watch_children(root, on_children))

    async def _process(
        self,
        root: str,
        children: list[str],
        callback: Callable[[ResourcePattern], None],
    ) -> None:
        seen = self._seen[root]
        now = self._clock()
        for child in sorted(c for c in children if c.startswith(CHANGE_PREFIX)):
            if child in seen:
                continue
            seen[child] = now
            try:
                data, _ = await self.store.get(f"{root}/{child}")
                pattern = decode_change(root, data)
            except NoNodeError:
                continue
            except (ValueError, KeyError) as exc:
                log.warning("ignoring malformed ACL change notification %s/%s: %s",
                            root, child, exc)  # fmt: skip
                continue
            callback(pattern)
        for child, first_seen in list(seen.items()):
            if child not in children:
                del seen[child]
            elif now - first_seen > NOTIFICATION_EXPIRY_S:
                try:
                    await self.store.delete(f"{root}/{child}")
                except NoNodeError:
                    pass

    def close(self) -> None:
        """Stop following notifications."""
        for w in self._watches:
            w.cancel()
        self._watches.clear()
        for task in self._tasks:
            task.cancel()


class AclCache:
    """Keeps an authorizer's cache equal to the store: loaded at start, each
    notified pattern re-read (Kafka's AclAuthorizer with its change listeners)."""

    def __init__(self, authorizer: _SetsAcls, store: AclStore) -> None:
        self.authorizer = authorizer
        self.store = store
        self._tasks: set[asyncio.Task[None]] = set()
        self._during_load: set[ResourcePattern] | None = None
        #: Set after each refresh a notification caused (tests wait on it).
        self.refreshed = asyncio.Event()

    async def start(self) -> None:
        """Follow the notifications, then load every ACL (in this order, so no change
        falls between; a pattern refreshed while loading keeps the newer read)."""
        self._during_load = set()
        self.store.watch(self._notified)
        loaded = await self.store.start()
        refreshed, self._during_load = self._during_load, None
        for pattern, entries in loaded.items():
            if pattern not in refreshed:
                self.authorizer.set_acls(pattern, entries)

    def _notified(self, pattern: ResourcePattern) -> None:
        task = asyncio.get_running_loop().create_task(self.refresh(pattern))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def refresh(self, pattern: ResourcePattern) -> None:
        """Re-read one pattern into the authorizer."""
        try:
            entries = await self.store.read(pattern)
        except ValueError as exc:
            log.warning("cannot read the ACLs of %s: %s", pattern, exc)
            return
        self.authorizer.set_acls(pattern, entries)
        if self._during_load is not None:
            self._during_load.add(pattern)
        self.refreshed.set()

    def close(self) -> None:
        """Stop following the store."""
        self.store.close()
        for task in self._tasks:
            task.cancel()


class _SetsAcls(Protocol):
    def set_acls(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """Replace a pattern's entries."""
        ...
