"""Where an online command connects and how: flags, environment, profile, local cluster.

Every online command (and `kt tui`) takes the same connection options; this module
merges them, highest first:

1. flags: `-b/--bootstrap-server`, `-X key=value` (kcat's, repeatable), `-F FILE`
   (kcat's properties file), `--command-config FILE` (Kafka's tools');
2. the environment: `KT_BOOTSTRAP_SERVER`;
3. a profile: `--profile NAME` / `KT_PROFILE`, else the one `kt profile use` chose;
4. the local cluster `kt cluster up` made: `$KT_CLUSTER_DIR/cluster.json`, else
   `./kt-cluster/cluster.json`;
5. localhost:9092.

Client properties (security.protocol, ssl.*, sasl.*, client.id, timeouts) merge the
same way: the profile's, then --command-config's, then -F's, then each -X in order.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kt.client.security import SECURITY_KEYS
from kt.storage.errors import CorruptCheckpointError
from kt.storage.meta_properties import parse_properties
from kt.tools.profiles import ProfileError, ProfileStore

DEFAULT_BOOTSTRAP = "localhost:9092"
CLUSTER_DIR_ENV = "KT_CLUSTER_DIR"
DEFAULT_CLUSTER_DIR = "kt-cluster"

#: non-security keys kt reads
GENERAL_KEYS = frozenset(
    {
        "bootstrap.servers",
        "metadata.broker.list",  # librdkafka's (kcat) name for bootstrap.servers
        "client.id",
        "request.timeout.ms",
        "default.api.timeout.ms",
    }
)


class SettingsError(Exception):
    """A bad connection setting; the message is one line naming it."""


@dataclass
class ConnectSettings:
    """The merged result: bootstrap servers, client properties, and where they came from."""

    bootstrap: str
    source: str
    properties: dict[str, str] = field(default_factory=dict)
    #: warnings to print (a profile file readable by others, ignored properties)
    warnings: list[str] = field(default_factory=list)
    #: what to say with -v
    notes: list[str] = field(default_factory=list)

    def security_properties(self) -> dict[str, str]:
        """The security part of the properties (what SecurityConfig reads)."""
        return {k: v for k, v in self.properties.items() if k in SECURITY_KEYS}


def read_properties_file(path: str, option: str) -> dict[str, str]:
    """A Java properties file as a dict (values trimmed, as Kafka's ConfigDef does)."""
    p = Path(path)
    if not p.is_file():
        raise SettingsError(f"{option}: {path}: no such file")
    try:
        return {k: v.strip() for k, v in parse_properties(p.read_text()).items()}
    except (OSError, UnicodeDecodeError, CorruptCheckpointError) as exc:
        raise SettingsError(f"{option}: {path}: {exc}") from None


def check_properties(props: Mapping[str, str], where: str) -> list[str]:
    """Refuse what kt cannot honour; returns warnings for keys it ignores.

    An unknown ssl.* or sasl.* key is an error (connecting without a security
    setting the file asks for would be wrong); other keys of Kafka's clients
    (acks, session.timeout.ms, client.dns.lookup, ...) are not about connecting
    and are ignored, as a Confluent Cloud client.properties has them."""
    ignored = []
    for key, value in props.items():
        if key in SECURITY_KEYS or key in GENERAL_KEYS:
            if key.endswith(".ms") and not (value.isdigit() and int(value) > 0):
                raise SettingsError(f"{where}: {key}={value}: not a positive integer")
            if key in ("bootstrap.servers", "client.id") and not value:
                raise SettingsError(f"{where}: {key} is empty")
            continue
        if key.startswith(("ssl.", "sasl.")) or key == "security.providers":
            raise SettingsError(f"{where}: unsupported property {key}")
        ignored.append(key)
    return ignored


def parse_x(items: Sequence[str]) -> dict[str, str]:
    """kcat's -X key=value list (later wins)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SettingsError(f"-X: expected key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def local_cluster_bootstrap(env: Mapping[str, str]) -> tuple[str, str, Path | None] | None:
    """(bootstrap servers, directory, the admin's client properties of a secure
    cluster else None) of the local cluster, or None when there is none."""
    from kt.tools.local_cluster import ClusterError, LocalCluster

    named = env.get(CLUSTER_DIR_ENV)
    directory = Path(named) if named else Path(DEFAULT_CLUSTER_DIR)
    if not (directory / "cluster.json").is_file():
        if named:
            raise SettingsError(f"{CLUSTER_DIR_ENV}={named}: no cluster.json there")
        return None
    try:
        cluster = LocalCluster.load(directory)
    except ClusterError as exc:
        raise SettingsError(str(exc)) from None
    servers = cluster.bootstrap_servers
    if not servers:
        return None
    return servers, str(directory), cluster.client_properties


def resolve(
    *,
    bootstrap_flag: str | None,
    bootstrap_env: str | None,
    command_config: str | None,
    properties_file: str | None,
    x_items: Sequence[str],
    profile_name: str | None,
    env: Mapping[str, str] | None = None,
    store: ProfileStore | None = None,
) -> ConnectSettings:
    """Merge everything into one ConnectSettings (SettingsError when something is bad)."""
    env = os.environ if env is None else env
    props: dict[str, str] = {}
    notes: list[str] = []
    warnings: list[str] = []

    # profile: explicit (--profile / KT_PROFILE), else the current one
    profile_bootstrap = None
    try:
        store = store or ProfileStore.load()
    except ProfileError as exc:
        raise SettingsError(str(exc)) from None
    name = profile_name or store.current
    if name:
        try:
            prof = store.get(name)
        except ProfileError as exc:
            raise SettingsError(str(exc)) from None
        if store.warning:
            warnings.append(store.warning)
        props.update(prof.properties)
        profile_bootstrap = prof.bootstrap or prof.properties.get("bootstrap.servers")
        how = "--profile/KT_PROFILE" if profile_name else "kt profile use"
        notes.append(f"profile {name!r} ({how}) from {store.path}")

    file_bootstrap = None
    for path, option in ((command_config, "--command-config"), (properties_file, "-F")):
        if path is None:
            continue
        fprops = read_properties_file(path, option)
        ignored = check_properties(fprops, f"{option}: {path}")
        if ignored:
            notes.append(f"{option} {path}: ignoring {', '.join(sorted(ignored))}")
        props.update(fprops)
        file_bootstrap = fprops.get("bootstrap.servers", fprops.get("metadata.broker.list",
                                                                    file_bootstrap))  # fmt: skip
    xprops = parse_x(x_items)
    ignored = check_properties(xprops, "-X")
    if ignored:
        notes.append(f"-X: ignoring {', '.join(sorted(ignored))}")
    props.update(xprops)
    x_bootstrap = xprops.get("bootstrap.servers", xprops.get("metadata.broker.list"))

    candidates = [
        (bootstrap_flag, "--bootstrap-server"),
        (x_bootstrap, "-X bootstrap.servers"),
        (file_bootstrap, "the properties file's bootstrap.servers"),
        (bootstrap_env, "KT_BOOTSTRAP_SERVER"),
        (profile_bootstrap, f"profile {name!r}"),
    ]
    for value, source in candidates:
        if value:
            return ConnectSettings(value, source, props, warnings, notes)
    local = local_cluster_bootstrap(env)
    if local is not None:
        servers, directory, client_file = local
        if client_file is not None and client_file.is_file():
            # a secure local cluster (kt cluster up --secure): its admin's settings,
            # under whatever was given explicitly
            cprops = read_properties_file(str(client_file), "the local cluster")
            cprops.pop("bootstrap.servers", None)
            props = {**cprops, **props}
            notes.append(f"the local cluster's client properties {client_file}")
        return ConnectSettings(servers, f"the local cluster in {directory}", props,
                               warnings, notes)  # fmt: skip
    return ConnectSettings(DEFAULT_BOOTSTRAP, "the default", props, warnings, notes)
