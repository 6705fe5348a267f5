"""kafka-metadata-quorum, kafka-features and kafka-storage on kt, as Kafka 3.x's tools
behave against what they find.

kt's brokers run in ZooKeeper mode: they offer neither DescribeQuorum nor
UpdateFeatures, and report no features in ApiVersions. Kafka's own tools pointed at
such a broker fail in known words, and the shims print exactly those:

- kafka-metadata-quorum describe: `org.apache.kafka.common.errors.UnsupportedVersionException:
  The node does not support DESCRIBE_QUORUM` on stderr, exit 1 (MetadataQuorumCommand
  prints the exception's message; the Java stack trace after it is left out);
- kafka-features describe: one `Feature: ...` line per feature ApiVersions reports
  (none from kt's broker), upgrade/downgrade/disable: `Could not upgrade F to L. The
  node does not support UPDATE_FEATURES` per feature, then `N out of N operation(s)
  failed.` on stderr, exit 1 (FeatureCommand);
- kafka-storage (StorageTool): `info` reads the meta.properties of the log
  directories a server.properties names, `random-uuid` prints a Kafka Uuid, `format`
  refuses a ZooKeeper-mode configuration in Kafka's words.

A KRaft cluster that does offer these APIs is refused in one line: kt's client does
not speak DescribeQuorum or UpdateFeatures.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePath

import click

from kt.client import KafkaClient
from kt.protocol import apis
from kt.storage.meta_properties import parse_properties
from kt.storage.partition_metadata import random_uuid, uuid_to_str
from kt.tools.compat_args import Arity, CompatUsageError, KafkaMessage, Parsed, Spec
from kt.tools.compat_common import Connection, read_config_file, warn_config_file

F, V, O = Arity.FLAG, Arity.VALUE, Arity.OPTIONAL  # noqa: E741 - the three arities
EXIT_OK, EXIT_FAILED = 0, 1
DESCRIBE_QUORUM_KEY, UPDATE_FEATURES_KEY = 55, 57

# MetadataVersion (Kafka 3.8): feature level -> version string.
METADATA_VERSIONS = {
    1: "3.0-IV1", 2: "3.1-IV0", 3: "3.2-IV0", 4: "3.3-IV0", 5: "3.3-IV1", 6: "3.3-IV2",
    7: "3.3-IV3", 8: "3.4-IV0", 9: "3.5-IV0", 10: "3.5-IV1", 11: "3.5-IV2", 12: "3.6-IV0",
    13: "3.6-IV1", 14: "3.6-IV2", 15: "3.7-IV0", 16: "3.7-IV1", 17: "3.7-IV2", 18: "3.7-IV3",
    19: "3.7-IV4", 20: "3.8-IV0",
}  # fmt: skip
MINIMUM_BOOTSTRAP_LEVEL, LATEST_PRODUCTION_LEVEL = 4, 20
CONNECT = {"bootstrap-server": V, "command-config": V, "help": F, "version": F}
NO_CONTROLLER = {"bootstrap-controller": "kt's brokers have no KRaft controller to reach"}


def _connection(tool: str, p: Parsed) -> Connection:
    # argparse4j's words for the required connection group
    if not p.has("bootstrap-server"):
        raise CompatUsageError(
            "one of the arguments --bootstrap-server --bootstrap-controller is required"
        )
    config = p.value("command-config")
    if config is not None:
        if not Path(config).exists():
            raise KafkaMessage(f"Properties file {config} does not exist.")
        warn_config_file(config, "admin")
    return Connection(p.value("bootstrap-server"), config)


def _command(tool: str, p: Parsed, choices: list[str]) -> str:
    if not p.positional:
        raise CompatUsageError(f"too few arguments (choose from {', '.join(choices)})")
    word = p.positional[0]
    if word not in choices or len(p.positional) > 1:
        quoted = ", ".join(f"'{c}'" for c in choices)
        raise CompatUsageError(f"invalid choice: '{word}' (choose from {quoted})")
    return word


def refuse_unrecognized(p: Parsed, names: list[str]) -> None:
    """argparse4j's refusal of options the chosen subcommand does not have, named as
    given on the command line (`-t` stays `-t`)."""
    # parseArgs (not parseKnownArgs): the first unknown flag stops it, quoted alone
    word = p.first_typed(names)
    if word is not None:
        raise CompatUsageError(f"unrecognized arguments: '{word}'")


async def _offered(c: KafkaClient) -> dict[int, tuple[int, int]]:
    return (await c.any_connection()).broker_versions


# --- kafka-metadata-quorum -------------------------------------------------------------

QUORUM = Spec(
    {**CONNECT, "status": F, "replication": F, "human-readable": F},
    {
        **NO_CONTROLLER,
        "dry-run": "add-controller and remove-controller are KRaft-only",
        "controller-id": "add-controller and remove-controller are KRaft-only",
        "controller-directory-id": "add-controller and remove-controller are KRaft-only",
    },
)


def kafka_metadata_quorum(p: Parsed) -> int:
    """kafka-metadata-quorum.sh describe --status|--replication."""
    conn = _connection("kafka-metadata-quorum", p)
    command = _command(
        "kafka-metadata-quorum", p, ["describe", "add-controller", "remove-controller"]
    )
    if command != "describe":
        raise CompatUsageError(f"{command} is for KRaft controllers; kt's brokers have none")
    status, replication = p.has("status"), p.has("replication")
    if status and replication:
        raise KafkaMessage(
            "Only one of --status or --replication should be specified with describe sub-command"
        )
    if status and p.has("human-readable"):
        raise KafkaMessage("The option --human-readable is only supported along with --replication")
    if not status and not replication:
        raise KafkaMessage(
            "One of --status or --replication must be specified with describe sub-command"
        )

    async def go(c: KafkaClient) -> dict[int, tuple[int, int]]:
        if status:
            await c.describe_cluster()  # --status asks for the cluster id first
        return await _offered(c)

    if DESCRIBE_QUORUM_KEY not in conn.wire().run(go):
        # what the admin client raises for a broker without the API (ZooKeeper mode)
        raise KafkaMessage(
            "org.apache.kafka.common.errors.UnsupportedVersionException: "
            "The node does not support DESCRIBE_QUORUM"
        )
    raise CompatUsageError(
        "the cluster offers DescribeQuorum (KRaft); kt's client does not speak it "
        "(kt metadata shell reads a __cluster_metadata log)"
    )


# --- kafka-features --------------------------------------------------------------------

FEATURES = Spec(
    {**CONNECT, "metadata": V, "feature": V, "dry-run": F, "unsafe": F},
    NO_CONTROLLER,
)


def level_text(feature: str, level: int) -> str:
    """FeatureCommand.levelToString: metadata.version levels as their version."""
    if feature == "metadata.version":
        return METADATA_VERSIONS.get(level, f"UNKNOWN {level}")
    return str(level)


def features_text(resp: object) -> str:
    """FeatureCommand's describe lines for an ApiVersions response (v3+)."""
    finalized = {f.name: f.max_version_level for f in getattr(resp, "finalized_features", [])}
    epoch = getattr(resp, "finalized_features_epoch", -1)
    out = ""
    for f in sorted(getattr(resp, "supported_features", []), key=lambda f: f.name):
        out += (
            f"Feature: {f.name}\tSupportedMinVersion: {level_text(f.name, f.min_version)}\t"
            f"SupportedMaxVersion: {level_text(f.name, f.max_version)}\t"
            f"FinalizedVersionLevel: {level_text(f.name, finalized.get(f.name, 0))}\t"
            f"Epoch: {epoch if epoch >= 0 else '-'}\n"
        )
    return out


