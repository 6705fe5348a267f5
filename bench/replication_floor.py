"""The floor under RF=3 acks=all on this machine: the same byte moves with no broker.

Run by hand (not a test):  .venv/bin/python bench/replication_floor.py [--mib 512]

`cluster_bench.py` compares kt's produce rate at RF=3 acks=all with RF=1 acks=1. This
bench asks what any broker could reach on this machine doing the work Kafka's
replication protocol requires, with none of a broker's logic: processes that only
move 1 MiB chunks with the same system calls, over loopback TCP, into log files on
the same file system.

- producer: sends length-prefixed 1 MiB chunks from memory (no record building, so
  it costs next to nothing; kcat also formats 1 KiB records, which this leaves out);
- leader: a thread receives each chunk (recv_into) and appends it (pwrite); at RF=1
  it acknowledges at once, at RF=3 once both followers have it (acks=all);
- followers (RF=3): pull as Kafka's do. A fetch names the follower's log end; the
  leader answers with up to 1 MiB from its log file with sendfile (one thread per
  follower, so the three moves overlap as in a multi-threaded broker); the follower
  receives it, appends it and fetches again, which tells the leader it has it.

Each figure beside the other in the same run: MB/s, and each process's CPU seconds per
GB (user + system). The chunks go through the kernel as a broker's would: written to
the page cache once per replica, copied over loopback twice per follower.
`--fetch-kib` sets the followers' fetch size (replica.fetch.max.bytes), `--dir` where
the log files go; the run also measures the page cache's write cost at its start and
end (`page_cache_probe`, which cluster_bench.py uses too).
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from broker_harness import free_port

CHUNK = 1 << 20
_LEN = struct.Struct(">I")
_OFF = struct.Struct(">q")


def _recv_exactly(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("peer closed")
        got += n


def _recv_chunk(sock: socket.socket, view: memoryview) -> int:
    """Receive one length-prefixed chunk into the front of `view`; its length."""
    header = bytearray(_LEN.size)
    _recv_exactly(sock, memoryview(header))
    (n,) = _LEN.unpack(header)
    _recv_exactly(sock, view[:n])
    return int(n)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# --- roles (each runs in its own process) ------------------------------------------------


def producer(port: int, chunks: int) -> None:
    """Send `chunks` chunks, pipelined; wait for the last acknowledgement."""
    data = os.urandom(CHUNK)
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    done = threading.Event()

    def acks() -> None:
        buf = bytearray(_OFF.size)
        for _ in range(chunks):
            _recv_exactly(sock, memoryview(buf))
        done.set()

    reader = threading.Thread(target=acks, daemon=True)
    cpu0, start = _cpu(), time.perf_counter()
    reader.start()
    header = _LEN.pack(CHUNK)
    for _ in range(chunks):
        sock.sendall(header)
        sock.sendall(data)
    done.wait()
    print(f"{time.perf_counter() - start:.6f} {_cpu() - cpu0:.6f}", flush=True)


def leader(port: int, log_path: str, followers: int, fetch_max: int) -> None:
    """Append what the producer sends; serve the followers' fetches; acknowledge each
    chunk once every replica has it."""
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", port))
    lsock.listen(8)
    print("ready", flush=True)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    rfd = os.open(log_path, os.O_RDONLY)
    cond = threading.Condition()
    state = {"end": 0, "acked": 0}
    ends: dict[int, int] = {}
    conns = [lsock.accept()[0] for _ in range(followers + 1)]
    for c in conns:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # The driver starts the producer after the followers have connected.
    prod, fols = conns[-1], conns[:-1]
    cpu0 = _cpu()

    def high_watermark() -> int:
        return min([state["end"], *ends.values()]) if ends else state["end"]

    def ack_upto(hw: int) -> None:
        # acks for every chunk wholly below the high watermark, in order
        while state["acked"] + CHUNK <= hw:
            state["acked"] += CHUNK
            prod.sendall(_OFF.pack(state["acked"]))

    def serve(i: int, sock: socket.socket) -> None:
        req = bytearray(_OFF.size)
        while True:
            try:
                _recv_exactly(sock, memoryview(req))
            except ConnectionError:
                return
            (offset,) = _OFF.unpack(req)
            with cond:
                ends[i] = offset
                ack_upto(high_watermark())
                while state["end"] <= offset:
                    cond.wait()
                n = min(fetch_max, state["end"] - offset)
            sock.sendall(_LEN.pack(n))
            sent = 0
            while sent < n:
                sent += os.sendfile(sock.fileno(), rfd, offset + sent, n - sent)

    for i, s in enumerate(fols):
        with cond:
            ends[i] = 0
        threading.Thread(target=serve, args=(i, s), daemon=True).start()
    view = memoryview(bytearray(CHUNK))
    position = 0
    while True:
        try:
            n = _recv_chunk(prod, view)
        except ConnectionError:
            break
        os.pwrite(fd, view[:n], position)
        position += n
        with cond:
            state["end"] = position
            cond.notify_all()
            ack_upto(high_watermark())
    print(f"{_cpu() - cpu0:.6f}", flush=True)


def follower(port: int, log_path: str, fetch_max: int) -> None:
    """Fetch from the leader, append, fetch again."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    view = memoryview(bytearray(fetch_max))
    offset = 0
    cpu0 = _cpu()
    print("ready", flush=True)
    while True:
        try:
            sock.sendall(_OFF.pack(offset))
            n = _recv_chunk(sock, view)
        except ConnectionError:  # BrokenPipeError is one
            break
        os.pwrite(fd, view[:n], offset)
        offset += n
    print(f"{_cpu() - cpu0:.6f}", flush=True)


