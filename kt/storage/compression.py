"""Compression codecs of Kafka's record formats: none, gzip, snappy, lz4 and zstd.

The codec id is the low three bits of a batch's (or legacy wrapper message's)
attributes. Each codec is stored the way Apache Kafka's Java clients write it:

- gzip: a plain gzip member stream.
- snappy: Xerial's framed stream (an 16-byte header, then length-prefixed raw
  snappy blocks). Some non-Java clients write raw snappy, so reading accepts both.
- lz4: the LZ4 frame format. Kafka before 0.10 computed the frame header checksum
  over the magic number too; legacy magic-0 messages may carry that wrong checksum,
  so reading magic 0 parses the frame itself and does not check it.
- zstd: a zstd frame, usually without the content size (Java's streaming encoder).
"""

from __future__ import annotations

import enum
import gzip
import struct
import zlib

import cramjam
import lz4.block
import lz4.frame
import zstandard

from kt.storage.errors import CorruptRecordError, UnsupportedFormatError


class Codec(enum.IntEnum):
    """Compression codec ids as stored in the attributes bits 0-2."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def label(self) -> str:
        """The lower-case name Kafka's tools print (`compresscodec: gzip`)."""
        return self.name.lower()


def codec_from_id(codec_id: int) -> Codec:
    """The Codec for an attributes id, or UnsupportedFormatError for 5-7."""
    try:
        return Codec(codec_id)
    except ValueError:
        raise UnsupportedFormatError(f"unknown compression codec id {codec_id}") from None


def codec_from_name(name: str) -> Codec:
    """The Codec for a name such as 'gzip' or 'none' (case-insensitive)."""
    try:
        return Codec[name.upper()]
    except KeyError:
        choices = ", ".join(c.label for c in Codec)
        raise UnsupportedFormatError(f"unknown codec {name!r} (one of {choices})") from None


# --- snappy (Xerial framing) -------------------------------------------------

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
# Kafka's SnappyOutputStream default block size.
_XERIAL_BLOCK = 32 * 1024


