"""Write a tape: redact, move large strings to objects, frame, compress, fsync, rename.

The tape id is the sha256 of the canonical JSONL (all events, each followed by a newline),
after redaction and externalisation — exactly the bytes `zstd -d` gives back. Writing the same
events twice yields the same id and leaves the existing file untouched.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import zstandard

from engram.fsutil import atomic_write, fsync_dir, names_in, publish, put_in_place, write_unpublished
from engram.tape import frames as fr
from engram.tape.redacted import record as record_clean
from engram.tape.events import META, Event, dumps, dumps_each
from engram.tape.objects import externalize
from engram.tape.reader import intact, mark_verified

log = logging.getLogger(__name__)

TAPE_SUFFIX = ".jsonl.zst"
COMPRESSION_LEVEL = 3

Redact = Callable[[Event], Event]
RedactAll = Callable[[list[Event]], list[Event]]


@dataclass
class WrittenTape:
    id: str
    path: Path
    n_events: int
    raw_bytes: int  # canonical JSONL size
    size: int  # compressed file size
    created: bool  # False when an identical tape already existed
    redactions: Counter[str] = field(default_factory=Counter)
    # The events as stored, but with large strings still inline: what an indexer reads back
    # from the tape, handed over without decompressing it again.
    events: list[Event] | None = field(default=None, repr=False)
    # Written with `publish_later`: the temp file holding the tape until `publish_tape` puts it
    # in place (None: the tape is in place and on disk).
    pending: Path | None = None
    in_place_unsynced: bool = False  # put in place by `publish_tapes`, its directory not synced yet


def tape_path(tapes_dir: Path, tape_id: str) -> Path:
    return tapes_dir / f"{tape_id}{TAPE_SUFFIX}"


def tape_files(tapes_dir: Path) -> list[Path]:
    """The tape files of a store's tapes directory, sorted; never through a symbolic link
    (`fsutil.names_in`)."""
    return [tapes_dir / n for n in sorted(names_in(tapes_dir)) if n.endswith(TAPE_SUFFIX)]


def _framed(lines: list[bytes], frame_bytes: int) -> list[tuple[bytes, int, int]]:
    """Canonical event lines (each without its newline) cut into frames of about `frame_bytes`:
    (the frame's bytes, newlines included; its first line; its number of lines)."""
    out: list[tuple[bytes, int, int]] = []
    i = 0
    n = len(lines)
    while i < n:
        first = i
        size = len(lines[i]) + 1
        i += 1
        while i < n and size < frame_bytes:
            size += len(lines[i]) + 1
            i += 1
        chunk = lines[first:i]
        chunk.append(b"")  # (the frame's last newline, joined with the others: not a second copy)
        out.append((b"\n".join(chunk), first, i - first))
    return out


def encode_tape(lines: list[bytes], frame_bytes: int = fr.FRAME_BYTES, level: int = COMPRESSION_LEVEL) -> bytes:
    """Frame and compress canonical event lines (each without its newline)."""
    return _encode_frames(_framed(lines, frame_bytes), level)


def _encode_frames(frames: list[tuple[bytes, int, int]], level: int = COMPRESSION_LEVEL) -> bytes:
    # The checksum (4 bytes a frame) makes a damaged frame fail to decode instead of reading as
    # other text: a window read from a tape on a bad disk says so.
    cctx = zstandard.ZstdCompressor(level=level, write_content_size=True, write_checksum=True)
    chunks: list[bytes] = []
    table: list[fr.Frame] = []
    offset = 0
    for raw, first, count in frames:
        comp = cctx.compress(raw)
        chunks.append(comp)
        table.append(fr.Frame(offset, len(comp), len(raw), first, count))
        offset += len(comp)
    chunks.append(fr.encode_table(table))
    return b"".join(chunks)


def write_tape(
    tapes_dir: Path,
    objects_dir: Path,
    events: Iterable[Event],
    *,
    redact: Redact | None = None,
    redact_all: RedactAll | None = None,
    redactions: Counter[str] | None = None,
    object_threshold: int = 256 * 1024,
    publish_later: bool = False,
    rules: str | None = None,
) -> WrittenTape:
    """Persist `events` (the first must be `meta`) as one immutable tape. `redact` redacts one
    event, `redact_all` all of them at once (`Redactor.events`, faster: capture's).
    `publish_later`: a new tape is left in a temp file (`WrittenTape.pending`) for
    `publish_tape` to sync and put in place — what a capture worker does, its parent publishing
    (`engram.fsutil.write_unpublished`). `rules`: the digest of the rules that redacted them
    (`Redactor.digest`), recorded beside the tapes (engram.tape.redacted): `engram push` does not
    scan a tape clean under today's rules again."""
    import hashlib  # noqa: PLC0415 - OpenSSL's start-up (~3.5 ms) only where hashes are taken

    if redact_all is not None:
        events = redact_all(list(events))
    stored: list[Event] = [redact(ev) for ev in events] if redact is not None else list(events)
    lines = dumps_each(stored)
    # A string is never longer in characters than the JSON line holding it is in bytes: only
    # a line over the threshold can hold a string to move out (rare; the walk is not).
    if lines and max(map(len, lines)) > object_threshold:
        lines = [dumps(externalize(ev, objects_dir, object_threshold)) if len(line) > object_threshold else line
                 for ev, line in zip(stored, lines)]
    if not lines or not lines[0].startswith(b'{"'):
        raise ValueError("a tape needs at least its meta event")
    first = events_first_kind(lines[0])
    if first != META:
        raise ValueError(f"the first event of a tape must be meta, not {first!r}")
    # The frames' bytes are the canonical JSONL, in order: hashed as they are, compressed as they are.
    frames = _framed(lines, fr.FRAME_BYTES)
    h = hashlib.sha256()
    raw_bytes = 0
    for raw, _, _ in frames:
        h.update(raw)
        raw_bytes += len(raw)
    tape_id = h.hexdigest()
    path = tape_path(tapes_dir, tape_id)
    if path.exists():  # (rare: captures of unchanged sessions stop earlier)
        if intact(path):
            record_clean(tapes_dir.parent, [tape_id], rules)
            return WrittenTape(tape_id, path, len(lines), raw_bytes, path.stat().st_size, False,
                               redactions or Counter(), stored)
        log.warning("tape %s was damaged on disk; writing it again", tape_id[:12])
    data = _encode_frames(frames)
    record_clean(tapes_dir.parent, [tape_id], rules)  # (a fact about these bytes, wherever they land)
    if publish_later:
        pending = write_unpublished(path, data, mode=0o444)
        return WrittenTape(tape_id, path, len(lines), raw_bytes, len(data), True, redactions or Counter(), stored,
                           pending)
    atomic_write(path, data, mode=0o444)
    mark_verified(path)
    log.debug("wrote tape %s (%d events, %d bytes)", tape_id, len(lines), len(data))
    return WrittenTape(tape_id, path, len(lines), raw_bytes, len(data), True, redactions or Counter(), stored)


def publish_tape(written: WrittenTape) -> None:
    """Put a tape written with `publish_later` in place, synced (nothing to do for another)."""
    if written.pending is not None:
        publish(written.pending, written.path)
    elif written.in_place_unsynced:
        fsync_dir(written.path.parent)
    else:
        return
    _published(written)


def publish_tapes(tapes: list[WrittenTape]) -> None:
    """`publish_tape` of several tapes at once (the results that came in together): each synced
    and put in place, their directory synced once for all. Why: on a slow disk (a sync 4 ms)
    the ingest process, which syncs every tape its workers write, fell behind them by a
    directory sync a tape. After an error, what is left is done by `publish_tape`."""
    placed = []
    for t in tapes:
        if t.pending is not None:
            put_in_place(t.pending, t.path)
            t.pending, t.in_place_unsynced = None, True
            placed.append(t)
    for d in sorted({t.path.parent for t in placed}):
        fsync_dir(d)
    for t in placed:
        _published(t)


def _published(written: WrittenTape) -> None:
    written.pending, written.in_place_unsynced = None, False
    mark_verified(written.path)
    log.debug("wrote tape %s (%d events, %d bytes)", written.id, written.n_events, written.size)


def events_first_kind(line: bytes) -> str | None:
    from engram.tape.events import loads  # noqa: PLC0415

    return loads(line).get("kind")
