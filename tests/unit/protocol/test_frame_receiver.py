"""FrameReceiver: frames assembled in place from arbitrary receive sizes."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kt.protocol.errors import FrameSizeError
from kt.protocol.framing import FrameReceiver


def feed(receiver: FrameReceiver, stream: bytes, cuts: list[int]) -> list[bytes]:
    """Write `stream` into the receiver's buffers, `cuts` bounding each receive."""
    out: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(stream):
        buf = receiver.get_buffer()
        assert len(buf) > 0
        n = min(len(buf), cuts[i % len(cuts)], len(stream) - pos)
        buf[:n] = stream[pos : pos + n]
        pos += n
        i += 1
        out += [bytes(f) for f in receiver.buffer_updated(n)]
    return out


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.binary(max_size=300) | st.integers(0, 200_000).map(bytes), max_size=20),
    st.lists(st.integers(1, 100_000), min_size=1, max_size=10),
    st.sampled_from([16, 300, 65536]),
)
def test_any_receive_pattern_yields_the_frames_in_order(
    frames: list[bytes], cuts: list[int], staging: int
) -> None:
    stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    assert feed(FrameReceiver(staging=staging), stream, cuts) == frames


def test_large_frame_is_read_into_its_own_buffer_without_copies() -> None:
    payload = bytes(range(256)) * 1000
    receiver = FrameReceiver(staging=1024)
    stream = struct.pack(">i", len(payload)) + payload
    first = receiver.get_buffer()
    first[:100] = stream[:100]
    assert receiver.buffer_updated(100) == []
    direct = receiver.get_buffer()
    # The rest goes straight into the frame's own buffer: exactly what is missing.
    assert len(direct) == len(payload) - 96
    direct[:] = stream[100:]
    (frame,) = receiver.buffer_updated(len(direct))
    assert isinstance(frame, bytearray) and frame == payload


@pytest.mark.parametrize("size", [-1, 1001])
def test_bad_sizes_raise(size: int) -> None:
    receiver = FrameReceiver(max_frame_size=1000)
    buf = receiver.get_buffer()
    buf[:4] = struct.pack(">i", size)
    with pytest.raises(FrameSizeError):
        receiver.buffer_updated(4)


def test_a_large_frame_takes_memory_as_its_bytes_arrive() -> None:
    # A client announcing a frame near the limit and then sending little must not
    # make the broker allocate the whole announced size (the fault campaign's
    # hostile clients do this on many connections).
    r = FrameReceiver(max_frame_size=100 << 20, staging=1024)
    announced = 90 << 20
    buf = r.get_buffer()
    buf[:8] = struct.pack(">i", announced) + b"abcd"
    assert r.buffer_updated(8) == []
    big = r.get_buffer()
    assert len(big) + 4 <= FrameReceiver.BIG_CHUNK  # not 90 MiB
    # and it still assembles the whole frame, however it arrives
    payload = bytes(range(256)) * (announced // 256)
    pos, frames = 4, []
    while pos < announced:
        view = r.get_buffer()
        n = min(len(view), 3 << 20, announced - pos)
        view[:n] = payload[pos : pos + n]
        pos += n
        frames += r.buffer_updated(n)
    assert len(frames) == 1 and frames[0][:4] == b"abcd" and frames[0][4:] == payload[4:]
