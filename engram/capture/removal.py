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
from engram.fsutil import append_durably, fsync_dir, json_lines
from engram.index.catalog import TapeRow, resolve_tapes
from engram.index.db import open_db
from engram.index.sql import immediate
from engram.store.lock import ingest_lock
from engram.store.repo import Store
from engram.tape.redacted import record as record_clean
from engram.tape.writer import TAPE_SUFFIX, tape_path

log = logging.getLogger(__name__)

LOG_NAME = "removed.jsonl"


def log_path(store: Store) -> Path:
    return store.dir / LOG_NAME


def aside_dir(store: Store) -> Path:
    """Where a tape removed without `--purge` is kept (no ingest, gc or reindex reads it as a tape)."""
    return store.removed_dir


def append_records(store: Store, records: list[dict[str, Any]]) -> None:
    """Append to the removal log and fsync before returning: the record precedes the removal."""
    append_durably(log_path(store), [orjson.dumps(r) for r in records])


def removed_sessions(store: Store) -> frozenset[tuple[str, str]]:
    """(harness, session id) of every session removed and not captured again since."""
    state: dict[tuple[str, str], bool] = {}
    for rec in json_lines(log_path(store)):  # (a line a crash cut short: its removal had not begun)
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
    rows: dict[str, TapeRow] = {}
    for rec in json_lines(log_path(store)):
        tid = str(rec.get("tape") or "")
        if rec.get("op") == "rm" and tid and (tid.startswith(ref) or rec.get("session_id") == ref):
            rows[tid] = TapeRow(tid, str(rec.get("harness") or ""), str(rec.get("session_id") or ""),
                                None, None, None, 0, 0, 0, 0, 0, None)
    return list(rows.values())


# ---------------------------------------------------------------- redacting stored tapes again

REDIRECTS = "redirects.jsonl"


@dataclass
class Reredaction:
    tapes: int = 0
    changed: dict[str, str] = field(default_factory=dict)  # old id -> new id
    redactions: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"tapes": self.tapes, "changed": self.changed, "redactions": self.redactions}


def redact_again(store: Store) -> Reredaction:
    """`engram redact --again`: every stored tape through today's rules (built-in and the config's
    `[redact] patterns`). A tape that changes gets a new id (its content address): the new tape is
    written first, then the old id -> new id pair is appended to `.engram/redirects.jsonl`
    (fsynced), then the old file is deleted. A later segment names its predecessor in `prev`, so it
    is rewritten after it, with the new id. Offsets do not change (redaction rewrites strings,
    never events), so `TAPE@OFFSET` references written before — memories' evidence — still name
    the same event through the redirect. The caller rebuilds the index (catalogue, continuation
    edges, search) and collects the objects only the old tapes used. Killed midway, running it
    again finishes: redacting is idempotent and tape ids are deterministic."""
    from engram.capture.redact import Redactor  # noqa: PLC0415
    from engram.tape.reader import TapeReader  # noqa: PLC0415
    from engram.tape.writer import write_tape  # noqa: PLC0415

    out = Reredaction()
    redactor = Redactor(store.config["redact"].get("patterns") or [])
    clean: list[str] = []
    threshold = int(store.config["ingest"]["object_threshold"])
    with ingest_lock(store):
        paths = {p.name[: -len(TAPE_SUFFIX)]: p for p in sorted(store.tapes_dir.glob(f"*{TAPE_SUFFIX}"))}
        metas: dict[str, dict[str, Any]] = {}
        for tid, path in paths.items():
            with TapeReader(path, store.objects_dir) as r:
                metas[tid] = next(r.events())
        for tid in _prev_first(metas):
            with TapeReader(paths[tid], store.objects_dir) as r:
                events = list(r.events(resolve_objects=True))
            prev = events[0].get("prev")
            if prev in out.changed:
                events[0] = {**events[0], "prev": out.changed[prev]}
            redacted = redactor.events(events)
            out.tapes += 1
            if redacted == events and prev not in out.changed:
                clean.append(tid)  # unchanged, its id stays: today's rules found nothing in it
                continue
            # rewritten: today's rules left it as it is now (redaction is idempotent)
            written = write_tape(store.tapes_dir, store.objects_dir, redacted, rules=redactor.digest,
                                 object_threshold=threshold)
            if written.id != tid:
                out.changed[tid] = written.id
                append_redirects(store, {tid: written.id})
                paths[tid].unlink()
        fsync_dir(store.tapes_dir)
        record_clean(store.dir, clean, redactor.digest)
    out.redactions = dict(redactor.counts)
    return out


def _prev_first(metas: dict[str, dict[str, Any]]) -> list[str]:
    """Tape ids so that a segment comes after the one its `prev` names."""
    done: list[str] = []
    seen: set[str] = set()

    def visit(tid: str) -> None:
        stack = []
        while tid in metas and tid not in seen:
            stack.append(tid)
            seen.add(tid)
            tid = metas[tid].get("prev") or ""
        done.extend(reversed(stack))
    for tid in sorted(metas):
        visit(tid)
    return done


def append_redirects(store: Store, pairs: dict[str, str]) -> None:
    append_durably(store.dir / REDIRECTS, [orjson.dumps({"old": a, "new": b}) for a, b in pairs.items()])
