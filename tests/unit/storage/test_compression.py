"""The five codecs: round trips, the exact framings Kafka uses, and damaged input."""

from __future__ import annotations

import gzip
import os
import struct

import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kcodec
from strategies import XxhashShim, codecs, xxh32

from kt.storage.compression import Codec, codec_from_id, codec_from_name, compress, decompress
from kt.storage.errors import CorruptRecordError, UnsupportedFormatError

# Compressible but not trivially so, and over 64 KiB: several lz4 and snappy blocks.
BIG = b"".join(b"record-%06d:" % i + bytes([i % 251]) * (i % 40) for i in range(6000))
assert len(BIG) > 3 * 64 * 1024
COMPRESSED = [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]


@pytest.fixture
def old_kafka_lz4(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-python's pre-0.10 lz4 framing needs `xxhash`; give it ours if it is absent."""
    if kcodec.xxhash is None:
        monkeypatch.setattr(kcodec, "xxhash", XxhashShim)


# --- codec ids ---------------------------------------------------------------


def test_codec_ids_and_names() -> None:
    assert [(c.value, c.label) for c in Codec] == [
        (0, "none"),
        (1, "gzip"),
        (2, "snappy"),
        (3, "lz4"),
        (4, "zstd"),
    ]
    for c in Codec:
        assert codec_from_id(c.value) is c
        assert codec_from_name(c.label.upper()) is c


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_ids_are_unsupported(codec_id: int) -> None:
    with pytest.raises(UnsupportedFormatError):
        codec_from_id(codec_id)
    with pytest.raises(UnsupportedFormatError):
        decompress(codec_id, b"abc")
    with pytest.raises(UnsupportedFormatError):
        compress(codec_id, b"abc")


def test_unknown_codec_name() -> None:
    with pytest.raises(UnsupportedFormatError, match="one of none, gzip"):
        codec_from_name("brotli")


# --- round trips -------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(codecs, st.binary(max_size=3000) | st.text(max_size=2000).map(str.encode))
def test_round_trip_every_codec(codec: Codec, data: bytes) -> None:
    packed = compress(codec, data)
    for magic in (0, 1, 2):
        assert decompress(codec, packed, magic) == data
    assert decompress(codec, memoryview(packed)) == data


@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.label)
@pytest.mark.parametrize(
    "data", [b"", b"x", BIG, os.urandom(150_000)], ids=["empty", "1", "big", "random"]
)
def test_round_trip_sizes(codec: Codec, data: bytes) -> None:
    packed = compress(codec, bytearray(data))
    assert decompress(codec, packed, 0) == data
    assert decompress(codec, packed, 2) == data


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.label)
def test_kt_output_reads_in_kafka_python(codec: Codec) -> None:
    decoders = {
        Codec.GZIP: kcodec.gzip_decode,
        Codec.SNAPPY: kcodec.snappy_decode,
        Codec.LZ4: kcodec.lz4_decode,
        Codec.ZSTD: kcodec.zstd_decode,
    }
    assert decoders[codec](compress(codec, BIG)) == BIG


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.label)
def test_kafka_python_output_reads_in_kt(codec: Codec) -> None:
    encoders = {
        Codec.GZIP: kcodec.gzip_encode,
        Codec.SNAPPY: kcodec.snappy_encode,
        Codec.LZ4: kcodec.lz4_encode,
        Codec.ZSTD: kcodec.zstd_encode,
    }
    packed = encoders[codec](BIG)
    for magic in (0, 1, 2):
        assert decompress(codec, packed, magic) == BIG


def test_compression_is_deterministic() -> None:
    for codec in Codec:
        assert compress(codec, BIG) == compress(codec, BIG)


# --- the exact framings --------------------------------------------------------


def test_gzip_is_a_plain_member_with_zero_mtime() -> None:
    packed = compress(Codec.GZIP, BIG)
    assert packed[:4] == b"\x1f\x8b\x08\x00"  # magic, deflate, no flags
    assert packed[4:8] == b"\x00\x00\x00\x00"  # mtime 0
    assert gzip.decompress(packed) == BIG


def test_gzip_reads_concatenated_members() -> None:
    packed = gzip.compress(b"abc") + gzip.compress(b"def")
    assert decompress(Codec.GZIP, packed) == b"abcdef"


