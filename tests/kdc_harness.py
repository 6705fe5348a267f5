"""A real MIT Kerberos KDC (Debian's krb5-kdc) for tests: its own realm, database,
configuration and port under a temporary directory, principals with keytabs.

`Kdc(dir).start()` creates realm KT.TEST, starts `krb5kdc -n` on a free port, and
`add(principal)` makes a principal and returns its keytab. `env` is what processes
need to use it (KRB5_CONFIG, KRB5_KDC_PROFILE, a private credentials cache).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

KRB5KDC = shutil.which("krb5kdc") or "/usr/sbin/krb5kdc"
KDB5_UTIL = shutil.which("kdb5_util") or "/usr/sbin/kdb5_util"
KADMIN_LOCAL = shutil.which("kadmin.local") or "/usr/sbin/kadmin.local"
AVAILABLE = all(os.path.exists(p) for p in (KRB5KDC, KDB5_UTIL, KADMIN_LOCAL))
REALM = "KT.TEST"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Kdc:
    """A KDC for realm KT.TEST under `dir`."""

    dir: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)

    def start(self, timeout: float = 30.0) -> Kdc:
        """Create the realm and start the KDC; returns when it accepts connections."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        (self.dir / "krb5.conf").write_text(
            f"[libdefaults]\n default_realm = {REALM}\n dns_lookup_kdc = false\n"
            " dns_lookup_realm = false\n rdns = false\n dns_canonicalize_hostname = false\n"
            " udp_preference_limit = 1\n"
            f"[realms]\n {REALM} = {{\n  kdc = 127.0.0.1:{self.port}\n }}\n"
            f"[domain_realm]\n localhost = {REALM}\n"
        )
        (self.dir / "kdc.conf").write_text(
            f"[kdcdefaults]\n kdc_ports = {self.port}\n kdc_tcp_ports = {self.port}\n"
            f"[realms]\n {REALM} = {{\n  database_name = {self.dir / 'principal'}\n"
            f"  key_stash_file = {self.dir / 'stash'}\n  acl_file = {self.dir / 'kadm5.acl'}\n"
            "  max_life = 1h\n }\n"
            f"[logging]\n kdc = FILE:{self.dir / 'kdc.log'}\n"
        )
        self.env = {
            "KRB5_CONFIG": str(self.dir / "krb5.conf"),
            "KRB5_KDC_PROFILE": str(self.dir / "kdc.conf"),
            "KRB5CCNAME": f"FILE:{self.dir / 'ccache'}",
        }
        env = {**os.environ, **self.env}
        subprocess.run([KDB5_UTIL, "-r", REALM, "-P", "kt-master", "create", "-s"], env=env,
                       check=True, capture_output=True, timeout=60)  # fmt: skip
        self.proc = subprocess.Popen(
            [KRB5KDC, "-n", "-r", REALM],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("krb5kdc did not start")
            time.sleep(0.05)
        return self

    def add(self, principal: str) -> Path:
        """Create `principal` (random key) and write its keytab; returns the keytab."""
        keytab = self.dir / (principal.replace("/", "_") + ".keytab")
        env = {**os.environ, **self.env}
        for q in (f"addprinc -randkey {principal}", f"ktadd -k {keytab} {principal}"):
            subprocess.run([KADMIN_LOCAL, "-r", REALM, "-q", q], env=env, check=True,
                           capture_output=True, timeout=60)  # fmt: skip
        return keytab

    def stop(self) -> None:
        """Stop the KDC."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
