"""Taking a captured session back: `engram tapes rm TAPE [--purge]` and the record that keeps it out.

Tapes are immutable and the index is their projection, so removing a tape is a change of the
truth: its file leaves `.engram/tapes/` and the index is rebuilt without it (`engram reindex`'s
rebuild). A later `engram ingest` would otherwise capture the same transcript again, so each
removal is recorded first in `.engram/removed.jsonl` (append-only, fsynced): sessions named there
are skipped by ingest until `engram ingest --again` captures them anew (with the rules of that
day) and records that too.

Order, so that a kill at any point leaves a store the next command can use: (1) the record is
appended; (2) the tape's catalogue rows go, in one transaction; (3) the file moves to
`.engram/removed/` (plain `rm`, restorable) or is deleted (`--purge`); (4) the index is rebuilt
(the caller runs the rebuild: it takes the ingest lock itself); (5) with `--purge`, objects no
tape uses any more are deleted. Killed before (4), the index may still hold fingerprints of the
removed tape: `engram tapes rm` of it again, or `engram reindex`, finishes the job.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from engram.errors import UnknownTape
from engram.fsutil import fsync_dir
from engram.index.catalog import TapeRow, resolve_tapes
from engram.index.db import open_db
from engram.index.sql import immediate
from engram.store.lock import ingest_lock
from engram.store.repo import Store
from engram.tape.writer import TAPE_SUFFIX, tape_path

log = logging.getLogger(__name__)

LOG_NAME = "removed.jsonl"
ASIDE = "removed"


def log_path(store: Store) -> Path:
    return store.dir / LOG_NAME


def aside_dir(store: Store) -> Path:
    """Where a tape removed without `--purge` is kept (no ingest, gc or reindex reads it as a tape)."""
    return store.dir / ASIDE


def append_records(store: Store, records: list[dict[str, Any]]) -> None:
    """Append to the removal log and fsync before returning: the record precedes the removal."""
    path = log_path(store)
    data = b"".join(orjson.dumps(r) + b"\n" for r in records)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)


def removed_sessions(store: Store) -> frozenset[tuple[str, str]]:
    """(harness, session id) of every session removed and not captured again since."""
    try:
        raw = log_path(store).read_bytes()
    except FileNotFoundError:
        return frozenset()
    state: dict[tuple[str, str], bool] = {}
    for line in raw.splitlines():
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # a line cut by a crash: its removal had not started
        key = (str(rec.get("harness") or ""), str(rec.get("session_id") or ""))
        state[key] = rec.get("op") == "rm"
    return frozenset(k for k, removed in state.items() if removed)


def note_captured_again(store: Store, sessions: list[tuple[str, str]]) -> None:
    """`engram ingest --again` captured these removed sessions: ingest no longer skips them."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    append_records(store, [{"op": "again", "harness": h, "session_id": s, "at": now} for h, s in sessions])


@dataclass
class Removal:
    tapes: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    purged: bool = False
    kept_in: str | None = None  # where the tape files went (not with --purge)
    already: bool = False  # nothing left in the catalogue: an earlier removal was interrupted

    def as_dict(self) -> dict[str, Any]:
        return {"tapes": self.tapes, "sessions": self.sessions, "purged": self.purged, "kept_in": self.kept_in}


def remove_tapes(store: Store, ref: str, *, purge: bool, why: str = "rm") -> Removal:
    """Steps (1)-(3) for the tapes `ref` names (a tape-id prefix, or a session id: all its
    segments). The caller rebuilds the index next, then with `purge` collects objects."""
    out = Removal(purged=purge)
    with ingest_lock(store):
        db = open_db(store)
        try:
            try:
                rows = resolve_tapes(db, ref)
            except UnknownTape:
                rows = _interrupted(store, ref)
                if not rows:
                    raise
                out.already = True
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            append_records(store, [{"op": "rm", "tape": r.id, "harness": r.harness, "session_id": r.session_id,
                                    "purge": purge, "why": why, "at": now} for r in rows])
            ids = [r.id for r in rows]
            with immediate(db):
                marks = ",".join("?" * len(ids))
                for table, col in (("captures", "tape"), ("subagents", "tape"), ("tapes", "id")):
                    db.execute(f"DELETE FROM {table} WHERE {col} IN ({marks})", ids)
        finally:
            db.close()
        if not purge:
            aside_dir(store).mkdir(exist_ok=True)
            out.kept_in = str(aside_dir(store))
        for tid in ids:
            src = tape_path(store.tapes_dir, tid)
            if not src.exists():
                continue
            if purge:
                src.unlink()
            else:
                os.replace(src, aside_dir(store) / src.name)
        fsync_dir(store.tapes_dir)
        if not purge:
            fsync_dir(aside_dir(store))
        if purge:  # a copy set aside by an earlier plain `rm` goes too
            for tid in ids:
                kept = aside_dir(store) / f"{tid}{TAPE_SUFFIX}"
                if kept.exists():
                    kept.unlink()
    out.tapes = ids
    out.sessions = sorted({r.session_id for r in rows})
    return out


def _interrupted(store: Store, ref: str) -> list[TapeRow]:
    """Tapes of the removal log matching `ref` whose removal may not have finished (no catalogue
    row left): named again, they are removed again, which completes the job."""
    try:
        raw = log_path(store).read_bytes()
    except FileNotFoundError:
        return []
    rows: dict[str, TapeRow] = {}
    for line in raw.splitlines():
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        tid = str(rec.get("tape") or "")
        if rec.get("op") == "rm" and tid and (tid.startswith(ref) or rec.get("session_id") == ref):
            rows[tid] = TapeRow(tid, str(rec.get("harness") or ""), str(rec.get("session_id") or ""),
                                None, None, None, 0, 0, 0, 0, 0, None)
    return list(rows.values())
