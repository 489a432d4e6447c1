"""`engram search`: FTS5 over messages and tool calls, the plain-text bolt-on next to explain."""

from __future__ import annotations

import logging
from typing import Any, Final

import apsw

from engram.errors import BadInput, CorruptTape
from engram.index.kinds import KIND_NAME, event_text
from engram.query.copies import Event, copies
from engram.store.repo import Store
from engram.tape.reader import TapeReader
from engram.tape.writer import tape_path

log = logging.getLogger(__name__)


def fts_query(text: str) -> str:
    """Every word of the user's query as a quoted term (no FTS syntax surprises)."""
    words = [w.replace('"', '""') for w in text.split() if w.strip()]
    return " ".join(f'"{w}"' for w in words)


#: Hits read per hit answered at first: a resumed session's copy of a record matches as well as
#: the record and is left out (`copies`), so a full page needs more rows than it shows.
_READ_AHEAD: Final = 3

# Copies of a record have its text, so the same rank: ordered by when their session ended, the
# one that keeps the record (it ended first) comes before its copies, and a page that holds a
# copy holds the record too.
_HITS: Final = ("SELECT f.id, t.id, t.session_id, f.offset, f.kind, f.ts, t.harness, f.file, f.line0, f.line1"
                " FROM fts JOIN fragments f ON f.id = fts.rowid JOIN tapes t ON t.no = f.tape"
                " WHERE fts MATCH ? ORDER BY rank, t.ended, t.session_id LIMIT ?")


def search(store: Store, db: apsw.Connection, query: str, limit: int = 20) -> list[dict[str, Any]]:
    """The messages and tool calls matching `query`'s words, best first. An empty query is an
    error, not an empty answer: an agent read "no hits" as "nothing matches"."""
    return search_hits(store, db, query, limit)[0]


def search_hits(store: Store, db: apsw.Connection, query: str, limit: int = 20) -> tuple[list[dict[str, Any]], bool]:
    """`search`'s hits, and whether more matched than `limit`: an answer that stops at its limit
    without saying so reads as all there is."""
    if not query.strip():
        raise BadInput("what to search for? the query is empty: give words ('retry backoff')")
    q = fts_query(query)
    if not q:
        return [], False
    out = []
    words = [w.lower() for w in query.split()]
    damaged: set[str] = set()
    rows = _own_hits(db, q, limit + 1)
    for _fid, tape, session, offset, kind, ts, *_ in rows[:limit]:
        if tape in damaged:
            continue
        try:
            with TapeReader(tape_path(store.tapes_dir, tape), store.objects_dir) as r:
                text = event_text(r.event(offset, resolve_objects=True))
        except CorruptTape as exc:  # one damaged tape left out, not every answer (it said only this)
            damaged.add(tape)
            log.warning("search left out the hits of a damaged tape: %s", exc)
            continue
        low = text.lower()
        at = min((low.find(w) for w in words if low.find(w) >= 0), default=0)
        start = max(0, at - 80)
        excerpt = text[start:start + 240].replace("\n", " ")
        out.append({"tape": tape, "session_id": session, "offset": offset, "kind": KIND_NAME.get(kind, "?"),
                    "timestamp": ts, "excerpt": excerpt})
    return out, len(rows) > limit


def _own_hits(db: apsw.Connection, q: str, limit: int) -> list[tuple[Any, ...]]:
    """The best `limit` matches that are not copies, reading further while copies leave the page short."""
    want = limit * _READ_AHEAD
    while True:
        rows = db.execute(_HITS, (q, want)).fetchall()
        copied = copies(db, (Event(r[0], r[2], r[6], r[4], r[5], r[7], r[8], r[9]) for r in rows))
        own = [r for r in rows if r[0] not in copied]
        if len(own) >= limit or len(rows) < want:
            return own[:limit]
        want *= 4
