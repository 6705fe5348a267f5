"""Every online kt command, unchanged, against a secured cluster (issue 20).

The online commands are found in kt's real click tree (every command taking the shared
connection options, `--command-config` among them); each runs as a real `kt` process
with a realistic, harmless invocation from COMMANDS, over SASL_SSL + SCRAM-SHA-512
given by `--command-config`, and again over mutual TLS given by a profile
(`kt profile create ... --use`). A command added to the tree without a row in COMMANDS
fails `test_every_online_command_has_a_row`, so it gets covered here too.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import click
import pytest
from broker_harness import KT
from tls_harness import PASSWORD

pytestmark = pytest.mark.integration

# Commands with the connection options that are tested elsewhere: the TUI is a
# full-screen program (tests/tui drives it; its sampler over SASL_SSL is in
# test_client_vs_secured_broker.py).
SKIPPED = {"tui"}
# Commands without kt's connection options that reach the cluster anyway: `compat run`
# takes Kafka's own (--bootstrap-server, --command-config) among the tool's arguments.
ALSO_ONLINE = {"compat run"}

# command path -> steps, in the order they run: (arguments, expected exit code, stdin).
# {t} is the pass's topic, {g} its group, {u} its SCRAM user; {files} name files
# written by the test. Exit code 1 is expected only where the command reports a
# problem by design (nothing to elect, no such transaction).
Step = tuple[list[str], int, str | None]
# command path -> what its expected exit-1 line says: the broker's answer, proving the
# request got through the secured connection (not a refusal to connect).
PROBLEM_SAYS = {
    "acl check": "SECURITY_DISABLED",
    "transactions describe": "TRANSACTIONAL_ID_NOT_FOUND",
    "transactions abort": "Could not find any open transactions starting at offset 0",
}
COMMANDS: dict[str, list[Step]] = {
    "topic create": [(["topic", "create", "{t}", "--partitions", "1"], 0, None)],
    "produce": [(["produce", "{t}", "-K", ":"], 0, "k1:one\nk2:two\n")],
    "consume": [
        (["consume", "{t}", "-G", "{g}", "-o", "beginning", "-c", "2", "-K", ":"], 0, None)
    ],
    "topic list": [(["topic", "list"], 0, None)],
    "topic describe": [(["topic", "describe", "{t}"], 0, None)],
    "topic alter": [(["topic", "alter", "{t}", "--partitions", "2"], 0, None)],
    "configs describe": [
        (["configs", "describe", "--entity-type", "topics", "--entity-name", "{t}"], 0, None),
        (
            ["configs", "describe", "--entity-type", "brokers", "--entity-name", "1", "--all"],
            0,
            None,
        ),
    ],
    "configs alter": [
        (
            [
                "configs",
                "alter",
                "--entity-type",
                "topics",
                "--entity-name",
                "{t}",
                "--add-config",
                "retention.ms=86400000",
            ],
            0,
            None,
        ),
        (
            [
                "configs",
                "alter",
                "--entity-type",
                "topics",
                "--entity-name",
                "{t}",
                "--delete-config",
                "retention.ms",
            ],
            0,
            None,
        ),
    ],
    "log-dirs describe": [(["log-dirs", "describe", "--topic-list", "{t}"], 0, None)],
    "cluster describe": [(["cluster", "describe"], 0, None)],
    "group list": [(["group", "list"], 0, None)],
    "group describe": [(["group", "describe", "--group", "{g}"], 0, None)],
    "group reset-offsets": [
        (
            [
                "group",
                "reset-offsets",
                "--group",
                "{g}",
                "--topic",
                "{t}",
                "--to-earliest",
                "--execute",
            ],
            0,
            None,
        ),
    ],
    "reassign-partitions": [
        (
            [
                "reassign-partitions",
                "--generate",
                "--topics-to-move-json-file",
                "{topics_json}",
                "--broker-list",
                "1",
            ],
            0,
            None,
        ),
        (["reassign-partitions", "--execute", "--reassignment-json-file", "{plan_json}"], 0, None),
        (["reassign-partitions", "--verify", "--reassignment-json-file", "{plan_json}"], 0, None),
        (["reassign-partitions", "--list"], 0, None),
    ],
    # one replica per partition: the preferred leader already leads (Kafka's
    # ELECTION_NOT_NEEDED), which the tool reports as not an error
    "leader-election": [
        (
            [
                "leader-election",
                "--election-type",
                "preferred",
                "--topic",
                "{t}",
                "--partition",
                "0",
            ],
            0,
            None,
        ),
    ],
    "transactions list": [(["transactions", "list"], 0, None)],
    "transactions describe": [
        (["transactions", "describe", "--transactional-id", "{t}-no-such-txn"], 1, None),
    ],
    "transactions describe-producers": [
        (["transactions", "describe-producers", "--topic", "{t}", "--partition", "0"], 0, None),
    ],
    "transactions find-hanging": [(["transactions", "find-hanging", "--broker-id", "1"], 0, None)],
    # offset 0 holds a non-transactional record: nothing to abort, said as a problem
    "transactions abort": [
        (
            ["transactions", "abort", "--topic", "{t}", "--partition", "0", "--start-offset", "0"],
            1,
            None,
        ),
    ],
    # the broker runs without an authorizer: the answer (SECURITY_DISABLED) comes back
    # over the secured connection and is reported as the problem it is
    "acl check": [
        (
            ["acl", "check", "--principal", "User:alice", "--operation", "Read", "--topic", "{t}"],
            1,
            None,
        ),
    ],
    "user scram describe": [(["user", "scram", "describe"], 0, None)],
    "user scram add": [
        (
            [
                "user",
                "scram",
                "add",
                "{u}",
                "--mechanism",
                "scram-sha-512",
                "--password-file",
                "{password_file}",
            ],
            0,
            None,
        ),
        (["user", "scram", "describe", "{u}"], 0, None),
    ],
    "user scram delete": [
        (["user", "scram", "delete", "{u}", "--mechanism", "scram-sha-512"], 0, None),
    ],
    "compat run": [
        (["compat", "run", "kafka-topics", "--list"], 0, None),
        (["compat", "run", "kafka-topics", "--describe", "--topic", "{t}"], 0, None),
    ],
    "group delete": [(["group", "delete", "--group", "{g}"], 0, None)],
    "topic delete": [(["topic", "delete", "{t}"], 0, None)],
}


def online_commands() -> set[str]:
    """Paths ("topic create") of every command in kt's click tree that takes the shared
    connection options."""
    from kt.cli import cli

    found: set[str] = set()

    def walk(command: click.Command, path: list[str]) -> None:
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None
                walk(sub, [*path, name])
            return
        opts = {o for p in command.params for o in getattr(p, "opts", [])}
        if "--command-config" in opts:
            found.add(" ".join(path))

    walk(cli, [])
    return found


def test_every_online_command_has_a_row() -> None:
    online = online_commands()
    assert {"topic create", "produce", "consume", "cluster describe"} <= online  # the walk works
    missing = sorted(online - set(COMMANDS) - SKIPPED)
    assert not missing, f"online commands without a row in COMMANDS: {missing}"
    stale = sorted(set(COMMANDS) - online - ALSO_ONLINE)
    assert not stale, f"rows in COMMANDS for commands that are not online commands: {stale}"


def run_kt(
    args: list[str], stdin: str | None, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KT, *args], input=stdin, capture_output=True, text=True,
                          timeout=180, env=env)  # fmt: skip


def base_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KT_")}
    env["XDG_CONFIG_HOME"] = str(tmp / "config")  # never the user's profiles
    return env


def run_every_command(
    tmp: Path, name: str, conn: list[str], compat_conn: list[str], env: dict[str, str]
) -> None:
    """Run COMMANDS' steps in order with `conn` appended (`compat run`: `compat_conn`,
    Kafka's connection arguments, right after the tool's name); report every failing
    step at once."""
    files = {
        "topics_json": tmp / "topics.json",
        "plan_json": tmp / "plan.json",
        "password_file": tmp / "password",
    }
    files["topics_json"].write_text(json.dumps({"version": 1, "topics": [{"topic": name}]}))
    plan = [{"topic": name, "partition": p, "replicas": [1], "log_dirs": ["any"]} for p in (0, 1)]
    files["plan_json"].write_text(json.dumps({"version": 1, "partitions": plan}))
    files["password_file"].write_text("dave-secret\n")
    values = {"t": name, "g": f"{name}-g", "u": f"{name}-user"} | {
        k: str(v) for k, v in files.items()
    }
    failures: list[str] = []
    for path, steps in COMMANDS.items():
        for args, code, stdin in steps:
            argv = [a.format(**values) for a in args]
            if argv[:2] == ["compat", "run"]:
                argv = [*argv[:3], *compat_conn, *argv[3:]]
            else:
                argv = [*argv, *conn]
            r = run_kt(argv, stdin, env)
            shown = " ".join(argv if argv[0] == "compat" else argv[: len(argv) - len(conn)])
            if r.returncode != code or "Traceback" in r.stderr:
                failures.append(
                    f"kt {shown}: exit {r.returncode} (want {code}): {r.stderr.strip()}"
                )
            elif code == 1:
                lines = r.stderr.strip().splitlines()
                if (
                    len(lines) != 1
                    or not lines[0].startswith("kt: error: ")
                    or PROBLEM_SAYS[path] not in lines[0]
                ):
                    failures.append(f"kt {shown}: not the expected kt: error line: {r.stderr!r}")
            if path == "consume" and r.returncode == 0:
                assert r.stdout.splitlines() == ["k1:one", "k2:two"], r.stdout
    assert not failures, "\n".join(failures)


def test_every_command_over_sasl_ssl_scram_command_config(
    secured_broker: dict[str, Any], tmp_path: Path
) -> None:
    port, pki = secured_broker["ports"]["SASL_SSL"], secured_broker["pki"]
    props = tmp_path / "msk.properties"
    props.write_text(
        f"bootstrap.servers=localhost:{port}\nsecurity.protocol=SASL_SSL\n"
        f"ssl.truststore.location={pki / 'ca.pem'}\nssl.truststore.type=PEM\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="alice-secret";\n'
    )
    conn = ["--command-config", str(props)]
    compat = ["--bootstrap-server", f"localhost:{port}", *conn]
    run_every_command(tmp_path, "every-scram", conn, compat, base_env(tmp_path))


def test_every_command_over_mutual_tls_profile(
    secured_broker: dict[str, Any], tmp_path: Path
) -> None:
    port, pki = secured_broker["ports"]["SSL"], secured_broker["pki"]
    env = base_env(tmp_path)
    settings = {
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki / "ca.pem"),
        "ssl.keystore.location": str(pki / "client.p12"),
        "ssl.keystore.password": PASSWORD,
    }
    xs = [a for k, v in settings.items() for a in ("-X", f"{k}={v}")]
    r = run_kt(["profile", "create", "aiven", "-b", f"localhost:{port}", *xs, "--use"], None, env)
    assert r.returncode == 0, r.stderr
    # Kafka's tools know no kt profiles: compat run is given Kafka's arguments
    props = tmp_path / "aiven.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    compat = ["--bootstrap-server", f"localhost:{port}", "--command-config", str(props)]
    # the current profile alone connects: no connection option on any kt command
    run_every_command(tmp_path, "every-mtls", [], compat, env)
