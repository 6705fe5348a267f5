"""SCRAM credentials in the coordination store, as Kafka keeps them, and the cache a
broker authenticates from.

`/config/users/<sanitized user>` holds the user's config map (SCRAM credentials
beside any quota keys, which are kept as they are); every change writes
`/config/changes/config_change_<seq>` = `{"version":2,"entity_path":"users/<user>"}`
in the same multi, so brokers (kt's and Kafka's) reload the user. Writing before any
broker runs works the same way (the inter-broker user must exist first), and
`kafka-configs.sh --zookeeper ... --entity-type users` output is read unchanged.

The AlterUserScramCredentials / DescribeUserScramCredentials rules (per-user errors
with Kafka's messages) are `alter_results` and `describe_results`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kt.broker.metadata.store import (
    BadVersionError,
    CoordinationStore,
    Create,
    NodeExistsError,
    NoNodeError,
    SetData,
    TransactionFailedError,
    Watch,
)
from kt.broker.security import scram
from kt.broker.security.scram import MECHANISMS, ScramCredential

log = logging.getLogger("kt.broker.security.credentials")

USERS = "/config/users"
CHANGES = "/config/changes"
CHANGE_PREFIX = "config_change_"

# Kafka's error codes for the SCRAM admin APIs
NONE = 0
UNSUPPORTED_SASL_MECHANISM = 33
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93


@dataclass(frozen=True, slots=True)
class Upsertion:
    """A credential to set: user, mechanism code, iterations, salt, salted password."""

    user: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class Deletion:
    """A credential to remove."""

    user: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class UserResult:
    """One user's outcome in AlterUserScramCredentials."""

    user: str
    error_code: int = NONE
    error_message: str | None = None


def _sequence(name: str) -> int:
    digits = name.rsplit("_", 1)[-1]
    return int(digits) if digits.isdigit() else -1


