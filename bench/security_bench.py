"""What security costs: produce and consume MB/s over PLAINTEXT, SSL and SASL_SSL
(SCRAM-SHA-512) on one broker in the same run, and the authorizer's cost on the
produce path (ACLs on vs off), with confluent-kafka (librdkafka).

Run by hand (not a test):  .venv/bin/python bench/security_bench.py [--mib 64]
(consume is kcat reading everything back to /dev/null, as bench/broker_bench.py).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from broker_harness import BrokerProcess, free_port  # noqa: E402
from brokersec_certs import CA  # noqa: E402

RECORD = 1024


def produce(conf: dict[str, Any], topic: str, total: int) -> float:
    """MB/s of producing `total` bytes of 1 KiB records, acks=1."""
    from confluent_kafka import Producer

    p = Producer({**conf, "acks": 1, "linger.ms": 5, "batch.size": 1 << 20,
                  "queue.buffering.max.kbytes": 1 << 20})  # fmt: skip
    value = b"x" * RECORD
    p.produce(topic, value)  # metadata and connection before the clock starts
    p.flush(60)
    n = total // RECORD
    start = time.monotonic()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)
    return n * RECORD / (time.monotonic() - start) / 1e6


def consume(conf: dict[str, Any], topic: str, total: int) -> float:
    """MB/s of reading `total` bytes back with kcat (librdkafka) to /dev/null."""
    args = ["kcat", "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s"]
    for key, value in conf.items():
        args += ["-b", value] if key == "bootstrap.servers" else ["-X", f"{key}={value}"]
    start = time.monotonic()
    subprocess.run(args, stdout=subprocess.DEVNULL, check=True, timeout=600)
    return total / (time.monotonic() - start) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=64)
    total = ap.parse_args().mib << 20
    tmp = Path(tempfile.mkdtemp(prefix="kt-secbench-"))
    ca = CA()
    server = ca.issue("CN=broker1", ("localhost", "127.0.0.1"))
    files = ca.write(tmp, "server", server)
    ports = {n: free_port() for n in ("PLAINTEXT", "SSL", "SASL_SSL")}
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_bench="bench-secret";')  # fmt: skip
    base = {
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(files["pem"]),
        "num.partitions": "1",
    }  # fmt: skip
    tls = {"ssl.ca.location": str(files["ca"])}
    confs = {
        "PLAINTEXT": {"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"},
        "SSL": {"bootstrap.servers": f"127.0.0.1:{ports['SSL']}", "security.protocol": "SSL",
                **tls},
        "SASL_SSL": {"bootstrap.servers": f"127.0.0.1:{ports['SASL_SSL']}",
                     "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                     "sasl.username": "bench", "sasl.password": "bench-secret", **tls},
    }  # fmt: skip
    b = BrokerProcess(tmp / "data", ports["PLAINTEXT"], base).start(timeout=60)
    try:
        print(f"{total >> 20} MiB of 1 KiB records, acks=1, one partition each")
        for name, conf in confs.items():
            topic = f"bench-{name.lower()}"
            p = produce(conf, topic, total)
            c = consume(conf, topic, total)
            print(f"{name:10s} produce {p:7.1f} MB/s   consume {c:7.1f} MB/s")
    finally:
        b.stop()
    # the authorizer's cost on the produce path: the same PLAINTEXT produce with ACLs
    for label, extra in (("ACLs off", {}), ("ACLs on ", {
            # everyone may until ACLs exist: the bench grants itself, then is checked
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "true"})):  # fmt: skip
        port = free_port()
        props = {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "num.partitions": "1", **extra}
        d = Path(tempfile.mkdtemp(prefix="kt-secbench-acl-"))
        b = BrokerProcess(d / "data", port, props).start(timeout=60)
        try:
            conf = {"bootstrap.servers": f"127.0.0.1:{port}"}
            if extra:
                from confluent_kafka.admin import (
                    AclBinding,
                    AclOperation,
                    AclPermissionType,
                    AdminClient,
                    ResourcePatternType,
                    ResourceType,
                )

                # the broker's own listener is anonymous: grant it what the bench needs
                admin_conf = {"bootstrap.servers": f"127.0.0.1:{port}"}
                grants = [AclBinding(ResourceType.TOPIC, "bench", ResourcePatternType.LITERAL,
                                     "User:ANONYMOUS", "*", AclOperation.ALL,
                                     AclPermissionType.ALLOW),
                          AclBinding(ResourceType.BROKER, "kafka-cluster",
                                     ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                                     AclOperation.ALL, AclPermissionType.ALLOW)]  # fmt: skip
                a = AdminClient(admin_conf)
                for fut in a.create_acls(grants).values():
                    fut.result(30)
            print(f"{label}   produce {produce(conf, 'bench', total):7.1f} MB/s")
        finally:
            b.stop()


if __name__ == "__main__":
    main()
