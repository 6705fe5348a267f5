"""`kt user scram add|delete|describe`: SCRAM credentials of a secured cluster,
through Kafka's AlterUserScramCredentials / DescribeUserScramCredentials APIs (what
`kafka-configs.sh --bootstrap-server ... --entity-type users` sends).

The password never travels or is stored: the command salts it here (a random 32-byte
salt, PBKDF2 with the mechanism's hash, RFC 5802's SaltedPassword) and sends the
salted password, as Kafka's admin client does. It is read from a file, from stdin, or
typed at a hidden prompt; never from the command line, where `ps` would show it.
"""

from __future__ import annotations

import hashlib
import secrets
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from kt.client import KafkaClient
from kt.protocol import ErrorCode, apis
from kt.tools.console import emit_json, fail, handle_errors, usage_error
from kt.tools.wire import Wire, wire_options

#: mechanism name -> (Kafka's admin-API code, hashlib name)
MECHANISMS = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}
_NAMES = {code: name for name, (code, _) in MECHANISMS.items()}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384


@click.group()
def user() -> None:
    """Users of a secured cluster: their SCRAM credentials.

    \b
    Examples:
      kt user scram add alice --mechanism SCRAM-SHA-512 --iterations 8192 -b host:9092
      kt user scram add svc --password-file /run/secrets/svc-password -b host:9092
      kt user scram describe -b host:9092
      kt user scram delete alice --mechanism SCRAM-SHA-512 -b host:9092
      kt user scram add admin --password-file admin.pw --zookeeper zk1:2181/kafka

    Exit codes: 0 ok, 1 the operation failed (refused by the broker, unreachable
    cluster), 2 usage error.
    """


@user.group()
def scram() -> None:
    """SCRAM-SHA-256/512 credentials (stored by the brokers as Kafka stores them)."""


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's SaltedPassword: PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism][1], password.encode("utf-8"), salt,
                               iterations)  # fmt: skip


def _read_password(password_file: str | None) -> str:
    if password_file == "-" or (password_file is None and not sys.stdin.isatty()):
        text = sys.stdin.readline()
    elif password_file is not None:
        try:
            text = Path(password_file).read_text(encoding="utf-8")
        except OSError as exc:
            usage_error(f"--password-file: {password_file}: {exc.strerror or exc}")
    else:
        text = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    password = text.rstrip("\r\n")
    if not password:
        usage_error("the password is empty")
    return password


def _result_error(result: Any) -> str | None:
    if result.error_code == ErrorCode.NONE:
        return None
    code = ErrorCode(result.error_code)
    return f"{code.name}: {result.error_message or code.message}"


_zookeeper = click.option(
    "--zookeeper",
    metavar="HOST:PORT[/CHROOT]",
    help="Write/read /config/users in ZooKeeper directly (kafka-configs.sh --zookeeper): "
    "how the inter-broker user is created before any broker runs.",
)

_mechanism = click.option(
    "--mechanism",
    type=click.Choice(sorted(MECHANISMS), case_sensitive=False),
    default="SCRAM-SHA-512",
    show_default=True,
    help="The SCRAM mechanism.",
)


@scram.command("add")
@click.argument("name")
@_mechanism
@click.option("--iterations", type=int, default=4096, show_default=True,
              help=f"PBKDF2 iterations ({MIN_ITERATIONS} to {MAX_ITERATIONS}).")  # fmt: skip
@click.option("--password-file", metavar="PATH",
              help="Read the password from this file ('-': stdin; default: a hidden "
              "prompt, or stdin when it is not a terminal).")  # fmt: skip
@_zookeeper
@wire_options
@handle_errors
def scram_add(
    name: str,
    mechanism: str,
    iterations: int,
    password_file: str | None,
    zookeeper: str | None,
    wire: Wire,
) -> None:
    """Create or replace a user's credential for a mechanism (through a broker, or
    with --zookeeper straight into ZooKeeper before any broker runs)."""
    mechanism = mechanism.upper()
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        usage_error(f"--iterations must be {MIN_ITERATIONS} to {MAX_ITERATIONS}, got {iterations}")
    if not name:
        usage_error("the user name is empty")
    password = _read_password(password_file)
    if zookeeper is not None:
        from kt.cluster import scram_credentials as sc

        cred = sc.make_credential(sc.MECHANISMS[mechanism], password, iterations)
        text = sc.credential_to_string(cred)
        _zk_change(zookeeper, wire.timeout, name, lambda c: {**c, mechanism: text})
        return
    body = {"deletions": [], "upsertions": [upsertion(name, mechanism, password, iterations)]}
    alter_credentials(wire, name, body)


def _zk_change(
    zookeeper: str, timeout: float, name: str, edit: Callable[[dict[str, str]], dict[str, str]]
) -> None:
    from kt.tools.zk_users import ZkUsers

    zk = ZkUsers(zookeeper, timeout)
    try:
        zk.change(name, edit)
    finally:
        zk.close()
    click.echo(f"Completed updating config for user {name}.")


