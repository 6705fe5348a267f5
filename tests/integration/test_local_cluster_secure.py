"""`kt cluster up --secure`: a local cluster with SASL_SSL and SCRAM-SHA-512 on every
listener, the brokers' own connections included, whose printed client properties
work as they are with kcat (-F) and kt (--command-config, or by themselves through
the local cluster), while a client without the credentials is turned away."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kt.cli import cli
from kt.tools.local_cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def kt(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_up_secure_kcat_kt_and_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert shutil.which("kcat"), "kcat is not installed (scripts/setup)"
    d = str(tmp_path / "sec")
    up = kt("cluster", "up", "--secure", "--dir", d, "--brokers", "2",
            "--override", "offsets.topic.replication.factor=2")  # fmt: skip
    try:
        assert up.exit_code == 0, up.stderr
        c = LocalCluster.load(d)
        assert c.secure and c.client_properties is not None
        props = c.client_properties
        lines = up.stdout.splitlines()
        assert "Security: SASL_SSL with SCRAM-SHA-512 everywhere; super user admin" in lines
        assert f"Try: kcat -F {props} -L" in lines
        assert f"     kt topic list --command-config {props}" in lines
        text = props.read_text()
        password = next(x for x in text.splitlines() if x.startswith("sasl.password="))
        password = password.partition("=")[2]
        assert password and password not in up.stdout + up.stderr
        assert props.stat().st_mode & 0o077 == 0

        # kcat, exactly as printed
        r = subprocess.run(["kcat", "-F", str(props), "-L"], capture_output=True, text=True,
                           timeout=60)  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert " 2 brokers:" in r.stdout and "sasl_ssl://" in r.stdout

        created = kt("topic", "create", "secure-t", "--partitions", "2",
                     "--replication-factor", "2", "--command-config", str(props))  # fmt: skip
        assert created.exit_code == 0, created.stderr
        listed = kt("topic", "list", "--command-config", str(props))
        assert listed.exit_code == 0, listed.stderr
        assert "secure-t" in listed.stdout.split()
        # replicated between the brokers over SASL_SSL: both replicas in sync
        described = kt("topic", "describe", "secure-t", "--command-config", str(props))
        assert described.exit_code == 0, described.stderr
        isrs = [ln for ln in described.stdout.splitlines() if "Isr:" in ln]
        assert len(isrs) == 2 and all(len(ln.split("Isr:")[1].split()[0].split(",")) == 2
                                      for ln in isrs), described.stdout  # fmt: skip

        # the local cluster's own client settings when nothing else is given
        monkeypatch.setenv("KT_CLUSTER_DIR", d)
        local = kt("topic", "list")
        assert local.exit_code == 0, local.stderr
        assert "secure-t" in local.stdout.split()
        monkeypatch.delenv("KT_CLUSTER_DIR")

        # no credentials: refused, one line, no traceback
        plain = kt("topic", "list", "-b", c.bootstrap_servers, "-X", "security.protocol=SSL",
                   "-X", f"ssl.ca.location={c.directory / 'security' / 'ca.crt'}")  # fmt: skip
        assert plain.exit_code == 1
        assert plain.stderr.startswith("kt: error:") and "Traceback" not in plain.stderr

        # kcat with a wrong password
        bad = subprocess.run(["kcat", "-F", str(props), "-X", "sasl.password=wrong", "-L",
                              "-m", "5"], capture_output=True, text=True, timeout=60)  # fmt: skip
        assert bad.returncode != 0

        # `up` again on the running cluster keeps --secure
        again = kt("cluster", "up", "--dir", d)
        assert again.exit_code == 0, again.stderr
        assert "Started: nothing (all was running)" in again.stdout
        assert json.loads((Path(d) / "cluster.json").read_text())["secure"] is True
        assert password not in (Path(d) / "cluster.json").read_text()
    finally:
        down = kt("cluster", "down", "--dir", d)
    assert down.exit_code == 0, down.stderr
