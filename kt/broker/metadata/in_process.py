"""InProcessStore: ZooKeeper's znode semantics in memory, for the single-node broker.

The tree lives in this process. Persistent znodes are written atomically to one JSON
file (`kt-metadata.json` in the metadata log dir) after every change and read back at
start; ephemeral znodes live as long as their session (at most the process).

Several sessions may share one tree (`new_session()`), which lets tests run many
"brokers" against one in-process tree and expire a session (`expire()`) the way a
ZooKeeper ensemble would.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kt.storage.atomic import atomic_write

from . import znodes
from .store import (
    ANY_VERSION,
    BadVersionError,
    Check,
    ChildrenCallback,
    CoordinationStore,
    Create,
    DataCallback,
    Delete,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    RolledBackError,
    RuntimeInconsistencyError,
    SessionCallback,
    SessionEvent,
    SessionExpiredError,
    SetData,
    Stat,
    StoreError,
    StoreUnavailableError,
    TransactionFailedError,
    Watch,
    parent_of,
    validate_path,
)

DATA_FILE = "kt-metadata.json"
LEGACY_FILE = "kt-cluster-metadata.json"
FORMAT_VERSION = 1


@dataclass(slots=True)
class _Node:
    data: bytes
    version: int
    czxid: int
    mzxid: int
    ephemeral_owner: int
    # Bumped by every child create; ZooKeeper takes sequential suffixes from it.
    cversion: int = 0
    children: set[str] = field(default_factory=set)

    def stat(self) -> Stat:
        return Stat(self.version, self.czxid, self.ephemeral_owner, len(self.children), self.mzxid)


class _Watch(Watch):
    """A registered watch: its path, owning session and one of the two callbacks."""

    def __init__(
        self,
        path: str,
        session: InProcessStore,
        on_children: ChildrenCallback | None = None,
        on_data: DataCallback | None = None,
    ) -> None:
        super().__init__()
        self.path = path
        self.session = session
        self.on_children = on_children
        self.on_data = on_data


class _Tree:
    """The znodes shared by the sessions of one in-process ensemble."""

    def __init__(self, data_file: Path | None) -> None:
        self.data_file = data_file
        self.nodes: dict[str, _Node] = {"/": _Node(b"", 0, 0, 0, 0)}
        self.zxid = 0
        self.watches: dict[str, list[_Watch]] = {}
        self.session_ids = itertools.count(1)
        self.loaded = False

    # -- persistence ---------------------------------------------------------------

    def load(self, legacy_file: Path | None, broker_id: int) -> None:
        """Read the data file; on first start, migrate a legacy single-node store."""
        if self.loaded:
            return
        self._read(legacy_file, broker_id)
        self.loaded = True

    def _read(self, legacy_file: Path | None, broker_id: int) -> None:
        if self.data_file is None:
            return
        if self.data_file.exists():
            doc = json.loads(self.data_file.read_text(encoding="utf-8"))
            if doc.get("version") != FORMAT_VERSION:
                raise StoreUnavailableError(
                    f"{self.data_file}: unsupported metadata format version {doc.get('version')}"
                )
            self.zxid = int(doc["zxid"])
            for path, n in sorted(doc["nodes"].items()):  # parents sort before children
                data = (
                    base64.b64decode(n["data_b64"])
                    if "data_b64" in n
                    else n.get("data", "").encode("utf-8")
                )
                node = _Node(data, int(n["version"]), int(n["czxid"]), int(n["mzxid"]), 0)
                node.cversion = int(n.get("cversion", 0))
                self._attach(path, node)
        elif legacy_file is not None and legacy_file.exists():
            for path, data in migrate_legacy_metadata(legacy_file, broker_id):
                self.zxid += 1
                self._make_parents(path, self.zxid)
                if path in self.nodes:
                    self.nodes[path].data = data
                else:
                    self.nodes[parent_of(path)].cversion += 1
                    self._attach(path, _Node(data, 0, self.zxid, self.zxid, 0))
            self.save()

    def _attach(self, path: str, node: _Node) -> None:
        self.nodes[path] = node
        if path != "/":
            self.nodes[parent_of(path)].children.add(path.rsplit("/", 1)[1])

    def _make_parents(self, path: str, zxid: int) -> None:
        parts = path.split("/")[1:-1]
        for i in range(1, len(parts) + 1):
            p = "/" + "/".join(parts[:i])
            if p not in self.nodes:
                self.nodes[parent_of(p)].cversion += 1
                self._attach(p, _Node(b"", 0, zxid, zxid, 0))

    def save(self) -> None:
        """Write the persistent znodes (and the zxid) atomically."""
        if self.data_file is None:
            return
        nodes: dict[str, dict[str, Any]] = {}
        for path, node in sorted(self.nodes.items()):
            if node.ephemeral_owner or path == "/":
                continue
            entry: dict[str, Any] = {
                "version": node.version,
                "czxid": node.czxid,
                "mzxid": node.mzxid,
                "cversion": node.cversion,
            }
            # Kafka's payloads are UTF-8 JSON: keep them readable in the file.
            try:
                entry["data"] = node.data.decode("utf-8")
            except UnicodeDecodeError:
                entry["data_b64"] = base64.b64encode(node.data).decode("ascii")
            nodes[path] = entry
        doc = {"version": FORMAT_VERSION, "zxid": self.zxid, "nodes": nodes}
        atomic_write(self.data_file, (json.dumps(doc, indent=1) + "\n").encode("utf-8"))


class _Txn:
    """Mutations of one transaction (one zxid) with an undo log for rollback."""

    def __init__(self, tree: _Tree, session_id: int) -> None:
        self.tree = tree
        self.session_id = session_id
        self.zxid = tree.zxid + 1
        self.undo: list[Callable[[], None]] = []
        self.changed_data: set[str] = set()
        self.changed_children: set[str] = set()

    def _node(self, path: str) -> _Node:
        validate_path(path)
        node = self.tree.nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        return node

    def create(self, op: Create) -> str:
        validate_path(op.path)
        if op.path == "/":
            raise NodeExistsError("/")
        parent_path = parent_of(op.path)
        parent = self.tree.nodes.get(parent_path)
        if parent is None:
            raise NoNodeError(parent_path)
        if parent.ephemeral_owner:
            raise NoChildrenForEphemeralsError(parent_path)
        path = op.path
        if op.sequential:
            # ZooKeeper formats the parent's cversion as a 10-digit decimal.
            path = f"{op.path}{parent.cversion:010d}"
        if path in self.tree.nodes:
            raise NodeExistsError(path)
        owner = self.session_id if op.ephemeral else 0
        name = path.rsplit("/", 1)[1]
        self.tree.nodes[path] = _Node(op.data, 0, self.zxid, self.zxid, owner)
        parent.children.add(name)
        parent.cversion += 1

        def undo() -> None:
            del self.tree.nodes[path]
            parent.children.discard(name)
            parent.cversion -= 1

        self.undo.append(undo)
        self.changed_data.add(path)
        self.changed_children.update((path, parent_path))
        return path

    def set(self, op: SetData) -> Stat:
        node = self._node(op.path)
        if op.version != ANY_VERSION and op.version != node.version:
            raise BadVersionError(op.path)
        old = (node.data, node.version, node.mzxid)
        node.data, node.version, node.mzxid = op.data, node.version + 1, self.zxid

        def undo() -> None:
            node.data, node.version, node.mzxid = old

        self.undo.append(undo)
        self.changed_data.add(op.path)
        return node.stat()

    def check(self, op: Check) -> bool:
        node = self._node(op.path)
        if op.version != ANY_VERSION and op.version != node.version:
            raise BadVersionError(op.path)
        return True

    def delete(self, op: Delete) -> bool:
        node = self._node(op.path)
        if op.path == "/":
            raise BadVersionError("/ cannot be deleted")
        if op.version != ANY_VERSION and op.version != node.version:
            raise BadVersionError(op.path)
        if node.children:
            raise NotEmptyError(op.path)
        parent_path = parent_of(op.path)
        parent = self.tree.nodes[parent_path]
        name = op.path.rsplit("/", 1)[1]
        del self.tree.nodes[op.path]
        # No cversion bump: ZooKeeper's sequence counter counts creates only.
        parent.children.discard(name)

        def undo() -> None:
            self.tree.nodes[op.path] = node
            parent.children.add(name)

        self.undo.append(undo)
        self.changed_data.add(op.path)
        self.changed_children.update((op.path, parent_path))
        return True

    def apply(self, op: Op) -> object:
        if isinstance(op, Create):
            return self.create(op)
        if isinstance(op, SetData):
            return self.set(op)
        if isinstance(op, Check):
            return self.check(op)
        return self.delete(op)

    def rollback(self) -> None:
        for undo in reversed(self.undo):
            undo()
        self.undo.clear()

    def commit(self) -> None:
        if not self.undo:
            return  # reads and checks only: nothing to number, save or notify
        previous_zxid, self.tree.zxid = self.tree.zxid, self.zxid
        try:
            self.tree.save()
        except OSError as e:
            # Not on disk means not done: ZooKeeper acknowledges only logged writes.
            self.rollback()
            self.tree.zxid = previous_zxid
            raise StoreUnavailableError(f"cannot write {self.tree.data_file}: {e}") from e
        loop_watches: set[_Watch] = set()
        for path in self.changed_data:
            loop_watches.update(w for w in self.tree.watches.get(path, ()) if w.on_data)
        for path in self.changed_children:
            loop_watches.update(w for w in self.tree.watches.get(path, ()) if w.on_children)
        for w in loop_watches:
            w.session._schedule(w)


class InProcessStore(CoordinationStore):
    """A CoordinationStore whose znodes live in this process (see the module doc)."""

    def __init__(
        self,
        data_file: Path | None = None,
        *,
        legacy_file: Path | None = None,
        broker_id: int = 0,
        _tree: _Tree | None = None,
    ) -> None:
        """`data_file`: where persistent znodes are kept (None: memory only).

        `legacy_file`: a `kt-cluster-metadata.json` to migrate when `data_file` does
        not exist yet (its topics are assigned to `broker_id` where it has no assignment).
        """
        self._tree = _tree if _tree is not None else _Tree(data_file)
        self._legacy_file = legacy_file
        self._broker_id = broker_id
        self._session_id = next(self._tree.session_ids)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listeners: list[SessionCallback] = []
        self._pending: set[_Watch] = set()
        self._closed = False

    @classmethod
    def in_dir(cls, metadata_dir: Path, broker_id: int = 0) -> InProcessStore:
        """The store kept in `metadata_dir/kt-metadata.json` (migrating a legacy file)."""
        return cls(
            metadata_dir / DATA_FILE, legacy_file=metadata_dir / LEGACY_FILE, broker_id=broker_id
        )

    def new_session(self) -> InProcessStore:
        """Another session on the same tree (another 'client' of the same ensemble)."""
        return InProcessStore(_tree=self._tree)

    @property
    def session_id(self) -> int:
        """This session's id (the ephemeral owner of the nodes it creates)."""
        return self._session_id

    async def start(self, timeout_s: float = 0.0) -> None:
        """Load the data file (once per tree); the timeout is unused."""
        self._loop = asyncio.get_running_loop()
        self._closed = False
        try:
            self._tree.load(self._legacy_file, self._broker_id)
        except (OSError, ValueError, KeyError) as e:
            raise StoreUnavailableError(f"cannot read {self._tree.data_file}: {e}") from e

    async def close(self) -> None:
        """End the session: its ephemeral nodes are deleted and its watches stop."""
        self._drop_session()
        self._closed = True

    async def expire(self) -> None:
        """Simulate a session expiry: EXPIRED, ephemerals gone, then a new session.

        Like a ZooKeeper client after expiry, the store goes on with a new session id
        (RECONNECTED follows EXPIRED); its watches survive and fire with fresh values.
        """
        watches = [w for ws in self._tree.watches.values() for w in ws if w.session is self]
        self._delete_ephemerals()
        self._session_id = next(self._tree.session_ids)
        self._emit(SessionEvent.EXPIRED)
        self._emit(SessionEvent.RECONNECTED)
        for w in watches:
            self._schedule(w)

    def _drop_session(self) -> None:
        self._delete_ephemerals()
        for path in list(self._tree.watches):
            for w in [w for w in self._tree.watches[path] if w.session is self]:
                w.cancel()
                self._forget(w)

    def _delete_ephemerals(self) -> None:
        mine = [p for p, n in self._tree.nodes.items() if n.ephemeral_owner == self._session_id]
        if not mine:
            return
        txn = _Txn(self._tree, self._session_id)
        for path in mine:
            txn.delete(Delete(path))
        txn.commit()

    def _check_open(self) -> None:
        if self._closed:
            raise SessionExpiredError("the in-process store session is closed")

    # -- operations ----------------------------------------------------------------

    def _run(self, op: Op) -> object:
        self._check_open()
        txn = _Txn(self._tree, self._session_id)
        try:
            result = txn.apply(op)
        except BaseException:
            txn.rollback()
            raise
        txn.commit()
        return result

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        """Create a znode (see CoordinationStore.create)."""
        self._check_open()
        txn = _Txn(self._tree, self._session_id)
        try:
            if make_parents:
                parts = path.split("/")[1:-1]
                for i in range(1, len(parts) + 1):
                    p = "/" + "/".join(parts[:i])
                    if p not in self._tree.nodes:
                        txn.create(Create(p))
            created = txn.create(Create(path, data, ephemeral, sequential))
        except BaseException:
            txn.rollback()
            raise
        txn.commit()
        return created

    async def get(self, path: str) -> tuple[bytes, Stat]:
        """A znode's data and stat (see CoordinationStore.get)."""
        self._check_open()
        validate_path(path)
        node = self._tree.nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        return node.data, node.stat()

    async def exists(self, path: str) -> Stat | None:
        """A znode's stat or None (see CoordinationStore.exists)."""
        self._check_open()
        validate_path(path)
        node = self._tree.nodes.get(path)
        return None if node is None else node.stat()

    async def set(self, path: str, data: bytes, version: int = ANY_VERSION) -> Stat:
        """Conditionally replace a znode's data (see CoordinationStore.set)."""
        result = self._run(SetData(path, data, version))
        assert isinstance(result, Stat)
        return result

    async def delete(
        self, path: str, version: int = ANY_VERSION, *, recursive: bool = False
    ) -> None:
        """Delete a znode, or its whole subtree when `recursive`."""
        self._check_open()
        if not recursive:
            self._run(Delete(path, version))
            return
        txn = _Txn(self._tree, self._session_id)
        try:
            root = txn._node(path)
            if version != ANY_VERSION and version != root.version:
                raise BadVersionError(path)
            subtree = [p for p in self._tree.nodes if p.startswith(path + "/")]
            for p in sorted(subtree, key=lambda p: p.count("/"), reverse=True):
                txn.delete(Delete(p))
            txn.delete(Delete(path))
        except BaseException:
            txn.rollback()
            raise
        txn.commit()

    async def children(self, path: str) -> list[str]:
        """The sorted names of a znode's children."""
        self._check_open()
        validate_path(path)
        node = self._tree.nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        return sorted(node.children)

    async def multi(self, ops: list[Op]) -> list[object]:
        """Apply `ops` atomically, as one transaction (one zxid)."""
        self._check_open()
        txn = _Txn(self._tree, self._session_id)
        results: list[object] = []
        for i, op in enumerate(ops):
            try:
                results.append(txn.apply(op))
            except StoreError as e:
                txn.rollback()
                errors: list[StoreError] = [RolledBackError(o.path) for o in ops[:i]]
                errors.append(e)
                errors += [RuntimeInconsistencyError(o.path) for o in ops[i + 1 :]]
                raise TransactionFailedError(errors) from None
            except BaseException:
                txn.rollback()
                raise
        txn.commit()
        return results

    # -- watches -------------------------------------------------------------------

    def _register(self, w: _Watch) -> _Watch:
        self._check_open()
        validate_path(w.path)
        self._tree.watches.setdefault(w.path, []).append(w)
        self._schedule(w)
        return w

    def watch_children(self, path: str, callback: ChildrenCallback) -> Watch:
        """Persistent children watch; callbacks run on the loop (see the interface)."""
        return self._register(_Watch(path, self, on_children=callback))

    def watch_data(self, path: str, callback: DataCallback) -> Watch:
        """Persistent data watch; callbacks run on the loop (see the interface)."""
        return self._register(_Watch(path, self, on_data=callback))

    def _schedule(self, w: _Watch) -> None:
        # Several changes before the loop gets to run coalesce into one callback
        # with the newest value, as a re-armed ZooKeeper watch would see it.
        if w.cancelled:
            self._forget(w)
            return
        if w in self._pending:
            return
        loop = self._loop or asyncio.get_running_loop()
        self._loop = loop
        self._pending.add(w)
        loop.call_soon(self._deliver, w)

    def _deliver(self, w: _Watch) -> None:
        self._pending.discard(w)
        if w.cancelled:
            self._forget(w)
            return
        node = self._tree.nodes.get(w.path)
        if w.on_children is not None:
            w.on_children(sorted(node.children) if node else [])
        if w.on_data is not None:
            if node is None:
                w.on_data(None, None)
            else:
                w.on_data(node.data, node.stat())

    def _forget(self, w: _Watch) -> None:
        watches = self._tree.watches.get(w.path, [])
        if w in watches:
            watches.remove(w)
        if not watches:
            self._tree.watches.pop(w.path, None)

    def on_session_event(self, callback: SessionCallback) -> None:
        """Call `callback(event)` on the loop for every session event."""
        self._listeners.append(callback)

    def _emit(self, event: SessionEvent) -> None:
        loop = self._loop or asyncio.get_running_loop()
        for cb in list(self._listeners):
            loop.call_soon(cb, event)


