"""Which tapes one resumable piece of work is made of: a session's segments, and the sessions it
continues (a compaction that started a new session, `claude --resume`, a plan carried into a new
session), found through the index's continuation edges and read as one session."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from engram.errors import UnknownTape
from engram.index.catalog import COLUMNS, TapeRow, resolve_tapes

if TYPE_CHECKING:
    import apsw

#: Sessions followed back at most: a chain longer than this is an old project's history, not the
#: work being resumed.
MAX_SESSIONS: Final = 8
#: An edge found only from shared text (no harness marker, no stated resume) is followed when its
#: confidence is at least this: weaker ones are a session quoting another, not continuing it.
FOLLOW_CONFIDENCE: Final = 0.5


@dataclass
class Chain:
    """The tapes to read, oldest first, and how they were found."""

    tapes: list[TapeRow]
    session_id: str  # the session asked for (the latest of the chain)
    sessions: list[dict[str, str | None]] = field(default_factory=list)  # each: session_id, harness, via
    continued_by: list[str] = field(default_factory=list)  # later sessions that continue this one


def _rows_where(db: apsw.Connection, sql: str, args: tuple[object, ...]) -> list[TapeRow]:
    cols = ", ".join(COLUMNS)
    return [TapeRow(*r) for r in db.execute(f"SELECT {cols} FROM tapes WHERE {sql}", args)]


def latest_session(db: apsw.Connection, harness: str | None = None) -> str:
    """The session whose latest event is the newest, subagents' sessions left out (their work
    belongs to the session that started them)."""
    sql = ("SELECT t.session_id FROM tapes t LEFT JOIN subagents s ON s.tape = t.id WHERE s.tape IS NULL "
           "AND t.harness != 'editor'")
    args: list[object] = []
    if harness:
        sql += " AND t.harness = ?"
        args.append(harness)
    rows = db.execute(sql + " ORDER BY coalesce(t.ended, t.started) DESC, t.id LIMIT 1", args).fetchall()
    if not rows:
        held = [r[0] for r in db.execute("SELECT DISTINCT harness FROM tapes WHERE harness != 'editor' ORDER BY 1")]
        if harness and held:  # a typo, or a harness never captured here: "run ingest" would not help
            raise UnknownTape(f"no session from harness {harness!r}: the store holds sessions of {', '.join(held)}")
        more = f" from harness {harness!r}" if harness else ""
        raise UnknownTape(f"no session{more} to resume yet: run `engram ingest` (`engram tapes` lists what is stored)")
    return str(rows[0][0])


def _nos(db: apsw.Connection, rows: list[TapeRow]) -> dict[int, TapeRow]:
    ids = {r.id: r for r in rows}
    marks = ",".join("?" * len(ids))
    return {int(no): ids[tid] for tid, no in db.execute(f"SELECT id, no FROM tapes WHERE id IN ({marks}) "
                                                        "AND no IS NOT NULL", list(ids))}


def _edges(db: apsw.Connection, nos: list[int], backward: bool) -> list[tuple[int, str | None, float]]:
    """(the other tape, marker, confidence) of the continuation edges into (backward) or out of these tapes."""
    if not nos:
        return []
    mine, other = ("dst_tape", "src_tape") if backward else ("src_tape", "dst_tape")
    marks = ",".join("?" * len(nos))
    return [(int(o), m, float(c)) for o, m, c in db.execute(
        f"SELECT {other}, marker, confidence FROM continuations WHERE {mine} IN ({marks})", nos)]


def _followed(marker: str | None, confidence: float) -> bool:
    return marker is not None or confidence >= FOLLOW_CONFIDENCE


def _session_of(db: apsw.Connection, no: int) -> str | None:
    rows = db.execute("SELECT session_id FROM tapes WHERE no = ?", (no,)).fetchall()
    return str(rows[0][0]) if rows else None


def resolve_chain(db: apsw.Connection, ref: str | None, harness: str | None = None) -> Chain:
    """The chain ending with the session `ref` names (as `engram show` resolves it: a tape-id
    prefix, a session id or its start), or with the latest session; followed back through
    continuation edges to at most MAX_SESSIONS sessions."""
    session = latest_session(db, harness) if ref is None else resolve_tapes(db, ref)[-1].session_id
    own = resolve_tapes(db, session)
    seen = {session}
    order: list[tuple[str, list[TapeRow], str | None]] = [(session, own, None)]
    frontier = own
    while frontier and len(seen) < MAX_SESSIONS:
        found: list[TapeRow] = []
        for no, marker, conf in sorted(_edges(db, list(_nos(db, frontier)), backward=True)):
            other = _session_of(db, no)
            if other is None or other in seen or not _followed(marker, conf):
                continue
            seen.add(other)
            rows = resolve_tapes(db, other)
            order.append((other, rows, marker or f"shared text {conf:.2f}"))
            found.extend(rows)
            if len(seen) >= MAX_SESSIONS:
                break
        frontier = found
    order.sort(key=lambda s: (s[1][0].started or "", s[0]))
    later = {s for no, m, c in _edges(db, list(_nos(db, own)), backward=False)
             if _followed(m, c) and (s := _session_of(db, no)) is not None and s not in seen}
    return Chain(tapes=[t for _, rows, _ in order for t in rows], session_id=session,
                 sessions=[{"session_id": s, "harness": rows[0].harness, "via": via} for s, rows, via in order],
                 continued_by=sorted(later))
