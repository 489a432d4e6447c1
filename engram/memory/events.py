"""The memory event log: every change to a memory, append-only and fsynced, under
`.engram/events/memories/`.

Why this shape:

- **One file per clone and UTC day** (`2026-11-28.<clone>.jsonl`). A clone is one `.engram/`
  store (its random id is in `.engram/clone`); only that clone's processes append to its files,
  under the store's memory lock. Two people's logs are therefore disjoint sets of files: copied
  into one directory (later, through git) they union with no conflict, and no file is ever
  edited by two writers.
- **Every event has an id and a time.** The id is a content address (blake2b of the event
  without it), the time UTC with microseconds. Replaying the union of all files in (time, id)
  order is deterministic, whatever order the files arrived in; within one clone, time order is
  also file order (a writer never stamps an event earlier than the last one applied).
- **Whole lines or nothing that counts.** An append is one write of whole lines followed by
  fsync; a process killed in the middle leaves at most a torn last line. Readers skip an
  unparsable line and count it (never an exception), and the next append starts on a new line,
  so a torn line never swallows the next event.
- **Purge rewrites files, never appends a copy.** `purge` drops every event of one memory from
  each file that holds one, by writing the file anew (temp file, fsync, rename, fsync the
  directory): each file is either the old one or the new one, and the events of other memories
  are copied byte for byte.
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import orjson

from engram.errors import BadInput
from engram.fsutil import atomic_write, fsync_dir, names_in, remove_stale_temps
from engram.memory import LOG_SUBDIR
from engram.memory.model import iso, moment_of, now_iso
from engram.store.repo import Store
from engram.words import plural

log = logging.getLogger(__name__)

FORMAT = 1
SUBDIR = LOG_SUBDIR
SUFFIX = ".jsonl"
CLONE_FILE = "clone"
# Operations, each a kind of change (docs/memories.md describes their fields).
OPS = ("add", "edit", "status", "link", "reanchor", "forget", "reinforce", "recalled", "written_at")


@dataclass(frozen=True)
class Event:
    id: str
    ts: str
    clone: str
    op: str
    memory: str | None
    by: dict[str, Any]
    data: dict[str, Any]

    @property
    def key(self) -> tuple[str, str]:
        """The replay order of the union of every clone's log."""
        return (self.ts, self.id)

    def to_json(self) -> dict[str, Any]:
        # `op` and `memory` before the payload: a torn line that holds any content also names
        # the memory it belongs to, which purge relies on to drop it.
        return {"v": FORMAT, "id": self.id, "ts": self.ts, "clone": self.clone, "op": self.op,
                "memory": self.memory, "by": self.by, **self.data}


_HEAD = ("v", "id", "ts", "clone", "op", "memory", "by")


def event_from_json(doc: Any) -> Event | None:
    """The event a parsed line holds, or None when it is not one (a foreign or later format)."""
    if not isinstance(doc, dict) or doc.get("v") != FORMAT:
        return None
    eid, ts, op = doc.get("id"), doc.get("ts"), doc.get("op")
    if not (isinstance(eid, str) and isinstance(ts, str) and op in OPS):
        return None
    memory = doc.get("memory")
    by = doc.get("by")
    return Event(eid, ts, str(doc.get("clone") or ""), op, memory if isinstance(memory, str) else None,
                 by if isinstance(by, dict) else {}, {k: v for k, v in doc.items() if k not in _HEAD})


def events_in(data: bytes) -> Iterator[tuple[Event, bytes]]:
    """Each event of a log file's bytes with its line, in order; a line that is not a whole event
    (torn, foreign) is passed over: what reading another clone's copy of a log needs."""
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        try:
            ev = event_from_json(orjson.loads(raw))
        except orjson.JSONDecodeError:
            continue
        if ev is not None:
            yield ev, raw


def event_id(body: dict[str, Any]) -> str:
    import hashlib  # noqa: PLC0415 - (OpenSSL's start-up: only when writing)

    return hashlib.blake2b(orjson.dumps(body, option=orjson.OPT_SORT_KEYS), digest_size=16).hexdigest()


@dataclass(frozen=True)
class Pending:
    """An event to append: what changes; the log gives it its time, clone and id."""

    op: str
    memory: str | None
    by: dict[str, Any]
    data: dict[str, Any]


@dataclass(frozen=True)
class LogFile:
    name: str
    size: int
    ino: int


@dataclass
class Chunk:
    """What reading a log file from an offset gave."""

    events: list[Event]
    end: int  # the offset after the last whole line read
    torn: int  # lines skipped: unparsable (a write cut short) or not an event