def metadata_level(text: str) -> int:
    """MetadataVersion.fromVersionString's level for "3.3-IV3" or "3.3" (its latest)."""
    by_name = {v: k for k, v in METADATA_VERSIONS.items()}
    if text in by_name:
        return by_name[text]
    same_release = [k for k, v in METADATA_VERSIONS.items() if v.split("-")[0] == text]
    if same_release:
        return max(same_release)
    listed = ", ".join(
        METADATA_VERSIONS[k] for k in range(MINIMUM_BOOTSTRAP_LEVEL, LATEST_PRODUCTION_LEVEL + 1)
    )
    raise KafkaMessage(
        f"Unsupported metadata version {text}. Supported metadata versions are {listed}"
    )


def feature_updates(p: Parsed, command: str) -> dict[str, int]:
    """The features and levels FeatureCommand would send, with its refusals."""
    updates: dict[str, int] = {}
    if command != "disable" and p.has("metadata"):
        updates["metadata.version"] = metadata_level(p.value("metadata") or "")
    elif p.has("metadata"):
        refuse_unrecognized(p, ["metadata"])  # disable's subparser has no --metadata
    for text in p.values("feature"):
        if command == "disable":
            name, level = text, 0
        else:
            name, eq, level_str = text.partition("=")
            if not eq:
                raise KafkaMessage(
                    f"Can't parse feature=level string {text}: equals sign not found."
                )
            name, level_str = name.strip(), level_str.strip()
            if not re.fullmatch(r"[+-]?\d+", level_str) or not -32768 <= int(level_str) < 32768:
                raise KafkaMessage(
                    f"Can't parse feature=level string {text}: unable to parse {level_str} "
                    "as a short."
                )
            level = int(level_str)
        if name in updates:
            raise KafkaMessage(f"Feature {name} was specified more than once.")
        updates[name] = level
    if not updates:
        raise KafkaMessage(f"You must specify at least one feature to {command}")
    return updates


