"""Read a tape: stream its events or jump to an event offset through the seek table.

An event offset is the event's 0-based position in the tape (the meta event is offset 0).
Reading a window decompresses only the frames that hold it, so explain windows cost the same
on a 10 KB tape and a 1 GB store.
"""

from __future__ import annotations

import os
import stat
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Iterator

import zstandard

from engram.errors import CorruptTape
from engram.tape import frames as fr
from engram.tape.events import Event, loads
from engram.tape.objects import OBJ_KEY, resolve

_TAIL_GUESS = 4096
SHARED_CACHE_BYTES = 64 << 20


class _SharedFrames:
    """Decoded frames of every tape this process read, least recently used dropped past a byte
    budget. Tapes are immutable, so a language server or MCP endpoint answering explain after
    explain on the same sessions decompresses each frame once. Keys carry the file's size and
    mtime: a tape replaced or damaged on disk is never answered from memory."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.used = 0
        self.frames: OrderedDict[tuple[tuple[str, int, int], int], tuple[list[bytes], int]] = OrderedDict()
        self.tables: OrderedDict[tuple[str, int, int], list[fr.Frame]] = OrderedDict()
        self.verified: OrderedDict[tuple[str, int, int], None] = OrderedDict()  # ids checked in this process
        self.lock = threading.Lock()  # the language server reads tapes from two threads

    def get(self, key: tuple[tuple[str, int, int], int]) -> list[bytes] | None:
        with self.lock:
            hit = self.frames.get(key)
            if hit is None:
                return None
            self.frames.move_to_end(key)
            return hit[0]

    def put(self, key: tuple[tuple[str, int, int], int], lines: list[bytes], size: int) -> None:
        with self.lock:
            if size > self.budget // 4 or key in self.frames:
                return
            self.frames[key] = (lines, size)
            self.used += size
            while self.used > self.budget:
                _, (_, n) = self.frames.popitem(last=False)
                self.used -= n

    def table(self, ident: tuple[str, int, int]) -> list[fr.Frame] | None:
        with self.lock:
            got = self.tables.get(ident)
            if got is not None:
                self.tables.move_to_end(ident)
            return got

    def put_table(self, ident: tuple[str, int, int], frames: list[fr.Frame]) -> None:
        with self.lock:
            self.tables[ident] = frames
            if len(self.tables) > 4096:
                self.tables.popitem(last=False)

    def is_verified(self, ident: tuple[str, int, int]) -> bool:
        with self.lock:
            return ident in self.verified

    def put_verified(self, ident: tuple[str, int, int]) -> None:
        with self.lock:
            self.verified[ident] = None
            if len(self.verified) > 65536:
                self.verified.popitem(last=False)


_shared = _SharedFrames(SHARED_CACHE_BYTES)


#: What a user can do about a damaged tape file: the catalog keeps a session's capture as long as
#: its tape is catalogued, so `engram ingest` alone would skip the session as unchanged.
REPAIR = ("the tape is damaged: `engram reindex` moves it to .engram/quarantine/, then `engram ingest` captures its "
          "session again")


# How an object reference looks in a canonical JSONL line (`{"$obj": digest, ...}`): a line
# without it has none, and is not walked to find one.
_OBJ_NEEDLE = b'"' + OBJ_KEY.encode() + b'"'

MISMATCH = "content does not match its id (another tape's content under this name?)"


def intact(path: Path) -> bool:
    """Whether the tape file at `path` decodes and matches its id (reads all of it)."""
    try:
        with TapeReader(path):  # (opening it checks its id)
            pass
    except CorruptTape:
        return False
    return True


def _is_address(name: str) -> bool:
    """Whether a file name is a content address (a tape of a store, not a file a test or a tool
    named otherwise)."""
    return len(name) == 64 and all(c in "0123456789abcdef" for c in name)


def mark_verified(path: Path) -> None:
    """A tape this process has just written: its id is known to match, opening it need not hash it."""
    st = os.stat(path)
    _shared.put_verified((str(path), st.st_size, st.st_mtime_ns))


def verified_as(path: Path) -> tuple[str, int, int] | None:
    """The file's identity (path, size, mtime) when this process has checked its id, else None:
    what a worker process is handed (`trust`) so that it does not hash the same bytes again."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    ident = (str(path), st.st_size, st.st_mtime_ns)
    return ident if _shared.is_verified(ident) else None


def trust(ident: tuple[str, int, int]) -> None:
    """Take the parent process's word (`verified_as`) that the file with this identity matches
    its id; a file changed since has another identity and is hashed on open as usual."""
    _shared.put_verified((str(ident[0]), int(ident[1]), int(ident[2])))