def page_cache_probe(directory: str | Path, mib: int = 256) -> tuple[float, float]:
    """MB/s and CPU seconds per GB of writing `mib` MiB to a new file in 1 MiB pwrites,
    the file then deleted. On this project's VMs the figure swings several-fold from
    one minute to the next (how much of the guest's free memory the host still backs:
    a page written for the first time in a while costs the host a fault), and every
    broker figure moves with it, so the benches print it beside theirs."""
    data = os.urandom(CHUNK)
    path = Path(directory) / f".page-cache-probe-{os.getpid()}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        cpu0, start = _cpu(), time.perf_counter()
        for i in range(mib):
            os.pwrite(fd, data, i * CHUNK)
        elapsed, used = time.perf_counter() - start, _cpu() - cpu0
    finally:
        os.close(fd)
        path.unlink()
    gb = mib * CHUNK / 1e9
    return gb * 1e3 / elapsed, used / gb


# --- driver ---------------------------------------------------------------------------------


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, "--role", *args], stdout=subprocess.PIPE, text=True
    )


def run(rf: int, mib: int, directory: Path, fetch_max: int) -> tuple[float, dict[str, float]]:
    """One run: MB/s and CPU seconds per GB of each role."""
    port = free_port()
    chunks = mib
    lead = _spawn("leader", str(port), str(directory / "leader.log"), str(rf - 1), str(fetch_max))
    assert lead.stdout is not None
    lead.stdout.readline()
    fols = []
    for i in range(rf - 1):
        f = _spawn("follower", str(port), str(directory / f"follower{i}.log"), str(fetch_max))
        assert f.stdout is not None
        f.stdout.readline()
        fols.append(f)
    time.sleep(0.2)  # the followers' connections are accepted before the producer's
    os.sync()
    prod = _spawn("producer", str(port), str(chunks))
    assert prod.stdout is not None
    elapsed, prod_cpu = (float(x) for x in prod.stdout.readline().split())
    prod.wait()
    gb = chunks * CHUNK / 1e9
    cpu = {"producer": prod_cpu / gb}
    # The producer is gone: the leader's receive loop ends, then the followers'.
    out, _ = lead.communicate(timeout=60)
    cpu["leader"] = float(out.split()[-1]) / gb
    for i, f in enumerate(fols):
        out, _ = f.communicate(timeout=60)
        cpu[f"follower {i + 1}"] = float(out.split()[-1]) / gb
    for p in directory.iterdir():
        p.unlink()
    return chunks * CHUNK / elapsed / 1e6, cpu


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--role":
        role, args = sys.argv[2], sys.argv[3:]
        if role == "producer":
            producer(int(args[0]), int(args[1]))
        elif role == "leader":
            leader(int(args[0]), args[1], int(args[2]), int(args[3]))
        else:
            follower(int(args[0]), args[1], int(args[2]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--mib", type=int, default=512, help="MiB per run (default 512)")
    ap.add_argument("--rounds", type=int, default=3, help="runs per row, alternating (3)")
    ap.add_argument("--dir", help="where the log files go (default: a temp dir in /tmp)")
    ap.add_argument(
        "--fetch-kib",
        type=int,
        default=1024,
        help="a follower's fetch size, replica.fetch.max.bytes (Kafka's 1024 KiB)",
    )
    args = ap.parse_args()
    load0 = os.getloadavg()[0]
    rates: dict[int, list[float]] = {1: [], 3: []}
    cpus: dict[int, list[dict[str, float]]] = {1: [], 3: []}
    with tempfile.TemporaryDirectory(prefix="kt-floor-", dir=args.dir) as tmp:
        probe0 = page_cache_probe(tmp)
        for r in range(args.rounds):
            for rf in (1, 3):
                mb, cpu = run(rf, args.mib, Path(tmp), args.fetch_kib << 10)
                rates[rf].append(mb)
                cpus[rf].append(cpu)
                shares = ", ".join(f"{k} {v:.2f}" for k, v in cpu.items())
                print(f"  RF={rf} round {r + 1}: {mb:6.0f} MB/s; CPU s per GB: {shares}",
                      flush=True)  # fmt: skip
        probe1 = page_cache_probe(tmp)
    med = {rf: sorted(v)[len(v) // 2] for rf, v in rates.items()}
    total = {rf: sorted(sum(c.values()) for c in cs)[len(cs) // 2] for rf, cs in cpus.items()}
    print()
    print(f"floor, RF=3 acks=all: {med[3]:.0f} MB/s   RF=1 acks=1: {med[1]:.0f} MB/s   "
          f"ratio {med[3] / med[1]:.2f}")  # fmt: skip
    print(f"CPU s per GB, all processes: RF=3 {total[3]:.2f}, RF=1 {total[1]:.2f}, "
          f"ratio {total[3] / total[1]:.2f}")  # fmt: skip
    print(f"page-cache writes (256 MiB to a new file) at the start / end: {probe0[0]:.0f} / "
          f"{probe1[0]:.0f} MB/s, {probe0[1]:.2f} / {probe1[1]:.2f} CPU s per GB")  # fmt: skip
    print(f"(medians of {args.rounds}; {args.mib} MiB a run; fetches of {args.fetch_kib} KiB; "
          f"{os.cpu_count()} cores; load "
          f"average {load0:.1f} -> {os.getloadavg()[0]:.1f})")  # fmt: skip


if __name__ == "__main__":
    main()