def migrate_legacy_metadata(path: Path, broker_id: int = 0) -> list[tuple[str, bytes]]:
    """The znodes equivalent to a single-node `kt-cluster-metadata.json`.

    /cluster/id, /brokers/topics/T (assignment and topic id; partitions without an
    assignment go to `broker_id`), /config/topics/T and /latest_producer_id_block.
    Partition states are left to the controller, which elects new partitions as Kafka
    does. The legacy file itself is not touched.
    """
    doc = json.loads(path.read_text(encoding="utf-8"))
    out: list[tuple[str, bytes]] = []
    cluster_id = doc.get("cluster_id")
    if cluster_id:
        out.append((znodes.CLUSTER_ID, znodes.encode_cluster_id(cluster_id)))
    for t in doc.get("topics", []):
        name = t["name"]
        assignment = {int(k): list(v) for k, v in t.get("assignment", {}).items()}
        for p in range(int(t["partitions"])):
            assignment.setdefault(p, [broker_id])
        topic = znodes.TopicAssignment(assignment, bytes.fromhex(t["topic_id"]))
        out.append((znodes.topic_path(name), znodes.encode_topic(topic)))
        out.append(
            (
                znodes.config_entity_path("topics", name),
                znodes.encode_entity_config(t.get("configs", {})),
            )
        )
    next_block = int(doc.get("next_producer_id_block", 0))
    if next_block > 0:
        # The legacy store kept the first free id; Kafka keeps the last block handed out.
        block = znodes.ProducerIdBlock(
            broker_id, max(0, next_block - znodes.PRODUCER_ID_BLOCK_SIZE), next_block - 1
        )
        out.append((znodes.PRODUCER_ID_BLOCK, znodes.encode_producer_id_block(block)))
    return out