class TapeReader:
    """Random access to one tape file. Cheap to open: reads only the seek table."""

    def __init__(self, path: Path, objects_dir: Path | None = None, cache_frames: int = 4, *,
                 check_id: bool = True) -> None:
        """`check_id`: hash the content against the file name on the first open of this file in
        this process (a tape overwritten with another valid tape would otherwise be answered
        under the wrong id); off only for callers that read and hash every event themselves."""
        self.path = path
        self.objects_dir = objects_dir
        self._cache: OrderedDict[int, list[bytes]] = OrderedDict()
        self._cache_frames = cache_frames
        try:
            # O_NOFOLLOW: a tape replaced by a link is not read through it (out of the store).
            self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError as exc:
            raise CorruptTape(f"tape file {path} is missing; run `engram reindex`") from exc
        except OSError as exc:  # ELOOP (a link), EISDIR, EACCES
            raise CorruptTape(f"tape file {path} cannot be read ({exc.strerror}); {REPAIR}") from exc
        try:
            st = os.fstat(self._fd)
            if not stat.S_ISREG(st.st_mode):  # (a directory opens read-only; its reads fail later)
                raise CorruptTape(f"tape file {path} is not a file; {REPAIR}")
            self.size = st.st_size
            self._ident = (str(path), st.st_size, st.st_mtime_ns)
            frames = _shared.table(self._ident)
            if frames is None:
                frames = self._read_table()
                _shared.put_table(self._ident, frames)
            self.frames = frames
        except BaseException:
            os.close(self._fd)
            raise
        self.n_events = sum(f.n_events for f in self.frames)
        self._dctx = zstandard.ZstdDecompressor()
        if check_id and _is_address(self.id) and not _shared.is_verified(self._ident):
            try:
                self._check_id()
            except BaseException:
                self.close()
                raise
            _shared.put_verified(self._ident)

    def _check_id(self) -> None:
        """The sha256 of the frames' content against the id the file is named by: ~10 ms a MB of
        JSONL on the slowest machine measured (no SHA instructions), once per file and process."""
        import hashlib  # noqa: PLC0415 - OpenSSL's start-up (~3.5 ms) only where hashes are taken

        h = hashlib.sha256()
        for index, f in enumerate(self.frames):
            comp = os.pread(self._fd, f.size, f.offset)
            try:
                h.update(self._dctx.decompress(comp, max_output_size=f.raw_size))
            except zstandard.ZstdError as exc:
                raise self._damaged(f"frame {index} does not decompress ({exc})") from exc
        if h.hexdigest() != self.id:
            raise self._damaged(MISMATCH)

    def _read_table(self) -> list[fr.Frame]:
        want = min(self.size, _TAIL_GUESS)
        while True:
            tail = os.pread(self._fd, want, self.size - want)
            try:
                got = fr.decode_table(tail, self.size)
            except ValueError as exc:
                raise self._damaged(str(exc)) from exc
            if got is not None:
                return got[0]
            if want >= self.size:
                raise self._damaged("seek table larger than the file")
            want = min(self.size, want * 4)

    def _damaged(self, what: str) -> CorruptTape:
        return CorruptTape(f"{self.path}: {what}; {REPAIR}")

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "TapeReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return self.n_events

    @property
    def id(self) -> str:
        return self.path.name.split(".", 1)[0]

    def _frame_lines(self, index: int) -> list[bytes]:
        cached = self._cache.get(index)
        if cached is not None:
            self._cache.move_to_end(index)
            return cached
        cached = _shared.get((self._ident, index))
        if cached is not None:
            return cached
        f = self.frames[index]
        comp = os.pread(self._fd, f.size, f.offset)
        try:
            raw = self._dctx.decompress(comp, max_output_size=f.raw_size)
        except zstandard.ZstdError as exc:
            raise self._damaged(f"frame {index} does not decompress ({exc})") from exc
        lines = raw.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        if len(lines) != f.n_events:
            raise self._damaged(f"frame {index} holds {len(lines)} events, table says {f.n_events}")
        self._cache[index] = lines
        if len(self._cache) > self._cache_frames:
            self._cache.popitem(last=False)
        _shared.put((self._ident, index), lines, f.raw_size)
        return lines

    def _frame_of(self, offset: int) -> int:
        lo, hi = 0, len(self.frames) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.frames[mid].first_event <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def raw_lines(self, start: int = 0, stop: int | None = None) -> Iterator[bytes]:
        """Canonical JSONL lines of events [start, stop)."""
        stop = self.n_events if stop is None else min(stop, self.n_events)
        start = max(0, start)
        if start >= stop:
            return
        fi = self._frame_of(start)
        pos = start
        while pos < stop and fi < len(self.frames):
            f = self.frames[fi]
            lines = self._frame_lines(fi)
            for j in range(pos - f.first_event, min(f.n_events, stop - f.first_event)):
                yield lines[j]
            pos = f.first_event + f.n_events
            fi += 1

    def events(self, start: int = 0, stop: int | None = None, *, resolve_objects: bool = False) -> Iterator[Event]:
        resolving = resolve_objects and self.objects_dir is not None
        for line in self.raw_lines(start, stop):
            ev = loads(line)
            if resolving and _OBJ_NEEDLE in line:  # (walking every event's values cost 6 s per 200 MB indexed)
                ev = resolve(ev, self.objects_dir)
            yield ev

    def event(self, offset: int, *, resolve_objects: bool = False) -> Event:
        if not 0 <= offset < self.n_events:
            raise IndexError(offset)
        return next(self.events(offset, offset + 1, resolve_objects=resolve_objects))

    def meta(self) -> Event:
        return self.event(0)

    def window(self, at: int, before: int, after: int, *, resolve_objects: bool = True) -> list[tuple[int, Event]]:
        """Events around offset `at`, each with its offset."""
        start = max(0, at - before)
        stop = min(self.n_events, at + after + 1)
        return list(zip(range(start, stop), self.events(start, stop, resolve_objects=resolve_objects)))

    def verify(self) -> None:
        """Check the content hash against the file name (raises CorruptTape)."""
        import hashlib  # noqa: PLC0415 - OpenSSL's start-up (~3.5 ms) only where hashes are taken

        h = hashlib.sha256()
        for line in self.raw_lines():
            h.update(line)
            h.update(b"\n")
        if h.hexdigest() != self.id:
            raise self._damaged(MISMATCH)
