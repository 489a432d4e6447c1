"""The catalog of tapes: registering a written tape (its row, sources, subagent link), finding
tapes on disk the catalog missed, and looking tapes up by id prefix or by session id.

Every query opens the index through `require_tapes`: the tape reader and writer (and zstandard)
are imported only by the functions that read or name tape files, not by a query that reads none."""

from __future__ import annotations

import logging
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from engram.errors import CorruptTape, EngramError, UnknownTape
from engram.index.sql import ambiguity, by_prefix, immediate
from engram.fsutil import json_lines, names_in, remove_stale_temps
from engram.store.repo import Store
from engram.tape import events as E

log = logging.getLogger(__name__)

COLUMNS = ("id", "harness", "session_id", "model", "started", "ended", "events", "edits", "reads", "size",
           "raw_bytes", "prev")


@dataclass(frozen=True)
class TapeRow:
    id: str
    harness: str
    session_id: str
    model: str | None
    started: str | None
    ended: str | None
    events: int
    edits: int
    reads: int
    size: int
    raw_bytes: int
    prev: str | None
    subagent: str | None = None  # the kind of agent another session started (Codex `guardian`, …)
    parent_session: str | None = None  # that session, when the harness says

    def as_dict(self) -> dict[str, Any]:
        return {c: getattr(self, c) for c in (*COLUMNS, "subagent", "parent_session")}


def list_tapes(db: apsw.Connection, *, limit: int | None = None, harness: str | None = None) -> list[TapeRow]:
    """The catalog, newest first. A subagent's tape says so: a store of Codex sessions can hold
    more automatic reviewers' tapes than sessions a person started (chikachow/cyspbot: 51 of 80)."""
    cols = ", ".join(f"t.{c}" for c in COLUMNS)
    sql = f"SELECT {cols}, s.kind, s.parent_session FROM tapes t LEFT JOIN subagents s ON s.tape = t.id"
    args: list[Any] = []
    if harness:
        sql += " WHERE t.harness = ?"
        args.append(harness)
    sql += " ORDER BY t.started DESC, t.id"
    if limit:
        sql += " LIMIT ?"
        args.append(limit)
    return [TapeRow(*r) for r in db.execute(sql, args)]


def resolve_tapes(db: apsw.Connection, ref: str) -> list[TapeRow]:
    """All tapes `ref` names: a unique id prefix, or every segment of a harness session id."""
    ref = ref.strip()
    if not ref:
        raise UnknownTape("empty tape reference")
    cols = ", ".join(COLUMNS)
    rows = [TapeRow(*r) for r in db.execute(
        f"SELECT {cols} FROM tapes WHERE session_id = ? ORDER BY started, id", (ref,))]
    if rows:
        return _chain_order(rows)
    ids = by_prefix(db, "tapes", "id", ref.lower())
    if not ids:
        moved = redirected(db, ref.lower())
        if moved is not None:
            return resolve_tapes(db, moved)
        return _session_prefix(db, ref)
    if len(ids) > 1:
        raise UnknownTape(ambiguity(ref, ids, "tapes"))
    return [TapeRow(*r) for r in db.execute(f"SELECT {cols} FROM tapes WHERE id = ?", (ids[0],))]


def redirected(db: apsw.Connection, ref: str) -> str | None:
    """The id a tape rewritten by `engram redact --again` has now, when `ref` starts an old id
    (`.engram/redirects.jsonl`, next to the index): a memory's evidence and any `TAPE@OFFSET`
    written before keep naming the same event, whose offset a redaction never changes."""
    if len(ref) < 4:
        return None
    moves = {rec["old"]: rec["new"] for rec in json_lines(Path(db.filename).parent / "redirects.jsonl")
             if isinstance(rec.get("old"), str) and isinstance(rec.get("new"), str)}
    olds = [o for o in moves if o.startswith(ref)]
    if len(olds) != 1:
        return None
    new = moves[olds[0]]
    for _ in range(len(moves)):  # redacted again more than once
        if new not in moves:
            break
        new = moves[new]
    return new


