"""The on-disk layout of a tape: seekable zstd frames plus a seek table.

A tape file is a sequence of ordinary zstd frames, each holding whole event lines (about
FRAME_BYTES of JSONL), followed by one zstd *skippable* frame holding the seek table. Any zstd
tool decompresses it to the plain JSONL (skippable frames are ignored), and a reader can jump to
event N by decompressing one frame instead of the whole tape.

Seek table payload (little-endian): per frame `u32 compressed_size, u32 raw_size,
u32 first_event, u32 n_events`, then `u32 n_frames, u32 TABLE_VERSION, 8 bytes MAGIC`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

FRAME_BYTES: Final = 128 * 1024
SKIPPABLE_MAGIC: Final = 0x184D2A5E
MAGIC: Final = b"ENGRSEEK"
TABLE_VERSION: Final = 1
_ENTRY = struct.Struct("<IIII")
_FOOTER = struct.Struct("<II8s")


@dataclass(frozen=True, slots=True)
class Frame:
    offset: int  # byte offset of the compressed frame in the file
    size: int  # compressed size
    raw_size: int
    first_event: int
    n_events: int


def encode_table(frames: list[Frame]) -> bytes:
    payload = b"".join(_ENTRY.pack(f.size, f.raw_size, f.first_event, f.n_events) for f in frames)
    payload += _FOOTER.pack(len(frames), TABLE_VERSION, MAGIC)
    return struct.pack("<II", SKIPPABLE_MAGIC, len(payload)) + payload


def decode_table(tail: bytes, file_size: int) -> tuple[list[Frame], int] | None:
    """Parse the seek table from the end of a tape.

    `tail` must hold at least the last `table_size(n)` bytes; returns the frames and the number
    of bytes the table occupies, or None when `tail` is too short (the caller reads more).
    Raises ValueError when the bytes are not a seek table.
    """
    if len(tail) < _FOOTER.size:
        raise ValueError("file too short for a seek table")
    n, version, magic = _FOOTER.unpack_from(tail, len(tail) - _FOOTER.size)
    if magic != MAGIC or version != TABLE_VERSION:
        raise ValueError("no seek table at the end of the file")
    total = 8 + n * _ENTRY.size + _FOOTER.size
    if total > len(tail):
        return None
    base = len(tail) - total
    magic_word, payload_len = struct.unpack_from("<II", tail, base)
    if magic_word != SKIPPABLE_MAGIC or payload_len != total - 8:
        raise ValueError("seek table header is damaged")
    frames: list[Frame] = []
    offset = 0
    for i in range(n):
        size, raw, first, count = _ENTRY.unpack_from(tail, base + 8 + i * _ENTRY.size)
        frames.append(Frame(offset, size, raw, first, count))
        offset += size
    if offset + total != file_size:
        raise ValueError("seek table does not account for the file's size")
    return frames, total


def table_size(n_frames: int) -> int:
    return 8 + n_frames * _ENTRY.size + _FOOTER.size