class EventLog:
    """The memory log of one store. Appending and purging expect the caller to hold the store's
    memory lock (`engram.store.lock.memory_lock`); reading does not need it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.dir = store.events_dir / SUBDIR
        self._clone: str | None = None

    # ------------------------------------------------------------ identity

    @property
    def clone(self) -> str:
        """This store's writer id: random, made once, never shared (it names this clone's files)."""
        if self._clone is None:
            path = self.store.dir / CLONE_FILE
            try:
                self._clone = path.read_text(encoding="ascii").strip()
            except FileNotFoundError:
                self._clone = ""
            if not self._clone:
                import secrets  # noqa: PLC0415 - (only when writing)

                self._clone = secrets.token_hex(4)
                atomic_write(path, (self._clone + "\n").encode(), mode=0o644)
        return self._clone

    # ------------------------------------------------------------ writing

    def append(self, pending: Iterable[Pending], not_before: str | None = None) -> list[Event]:
        """Stamp, write and fsync `pending` as whole lines; returns the events as written.

        `not_before`: the time of the last event applied; stamps are kept after it, so that this
        clone's events are in time order in its files whatever the clock did."""
        last = not_before or ""
        events: list[Event] = []
        for p in pending:
            ts = now_iso()
            if ts <= last:
                ts = _after(last)
            last = ts
            body = {"v": FORMAT, "ts": ts, "clone": self.clone, "op": p.op, "memory": p.memory, "by": p.by, **p.data}
            events.append(Event(event_id(body), ts, self.clone, p.op, p.memory, p.by, p.data))
        by_file: dict[str, list[bytes]] = {}
        for ev in events:
            by_file.setdefault(self.file_for(ev), []).append(orjson.dumps(ev.to_json()) + b"\n")
        for name, lines in by_file.items():
            self._write(self.dir / name, b"".join(lines))
        return events

    def file_for(self, ev: Event) -> str:
        return f"{ev.ts[:10]}.{self.clone}{SUFFIX}"

    def _write(self, path: Path, data: bytes) -> None:
        created = not path.exists()
        if created:
            self.dir.mkdir(parents=True, exist_ok=True)
        try:  # O_NOFOLLOW: a link planted here must not have memories appended to a file outside
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
        except OSError as exc:
            if os.path.isdir(path) and not os.path.islink(path):
                raise BadInput(f"{path} is a directory, not a memory log file: move it out of the way") from exc
            if not os.path.islink(path):
                raise
            raise BadInput(f"{path} is a symbolic link: engram writes its memory log only inside the store; "
                           "remove the link (and move the file it points to there if it is a log)") from exc
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # a torn line before: end it, so this event starts a line
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            fsync_dir(self.dir)

    # ------------------------------------------------------------ reading

    def files(self) -> list[LogFile]:
        out = []
        for name in sorted(names_in(self.dir)):
            if name.endswith(SUFFIX) and not name.startswith("."):
                try:
                    st = os.stat(self.dir / name)
                except FileNotFoundError:
                    continue
                if not stat.S_ISREG(st.st_mode):  # (a directory in a log file's place: not read)
                    log.warning("%s is not a file: the memory log leaves it out; move it out of the way",
                                self.dir / name)
                    continue
                out.append(LogFile(name, st.st_size, st.st_ino))
        return out

    def read(self, name: str, offset: int = 0) -> Chunk:
        """The events of one file from `offset` (a line start); a last line without its newline
        is left unread (a write in progress, or cut short: the next append ends it)."""
        try:
            with open(self.dir / name, "rb") as f:
                f.seek(offset)
                data = f.read()
        except FileNotFoundError:
            return Chunk([], offset, 0)
        cut = data.rfind(b"\n") + 1
        events: list[Event] = []
        torn = 0
        for line in data[:cut].split(b"\n")[:-1]:
            if not line.strip():
                continue
            try:
                ev = event_from_json(orjson.loads(line))
            except orjson.JSONDecodeError:
                ev = None
            if ev is None:
                torn += 1
            else:
                events.append(ev)
        if cut < len(data):
            torn += 1
        if torn:
            log.warning("%s: skipped %s that %s not whole events (a write cut short)", name, plural(torn, "line"), "is" if torn == 1 else "are")
        return Chunk(events, offset + cut, torn)

    def read_all(self) -> tuple[list[Event], int]:
        """Every event of every clone's files in replay order, and the lines skipped."""
        events: list[Event] = []
        torn = 0
        for f in self.files():
            chunk = self.read(f.name)
            events.extend(chunk.events)
            torn += chunk.torn
        events.sort(key=lambda e: e.key)
        return dedupe(events), torn

    # ------------------------------------------------------------ purging

    def purge(self, memory: str) -> tuple[list[str], int]:
        """Rewrite every file holding an event of `memory` without those events (nor lines that
        are not whole events, which could hold part of one). Returns the files rewritten and the
        lines dropped. The caller holds the memory lock, and appends the tombstone afterwards."""
        remove_stale_temps(self.dir)
        rewritten: list[str] = []
        dropped = 0
        needle = memory.encode()
        for f in self.files():
            path = self.dir / f.name
            data = path.read_bytes()
            if needle not in data:
                continue
            kept: list[bytes] = []
            here = 0
            for line in data.split(b"\n"):
                if not line.strip():
                    continue
                if needle in line and _mentions(line, memory):
                    here += 1
                    continue
                kept.append(line)
            if here:
                atomic_write(path, b"".join(line + b"\n" for line in kept), mode=0o644)
                rewritten.append(f.name)
                dropped += here
        return rewritten, dropped


def _mentions(line: bytes, memory: str) -> bool:
    """Is this line an event of `memory` that purge drops (or not a whole event at all, so
    perhaps one)? Only a memory's own events hold its content: another memory's link to it, or a
    recall batch that counted it, name its id alone and are kept byte for byte, and so is its
    tombstone (`forget`), which must reach every clone."""
    try:
        ev = event_from_json(orjson.loads(line))
    except orjson.JSONDecodeError:
        return True
    return ev is None or (ev.memory == memory and ev.op != "forget")


def dedupe(events: list[Event]) -> list[Event]:
    """Sorted events without repeats of an id (the same file copied twice)."""
    out: list[Event] = []
    for ev in events:
        if not out or out[-1].id != ev.id:
            out.append(ev)
    return out


def _after(ts: str) -> str:
    """The stored time one microsecond after `ts`."""
    import datetime as dt  # noqa: PLC0415

    return iso(moment_of(ts) + dt.timedelta(microseconds=1))