def upsertion(name: str, mechanism: str, password: str, iterations: int) -> dict[str, Any]:
    """An AlterUserScramCredentials upsertion: a fresh random salt and the salted
    password (the password itself never leaves this process)."""
    salt = secrets.token_bytes(32)
    return {"name": name, "mechanism": MECHANISMS[mechanism][0], "iterations": iterations,
            "salt": salt, "salted_password": salted_password(mechanism, password, salt,
                                                             iterations)}  # fmt: skip


@scram.command("delete")
@click.argument("name")
@_mechanism
@_zookeeper
@wire_options
@handle_errors
def scram_delete(name: str, mechanism: str, zookeeper: str | None, wire: Wire) -> None:
    """Remove a user's credential for a mechanism."""
    if zookeeper is not None:
        mech = mechanism.upper()

        def drop(config: dict[str, str]) -> dict[str, str]:
            if mech not in config:
                fail(f"user {name}: RESOURCE_NOT_FOUND: Attempt to delete a user credential "
                     "that does not exist")  # fmt: skip
            return {k: v for k, v in config.items() if k != mech}

        _zk_change(zookeeper, wire.timeout, name, drop)
        return
    body = {"deletions": [{"name": name, "mechanism": MECHANISMS[mechanism.upper()][0]}],
            "upsertions": []}  # fmt: skip
    alter_credentials(wire, name, body)


def alter_credentials(wire: Wire, name: str, body: dict[str, Any]) -> None:
    """Send AlterUserScramCredentials; one error line and exit 1 per refused change,
    else kafka-configs.sh's completion line."""

    async def run(client: KafkaClient) -> Any:
        return await client.send(apis.ALTER_USER_SCRAM_CREDENTIALS, body)

    response = wire.run(run)
    for result in response.results:
        problem = _result_error(result)
        if problem is not None:
            fail(f"user {result.user}: {problem}")
    click.echo(f"Completed updating config for user {name}.")


@scram.command("describe")
@click.argument("names", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
@_zookeeper
@wire_options
@handle_errors
def scram_describe(
    names: tuple[str, ...], as_json: bool, zookeeper: str | None, wire: Wire
) -> None:
    """The mechanisms and iteration counts of users' credentials (all users when none
    is named); never any secret."""
    if zookeeper is not None:
        _zk_describe(zookeeper, wire.timeout, names, as_json)
        return
    describe_credentials(wire, names, as_json)


def _zk_describe(zookeeper: str, timeout: float, names: tuple[str, ...], as_json: bool) -> None:
    from kt.cluster import scram_credentials as sc
    from kt.tools.zk_users import ZkUsers

    zk = ZkUsers(zookeeper, timeout)
    out: dict[str, Any] = {}
    problems = []
    try:
        for user in names or tuple(zk.users()):
            config, _ = zk.config(user)
            creds = []
            for mech in sorted(m for m in config if m in sc.MECHANISMS):
                try:
                    iterations = sc.credential_from_string(config[mech]).iterations
                except ValueError as exc:
                    problems.append(f"user {user}: {mech}: {exc}")
                    continue
                creds.append({"mechanism": mech, "iterations": iterations})
            if creds:
                out[user] = creds
            elif names:
                problems.append(f"user {user}: RESOURCE_NOT_FOUND: Attempt to describe a user "
                                "credential that does not exist")  # fmt: skip
    finally:
        zk.close()
    _print_described(out, problems, as_json)


def describe_credentials(wire: Wire, names: tuple[str, ...], as_json: bool) -> None:
    """DescribeUserScramCredentials printed as kafka-configs.sh prints it (or JSON);
    exit 1 after the others when a named user has no credential."""

    async def run(client: KafkaClient) -> Any:
        users = [{"name": n} for n in names] or None
        return await client.send(apis.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": users})

    response = wire.run(run)
    if response.error_code != ErrorCode.NONE:
        code = ErrorCode(response.error_code)
        fail(f"{code.name}: {response.error_message or code.message}")
    out: dict[str, Any] = {}
    problems = []
    for r in response.results:
        problem = _result_error(r)
        if problem is not None:
            problems.append(f"user {r.user}: {problem}")
            continue
        out[r.user] = [{"mechanism": _NAMES.get(c.mechanism, str(c.mechanism)),
                        "iterations": c.iterations} for c in r.credential_infos]  # fmt: skip
    _print_described(out, problems, as_json)


def _print_described(out: dict[str, Any], problems: list[str], as_json: bool) -> None:
    if as_json:
        emit_json(out)
    else:
        for u, creds in out.items():
            listed = ", ".join(f"{c['mechanism']}=iterations={c['iterations']}" for c in creds)
            # kafka-configs.sh's line
            click.echo(f"SCRAM credential configs for user-principal '{u}' are {listed}")
    for p in problems:
        click.echo(f"kt: error: {p}", err=True)
    if problems:
        sys.exit(1)