def test_xerial_snappy_header_and_blocks() -> None:
    packed = compress(Codec.SNAPPY, BIG)
    assert packed[:16] == b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01"
    # Length-prefixed raw snappy blocks of 32 KiB of input each.
    import cramjam

    pos, pieces = 16, []
    while pos < len(packed):
        (size,) = struct.unpack_from(">i", packed, pos)
        pieces.append(bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + size])))
        pos += 4 + size
    assert pos == len(packed)
    assert [len(p) for p in pieces[:-1]] == [32 * 1024] * (len(pieces) - 1)
    assert len(pieces) == -(-len(BIG) // (32 * 1024))
    assert b"".join(pieces) == BIG


def test_xerial_snappy_of_empty_input_is_just_the_header() -> None:
    assert compress(Codec.SNAPPY, b"") == b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"
    assert decompress(Codec.SNAPPY, compress(Codec.SNAPPY, b"")) == b""


def test_raw_snappy_is_accepted_on_read() -> None:
    raw = kcodec.snappy_encode(BIG, xerial_compatible=False)
    assert not raw.startswith(b"\x82SNAPPY")
    assert decompress(Codec.SNAPPY, raw) == BIG


def test_xerial_snappy_with_other_version_fields_still_reads() -> None:
    # Some producers write the version/compat ints little-endian; only the magic counts.
    packed = bytearray(compress(Codec.SNAPPY, BIG))
    packed[8:16] = struct.pack("<ii", 1, 1)
    assert decompress(Codec.SNAPPY, bytes(packed)) == BIG


def test_lz4_frame_descriptor() -> None:
    packed = compress(Codec.LZ4, BIG)
    assert struct.unpack_from("<I", packed)[0] == 0x184D2204
    flg, bd = packed[4], packed[5]
    assert flg >> 6 == 0b01  # version
    assert flg & 0x20  # independent blocks (Kafka's reader rejects linked blocks)
    assert not flg & 0x10  # no block checksums
    assert not flg & 0x04  # no content checksum
    assert (bd >> 4) & 7 == 4  # 64 KiB blocks, as Kafka's KafkaLZ4BlockOutputStream
    header_end = 6 + (8 if flg & 0x08 else 0)
    assert packed[header_end] == (xxh32(packed[4:header_end]) >> 8) & 0xFF


@pytest.mark.parametrize(
    "options",
    [
        {"block_checksum": True},
        {"content_checksum": True},
        {"store_size": False},
        {"block_size": lz4.frame.BLOCKSIZE_MAX4MB},
    ],
    ids=["block-checksum", "content-checksum", "no-size", "4mb"],
)
@pytest.mark.parametrize("data", [BIG, os.urandom(100_000)], ids=["text", "random"])
def test_lz4_frame_options_read_with_both_decoders(options: dict[str, object], data: bytes) -> None:
    # Random data makes lz4 store blocks uncompressed (high bit of the block size).
    packed = lz4.frame.compress(data, block_linked=False, **options)
    assert decompress(Codec.LZ4, packed, magic=0) == data
    assert decompress(Codec.LZ4, packed, magic=2) == data


def test_lz4_old_kafka_framing_reads_for_magic_0(old_kafka_lz4: None) -> None:
    """Kafka < 0.10 hashed the frame magic into the header checksum (KAFKA-3160).

    kafka-python still writes that framing for magic 0 (and drops the content size).
    kt reads it for magic 0; for magic 1 and 2 the frame is held to the standard and
    the wrong checksum makes it corrupt.
    """
    packed = kcodec.lz4_encode_old_kafka(BIG)
    flg = packed[4]
    assert not flg & 0x08
    assert packed[6] == (xxh32(packed[0:6]) >> 8) & 0xFF  # the broken checksum
    assert packed[6] != (xxh32(packed[4:6]) >> 8) & 0xFF
    assert decompress(Codec.LZ4, packed, magic=0) == BIG
    for magic in (1, 2):
        with pytest.raises(CorruptRecordError, match="lz4"):
            decompress(Codec.LZ4, packed, magic=magic)


def test_kt_lz4_reads_in_kafka_python_old_kafka_decoder(old_kafka_lz4: None) -> None:
    """The other way: kt writes a standard frame (correct checksum, content size) even
    for magic 0. kafka-python's magic-0 decoder recomputes the checksum before decoding,
    so it reads it; Kafka >= 0.10 ignores the checksum for magic 0, so it does too. Only a
    0.8/0.9 broker, which demands the broken checksum, would reject kt's magic-0 lz4."""
    assert kcodec.lz4_decode_old_kafka(compress(Codec.LZ4, BIG)) == BIG


def test_zstd_without_content_size_reads() -> None:
    # Java's streaming encoder leaves the content size out of the frame header.
    packed = zstandard.ZstdCompressor(write_content_size=False).compress(BIG)
    assert decompress(Codec.ZSTD, packed) == BIG
    cobj = zstandard.ZstdCompressor().compressobj()
    streamed = cobj.compress(BIG) + cobj.flush()
    assert decompress(Codec.ZSTD, streamed) == BIG


def test_zstd_reads_concatenated_frames() -> None:
    # Java's zstd stream decoder carries on into a following frame; so does kt.
    packed = compress(Codec.ZSTD, b"abc") + compress(Codec.ZSTD, b"def")
    assert decompress(Codec.ZSTD, packed) == b"abcdef"


def test_zstd_with_garbage_after_the_frame_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="zstd"):
        decompress(Codec.ZSTD, compress(Codec.ZSTD, BIG) + b"garbage")