def _snappy_compress(data: bytes | bytearray | memoryview) -> bytes:
    out = [_XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        out.append(struct.pack(">i", len(block)))
        out.append(block)
    return b"".join(out)


def _snappy_decompress(data: bytes | memoryview) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    if len(view) < len(_XERIAL_HEADER):
        raise CorruptRecordError("truncated xerial snappy header")
    pos = 16
    out = []
    end = len(view)
    while pos < end:
        if pos + 4 > end:
            raise CorruptRecordError("truncated xerial snappy block header")
        (size,) = struct.unpack_from(">i", view, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise CorruptRecordError("xerial snappy block runs past the end of the data")
        out.append(bytes(cramjam.snappy.decompress_raw(view[pos : pos + size])))
        pos += size
    return b"".join(out)


# --- lz4 ---------------------------------------------------------------------

_LZ4_MAGIC = 0x184D2204
_LZ4_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}


def _lz4_decompress_frame_lenient(data: bytes | memoryview) -> bytes:
    """Decode an LZ4 frame without checking the header checksum.

    Needed for magic-0 messages written by Kafka before 0.10, whose frame header
    checksum covers the magic number as well (KAFKA-3160).
    """
    view = memoryview(data)
    if len(view) < 7 or struct.unpack_from("<I", view, 0)[0] != _LZ4_MAGIC:
        raise CorruptRecordError("not an LZ4 frame")
    flg, bd = view[4], view[5]
    pos = 6
    if flg & 0x08:  # content size present
        pos += 8
    if flg & 0x01:  # dictionary id present
        pos += 4
    pos += 1  # header checksum, deliberately not verified
    block_checksum = bool(flg & 0x10)
    max_block = _LZ4_BLOCK_MAX.get((bd >> 4) & 0x7, 4 << 20)
    out = []
    while True:
        if pos + 4 > len(view):
            raise CorruptRecordError("truncated LZ4 frame")
        (size,) = struct.unpack_from("<I", view, pos)
        pos += 4
        if size == 0:
            break
        raw = size & 0x80000000
        size &= 0x7FFFFFFF
        if pos + size > len(view):
            raise CorruptRecordError("LZ4 block runs past the end of the frame")
        block = view[pos : pos + size]
        if raw:
            out.append(bytes(block))
        else:
            out.append(lz4.block.decompress(bytes(block), uncompressed_size=max_block))
        pos += size + (4 if block_checksum else 0)
    return b"".join(out)


def _lz4_decompress(data: bytes | memoryview, magic: int) -> bytes:
    if magic == 0:
        return _lz4_decompress_frame_lenient(data)
    # lz4.frame allocates its output from the frame's content size field, so a
    # corrupt one could ask for any amount of memory. LZ4 expands at most ~255-fold.
    view = memoryview(data)
    if len(view) >= 14 and struct.unpack_from("<I", view, 0)[0] == _LZ4_MAGIC and view[4] & 0x08:
        (content_size,) = struct.unpack_from("<Q", view, 6)
        if content_size > 256 * len(view):
            raise CorruptRecordError(
                f"LZ4 frame claims {content_size} bytes from {len(view)} compressed"
            )
    result: bytes = lz4.frame.decompress(bytes(data))
    return result


# --- zstd --------------------------------------------------------------------

_ZSTD_DECOMPRESSOR = zstandard.ZstdDecompressor()
_ZSTD_COMPRESSOR = zstandard.ZstdCompressor(level=3)


def _zstd_decompress(data: bytes | memoryview) -> bytes:
    # Java's streaming encoder leaves out the content size, so the one-shot API
    # cannot size its output; the streaming decoder can. A decompressobj stops at
    # the end of one frame and returns what it has for a cut one, so check that
    # every frame ends, and go on with the next as Java's stream decoder does.
    out = []
    rest = bytes(data)
    while True:
        dobj = _ZSTD_DECOMPRESSOR.decompressobj()
        out.append(dobj.decompress(rest))
        if not dobj.eof:
            raise CorruptRecordError("truncated zstd frame")
        rest = dobj.unused_data
        if not rest:
            return b"".join(out)


# --- public API --------------------------------------------------------------


def decompress(codec: Codec | int, data: bytes | memoryview, magic: int = 2) -> bytes:
    """Decompress a batch's (or wrapper message's) payload.

    Raises CorruptRecordError when the payload does not decode with its codec.
    """
    try:
        if codec == Codec.NONE:
            return bytes(data)
        if codec == Codec.GZIP:
            if not data:  # gzip.decompress takes no bytes as zero members
                raise CorruptRecordError("gzip payload is empty")
            return gzip.decompress(bytes(data))
        if codec == Codec.SNAPPY:
            return _snappy_decompress(data)
        if codec == Codec.LZ4:
            return _lz4_decompress(data, magic)
        if codec == Codec.ZSTD:
            return _zstd_decompress(data)
    except CorruptRecordError:
        raise
    except (
        OSError,
        EOFError,
        ValueError,
        RuntimeError,
        zlib.error,
        zstandard.ZstdError,
        lz4.block.LZ4BlockError,
    ) as exc:
        name = codec_from_id(int(codec)).label
        raise CorruptRecordError(f"{name} payload does not decompress: {exc}") from None
    except Exception as exc:  # cramjam raises its own error types
        if type(exc).__module__.startswith("cramjam") or "Decompression" in type(exc).__name__:
            raise CorruptRecordError(f"snappy payload does not decompress: {exc}") from None
        raise
    raise UnsupportedFormatError(f"unknown compression codec id {int(codec)}")


def compress(codec: Codec | int, data: bytes | bytearray | memoryview) -> bytes:
    """Compress a payload the way Kafka's Java producer does for `codec`."""
    if codec == Codec.NONE:
        return bytes(data)
    if codec == Codec.GZIP:
        # mtime=0 keeps output deterministic (tests compare bytes).
        return gzip.compress(bytes(data), compresslevel=6, mtime=0)
    if codec == Codec.SNAPPY:
        return _snappy_compress(data)
    if codec == Codec.LZ4:
        result: bytes = lz4.frame.compress(
            bytes(data),
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
        )
        return result
    if codec == Codec.ZSTD:
        out: bytes = _ZSTD_COMPRESSOR.compress(bytes(data))
        return out
    raise UnsupportedFormatError(f"unknown compression codec id {int(codec)}")