def _session_prefix(db: apsw.Connection, ref: str) -> list[TapeRow]:
    """Every segment of the one session whose id starts with `ref` (the 8 characters people quote,
    as explain prints them), when no tape id does."""
    sessions = by_prefix(db, "(SELECT DISTINCT session_id FROM tapes)", "session_id", ref)
    if not sessions:
        raise UnknownTape(f"no tape or session matches {ref!r}; `engram tapes` lists them")
    if len(sessions) > 1:
        raise UnknownTape(ambiguity(ref, sessions, "session ids", shown=40, verb="starts"))
    return resolve_tapes(db, sessions[0])


def resolve_tape(db: apsw.Connection, ref: str) -> TapeRow:
    """One tape: a session id names its latest segment."""
    return resolve_tapes(db, ref)[-1]


def _chain_order(rows: list[TapeRow]) -> list[TapeRow]:
    """Segments of one session, first to last, following `prev`."""
    by_prev = {r.prev: r for r in rows}
    ids = {r.id for r in rows}
    heads = [r for r in rows if r.prev is None or r.prev not in ids]
    out: list[TapeRow] = []
    for head in heads:
        cur: TapeRow | None = head
        while cur is not None and cur not in out:
            out.append(cur)
            cur = by_prev.get(cur.id)
    out.extend(r for r in rows if r not in out)
    return out


def tape_file(store: Store, tape_id: str) -> Path:
    from engram.tape.writer import tape_path  # noqa: PLC0415

    return tape_path(store.tapes_dir, tape_id)


def require_tapes(db: apsw.Connection, store: Store, ingest_hint: str) -> None:
    """Raise a clear error when the catalog has no tape: there is nothing to ask yet, or (tape
    files on disk, an index removed or set aside) the index needs rebuilding."""
    if db.execute("SELECT 1 FROM tapes LIMIT 1").fetchall():
        return
    from engram.tape.writer import tape_files  # noqa: PLC0415

    on_disk = len(tape_files(store.tapes_dir))
    if on_disk:
        raise EngramError(f"the index lists no tapes but {store.tapes_dir} holds {on_disk}: "
                          "run `engram reindex` to rebuild it from them")
    raise EngramError(f"the store is empty: {ingest_hint} first")


# ---------------------------------------------------------------- registering tapes


def catalog_row(tape_id: str, events: list[dict[str, Any]], size: int, raw_bytes: int) -> dict[str, Any]:
    meta = events[0]
    kinds = Counter([ev.get("kind") for ev in events])
    return {
        "id": tape_id, "harness": meta.get("harness") or "", "session_id": meta.get("session_id") or "",
        "model": meta.get("model"), "started": meta.get("started"), "ended": meta.get("ended"),
        "begins": begins(events),
        "events": len(events), "edits": kinds[E.CODE_EDIT], "reads": kinds[E.CODE_READ],
        "size": size, "raw_bytes": raw_bytes, "prev": meta.get("prev"),
        "subagent": meta.get("subagent"), "parent_session": meta.get("parent_session"),
    }


def begins(events: list[dict[str, Any]]) -> str | None:
    """When a tape's content begins, the key tapes are indexed by (`tapes.begins`): the session's
    start for its first tape; for a later segment, its earliest event time (else the start)."""
    meta = events[0]
    if meta.get("prev") is None:
        return meta.get("started")
    times = [ts for ev in events[1:] if isinstance(ts := ev.get("ts"), str) and ts]
    return min(times) if times else meta.get("started")


def register(db: apsw.Connection, row: dict[str, Any], sources: list[dict[str, Any]]) -> None:
    """Add a written tape to the catalog (inside the caller's transaction)."""
    db.execute(
        "INSERT OR IGNORE INTO tapes(id, harness, session_id, model, started, ended, begins, events, edits, reads,"
        " size, raw_bytes, prev) VALUES(:id, :harness, :session_id, :model, :started, :ended, :begins, :events,"
        " :edits, :reads, :size, :raw_bytes, :prev)",
        row,
    )
    if isinstance(row.get("subagent"), str):
        db.execute("INSERT OR IGNORE INTO subagents(tape, kind, parent_session) VALUES(?, ?, ?)",
                   (row["id"], row["subagent"], row.get("parent_session")))
    for s in sources:
        db.execute(
            "INSERT OR IGNORE INTO captures(tape, harness, session_id, source, path, start, end, prefix_sha256)"
            " VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
            (row["id"], row["harness"], row["session_id"], s["name"], s["path"], s["start"], s["end"],
             s["prefix_sha256"]),
        )