def kafka_features(p: Parsed) -> int:
    """kafka-features.sh describe|upgrade|downgrade|disable."""
    command = _command("kafka-features", p, ["describe", "upgrade", "downgrade", "disable"])
    # options the chosen subparser lacks: argparse4j refuses them before anything runs
    if command == "describe":
        refuse_unrecognized(p, ["feature", "metadata", "dry-run", "unsafe"])
    elif command == "upgrade":
        refuse_unrecognized(p, ["unsafe"])
    elif command == "disable":
        refuse_unrecognized(p, ["metadata"])
    conn = _connection("kafka-features", p)
    if command == "describe":

        async def describe(c: KafkaClient) -> str:
            resp = await c.send(
                apis.API_VERSIONS,
                {"client_software_name": "kt", "client_software_version": "1"},
            )
            return features_text(resp)

        click.echo(conn.wire().run(describe), nl=False)
        return EXIT_OK
    updates = feature_updates(p, command)
    if UPDATE_FEATURES_KEY in conn.wire().run(_offered):
        raise CompatUsageError("the cluster offers UpdateFeatures; kt's client does not speak it")
    # The admin client fails every update with the version error; FeatureCommand
    # prints one line per feature in name order, then its summary on stderr.
    why = "The node does not support UPDATE_FEATURES"
    helper = "Can not " if p.has("dry-run") else "Could not "
    for name in sorted(updates):
        what = f"disable {name}" if command == "disable" else f"{command} {name} to {updates[name]}"
        click.echo(f"{helper}{what}. {why}")
    raise KafkaMessage(f"{len(updates)} out of {len(updates)} operation(s) failed.")


# --- kafka-storage ---------------------------------------------------------------------

STORAGE = Spec(
    {"config": V, "cluster-id": V, "ignore-formatted": F, "help": F, "version": F},
    {
        "release-version": "kt formats no KRaft directories",
        "add-scram": "kt formats no KRaft directories",
        "standalone": "kt formats no KRaft directories",
        "initial-controllers": "kt formats no KRaft directories",
        "no-initial-controllers": "kt formats no KRaft directories",
        "feature": "kt formats no KRaft directories",
    },
    short={"-c": "config", "-t": "cluster-id", "-g": "ignore-formatted"},
)


def log_directories(props: dict[str, str]) -> list[str]:
    """StorageTool.configToLogDirectories: log.dirs (else log.dir, else Kafka's
    default) and metadata.log.dir, sorted, each once."""
    dirs_text = props.get("log.dirs") or props.get("log.dir") or "/tmp/kafka-logs"
    dirs = {d.strip() for d in dirs_text.split(",") if d.strip()}
    if props.get("metadata.log.dir"):
        dirs.add(props["metadata.log.dir"].strip())
    return sorted(dirs)


