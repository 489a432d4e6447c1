"""The memory tables of index.sqlite: the event log replayed, and nothing that is not in it.

Applying an event is a pure function of the tables and the event, so replaying the whole log in
(time, id) order (`rebuild`) gives the same tables, bit for bit in what a query reads, as the
increments that built them. The projection catches up with the log (`catch_up`) whenever it is
opened: another process, or a log copied in from elsewhere, may have added events. Appends of this
clone arrive in time order and are applied as they come; anything else (a file that shrank or was
replaced, an event older than the last one applied) makes the projection replay from the start.

Vectors are not derived from the log's order but from the content alone; they are kept across a
rebuild, keyed by the content's hash and the model.
"""

from __future__ import annotations

import logging
import re
from contextlib import contextmanager
from typing import Any, Iterable, Iterator

import apsw
import orjson

from engram.index.sql import immediate, int_array
from engram.memory.events import Event, EventLog
from engram.memory.model import TRUST, Memory, Transition

log = logging.getLogger(__name__)

TABLES = ("memories", "memory_anchors", "memory_relations", "memory_transitions", "memory_forgotten",
          "memory_terms", "memory_log", "memory_state")
COLUMNS = ("no", "id", "content", "kind", "tags", "importance", "pinned", "source", "status", "created", "updated",
           "last_recalled", "recall_count", "evidence", "context")