# --- damaged input -------------------------------------------------------------


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.label)
@pytest.mark.parametrize("magic", [0, 2])
def test_truncated_payloads_are_corrupt(codec: Codec, magic: int) -> None:
    packed = compress(codec, BIG)
    for cut in (0, 1, 5, 10, 17, len(packed) // 2, len(packed) - 1):
        with pytest.raises(CorruptRecordError):
            decompress(codec, packed[:cut], magic)


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.label)
def test_empty_payload_is_corrupt(codec: Codec) -> None:
    for magic in (0, 2):
        with pytest.raises(CorruptRecordError):
            decompress(codec, b"", magic)


def test_lz4_frame_claiming_a_huge_content_size_is_corrupt() -> None:
    """The frame's content size must not decide how much memory kt asks for."""
    frame = bytearray(lz4.frame.compress(BIG, store_size=True, block_linked=False))
    assert frame[4] & 0x08
    struct.pack_into("<Q", frame, 6, 2**62)
    frame[14] = (xxh32(bytes(frame[4:14])) >> 8) & 0xFF  # a matching header checksum
    for magic in (1, 2):
        with pytest.raises(CorruptRecordError, match="LZ4 frame claims"):
            decompress(Codec.LZ4, bytes(frame), magic)
    # Magic 0 reads the blocks itself and ignores the content size, as Kafka does.
    assert decompress(Codec.LZ4, bytes(frame), 0) == BIG


def test_lz4_corrupt_block_is_corrupt_for_magic_0() -> None:
    # Magic 0 decodes the frame's blocks itself; lz4.block's own error must not leak.
    frame = bytearray(compress(Codec.LZ4, BIG))
    frame[20:60] = b"\xff" * 40
    with pytest.raises(CorruptRecordError, match="lz4"):
        decompress(Codec.LZ4, bytes(frame), magic=0)


def test_snappy_with_a_cut_xerial_header_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        decompress(Codec.SNAPPY, b"\x82SNAPPY\x00\x00\x00")


SAMPLES = {c: compress(c, BIG[:5000]) for c in Codec}


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(COMPRESSED),
    st.sampled_from([0, 1, 2]),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=4),
)
def test_mutated_payloads_raise_only_corrupt_record_error(
    codec: Codec, magic: int, flips: list[tuple[int, int]]
) -> None:
    data = bytearray(SAMPLES[codec])
    for where, mask in flips:
        data[where % len(data)] ^= mask
    try:
        decompress(codec, bytes(data), magic)
    except CorruptRecordError:
        pass


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(COMPRESSED),
    st.sampled_from([0, 2]),
    st.binary(max_size=200),
    st.sampled_from([b"", b"\x1f\x8b\x08\x00", b"\x82SNAPPY\x00", b"\x04\x22\x4d\x18"]),
)
def test_garbage_raises_only_corrupt_record_error(
    codec: Codec, magic: int, data: bytes, prefix: bytes
) -> None:
    try:
        decompress(codec, prefix + data, magic)
    except CorruptRecordError:
        pass