class ScramCredentialStore:
    """SCRAM credentials on a CoordinationStore (ZooKeeper or in-process)."""

    def __init__(self, store: CoordinationStore) -> None:
        self.store = store
        self._watch: Watch | None = None
        self._last_seen = -1
        self._lock = asyncio.Lock()

    async def _config(self, user: str) -> tuple[dict[str, str], int]:
        try:
            data, stat = await self.store.get(scram.user_config_path(user))
        except NoNodeError:
            return {}, -1
        return scram.decode_user_config(data), stat.version

    async def credentials(self, user: str) -> dict[str, ScramCredential]:
        """The user's credentials by mechanism name (malformed ones skipped, logged)."""
        config, _ = await self._config(user)
        return _credentials(user, config)

    async def users(self) -> list[str]:
        """Every user that has a config node, sorted."""
        try:
            names = await self.store.children(USERS)
        except NoNodeError:
            return []
        return sorted(scram.desanitize(n) for n in names)

    async def load_all(self) -> dict[str, dict[str, ScramCredential]]:
        """Every user's credentials (users without any left out)."""
        out = {}
        for user in await self.users():
            creds = await self.credentials(user)
            if creds:
                out[user] = creds
        return out

    async def change(self, user: str, edit: Callable[[dict[str, str]], dict[str, str]]) -> bool:
        """Apply `edit` to the user's config map atomically with its notification
        (retried when another writer got there first); True when it changed."""
        path = scram.user_config_path(user)
        await self._ensure(USERS)
        await self._ensure(CHANGES)
        while True:
            config, version = await self._config(user)
            new = edit(dict(config))
            if new == config:
                return False
            data = scram.encode_user_config(new)
            write = Create(path, data) if version < 0 else SetData(path, data, version)
            notify = Create(f"{CHANGES}/{CHANGE_PREFIX}", scram.change_notification(user),
                            sequential=True)  # fmt: skip
            try:
                await self.store.multi([write, notify])
                return True
            except TransactionFailedError as exc:
                if isinstance(exc.failure, (BadVersionError, NodeExistsError, NoNodeError)):
                    continue
                raise exc.failure from exc

    async def _ensure(self, path: str) -> None:
        try:
            await self.store.create(path, b"", make_parents=True)
        except NodeExistsError:
            pass

    async def set_credential(self, user: str, mechanism: str, cred: ScramCredential) -> bool:
        """Create or replace one credential."""
        text = scram.credential_to_string(cred)

        def edit(config: dict[str, str]) -> dict[str, str]:
            config[mechanism] = text
            return config

        return await self.change(user, edit)

    async def delete_credential(self, user: str, mechanism: str) -> bool:
        """Remove one credential; False when there was none."""

        def edit(config: dict[str, str]) -> dict[str, str]:
            config.pop(mechanism, None)
            return config

        return await self.change(user, edit)

    def watch(self, callback: Callable[[str], None]) -> None:
        """Call `callback(user)` for each `users/<user>` notification from now on."""

        def on_children(children: list[str]) -> None:
            if any(_sequence(c) > self._last_seen for c in children):
                asyncio.get_running_loop().create_task(self._process(children, callback))

        self._watch = self.store.watch_children(CHANGES, on_children)

    async def mark_seen(self) -> None:
        """Treat the notifications there now as history (the caller reads afresh)."""
        try:
            names = await self.store.children(CHANGES)
        except NoNodeError:
            names = []
        self._last_seen = max((_sequence(n) for n in names), default=-1)

    async def _process(self, children: list[str], callback: Callable[[str], None]) -> None:
        async with self._lock:
            for name in sorted(children, key=_sequence):
                seq = _sequence(name)
                if seq <= self._last_seen:
                    continue
                self._last_seen = seq
                try:
                    data, _ = await self.store.get(f"{CHANGES}/{name}")
                    doc = json.loads(data)
                    entity = str(doc.get("entity_path", ""))
                except NoNodeError:
                    continue
                except ValueError:
                    log.warning("ignoring malformed config change %s", name)
                    continue
                kind, _, sanitized = entity.partition("/")
                if kind == "users" and sanitized:
                    callback(scram.desanitize(sanitized))

    def close(self) -> None:
        """Stop following notifications."""
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None


def _credentials(user: str, config: Mapping[str, str]) -> dict[str, ScramCredential]:
    out = {}
    for mech, text in config.items():
        if mech in MECHANISMS:
            try:
                out[mech] = scram.credential_from_string(text)
            except ValueError as exc:
                log.warning("ignoring the %s credential of user %s: %s", mech, user, exc)
    return out


