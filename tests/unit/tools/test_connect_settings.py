"""Where online commands connect: `kt profile`, the precedence flags > environment >
profile > local cluster > localhost:9092, -X/-F/--command-config, and what -v says."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kt.cli import cli
from kt.tools.connect_settings import SettingsError, resolve
from kt.tools.local_cluster import LocalCluster
from kt.tools.profiles import ProfileStore, mask


@pytest.fixture
def cfg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config" / "kt" / "profiles.json"
    monkeypatch.setenv("KT_CONFIG", str(path))
    monkeypatch.delenv("KT_BOOTSTRAP_SERVER", raising=False)
    monkeypatch.chdir(tmp_path)
    return path


def kt(*args: str, env: dict[str, str | None] | None = None) -> Any:
    return CliRunner().invoke(cli, list(args), env=env or {})


def test_profile_lifecycle_and_masking(cfg: Path) -> None:
    r = kt("profile", "create", "prod", "-b", "b1:9093", "-X", "security.protocol=SASL_SSL",
           "-X", "sasl.mechanism=SCRAM-SHA-512", "-X", "sasl.username=ops",
           "-X", "sasl.password=hunter2")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert "stores sasl.password" in r.stderr  # told to keep it out of the file
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o600
    r = kt("profile", "create", "dev", "-b", "127.0.0.1:9092", "--use")
    assert r.exit_code == 0 and r.stderr == "", r.stderr
    r = kt("profile", "list")
    assert r.stdout.splitlines() == ["* dev\t127.0.0.1:9092\tPLAINTEXT",
                                     "  prod\tb1:9093\tSASL_SSL"]  # fmt: skip
    r = kt("profile", "use", "prod")
    assert r.exit_code == 0
    r = kt("profile", "show")
    assert "sasl.password: ******" in r.stdout and "hunter2" not in r.stdout
    assert "name: prod (current)" in r.stdout
    doc = json.loads(kt("profile", "show", "prod", "--json").stdout)
    assert doc["properties"]["sasl.password"] == "******" and doc["current"]
    r = kt("profile", "create", "prod", "-b", "x:1")
    assert r.exit_code == 1 and "exists" in r.stderr
    r = kt("profile", "delete", "prod")
    assert r.exit_code == 0
    assert ProfileStore.load(cfg).current is None
    r = kt("profile", "show", "nope")
    assert (
        r.exit_code == 1
        and r.stderr == "kt: error: no profile 'nope' (profiles: dev; kt profile create)\n"
    )


def test_profile_settings_are_checked_and_names_too(cfg: Path) -> None:
    r = kt("profile", "create", "p", "-b", "h:1", "-X", "security.protocol=SASL_SSL")
    assert r.exit_code == 2 and "needs sasl.mechanism" in r.stderr
    r = kt("profile", "create", "bad name", "-b", "h:1")
    assert r.exit_code == 2
    r = kt("profile", "create", "p")
    assert r.exit_code == 2 and "needs bootstrap servers" in r.stderr
    assert not cfg.exists()


def test_profile_from_a_properties_file_and_env_secrets(cfg: Path, tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_text(
        "bootstrap.servers=pkc-1.example.cloud:9092\nsecurity.protocol=SASL_SSL\n"
        "sasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        "username='KEY' password='${env:CLOUD_SECRET}';\n"
        "session.timeout.ms=45000\n"
    )
    r = kt("profile", "create", "cloud", "--from-properties", str(props))
    assert r.exit_code == 2 and "CLOUD_SECRET is not set" in r.stderr
    r = kt("profile", "create", "cloud", "--from-properties", str(props),
           env={"CLOUD_SECRET": "s3cr3t"})  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert "stores" not in r.stderr  # a reference, not the secret
    assert "s3cr3t" not in cfg.read_text()
    prof = ProfileStore.load(cfg).get("cloud")
    assert prof.bootstrap == "pkc-1.example.cloud:9092"
    assert "session.timeout.ms" in prof.properties  # kept, ignored when connecting


def test_readable_profile_file_is_warned_about(cfg: Path) -> None:
    assert kt("profile", "create", "p", "-b", "127.0.0.1:1").exit_code == 0
    os.chmod(cfg, 0o644)
    r = kt("topic", "list", "--timeout", "1")
    assert r.exit_code == 1
    assert r.stderr.splitlines()[0] == (
        f"kt: warning: {cfg} is readable by other users and may hold secrets (chmod 600 {cfg})"
    )


def test_precedence_flags_env_profile_local_default(cfg: Path, tmp_path: Path) -> None:
    def where(*args: str, env: dict[str, str | None] | None = None) -> str:
        r = kt("topic", "list", "-v", "--timeout", "1", *args, env=env)
        line = [x for x in r.stderr.splitlines() if x.startswith("kt: bootstrap servers")]
        assert line, r.stderr
        return line[0]

    assert where() == (
        "kt: bootstrap servers localhost:9092 (from the default), security.protocol=PLAINTEXT"
    )
    cluster = LocalCluster.create(tmp_path / "kt-cluster", 2, port_base=1)
    cluster.save()
    assert where() == (
        "kt: bootstrap servers 127.0.0.1:1,127.0.0.1:2 (from the local cluster in kt-cluster), "
        "security.protocol=PLAINTEXT"
    )
    other = LocalCluster.create(tmp_path / "elsewhere", 1, port_base=7)
    other.save()
    assert "127.0.0.1:7 (from the local cluster in" in where(
        env={"KT_CLUSTER_DIR": str(other.directory)}
    )
    r = kt("topic", "list", env={"KT_CLUSTER_DIR": str(tmp_path / "none")})
    assert r.exit_code == 2 and "KT_CLUSTER_DIR" in r.stderr
    assert kt("profile", "create", "p", "-b", "127.0.0.1:3").exit_code == 0
    assert "127.0.0.1:3 (from profile 'p')" in where()
    assert "127.0.0.1:4 (from KT_BOOTSTRAP_SERVER)" in where(
        env={"KT_BOOTSTRAP_SERVER": "127.0.0.1:4"}
    )
    assert "127.0.0.1:5 (from --bootstrap-server)" in where(
        "-b", "127.0.0.1:5", env={"KT_BOOTSTRAP_SERVER": "127.0.0.1:4"})  # fmt: skip
    assert "127.0.0.1:6 (from -X bootstrap.servers)" in where("-X", "bootstrap.servers=127.0.0.1:6")
    r = kt("topic", "list", "--profile", "missing")
    assert r.exit_code == 2 and "no profile 'missing'" in r.stderr
    assert kt("profile", "create", "q", "-b", "127.0.0.1:8").exit_code == 0
    assert "127.0.0.1:8 (from profile 'q')" in where(env={"KT_PROFILE": "q"})


def test_properties_merge_in_order_and_bad_ones_are_refused(cfg: Path, tmp_path: Path) -> None:
    f = tmp_path / "a.properties"
    f.write_text("security.protocol=SSL\nclient.id=from-file\n")
    s = resolve(bootstrap_flag=None, bootstrap_env=None, command_config=str(f),
                properties_file=None, x_items=["security.protocol=PLAINTEXT"],
                profile_name=None, env={})  # fmt: skip
    assert s.properties == {"security.protocol": "PLAINTEXT", "client.id": "from-file"}
    with pytest.raises(SettingsError, match="-X: expected key=value"):
        resolve(bootstrap_flag=None, bootstrap_env=None, command_config=None,
                properties_file=None, x_items=["novalue"], profile_name=None, env={})  # fmt: skip
    with pytest.raises(SettingsError, match=r"unsupported property sasl\.login\.class"):
        resolve(bootstrap_flag=None, bootstrap_env=None, command_config=None,
                properties_file=None, x_items=["sasl.login.class=x.Y"],
                profile_name=None, env={})  # fmt: skip


def test_every_online_command_takes_the_connection_options() -> None:
    online = [
        ["topic", "list"], ["topic", "create"], ["topic", "describe"], ["topic", "delete"],
        ["topic", "alter"], ["produce"], ["consume"], ["group", "list"], ["group", "describe"],
        ["group", "delete"], ["group", "reset-offsets"], ["configs", "describe"],
        ["configs", "alter"], ["log-dirs", "describe"], ["cluster", "describe"],
        ["reassign-partitions"], ["leader-election"], ["transactions", "list"],
        ["transactions", "describe"], ["transactions", "abort"],
        ["transactions", "describe-producers"], ["transactions", "find-hanging"], ["tui"],
        ["acl"], ["acl", "check"],
    ]  # fmt: skip
    for cmd in online:
        r = kt(*cmd, "--help")
        assert r.exit_code == 0, (cmd, r.output)
        for opt in ("--command-config", "-X KEY=VALUE", "-F FILE", "--profile NAME",
                    "--bootstrap-server"):  # fmt: skip
            assert opt in r.output, (cmd, opt)


def test_mask_keeps_references_and_jaas_users() -> None:
    assert mask("sasl.password", "${env:X}") == "${env:X}"
    assert mask("ssl.key.password", "p") == "******"
    assert mask("sasl.username", "bob") == "bob"
    jaas = "x.PlainLoginModule required username='bob' password='pw';"
    assert (
        mask("sasl.jaas.config", jaas)
        == "x.PlainLoginModule required username='bob' password=\"******\";"
    )
