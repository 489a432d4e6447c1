"""Blobs read straight from the packs a pull's `git fetch` wrote, instead of back through
`git cat-file --batch`.

Engram's git options (`core.compression=0`, `pack.compression=0`: engram/share/git.py) make a
pushed tape a zlib stream of *stored* blocks, and a fetch from such a remote keeps it so: the
blob's bytes lie in the pack verbatim, in pieces of at most 64 KB. Writing those pieces from a
read-only mapping of the pack to the tape file (`writev`) costs one copy into the page cache;
`cat-file` cost a process, a pipe and three more copies (200 MB of tapes read and written: 0.36-0.61
s of CPU through cat-file, 0.10-0.14 s from the pack; bench/README.md, `sharing.py`).

What is read here is what git verified: index-pack checked every object's SHA-1 as it wrote the
pack, and git never rewrites a pack in place (a repack writes a new one and unlinks the old,
which stays readable through the mapping). The pieces are exactly what inflate would return: only
a zlib header without a preset dictionary followed by stored blocks whose LEN and NLEN agree, up
to the final one, summing to the size in the object's header, is read so. The adler-32 trailer is
not recomputed: a tape is checked against its id (sha256 of its content) when it is catalogued,
an object against its address as it lands, both stronger. A blob deflated otherwise (a server's
own compression level) is inflated here by zlib, which checks it. Anything else (a delta, an
object in none of the packs, an index of another version or hash, a header that does not parse)
is `None`, and the caller asks `git cat-file` for it: correctness never rests on this reader.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
import zlib
from pathlib import Path

log = logging.getLogger(__name__)

Pieces = list[memoryview]  # a blob's content, in order

_IDX_MAGIC = b"\xfftOc\x00\x00\x00\x02"  # pack index version 2 (git's default since 1.5.2)
_FANOUT_END = 8 + 256 * 4
_SHA = 20  # SHA-1 repositories only (a SHA-256 one's index does not match this layout: see _Pack)
_BLOB = 3


def pack_names(folder: Path) -> set[str]:
    """The complete packs in a pack folder (`pack-*.pack` with its `.idx`: index-pack renames the
    index into place last, so a pack being written is not listed)."""
    try:
        names = set(os.listdir(folder))
    except OSError:
        return set()
    return {n[:-4] for n in names if n.startswith("pack-") and n.endswith(".idx") and n[:-4] + ".pack" in names}


class NewPacks:
    """The packs that appear in `folder` after this is made (what the fetches that follow write)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.before = pack_names(folder)

    def reader(self) -> PackReader:
        """A reader over the packs made since."""
        return PackReader([self.folder / n for n in sorted(pack_names(self.folder) - self.before)])


class PackReader:
    """Blob lookups in a few packs (opened at the first lookup)."""

    def __init__(self, bases: list[Path]) -> None:
        self.bases = bases
        self._packs: list[_Pack] | None = None

    def _opened(self) -> list[_Pack]:
        if self._packs is None:
            self._packs = [p for p in (_Pack.open(b) for b in self.bases) if p is not None]
        return self._packs

    def blob(self, sha: str) -> Pieces | None:
        """The content of blob `sha` as pieces of the packs, or None (not a blob read simply here)."""
        if len(sha) != 2 * _SHA:
            return None
        try:
            name = bytes.fromhex(sha)
        except ValueError:
            return None
        for pack in self._opened():
            offset = pack.offset(name)
            if offset is not None:
                return pack.blob_at(offset)
        return None