class CredentialCache:
    """The credentials a broker authenticates SCRAM clients with, following the
    store (Kafka's CredentialProvider, fed by UserConfigHandler): only the enabled
    mechanisms are kept."""

    def __init__(self, store: ScramCredentialStore, mechanisms: Iterable[str] = MECHANISMS) -> None:
        self.store = store
        self.mechanisms = frozenset(mechanisms) & frozenset(MECHANISMS)
        self._creds: dict[str, dict[str, ScramCredential]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.refreshed = asyncio.Event()

    async def start(self) -> None:
        """Load every credential, then follow the notifications."""
        await self.store.mark_seen()
        self.store.watch(self._notified)
        for user, creds in (await self.store.load_all()).items():
            self._put(user, creds)

    def _put(self, user: str, creds: Mapping[str, ScramCredential]) -> None:
        kept = {m: c for m, c in creds.items() if m in self.mechanisms}
        if kept:
            self._creds[user] = kept
        else:
            self._creds.pop(user, None)

    def _notified(self, user: str) -> None:
        task = asyncio.get_running_loop().create_task(self._reload(user))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reload(self, user: str) -> None:
        self._put(user, await self.store.credentials(user))
        self.refreshed.set()

    def lookup(self, mechanism: str) -> Callable[[str], ScramCredential | None]:
        """The credential look-up a ScramServer for `mechanism` uses."""

        def find(user: str) -> ScramCredential | None:
            return self._creds.get(user, {}).get(mechanism)

        return find

    def close(self) -> None:
        """Stop following the store."""
        self.store.close()
        for task in self._tasks:
            task.cancel()


# --- the admin APIs' rules ---------------------------------------------------------------


def alter_results(
    deletions: list[Deletion], upsertions: list[Upsertion], existing: Mapping[str, set[str]]
) -> tuple[list[UserResult], list[Deletion], list[Upsertion]]:
    """Kafka's ZkAdminManager.alterUserScramCredentials checks: per-user results (the
    first error of a user fails all its changes) and the changes to apply.
    `existing` maps users to the mechanism names they have credentials for."""
    errors: dict[str, tuple[int, str]] = {}
    seen: dict[tuple[str, int], int] = {}
    order: list[str] = []
    changes: list[Deletion | Upsertion] = [*deletions, *upsertions]
    for change in changes:
        if change.user not in order:
            order.append(change.user)
        key = (change.user, change.mechanism)
        seen[key] = seen.get(key, 0) + 1

    def fail(user: str, code: int, message: str) -> None:
        errors.setdefault(user, (code, message))

    for change in changes:
        user = change.user
        if not user:
            fail(user, UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif change.mechanism not in scram.BY_CODE:
            fail(user, UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif seen[(user, change.mechanism)] > 1:
            fail(user, DUPLICATE_RESOURCE,
                 "A user credential cannot be altered twice in the same request")  # fmt: skip
        elif isinstance(change, Upsertion):
            mech = scram.BY_CODE[change.mechanism]
            if change.iterations < mech.min_iterations:
                fail(user, UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            elif change.iterations > mech.max_iterations:
                fail(user, UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        elif scram.BY_CODE[change.mechanism].name not in existing.get(user, set()):
            fail(user, RESOURCE_NOT_FOUND,
                 "Attempt to delete a user credential that does not exist")  # fmt: skip
    results = [UserResult(u, *errors[u]) if u in errors else UserResult(u) for u in order]
    return (
        results,
        [d for d in deletions if d.user not in errors],
        [u for u in upsertions if u.user not in errors],
    )


@dataclass(frozen=True, slots=True)
class DescribeResult:
    """One user's entry in DescribeUserScramCredentials."""

    user: str
    error_code: int = NONE
    error_message: str | None = None
    credentials: tuple[tuple[int, int], ...] = ()  # (mechanism code, iterations)


def describe_results(
    users: list[str] | None, known: Mapping[str, Mapping[str, ScramCredential]]
) -> list[DescribeResult]:
    """Kafka's describe rules: null/empty asks for every user with credentials
    (sorted); a user asked twice, unknown or empty is an error of its own."""

    def entry(user: str) -> DescribeResult:
        creds = known[user]
        infos = tuple(sorted((MECHANISMS[m].code, c.iterations) for m, c in creds.items()))
        return DescribeResult(user, credentials=infos)

    if not users:
        return [entry(u) for u in sorted(known) if known[u]]
    out = []
    counts: dict[str, int] = {}
    for u in users:
        counts[u] = counts.get(u, 0) + 1
    for u in dict.fromkeys(users):
        if counts[u] > 1:
            message = (
                "Cannot describe SCRAM credentials for the same user twice in a single "
                f"request: {u}"
            )
            out.append(DescribeResult(u, DUPLICATE_RESOURCE, message))
        elif not u:
            out.append(DescribeResult(u, RESOURCE_NOT_FOUND, "Username must not be empty"))
        elif not known.get(u):
            out.append(DescribeResult(u, RESOURCE_NOT_FOUND,
                                      f"Attempt to describe a user credential that does not "
                                      f"exist: {u}"))  # fmt: skip
        else:
            out.append(entry(u))
    return out
