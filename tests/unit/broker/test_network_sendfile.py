"""Record data sent from a log file's descriptor: asyncio's sendfile fallback (taken
when os.sendfile fails before sending a byte, as on a connection the peer just
dropped) must read the borrowed descriptor at the asked offset. The fault campaign
found the fallback failing on `_FdFile` (no `readinto`), which dropped a fetch
response with a traceback."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest

from kt.broker.network import _FdFile


def test_sendfile_fallback_reads_the_borrowed_descriptor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = bytes(range(256)) * 1024  # 256 KiB: several fallback reads
    path = tmp_path / "segment.log"
    path.write_bytes(data)

    async def go() -> bytes:
        loop = asyncio.get_running_loop()

        async def no_native(*args: object) -> int:
            raise asyncio.exceptions.SendfileNotAvailableError("forced")

        monkeypatch.setattr(loop, "_sendfile_native", no_native)
        a, b = socket.socketpair()
        transport, _ = await loop.create_connection(asyncio.Protocol, sock=a)
        b.setblocking(True)

        def drain_b() -> bytes:  # read while sending: the socket buffers are small
            got = bytearray()
            while chunk := b.recv(65536):
                got += chunk
            return bytes(got)

        reader = loop.run_in_executor(None, drain_b)
        fd = os.open(path, os.O_RDONLY)
        try:
            f = _FdFile(fd)
            sent = await loop.sendfile(transport, f, 1000, 200_000)
            assert sent == 200_000
            # the descriptor's own position is not ours to move (it is shared)
            assert os.lseek(fd, 0, os.SEEK_CUR) == 0
        finally:
            os.close(fd)
        transport.close()
        got = await reader
        b.close()
        return got

    assert asyncio.run(go()) == data[1000:201_000]
