"""Sans-IO framing: Kafka frames are an int32 big-endian size followed by that many bytes.

`FrameDecoder` takes whatever chunks the transport delivers and hands back the
complete frames (without their size prefix). A size that is negative or above the
configured maximum raises `FrameSizeError` before any of the frame is buffered,
which is the broker's cue to close the connection (Kafka's
`socket.request.max.bytes` check).
"""

from __future__ import annotations

from kt.protocol.errors import FrameSizeError
from kt.protocol.primitives import INT32

#: Kafka's default socket.request.max.bytes (100 MiB)
DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024


class FrameDecoder:
    """Accumulates bytes and splits them into complete frames."""

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as part of a frame."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Add `data` and return every frame it completes (possibly none)."""
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            size = INT32.unpack_from(buf, pos)[0]
            if size < 0 or size > self.max_frame_size:
                raise FrameSizeError(
                    f"frame size {size} is outside 0..{self.max_frame_size}; closing"
                )
            if end - pos - 4 < size:
                break
            frames.append(bytes(buf[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
        return frames


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """`payload` with its int32 size prefix."""
    return INT32.pack(len(payload)) + bytes(payload)