class _Pack:
    """One pack and its version-2 index, both mapped read-only."""

    def __init__(self, idx: mmap.mmap, pack: mmap.mmap, count: int) -> None:
        self.idx = idx
        self.pack = pack
        self.view = memoryview(pack)
        self.count = count
        self.fanout = struct.unpack_from(">256I", idx, 8)
        self.names_at = _FANOUT_END
        self.offsets_at = _FANOUT_END + count * (_SHA + 4)  # (the CRC32 table sits between)
        self.large_at = self.offsets_at + count * 4
        self.data_end = len(pack) - _SHA  # (the pack's trailing checksum)

    @classmethod
    def open(cls, base: Path) -> _Pack | None:
        try:
            idx = _map(base.with_name(base.name + ".idx"))
            pack = _map(base.with_name(base.name + ".pack"))
        except (OSError, ValueError) as exc:
            log.debug("pack %s not read directly: %s", base.name, exc)
            return None
        count = struct.unpack_from(">I", idx, _FANOUT_END - 4)[0] if len(idx) >= _FANOUT_END else -1
        ok = (idx[:8] == _IDX_MAGIC and len(idx) >= _FANOUT_END + count * (_SHA + 8) + 2 * _SHA
              and (len(idx) - _FANOUT_END - count * (_SHA + 8) - 2 * _SHA) % 8 == 0
              and pack[:4] == b"PACK" and struct.unpack_from(">II", pack, 4) in ((2, count), (3, count))
              and idx[-2 * _SHA:-_SHA] == pack[-_SHA:])  # (this index is this pack's; and both SHA-1)
        if not ok:
            log.debug("pack %s not read directly: not a SHA-1 pack with a version-2 index", base.name)
            return None
        return cls(idx, pack, count)

    def offset(self, name: bytes) -> int | None:
        """Where object `name` starts in the pack (binary search within its fan-out bucket)."""
        lo = self.fanout[name[0] - 1] if name[0] else 0
        hi = self.fanout[name[0]]
        idx = self.idx
        while lo < hi:
            mid = (lo + hi) // 2
            at = self.names_at + mid * _SHA
            here = idx[at:at + _SHA]
            if here == name:
                return self._offset_of(mid)
            if here < name:
                lo = mid + 1
            else:
                hi = mid
        return None

    def _offset_of(self, i: int) -> int | None:
        off = struct.unpack_from(">I", self.idx, self.offsets_at + 4 * i)[0]
        if off & 0x80000000:
            at = self.large_at + 8 * (off & 0x7FFFFFFF)
            if at + 8 > len(self.idx) - 2 * _SHA:
                return None
            off = struct.unpack_from(">Q", self.idx, at)[0]
        return off if 12 <= off < self.data_end else None

    def blob_at(self, offset: int) -> Pieces | None:
        """The blob starting at `offset`: its stored blocks' pieces, or its inflated bytes."""
        head = _object_head(self.pack, offset, self.data_end)
        if head is None or head[0] != _BLOB:
            return None  # (a delta or another type: git resolves it)
        _, size, at = head
        if at + 2 > self.data_end:
            return None
        cmf, flg = self.pack[at], self.pack[at + 1]
        if cmf & 0x0F != 8 or cmf >> 4 > 7 or ((cmf << 8) | flg) % 31 or flg & 0x20:
            return None
        pieces = _stored(self.view, at + 2, size, self.data_end)
        return pieces if pieces is not None else self._inflated(at, size)

    def _inflated(self, at: int, size: int) -> Pieces | None:
        """A blob compressed by a deflate level above 0: zlib inflates it and checks its adler-32."""
        end = min(self.data_end, at + size + (size >> 10) + 64)  # (deflate's worst case bounds the input)
        d = zlib.decompressobj()
        try:
            data = d.decompress(self.view[at:end], size + 1)
        except zlib.error:
            return None
        return [memoryview(data)] if d.eof and len(data) == size else None


def _map(path: Path) -> mmap.mmap:
    fd = os.open(path, os.O_RDONLY)
    try:
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)  # (keeps its own descriptor)
    finally:
        os.close(fd)


def _object_head(pack: mmap.mmap, at: int, end: int) -> tuple[int, int, int] | None:
    """(type, size, where the compressed data starts) of the object at `at`."""
    c = pack[at]
    kind, size, shift = (c >> 4) & 7, c & 15, 4
    at += 1
    while c & 0x80:
        if at >= end or shift > 63:
            return None
        c = pack[at]
        size |= (c & 0x7F) << shift
        shift += 7
        at += 1
    return kind, size, at


_BLOCK = struct.Struct("<BHH")  # a stored block's header byte (BFINAL, BTYPE, padding), LEN, NLEN


def _stored(view: memoryview, at: int, size: int, end: int) -> Pieces | None:
    """The payloads of a run of stored deflate blocks from `at` to a final one, when they sum to
    `size`; None at the first block of another type (or anything malformed)."""
    pieces: Pieces = []
    total = 0
    unpack = _BLOCK.unpack_from
    while True:
        if at + 5 > end:
            return None
        header, length, inverse = unpack(view, at)
        if header & 0b110 or length ^ inverse != 0xFFFF:  # (BTYPE 00 is stored; NLEN is LEN's complement)
            return None
        at += 5
        total += length
        if at + length > end or total > size:
            return None
        if length:
            pieces.append(view[at:at + length])
        at += length
        if header & 1:  # BFINAL
            return pieces if total == size else None
