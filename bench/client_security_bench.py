"""Throughput of `kt produce` and `kt consume` over TLS versus PLAINTEXT, in the same run,
and the TUI's refresh time over both.

Run by hand (not a test):  .venv/bin/python bench/client_security_bench.py
[--records 200000] [--size 200] [--rounds 3] [--json]

Setup, one transport at a time, each with a fresh `kt broker`: PLAINTEXT; TLS by
Debian's stunnel4 in front of a plaintext listener (TLS 1.3, an ECDSA P-256
certificate made here; a relay hop PLAINTEXT does not have); and kt's own SASL_SSL
listener with PLAIN (Confluent-Cloud style). The broker advertises the address the
run uses, so every connection of a run goes the same way.

For each transport and round: `kt produce` of --records records of --size bytes
from a file (wall time of the whole command, so start-up is included and is
reported apart by a 1-record run), then `kt consume -e` of them all; MB/s and
records/s from the medians. Then 10 `ClusterSampler.sample()` refreshes each way.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from broker_harness import KT, BrokerProcess, free_port  # noqa: E402
from tls_harness import Stunnel, make_pki  # noqa: E402

from kt.client import SecurityConfig  # noqa: E402
from kt.tui.sampler import ClusterSampler  # noqa: E402


def run(args: list[str], stdin: Path | None = None) -> float:
    t0 = time.monotonic()
    with open(stdin or os.devnull, "rb") as f:
        r = subprocess.run([KT, *args], stdin=f, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=600)  # fmt: skip
    if r.returncode != 0:
        raise SystemExit(f"kt {' '.join(args[:2])} failed: {r.stderr.decode()}")
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="kt-secbench-"))
    pki = make_pki(tmp / "pki")
    tls_port = free_port()
    broker_port = free_port()
    data = tmp / "records.txt"
    line = ("x" * (a.size - 1) + "\n").encode()
    data.write_bytes(line * a.records)
    one = tmp / "one.txt"
    one.write_bytes(line)
    results: dict[str, dict[str, float]] = {}
    broker = stunnel = None
    ca = str(pki / "ca.pem")
    keystore = tmp / "server-keystore.pem"
    keystore.write_text((pki / "server.key").read_text() + (pki / "server.pem").read_text())
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="admin" password="admin-secret" user_bench="bench-secret";')  # fmt: skip
    try:
        for mode in ("PLAINTEXT", "SSL via stunnel", "SASL_SSL"):
            overrides = {"num.partitions": "1"}
            host, port = "127.0.0.1", broker_port
            props: dict[str, str] = {}
            if mode == "SSL via stunnel":
                host, port = "localhost", tls_port
                overrides["advertised.listeners"] = f"PLAINTEXT://localhost:{tls_port}"
                props = {"security.protocol": "SSL", "ssl.ca.location": ca}
            elif mode == "SASL_SSL":
                host, port = "localhost", tls_port
                overrides.update({
                    "listeners": f"PLAINTEXT://127.0.0.1:{broker_port},"
                                 f"SASL_SSL://localhost:{tls_port}",
                    "sasl.enabled.mechanisms": "PLAIN",
                    "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
                    "ssl.keystore.type": "PEM",
                    "ssl.keystore.location": str(keystore),
                })  # fmt: skip
                props = {"security.protocol": "SASL_SSL", "ssl.ca.location": ca,
                         "sasl.mechanism": "PLAIN", "sasl.username": "bench",
                         "sasl.password": "bench-secret"}  # fmt: skip
            broker = BrokerProcess(tmp / f"data-{len(results)}", broker_port,
                                   overrides=overrides).start(timeout=60)  # fmt: skip
            if mode == "SSL via stunnel":
                stunnel = Stunnel(tmp, broker_port, {
                    "main": (tls_port, pki / "server.pem", pki / "server.key", False)},
                    pki / "ca.pem").start()  # fmt: skip
            conn = ["-b", f"{host}:{port}"]
            for k, v in props.items():
                conn += ["-X", f"{k}={v}"]
            startup = statistics.median(
                run(["produce", f"warm-{i}", *conn], one) for i in range(3))  # fmt: skip
            produce, consume = [], []
            for r in range(a.rounds):
                topic = f"bench-{r}"
                produce.append(run(["produce", topic, "-p", "0", *conn], data))
                consume.append(run(["consume", topic, "-p", "0", "-o", "beginning", "-e",
                                    "-c", str(a.records), *conn]))  # fmt: skip
            sec = SecurityConfig.from_properties(props)
            sampler = ClusterSampler(f"{host}:{port}", request_timeout=30, security=sec,
                                     isolate=False)  # fmt: skip

            async def refreshes(s: ClusterSampler = sampler) -> list[float]:
                out = []
                await s.sample()
                for _ in range(10):
                    t0 = time.monotonic()
                    await s.sample()
                    out.append(time.monotonic() - t0)
                await s.close()
                return out

            tui = asyncio.run(refreshes())
            mb = a.records * a.size / 1e6
            results[mode] = {
                "startup_s": startup,
                "produce_s": statistics.median(produce),
                "consume_s": statistics.median(consume),
                "produce_MBps": mb / statistics.median(produce),
                "consume_MBps": mb / statistics.median(consume),
                "produce_rps": a.records / statistics.median(produce),
                "consume_rps": a.records / statistics.median(consume),
                "tui_refresh_ms_median": statistics.median(tui) * 1000,
            }
            if stunnel is not None:
                stunnel.stop()
                stunnel = None
            broker.stop()
            broker = None
    finally:
        if stunnel is not None:
            stunnel.stop()
        if broker is not None:
            broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        print(json.dumps({"records": a.records, "size": a.size, "results": results}))
        return
    print(f"{a.records} records x {a.size} B, median of {a.rounds} rounds (whole commands)")
    print(
        f"{'':16} {'startup s':>10} {'produce MB/s':>13} {'consume MB/s':>13} "
        f"{'TUI refresh ms':>15}"
    )
    for mode, r in results.items():
        print(f"{mode:16} {r['startup_s']:10.2f} {r['produce_MBps']:13.1f} "
              f"{r['consume_MBps']:13.1f} {r['tui_refresh_ms_median']:15.1f}")  # fmt: skip
    p = results["PLAINTEXT"]
    for mode in ("SSL via stunnel", "SASL_SSL"):
        s = results[mode]
        print(f"{mode}/PLAINTEXT: produce {s['produce_MBps'] / p['produce_MBps']:.2f}, "
              f"consume {s['consume_MBps'] / p['consume_MBps']:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
