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
        with memoryview(buf) as view:  # one copy per frame, not two
            while end - pos >= 4:
                size = INT32.unpack_from(buf, pos)[0]
                if size < 0 or size > self.max_frame_size:
                    raise FrameSizeError(
                        f"frame size {size} is outside 0..{self.max_frame_size}; closing"
                    )
                if end - pos - 4 < size:
                    break
                frames.append(bytes(view[pos + 4 : pos + 4 + size]))
                pos += 4 + size
        if pos:
            del buf[:pos]
        return frames


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """`payload` with its int32 size prefix."""
    return INT32.pack(len(payload)) + bytes(payload)


class FrameReceiver:
    """Frames assembled in place, for transports that read into a buffer we supply
    (asyncio's BufferedProtocol, `socket.recv_into`).

    Small frames are read through a staging buffer together (one receive call can
    bring many pipelined requests); a frame larger than the staging area gets a
    buffer of its own and the transport reads straight into it, so a produce
    request's records are received once and never copied again. Frames come back
    as bytearrays the caller owns (and may modify, e.g. to patch record batches).

    A large frame's buffer grows with the bytes that actually arrive (doubling from
    `BIG_CHUNK`), not to the size its prefix claims: a client announcing frames just
    under the limit and sending nothing more costs next to no memory.
    """

    BIG_CHUNK = 1 << 20

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, staging: int = 64 * 1024):
        self.max_frame_size = max_frame_size
        self._staging = bytearray(staging)
        self._start = 0  # first unconsumed byte in staging
        self._end = 0  # end of received bytes in staging
        self._big: bytearray | None = None  # a large frame being filled directly
        self._big_got = 0
        self._big_size = 0  # the size the frame will have (its buffer grows to it)

    def get_buffer(self) -> memoryview:
        """Where the transport should write the next received bytes."""
        if self._big is not None:
            if self._big_got == len(self._big):
                # Full so far: double it (up to the frame's size).
                more = min(len(self._big), self._big_size - len(self._big))
                try:
                    self._big.extend(bytes(more))
                except BufferError:  # a view of it is still held: move to a new one
                    grown = bytearray(len(self._big) + more)
                    grown[: self._big_got] = self._big
                    self._big = grown
            return memoryview(self._big)[self._big_got :]
        if self._end == len(self._staging):
            # Move the unconsumed tail to the front to make room.
            tail = self._end - self._start
            self._staging[:tail] = self._staging[self._start : self._end]
            self._start, self._end = 0, tail
        return memoryview(self._staging)[self._end :]

    def buffer_updated(self, nbytes: int) -> list[bytearray]:
        """Account for `nbytes` written into the last buffer; return completed frames.

        Raises FrameSizeError for a negative or oversized frame size.
        """
        frames: list[bytearray] = []
        if self._big is not None:
            self._big_got += nbytes
            if self._big_got < self._big_size:
                return frames
            frames.append(self._big)
            self._big = None
            return frames
        self._end += nbytes
        buf = self._staging
        while self._end - self._start >= 4:
            size = INT32.unpack_from(buf, self._start)[0]
            if size < 0 or size > self.max_frame_size:
                raise FrameSizeError(
                    f"frame size {size} is outside 0..{self.max_frame_size}; closing"
                )
            have = self._end - self._start - 4
            if have >= size:
                begin = self._start + 4
                frames.append(buf[begin : begin + size])
                self._start = begin + size
                continue
            if size + 4 > len(buf):
                # Too big for staging: give it its own buffer, seeded with what we have.
                big = bytearray(min(size, max(have, self.BIG_CHUNK)))
                big[:have] = buf[self._start + 4 : self._end]
                self._big, self._big_got, self._big_size = big, have, size
                self._start = self._end = 0
            break
        if self._start == self._end:
            self._start = self._end = 0
        return frames