def register_from_file(db: apsw.Connection, store: Store, path: Path) -> str:
    """Catalog a tape from its own content (used by reconcile and reindex). Raises CorruptTape,
    before anything is catalogued, when the content does not match the tape's id.

    The file is decompressed once, for the row and the id check both (the reader's own check on
    open would decompress it a second time): this is where a pulled tape is first read, so it is
    where a pull's tapes are checked (engram/share/pull.py), and a check passed here is recorded
    for this process's readers and the index workers it hands tapes to (`verified_as`)."""
    import hashlib  # noqa: PLC0415 - OpenSSL's start-up (~3.5 ms) only where hashes are taken

    from engram.tape.reader import MISMATCH, REPAIR, TapeReader, mark_verified, verified_as  # noqa: PLC0415

    checked = verified_as(path) is not None
    with TapeReader(path, store.objects_dir, check_id=False) as r:
        lines = list(r.raw_lines())
        if not checked and _ADDRESS.fullmatch(r.id):
            h = hashlib.sha256(b"\n".join(lines))
            h.update(b"\n" if lines else b"")  # (the content is the lines, each ended by a newline)
            if h.hexdigest() != r.id:
                raise CorruptTape(f"{path}: {MISMATCH}; {REPAIR}")
            mark_verified(path)
        evs = [E.loads(line) for line in lines]
        row = catalog_row(r.id, evs, r.size, sum(len(line) + 1 for line in lines))
    register(db, row, evs[0].get("sources") or [])
    return row["id"]


_ADDRESS = re.compile("[0-9a-f]{64}")  # a tape named by its content's sha256 (one a test names otherwise is not)


def reconcile(db: apsw.Connection, store: Store) -> list[str]:
    """Catalog tapes that reached the disk but not the catalog (a crash between the two, or a
    pull's landing). Returns the ids of those left out as damaged (moved to quarantine/)."""
    from engram.tape.writer import TAPE_SUFFIX  # noqa: PLC0415

    names = names_in(store.tapes_dir)
    remove_stale_temps(store.tapes_dir, names)
    on_disk = {n[: -len(TAPE_SUFFIX)] for n in names if n.endswith(TAPE_SUFFIX)}
    known = {r[0] for r in db.execute("SELECT id FROM tapes")}
    missing = sorted(on_disk - known)
    if not missing:
        return []
    with immediate(db):
        damaged = register_intact(db, store, [store.tapes_dir / f"{tid}{TAPE_SUFFIX}" for tid in missing])
    log.info("catalogued %d tapes found on disk (a pull's, or left by an interrupted ingest)",
             len(missing) - len(damaged))
    return damaged


def register_intact(db: apsw.Connection, store: Store, paths: list[Path]) -> list[str]:
    """`register_from_file` for each tape that reads and matches its id, in order; a damaged one
    is moved to `.engram/quarantine/` with a warning, so that one bad file does not stop every
    later ingest or rebuild, and is never answered from (its session is captured again when its
    transcript is next ingested). Returns the ids of the tapes left out."""
    from engram.tape.writer import TAPE_SUFFIX  # noqa: PLC0415

    damaged = []
    for path in paths:
        try:
            register_from_file(db, store, path)
        except CorruptTape as exc:
            where = quarantine(store, path)
            log.warning("left out a damaged tape, moved to %s: %s", where, exc)
            damaged.append(path.name[: -len(TAPE_SUFFIX)])
    return damaged


def quarantine(store: Store, path: Path) -> Path:
    """Move a damaged tape file out of `tapes/` (kept for a look): reconcile would otherwise
    catalogue it again, and a reader answer from it."""
    store.quarantine_dir.mkdir(parents=True, exist_ok=True)
    where = store.quarantine_dir / path.name
    try:
        os.replace(path, where)
    except OSError as exc:  # (a directory in its place, a read-only store): left where it is
        log.warning("could not move %s to %s (%s)", path, where, exc.strerror)
        return path
    return where
