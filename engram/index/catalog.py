"""Looking tapes up in the catalog: by id prefix or by the harness's session id."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from engram.errors import EngramError, UnknownTape
from engram.store import Store
from engram.tape.writer import tape_path

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
    rows = [TapeRow(*r) for r in db.execute(
        f"SELECT {cols} FROM tapes WHERE id >= ? AND id < ? ORDER BY id", (ref.lower(), ref.lower() + "\uffff"))]
    if not rows:
        return _session_prefix(db, ref)
    if len(rows) > 1:
        raise UnknownTape(f"{ref!r} matches {len(rows)} tapes ({', '.join(r.id[:12] for r in rows[:5])}…); "
                          "give more characters")
    return rows


def _session_prefix(db: apsw.Connection, ref: str) -> list[TapeRow]:
    """Every segment of the one session whose id starts with `ref` (the 8 characters people quote,
    as explain prints them), when no tape id does."""
    sessions = [r[0] for r in db.execute("SELECT DISTINCT session_id FROM tapes WHERE session_id >= ? AND "
                                         "session_id < ? ORDER BY session_id LIMIT 6", (ref, ref + "\uffff"))]
    if not sessions:
        raise UnknownTape(f"no tape or session matches {ref!r}; `engram tapes` lists them")
    if len(sessions) > 1:
        raise UnknownTape(f"{ref!r} starts {'more than 5' if len(sessions) > 5 else len(sessions)} session ids "
                          f"({', '.join(sessions[:5])}); give more characters")
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
    return tape_path(store.tapes_dir, tape_id)


def require_tapes(db: apsw.Connection, store: Store, ingest_hint: str) -> None:
    """Raise a clear error when the catalog has no tape: there is nothing to ask yet, or (tape
    files on disk, an index removed or set aside) the index needs rebuilding."""
    if db.execute("SELECT 1 FROM tapes LIMIT 1").fetchall():
        return
    from engram.tape.writer import TAPE_SUFFIX  # noqa: PLC0415

    on_disk = sum(1 for _ in store.tapes_dir.glob(f"*{TAPE_SUFFIX}"))
    if on_disk:
        raise EngramError(f"the index lists no tapes but {store.tapes_dir} holds {on_disk}: "
                          "run `engram reindex` to rebuild it from them")
    raise EngramError(f"the store is empty: {ingest_hint} first")