def content_hash(content: str) -> str:
    import hashlib  # noqa: PLC0415 - (OpenSSL's start-up: not for a hook that only reads notes)

    return hashlib.blake2b(content.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


# ---------------------------------------------------------------- state


def state(db: apsw.Connection, key: str, default: Any = None) -> Any:
    rows = db.execute("SELECT value FROM memory_state WHERE key = ?", (key,)).fetchall()
    return rows[0][0] if rows else default


def _set_state(db: apsw.Connection, key: str, value: Any) -> None:
    db.execute("INSERT OR REPLACE INTO memory_state(key, value) VALUES(?, ?)", (key, value))


def _next_seq(db: apsw.Connection) -> int:
    seq = int(state(db, "seq", 0)) + 1
    _set_state(db, "seq", seq)
    return seq


def last_key(db: apsw.Connection) -> tuple[str, str]:
    """(time, id) of the last event applied: ("", "") when none."""
    ts, _, eid = str(state(db, "last", "")).partition(" ")
    return (ts, eid)


def epoch(db: apsw.Connection) -> str:
    """Changes with every rebuild: a cache of the tables (the embedding matrix) starts over."""
    value = state(db, "epoch")
    return str(value) if value is not None else ""


# ---------------------------------------------------------------- applying events


def apply(db: apsw.Connection, events: Iterable[Event]) -> int:
    """Apply events in the order given (inside the caller's transaction); returns how many
    changed something."""
    changed = 0
    last = None
    for ev in events:
        handler = _HANDLERS.get(ev.op)
        if handler is not None and handler(db, ev):
            changed += 1
        last = ev
    if last is not None:
        _set_state(db, "last", f"{last.ts} {last.id}")
    return changed


def _no(db: apsw.Connection, memory: str | None) -> int | None:
    if memory is None:
        return None
    rows = db.execute("SELECT no FROM memories WHERE id = ?", (memory,)).fetchall()
    return rows[0][0] if rows else None


_WORD = re.compile(r"\w+")


def words(text: str) -> set[str]:
    """The distinct lower-cased words of a text, as `memory_terms` counts them."""
    return {w.lower() for w in _WORD.findall(text)}


def _count(db: apsw.Connection, terms: set[str], delta: int) -> None:
    db.executemany("INSERT INTO memory_terms(term, docs) VALUES(?, ?) ON CONFLICT(term) DO UPDATE SET"
                   " docs = docs + excluded.docs", ((t, delta) for t in sorted(terms)))
    if delta < 0:
        db.executemany("DELETE FROM memory_terms WHERE term = ? AND docs <= 0", ((t,) for t in sorted(terms)))


def _fts_put(db: apsw.Connection, no: int, content: str, tags: list[str], context: str = "",
             old: tuple[str, list[str], str] | None = None) -> None:
    """The memory's full-text row and its words' memory counts (`old`: what they replace)."""
    if old is not None:
        _fts_drop(db, no, *old)
    db.execute("INSERT INTO memory_fts(rowid, content, tags, context) VALUES(?, ?, ?, ?)",
               (no, content, " ".join(tags), context))
    _count(db, words(content) | words(" ".join(tags)) | words(context), +1)


def _fts_drop(db: apsw.Connection, no: int, content: str, tags: list[str], context: str = "") -> None:
    db.execute("DELETE FROM memory_fts WHERE rowid = ?", (no,))
    _count(db, words(content) | words(" ".join(tags)) | words(context), -1)


def _put_anchors(db: apsw.Connection, no: int, anchors: list[dict[str, Any]]) -> None:
    db.execute("DELETE FROM memory_anchors WHERE memory = ?", (no,))
    for n, a in enumerate(anchors):
        db.execute("INSERT INTO memory_anchors(memory, n, file, start, end, anchor) VALUES(?, ?, ?, ?, ?, ?)",
                   (no, n, str(a.get("file", "")), int(a.get("start", 0)), int(a.get("end", 0)), _json(a)))


def _transition(db: apsw.Connection, no: int, ev: Event, old: str | None, new: str, why: str | None) -> None:
    db.execute("INSERT INTO memory_transitions(memory, ts, status_from, status, by, why) VALUES(?, ?, ?, ?, ?, ?)",
               (no, ev.ts, old, new, _json(ev.by), why))


def _on_add(db: apsw.Connection, ev: Event) -> bool:
    if ev.memory is None or _no(db, ev.memory) is not None or _forgotten(db, ev.memory):
        return False
    d = ev.data
    content = str(d.get("content", ""))
    tags = [str(t) for t in d.get("tags") or []]
    source = d.get("source") if isinstance(d.get("source"), dict) else ev.by
    created = str(d.get("created") or ev.ts)
    context = str(d.get("context") or "")
    db.execute(
        "INSERT INTO memories(id, content, hash, kind, tags, importance, pinned, source, trust, status, created, updated,"
        " last_recalled, recall_count, evidence, seq, context)"
        " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, NULL, 0, ?, ?, ?)",
        (ev.memory, content, content_hash(content), str(d.get("kind", "fact")), _json(tags),
         float(d.get("importance", 0.5)), int(bool(d.get("pinned"))), _json(source),
         TRUST.get(str(source.get("type")), 1), created, ev.ts, _json(d.get("evidence") or []), _next_seq(db),
         context))
    no = db.last_insert_rowid()
    _fts_put(db, no, content, tags, context)
    _put_anchors(db, no, list(d.get("anchors") or []))
    _transition(db, no, ev, None, "active", d.get("why"))
    if d.get(VECTOR_DEDUP) and not has_vector(db, content_hash(content)):
        _set_state(db, UNCHECKED + ev.memory, no)
    return True


#: An add event's flag: remember left the memory's cosine dedup to the moment its vector is made
#: (`Memories.embed_pending`). Such memories are listed in `memory_state` under UNCHECKED + id
#: until then; one whose content has a vector already when its add is applied (a rebuild: vectors
#: are kept) was judged when that vector was made, and is not listed again.
VECTOR_DEDUP = "vector_dedup"
UNCHECKED = "unchecked "
# memory_state's keys UNCHECKED + id are those from UNCHECKED up to the next string past its prefix
UNCHECKED_KEYS = (UNCHECKED, UNCHECKED[:-1] + "!")


def has_vector(db: apsw.Connection, hash_: str) -> bool:
    """Whether content with this hash has its vector already (vectors are kept by content)."""
    return bool(db.execute("SELECT 1 FROM memory_vectors WHERE hash = ? LIMIT 1", (hash_,)).fetchall())


def unchecked(db: apsw.Connection, hashes: list[str]) -> list[tuple[int, str, str, str, str]]:
    """(no, id, content, kind, source JSON) of the active memories with these content hashes whose
    cosine dedup waits for their vector, oldest first."""
    return db.execute(
        "SELECT m.no, m.id, m.content, m.kind, m.source FROM memory_state s JOIN memories m ON m.no = s.value"
        " WHERE s.key >= ? AND s.key < ? AND m.status = 'active' AND m.hash IN (SELECT value FROM json_each(?))"
        " ORDER BY m.no", (*UNCHECKED_KEYS, _json(hashes))).fetchall()


def unchecked_hashes(db: apsw.Connection) -> list[str]:
    """The content hashes of the memories whose cosine dedup waits for their vector: what a server
    embeds right after a remember, found without scanning every memory for a missing vector."""
    return [h for (h,) in db.execute(
        "SELECT DISTINCT m.hash FROM memory_state s JOIN memories m ON m.no = s.value WHERE s.key >= ? AND s.key < ?",
        UNCHECKED_KEYS)]


def _on_edit(db: apsw.Connection, ev: Event) -> bool:
    no = _no(db, ev.memory)
    if no is None:
        return False
    changes = ev.data.get("set") or {}
    row = db.execute("SELECT content, tags, context FROM memories WHERE no = ?", (no,)).fetchall()[0]
    content, tags, context = row[0], orjson.loads(row[1]), row[2]
    before = (content, list(tags), context)
    sets: dict[str, Any] = {}
    if "content" in changes:
        content = str(changes["content"])
        sets.update(content=content, hash=content_hash(content))
    if "tags" in changes:
        tags = [str(t) for t in changes["tags"] or []]
        sets["tags"] = _json(tags)
    if "context" in changes:
        context = str(changes["context"] or "")
        sets["context"] = context
    if "kind" in changes:
        sets["kind"] = str(changes["kind"])
    if "importance" in changes:
        sets["importance"] = float(changes["importance"])
    if "pinned" in changes:
        sets["pinned"] = int(bool(changes["pinned"]))
    if "evidence" in changes:
        sets["evidence"] = _json(list(changes["evidence"] or []))
    if not sets:
        return False
    sets.update(updated=ev.ts, seq=_next_seq(db))
    db.execute(f"UPDATE memories SET {', '.join(f'{k} = :{k}' for k in sets)} WHERE no = :no", {**sets, "no": no})
    if "content" in changes or "tags" in changes or "context" in changes:
        _fts_put(db, no, content, tags, context, old=before)
    return True


def _set_status(db: apsw.Connection, no: int, ev: Event, status: str, why: str | None) -> bool:
    old = db.execute("SELECT status FROM memories WHERE no = ?", (no,)).fetchall()[0][0]
    if old == status:
        return False
    db.execute("UPDATE memories SET status = ?, updated = ?, seq = ? WHERE no = ?", (status, ev.ts, _next_seq(db), no))
    _transition(db, no, ev, old, status, why)
    return True


def _on_status(db: apsw.Connection, ev: Event) -> bool:
    no = _no(db, ev.memory)
    status = ev.data.get("status")
    if no is None or not isinstance(status, str):
        return False
    return _set_status(db, no, ev, status, ev.data.get("why"))


def _on_link(db: apsw.Connection, ev: Event) -> bool:
    src, dst = _no(db, ev.memory), _no(db, ev.data.get("target"))
    relation = ev.data.get("relation")
    if src is None or dst is None or src == dst or not isinstance(relation, str):
        return False
    db.execute("INSERT OR IGNORE INTO memory_relations(src, dst, relation, ts, why, candidate) VALUES(?, ?, ?, ?, ?, ?)",
               (src, dst, relation, ev.ts, ev.data.get("why"), int(bool(ev.data.get("candidate")))))
    if relation == "supersedes":
        _set_status(db, dst, ev, "superseded", ev.data.get("why") or f"superseded by {ev.memory}")
    return db.changes() > 0


def _on_reanchor(db: apsw.Connection, ev: Event) -> bool:
    no = _no(db, ev.memory)
    if no is None:
        return False
    _put_anchors(db, no, list(ev.data.get("anchors") or []))
    db.execute("UPDATE memories SET updated = ?, seq = ? WHERE no = ?", (ev.ts, _next_seq(db), no))
    return True


def _on_forget(db: apsw.Connection, ev: Event) -> bool:
    if ev.memory is None:
        return False
    db.execute("INSERT OR REPLACE INTO memory_forgotten(id, ts, purged) VALUES(?, ?, ?)",
               (ev.memory, ev.ts, int(bool(ev.data.get("purge")))))
    no = _no(db, ev.memory)
    if no is None:
        return True
    drop(db, no)
    _next_seq(db)
    _set_state(db, "dropped", int(state(db, "dropped", 0)) + 1)
    return True


def drop(db: apsw.Connection, no: int) -> None:
    """Every row of one memory (a forget, a purge)."""
    content, tags = db.execute("SELECT content, tags FROM memories WHERE no = ?", (no,)).fetchall()[0]
    _fts_drop(db, no, content, orjson.loads(tags))
    db.execute("DELETE FROM memory_state WHERE key >= ? AND key < ? AND value = ?", (*UNCHECKED_KEYS, no))
    for sql in ("DELETE FROM memory_anchors WHERE memory = ?", "DELETE FROM memory_transitions WHERE memory = ?",
                "DELETE FROM memory_relations WHERE src = ?", "DELETE FROM memory_relations WHERE dst = ?",
                "DELETE FROM memories WHERE no = ?"):
        db.execute(sql, (no,))


def _reinforce(db: apsw.Connection, no: int, ev: Event, count: int) -> None:
    db.execute("UPDATE memories SET recall_count = recall_count + ?, last_recalled = max(coalesce(last_recalled, ''), ?),"
               " seq = ? WHERE no = ?", (count, ev.ts, _next_seq(db), no))


def _on_reinforce(db: apsw.Connection, ev: Event) -> bool:
    """Written again (remember found it): counts as a recall, and what the new note brought
    (tags, evidence) is added."""
    no = _no(db, ev.memory)
    if no is None:
        return False
    _reinforce(db, no, ev, 1)
    row = db.execute("SELECT content, tags, evidence FROM memories WHERE no = ?", (no,)).fetchall()[0]
    tags = orjson.loads(row[1])
    new_tags = [str(t) for t in ev.data.get("tags") or [] if t not in tags]
    evidence = orjson.loads(row[2])
    new_evidence = [e for e in ev.data.get("evidence") or [] if e not in evidence]
    if new_tags or new_evidence:
        db.execute("UPDATE memories SET tags = ?, evidence = ? WHERE no = ?",
                   (_json(tags + new_tags), _json(evidence + new_evidence), no))
        if new_tags:
            _fts_put(db, no, row[0], tags + new_tags, old=(row[0], tags))
    return True


def _on_recalled(db: apsw.Connection, ev: Event) -> bool:
    counts = ev.data.get("memories")
    if not isinstance(counts, dict):
        return False
    changed = False
    for memory, count in sorted(counts.items()):
        no = _no(db, memory)
        if no is not None:
            _reinforce(db, no, ev, int(count))
            changed = True
    return changed


def _on_written_at(db: apsw.Connection, ev: Event) -> bool:
    """The transcript event a memory was written at (`engram.memory.provenance`): the call is added
    to its evidence and, unless the call only reinforced it (`reinforced`), recorded in its source
    as `written_at` with the session when the source did not name one. Applying it twice changes
    nothing."""
    no = _no(db, ev.memory)
    tape, offset = ev.data.get("tape"), ev.data.get("offset")
    if no is None or not isinstance(tape, str) or not isinstance(offset, int):
        return False
    source_text, evidence_text = db.execute("SELECT source, evidence FROM memories WHERE no = ?", (no,)).fetchall()[0]
    source, evidence = orjson.loads(source_text), orjson.loads(evidence_text)
    here = {"tape": tape, "offset": offset}
    changed = here not in evidence
    if changed:
        evidence.append(here)
    if not ev.data.get("reinforced") and source.get("type") == "agent" and "written_at" not in source:
        source["written_at"] = here
        if not source.get("session") and isinstance(ev.data.get("session"), str):
            source["session"] = ev.data["session"]
        changed = True
    if changed:
        db.execute("UPDATE memories SET source = ?, evidence = ? WHERE no = ?", (_json(source), _json(evidence), no))
    return changed


def _forgotten(db: apsw.Connection, memory: str) -> bool:
    return bool(db.execute("SELECT 1 FROM memory_forgotten WHERE id = ?", (memory,)).fetchall())


_HANDLERS = {"add": _on_add, "edit": _on_edit, "status": _on_status, "link": _on_link, "reanchor": _on_reanchor,
             "forget": _on_forget, "reinforce": _on_reinforce, "recalled": _on_recalled,
             "written_at": _on_written_at}


# ---------------------------------------------------------------- following the log


def behind(db: apsw.Connection, events: EventLog) -> bool:
    """Has the log anything the projection has not applied? (A stat of each file: cheap. A file
    whose last line is torn stays "behind" until the next append ends the line.)"""
    known = {r[0]: (r[1], r[2]) for r in db.execute("SELECT file, size, ino FROM memory_log")}
    files = events.files()
    return len(files) != len(known) or any(known.get(f.name) != (f.size, f.ino) for f in files)


def catch_up(db: apsw.Connection, events: EventLog) -> dict[str, int]:
    """Apply what the log holds beyond what was applied (the caller holds the memory lock).
    Returns {"applied": events, "torn": lines skipped, "rebuilt": 0 or 1}."""
    known = {r[0]: (r[1], r[2]) for r in db.execute("SELECT file, size, ino FROM memory_log")}
    files = events.files()
    on_disk = {f.name for f in files}
    if any(name not in on_disk for name in known) or any(
            f.name in known and (f.ino != known[f.name][1] or f.size < known[f.name][0]) for f in files):
        return rebuild(db, events)
    fresh: list[Event] = []
    ends: dict[str, tuple[int, int]] = {}
    torn = 0
    for f in files:
        offset = known.get(f.name, (0, f.ino))[0]
        if f.name in known and f.size == offset:
            continue
        chunk = events.read(f.name, offset)
        fresh.extend(chunk.events)
        torn += chunk.torn
        ends[f.name] = (chunk.end, f.ino)
    fresh.sort(key=lambda e: e.key)
    if fresh and fresh[0].key <= last_key(db):
        log.info("the memory log has events older than the last one applied (a log copied in): replaying it all")
        return rebuild(db, events)
    purged = purged_in(fresh)
    with scrubbing(db, bool(purged)):
        with immediate(db):
            applied = apply(db, fresh)
            for name, (end, ino) in ends.items():
                db.execute("INSERT OR REPLACE INTO memory_log(file, size, ino) VALUES(?, ?, ?)", (name, end, ino))
            if purged:
                erase_leftovers(db)
    return {"applied": applied, "torn": torn, "rebuilt": 0, "purged": purged}


@contextmanager
def scrubbing(db: apsw.Connection, on: bool) -> Iterator[None]:
    """With `on` (a purge is applied, here or arriving from another clone's log): the pages freed
    inside are zeroed, not left holding the memory's text, and the WAL is truncated after
    (docs/memories.md, "Purge")."""
    if not on:
        yield
        return
    db.execute("PRAGMA secure_delete = ON")
    try:
        yield
    finally:
        db.execute("PRAGMA secure_delete = OFF")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def erase_leftovers(db: apsw.Connection) -> None:
    """Inside the transaction that deleted a purged memory's rows: its vector, and its terms, which
    the full-text index keeps until its segments merge."""
    db.execute("DELETE FROM memory_vectors WHERE hash NOT IN (SELECT hash FROM memories)")
    db.execute("INSERT INTO memory_fts(memory_fts) VALUES('optimize')")


def purged_in(events: list[Event]) -> list[str]:
    """Memories a purge tombstone among `events` forgot: their events may still sit in this
    clone's files (copied in before the tombstone came), to be erased there too."""
    return sorted({e.memory for e in events if e.op == "forget" and e.data.get("purge") and e.memory})


def record_appended(db: apsw.Connection, events: EventLog, written: list[Event]) -> None:
    """After this process appended `written` and applied them (inside the caller's transaction):
    the files' new ends, so catching up does not read them again."""
    for name in {events.file_for(ev) for ev in written}:
        path = events.dir / name
        st = path.stat()
        db.execute("INSERT OR REPLACE INTO memory_log(file, size, ino) VALUES(?, ?, ?)", (name, st.st_size, st.st_ino))


def rebuild(db: apsw.Connection, events: EventLog) -> dict[str, int]:
    """Replay the whole log into empty tables (the caller holds the memory lock). Vectors of
    content no memory holds any more are dropped; the others are kept."""
    every, torn = events.read_all()
    files = events.files()
    purged = purged_in(every)
    with scrubbing(db, bool(purged)), immediate(db):
        db.execute("INSERT INTO memory_fts(memory_fts) VALUES('delete-all')")  # (a DELETE leaves terms in segments)
        for table in TABLES:
            db.execute(f"DELETE FROM {table}")
        import secrets  # noqa: PLC0415

        _set_state(db, "epoch", secrets.token_hex(8))
        applied = apply(db, every)
        for f in files:
            db.execute("INSERT OR REPLACE INTO memory_log(file, size, ino) VALUES(?, ?, ?)", (f.name, _whole(events, f),
                                                                                             f.ino))
        db.execute("DELETE FROM memory_vectors WHERE hash NOT IN (SELECT hash FROM memories)")
    log.info("memory projection rebuilt from %d events (%d lines skipped)", len(every), torn)
    return {"applied": applied, "torn": torn, "rebuilt": 1, "events": len(every), "purged": purged}


def _whole(events: EventLog, f: Any) -> int:
    """The offset after the last whole line of a file (a torn tail is left for the next append)."""
    with open(events.dir / f.name, "rb") as fh:
        data = fh.read()
    return data.rfind(b"\n") + 1


# ---------------------------------------------------------------- reading

#: At this many memories and more, recall leaves out of its full-text match the query words found
#: in more than COMMON_SHARE of them (when rarer ones remain): BM25 gives them little weight, and
#: scoring every memory holding them was most of a query's time (bench/memory_speed.py). Below it
#: every word counts, as the LoCoMo figures were measured (bench/locomo.py: ~600 memories a store).
COMMON_FROM = 10_000
COMMON_SHARE = 0.05


def full_text_match(db: apsw.Connection, text: str, *, keep: int | None = None) -> tuple[str, bool]:
    """(the FTS5 MATCH string for `text`, whether to take the newest matches rather than the best
    ranked). The MATCH is `fusion.fts_query`'s, the OR of the words ("" when there is none); with
    `keep`, of its `keep` rarest words only (dedup's candidates: a near-duplicate shares the rare
    words). At COMMON_FROM memories the common words are left out; a query of common words only
    asks for the newest memories holding all of its (up to 4) rarest ones: ranking tens of
    thousands of matches by BM25 took 100-200 ms, and told little (bench/memory_speed.py)."""
    from engram.memory.fusion import fts_query, query_terms  # noqa: PLC0415

    terms = query_terms(text)
    n = db.execute("SELECT max(no) FROM memories").fetchall()[0][0] or 0
    if not terms or (keep is None and n < COMMON_FROM):
        return fts_query(text), False
    docs = dict(db.execute("SELECT term, docs FROM memory_terms WHERE term IN (SELECT value FROM json_each(?))",
                           (orjson.dumps(terms).decode(),)).fetchall())
    ranked = sorted(terms, key=lambda t: (docs.get(t, 0), t))
    if keep is not None:
        return fts_query(" ".join(ranked[:keep])), False
    rare = [t for t in ranked if docs.get(t, 0) <= COMMON_SHARE * n]
    if rare:
        return fts_query(" ".join(rare)), False
    return " AND ".join(fts_query(t) for t in ranked[:4]), True



def row_to_memory(db: apsw.Connection, row: tuple[Any, ...], *, full: bool = False) -> Memory:
    """A `memories` row (COLUMNS order) as a Memory; `full` adds anchors and transitions."""
    r = dict(zip(COLUMNS, row))
    m = Memory(id=r["id"], content=r["content"], kind=r["kind"], tags=orjson.loads(r["tags"]),
               importance=r["importance"], pinned=bool(r["pinned"]), source=orjson.loads(r["source"]),
               status=r["status"], created=r["created"], updated=r["updated"], last_recalled=r["last_recalled"],
               recall_count=r["recall_count"], evidence=orjson.loads(r["evidence"]), context=r["context"])
    if full:
        add_history(db, {r["no"]: m})
    return m


def add_history(db: apsw.Connection, memories: dict[int, Memory]) -> None:
    """Fill in the anchors and transitions of memories by number, two queries for all of them (two
    per memory cost a language server's 500 notes of a file ~30 ms)."""
    nos = int_array(list(memories))
    for m in memories.values():
        m.anchors, m.transitions = [], []
    for no, a in db.execute("SELECT memory, anchor FROM memory_anchors WHERE memory IN carray(?) ORDER BY memory, n",
                            (nos,)):
        memories[no].anchors.append(orjson.loads(a))
    for no, ts, old, new, by, why in db.execute(
            "SELECT memory, ts, status_from, status, by, why FROM memory_transitions WHERE memory IN carray(?)"
            " ORDER BY memory, ts, rowid", (nos,)):
        memories[no].transitions.append(Transition(ts, old, new, orjson.loads(by), why))


def select_sql(where: str = "") -> str:
    return f"SELECT {', '.join(COLUMNS)} FROM memories {where}"
