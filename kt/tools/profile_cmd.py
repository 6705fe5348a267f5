"""`kt profile`: named clusters (bootstrap servers and security), as rpk profiles.

The profiles file and its rules are in `kt.tools.profiles`.
"""

from __future__ import annotations

import json

import click

from kt.client.security import SecurityConfig, SecurityConfigError
from kt.tools.connect_settings import SettingsError, check_properties, parse_x, read_properties_file
from kt.tools.console import fail, handle_errors, usage_error, warn
from kt.tools.profiles import Profile, ProfileError, ProfileStore, check_name, holds_inline_secret


def _load() -> ProfileStore:
    try:
        store = ProfileStore.load()
    except ProfileError as exc:
        fail(str(exc))
    if store.warning:
        warn(store.warning)
    return store


def _save(store: ProfileStore) -> None:
    try:
        store.save()
    except OSError as exc:
        fail(f"{store.path}: {exc.strerror or exc}")


@click.group()
def profile() -> None:
    """Keep named clusters: bootstrap servers plus TLS/SASL settings.

    \b
    Profiles live in $XDG_CONFIG_HOME/kt/profiles.json (~/.config/kt/...;
    KT_CONFIG names another file), written owner-only. Every online command
    takes --profile NAME (or env KT_PROFILE); without it, the profile chosen
    with `kt profile use` applies. Precedence: flags (-b, -X, -F,
    --command-config) > environment (KT_BOOTSTRAP_SERVER) > profile > the
    local cluster (./kt-cluster) > localhost:9092.

    \b
    Secrets are best kept out of the file: a value may be ${env:NAME} or
    ${file:/path} (read at connection time).

    \b
    Examples:
      kt profile create prod -b b1.example.com:9093 \\
          -X security.protocol=SASL_SSL -X sasl.mechanism=SCRAM-SHA-512 \\
          -X sasl.username=ops -X 'sasl.password=${env:PROD_KAFKA_PASSWORD}'
      kt profile create cloud --from-properties client.properties --use
      kt profile use prod
      kt profile show prod
    """


@profile.command("create")
@click.argument("name")
@click.option("--bootstrap-server", "-b", "bootstrap", metavar="HOST:PORT[,...]",
              help="The cluster's bootstrap servers.")  # fmt: skip
@click.option("-X", "x_items", multiple=True, metavar="KEY=VALUE",
              help="A client property (security.protocol, ssl.*, sasl.*), repeatable.")  # fmt: skip
@click.option("--from-properties", "from_file", metavar="FILE",
              help="Take the properties (and bootstrap.servers) of a properties file.")  # fmt: skip
@click.option("--use", "make_current", is_flag=True, help="Make it the current profile.")
@click.option("--force", is_flag=True, help="Replace an existing profile of that name.")
@handle_errors
def create(name: str, bootstrap: str | None, x_items: tuple[str, ...], from_file: str | None,
           make_current: bool, force: bool) -> None:  # fmt: skip
    """Create a profile (its settings are checked first).

    \b
    Examples:
      kt profile create local -b 127.0.0.1:9092
      kt profile create aiven -b kafka-x.aivencloud.com:12345 -X security.protocol=SSL \\
          -X ssl.ca.location=ca.pem -X ssl.certificate.location=service.cert \\
          -X ssl.key.location=service.key
    """
    bad = check_name(name)
    if bad:
        usage_error(bad)
    props: dict[str, str] = {}
    try:
        if from_file:
            props.update(read_properties_file(from_file, "--from-properties"))
            check_properties(props, f"--from-properties: {from_file}")
        xprops = parse_x(x_items)
        check_properties(xprops, "-X")
    except SettingsError as exc:
        usage_error(str(exc))
    props.update(xprops)
    servers = bootstrap or props.pop("bootstrap.servers", None)
    props.pop("bootstrap.servers", None)
    if not servers:
        usage_error("a profile needs bootstrap servers: -b HOST:PORT or bootstrap.servers")
    try:
        SecurityConfig.from_properties(props)
    except SecurityConfigError as exc:
        usage_error(str(exc))
    store = _load()
    if name in store.profiles and not force:
        fail(f"profile {name!r} exists (--force replaces it)")
    store.profiles[name] = Profile(name, servers, props)
    if make_current or store.current is None:
        store.current = name
    _save(store)
    inline = sorted(k for k, v in props.items() if holds_inline_secret(k, v))
    if inline:
        warn(f"profile {name!r} stores {', '.join(inline)} in {store.path}; "
             "${env:NAME} or ${file:/path} keeps secrets out of it")  # fmt: skip
    current = " (current)" if store.current == name else ""
    click.echo(f"Created profile {name}{current} in {store.path}.")


@profile.command("use")
@click.argument("name")
@handle_errors
def use(name: str) -> None:
    """Make NAME the profile online commands use without --profile."""
    store = _load()
    try:
        store.get(name)
    except ProfileError as exc:
        fail(str(exc))
    store.current = name
    _save(store)
    click.echo(f"Using profile {name}.")


@profile.command("list")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@handle_errors
def list_(as_json: bool) -> None:
    """List the profiles; the current one is marked with *."""
    store = _load()
    if as_json:
        click.echo(json.dumps([
            {"name": p.name, "current": p.name == store.current, "bootstrap": p.bootstrap,
             "security.protocol": p.properties.get("security.protocol", "PLAINTEXT")}
            for p in sorted(store.profiles.values(), key=lambda p: p.name)
        ]))  # fmt: skip
        return
    for p in sorted(store.profiles.values(), key=lambda p: p.name):
        mark = "*" if p.name == store.current else " "
        proto = p.properties.get("security.protocol", "PLAINTEXT")
        click.echo(f"{mark} {p.name}\t{p.bootstrap}\t{proto}")


@profile.command("show")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@handle_errors
def show(name: str | None, as_json: bool) -> None:
    """Show a profile (the current one by default); secrets are masked."""
    store = _load()
    name = name or store.current
    if name is None:
        fail("no current profile (kt profile use NAME)")
    try:
        prof = store.get(name)
    except ProfileError as exc:
        fail(str(exc))
    doc = prof.masked()
    if as_json:
        doc["current"] = name == store.current
        click.echo(json.dumps(doc))
        return
    click.echo(f"name: {prof.name}{' (current)' if name == store.current else ''}")
    click.echo(f"bootstrap.servers: {prof.bootstrap}")
    for k, v in doc["properties"].items():
        click.echo(f"{k}: {v}")


@profile.command("delete")
@click.argument("name")
@handle_errors
def delete(name: str) -> None:
    """Delete a profile."""
    store = _load()
    try:
        store.get(name)
    except ProfileError as exc:
        fail(str(exc))
    del store.profiles[name]
    if store.current == name:
        store.current = None
    _save(store)
    click.echo(f"Deleted profile {name}.")