def storage_info(directories: list[str], kraft: bool) -> tuple[str, int]:
    """StorageTool.infoCommand's text and exit code for these directories."""
    problems: list[str] = []
    found: list[str] = []
    prev: dict[str, str] | None = None
    for directory in sorted(directories):
        path = Path(directory)
        shown = str(PurePath(directory))
        # os.path's tests, not Path's: like Java's Files.isDirectory/Files.exists they
        # answer False when stat fails for any reason (EACCES under an unreadable
        # parent included), so such a directory is listed as StorageTool lists it
        # ("does not exist") instead of raising PermissionError.
        if not os.path.isdir(path):
            problems.append(
                f"{shown} {'is not a directory' if os.path.exists(path) else 'does not exist'}"
            )
            continue
        found.append(shown)
        meta = path / "meta.properties"
        if not os.path.exists(meta):
            problems.append(f"{shown} is not formatted.")
            continue
        try:
            cur = parse_properties(meta.read_bytes(), str(meta))
        except OSError as exc:
            # an unreadable meta.properties: StorageTool dies with a stack trace here;
            # kt lists it as a problem, as StorageTool lists one it cannot parse
            problems.append(f"Error loading {meta}: {exc.strerror or exc}")
            continue
        except Exception as exc:
            problems.append(f"Error loading {meta}: {exc}")
            continue
        version = cur.get("version", "0").strip()
        if version not in ("0", "1"):
            problems.append(f"Unsupported version for {meta}: {version}")
            continue
        if prev is None:
            prev = cur
        elif prev != cur:
            problems.append(
                f"Metadata for {meta} was {_props_text(cur)}, but other directories featured "
                f"{_props_text(prev)}"
            )
    if prev is not None:
        prev_version = prev.get("version", "0").strip()
        if kraft and prev_version == "0":
            problems.append(
                "The kafka configuration file appears to be for a cluster in KRaft mode, but "
                "the directories are formatted for legacy mode."
            )
        elif not kraft and prev_version == "1":
            problems.append(
                "The kafka configuration file appears to be for a legacy cluster, but the "
                "directories are formatted for a cluster in KRaft mode."
            )
    if not directories:
        return "No directories specified.\n", EXIT_OK
    out = ""
    if found:
        out += "Found log directory:\n" if len(found) == 1 else "Found log directories:\n"
        out += "".join(f"  {d}\n" for d in found) + "\n"
    if prev is not None:
        out += f"Found metadata: {_props_text(prev)}\n\n"
    if problems:
        out += "Found problem:\n" if len(problems) == 1 else "Found problems:\n"
        out += "".join(f"  {p}\n" for p in problems) + "\n"
        return out, EXIT_FAILED
    return out, EXIT_OK


def _props_text(props: dict[str, str]) -> str:
    # a sorted java.util.Map's toString: {k=v, k=v}
    return "{" + ", ".join(f"{k}={props[k]}" for k in sorted(props)) + "}"


def _java_uuid_check(text: str) -> None:
    # Uuid.fromString's refusals, in its words
    if len(text) > 24:
        raise ValueError(
            f"Input string with prefix `{text[:24]}` is too long to be decoded as a base64 UUID"
        )
    import base64
    import binascii

    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"Illegal base64 input: {exc}") from None
    if len(raw) != 16:
        raise ValueError(
            f"Input string `{text}` decoded as {len(raw)} bytes, which is not equal to the "
            "expected 16 bytes of a base64-encoded UUID"
        )


def kafka_storage(p: Parsed) -> int:
    """kafka-storage.sh info|format|random-uuid."""
    command = _command("kafka-storage", p, ["info", "format", "random-uuid"])
    # options the chosen subparser lacks: argparse4j refuses them before anything runs
    if command == "random-uuid":
        refuse_unrecognized(p, ["config", "cluster-id", "ignore-formatted"])
    elif command == "info":
        refuse_unrecognized(p, ["cluster-id", "ignore-formatted"])
    if command == "random-uuid":
        click.echo(uuid_to_str(random_uuid()))
        return EXIT_OK
    if not p.has("config"):
        raise CompatUsageError("argument --config/-c is required")
    props = read_config_file(p.value("config") or "", "config")
    kraft = bool(props.get("process.roles", "").strip())
    directories = log_directories(props)
    if command == "info":
        text, code = storage_info(directories, kraft)
        click.echo(text, nl=False)
        return code
    if not p.has("cluster-id"):
        raise CompatUsageError("argument --cluster-id/-t is required")
    cluster_id = p.value("cluster-id") or ""
    try:
        _java_uuid_check(cluster_id)
    except ValueError as exc:
        raise KafkaMessage(
            f"Cluster ID string {cluster_id} does not appear to be a valid UUID: {exc}"
        ) from None
    if not kraft:
        raise KafkaMessage(
            "The kafka configuration file appears to be for a legacy cluster. Formatting is "
            "only supported for clusters in KRaft mode."
        )
    raise CompatUsageError(
        "format of a KRaft configuration is not supported by kt (its brokers run in "
        "ZooKeeper mode and format their directories themselves)"
    )
