"""Indexing tapes: fragments, postings, lineage edges, tombstones, continuation heads and tails.

Work is batched: `Indexer.add` fingerprints a tape's events in memory (one tokenizer pass over
all of the tape's text). Every FLUSH_POSTINGS postings a batch of tapes is written in one
transaction — their fragments, lineage and continuation facts — and its postings are kept in
memory; `flush` (which `finish` calls at the end of a run) writes the last batch together with
all of the run's postings, as one segment, and marks the tapes indexed. A bulk ingest therefore
writes each posting once, instead of once per batch and again when merging the batches'
segments (at 1 GB: ~4 s of the writer, which is the ingest's critical path).

A tape is `indexed=2` in between: its fragments are written, its postings are not. A run that
dies there leaves such tapes; the next one (ingest, `engram index`, or a query, through
`restore`) fingerprints them again — fragment ids follow from the tape's own fragment rows — and
writes their postings. Until then they are missing from answers, never wrong in them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import apsw
import numpy as np

from engram.anchor import fingerprints_many
from engram.arrays import member
from engram.index import memo, postings, stoplist
from engram.index.kinds import (
    CODE_CARRIED,
    KIND_NO,
    TEXT_VERSION,
    Hunk,
    carried_runs,
    conversational_text,
    edit_hunks,
    event_text,
    fragment_file,
    fragment_lines,
    request_line,
)
from engram.index.lineage import PART_MIN_FPS, RunEdits, continued_session, edit_confidences
from engram.index.pending import PendingCarried, PendingEdit, PendingTape
from engram.index.snapshot import ANCHOR_VERSION, index_params, stored_params
from engram.index.sql import immediate
from engram.store.repo import Store
from engram.tape import events as E
from engram.tape.reader import TapeReader
from engram.tape.writer import tape_path
from engram.words import agree, plural

log = logging.getLogger(__name__)

FLUSH_POSTINGS = 4_000_000
HEAD_TAIL_CHARS = 6000
_EMPTY = np.empty(0, np.int64)


def batch_fingerprints(texts: list[str], k: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """Winnowed fingerprints of many texts in one vector pass: (values, text index), one entry per
    distinct (text, value), identical to fingerprinting each text on its own."""
    bf = fingerprints_many(texts, k, w)
    if not len(bf):
        return np.empty(0, np.int64), np.empty(0, np.int64)
    owner = bf.text.astype(np.int64)
    # Sorted by value, then stably by text (a radix sort on a small integer type): the order of
    # a two-key lexsort, a third faster. Equal values of one text are adjacent either way.
    by_value = np.argsort(bf.values)
    narrow = np.int16 if len(texts) < 1 << 15 else np.int32
    order = by_value[np.argsort(owner[by_value].astype(narrow), kind="stable")]
    vals, own = bf.values[order], owner[order]
    keep = np.ones(len(vals), dtype=bool)
    keep[1:] = (vals[1:] != vals[:-1]) | (own[1:] != own[:-1])
    return vals[keep], own[keep]


def fingerprint_sets(texts: list[str], k: int, w: int) -> list[np.ndarray]:
    """Sorted unique fingerprints of each text (what similarity and containment compare)."""
    vals, own = batch_fingerprints(texts, k, w)
    cuts = np.searchsorted(own, np.arange(len(texts) + 1))
    return [vals[cuts[i]:cuts[i + 1]] for i in range(len(texts))]


def _tail_head(events: list[dict[str, Any]], k: int, w: int) -> tuple[np.ndarray, np.ndarray, str | None]:
    conv = [(i, conversational_text(ev)) for i, ev in enumerate(events)]
    conv = [(i, t) for i, t in conv if t.strip()]
    marker = None
    for ev in events[:40]:
        if ev.get("compact_summary"):
            marker = "compact-summary"
            break
        if ev.get("kind") == E.COMPACT:
            marker = "compaction"
            break

    def take(items: list[tuple[int, str]]) -> str:
        out: list[str] = []
        n = 0
        for _, t in items:
            out.append(t[: HEAD_TAIL_CHARS - n])
            n += len(out[-1])
            if n >= HEAD_TAIL_CHARS:
                break
        return "\n".join(out)

    head, tail = fingerprint_sets([take(conv), take(list(reversed(conv)))], k, w)
    return head, tail, marker


@dataclass
class Prepared:
    """A tape's index data, computed without the database (so a worker process can do it)."""

    tape: PendingTape
    values: np.ndarray  # fingerprints
    owner: np.ndarray  # fragment index (within the tape) of each fingerprint


def prepare_tape(tape_id: str, events: list[dict[str, Any]], k: int, w: int) -> Prepared:
    """Fragments, fingerprints, edit fingerprints and head/tail of one tape's events.

    A code.edit is a fragment per region it changed (`kinds.edit_hunks`: its lines there, its
    range there) and a `code.carried` fragment per run of lines it held without changing them
    (`kinds.carried_runs`), all at the edit's offset: the session had those in hand, it did not
    write them."""
    pt = PendingTape(tape_id, session_id=str(events[0].get("session_id") or ""))
    pt.continues = continued_session(events[0])
    texts: list[str] = []
    lineage = _EditTexts()
    for off, ev in enumerate(events):
        kind = ev.get("kind")
        if kind not in KIND_NO:
            continue
        if kind == E.CODE_EDIT:
            _add_edit(pt, texts, lineage, off, ev)
            continue
        text = event_text(ev)
        if not text.strip():
            continue
        fi = len(pt.frags)
        line0, line1 = fragment_lines(ev)
        file = ev.get("file") if kind in (E.CODE_READ, E.SPAN_LINK) else None
        pt.frags.append((off, KIND_NO[kind], file, ev.get("ts"), 0, line0, line1))
        texts.append(text)
        if kind in (E.MSG_IN, E.MSG_OUT, E.TOOL_CALL):
            pt.fts.append((fi, text))
        if kind == E.MSG_IN and (req := request_line(ev)) is not None:
            pt.requests.append((fi, *req))
        if kind == E.SPAN_LINK:
            pt.links.append((fi, ev))
    lineage.fingerprint(k, w)
    vals, owner = batch_fingerprints(texts, k, w)
    counts = np.bincount(owner, minlength=len(texts)) if len(owner) else np.zeros(len(texts), np.int64)
    pt.frags = [(o, kd, f, ts, int(c), a, b) for (o, kd, f, ts, _, a, b), c in zip(pt.frags, counts)]
    pt.head, pt.tail, pt.marker = _tail_head(events, k, w)
    return Prepared(pt, vals, owner)


def _add_edit(pt: PendingTape, texts: list[str], lineage: "_EditTexts", off: int, ev: dict[str, Any]) -> None:
    """A code.edit's fragments: one per changed region, then one per run of carried lines. An edit
    with nothing written (a deletion) is still a fragment: its tombstone's."""
    file = fragment_file(ev)
    file = file if isinstance(file, str) else None
    hunks = edit_hunks(ev)
    first = len(pt.frags)
    ts = ev.get("ts")
    for h in hunks:
        line0, line1 = h.after_range if h.after_range is not None else (None, None)
        if file is not None:
            pt.edits.append(lineage.edit(len(pt.frags), first, file, ts, h))
        pt.frags.append((off, KIND_NO[E.CODE_EDIT], file, ts, 0, line0, line1))
        texts.append(h.after)
    for lo, hi, body in carried_runs(ev, hunks) if file is not None else ():
        pt.carried.append(lineage.carried(len(pt.frags), first, file, body, [lo, hi]))
        pt.frags.append((off, KIND_NO[CODE_CARRIED], file, ts, 0, lo, hi))
        texts.append(body)


class _EditTexts:
    """The texts of a tape's edits that lineage compares, fingerprinted together at the end: each
    changed region's removed and written text, each run of carried lines."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.pairs: list[tuple[str, str]] = []  # (removed, written) of each region, for its confidence
        self.edits: list[tuple[PendingEdit, int]] = []  # each with the index of its removed text
        self.carry: list[tuple[PendingCarried, int]] = []  # each with the index of its text

    def edit(self, fi: int, first: int, file: str, ts: str | None, h: Hunk) -> PendingEdit:
        e = PendingEdit(fi, first, file, ts, _EMPTY, _EMPTY, 0.0, h.before_range, h.after_range)
        self.edits.append((e, len(self.texts)))
        self.texts += [h.before, h.after]
        self.pairs.append((h.before, h.after))
        return e

    def carried(self, fi: int, first: int, file: str, body: str, lines: list[int]) -> PendingCarried:
        c = PendingCarried(fi, first, file, _EMPTY, lines)
        self.carry.append((c, len(self.texts)))
        self.texts.append(body)
        return c

    def fingerprint(self, k: int, w: int) -> None:
        sets = fingerprint_sets(self.texts, k, w)
        confidences = edit_confidences(self.pairs)
        for (e, at), conf in zip(self.edits, confidences):
            e.before, e.after, e.confidence = sets[at], sets[at + 1], conf
        for c, at in self.carry:
            c.fps = sets[at]
        regions: dict[int, list[PendingEdit]] = {}
        for e, _ in self.edits:
            regions.setdefault(e.first, []).append(e)
        for group in regions.values():  # of an edit of several regions, those too small to look up alone
            if len(group) > 1:
                for e in group:
                    e.alone = len(e.before) >= PART_MIN_FPS


@contextmanager
def small_pages() -> Iterator[None]:
    """numpy's large arrays on ordinary 4 KiB pages while a bulk run's postings pile up (an
    ingest or `engram index` of several sessions, `engram reindex`).

    numpy asks Linux for transparent huge pages (madvise) on every array of 4 MB or more. A bulk
    run's writer holds all the run's postings and allocates a few hundred MB arrays per batch to
    sort and lay them out; on the benchmark machine (a 2-core VM, THP on `madvise`) its
    huge-page faults cost more than they save: the writer spent 5.0 s in the kernel per GB
    ingested with them and 3.1 s without, and a 1 GB `engram ingest` ran 2-13% faster in each of
    three alternated pairs (bench/README.md). The workers gained nothing from it, and an append,
    whose arrays are small, is left as it is. Restored afterwards; a numpy without the switch
    (numpy's own, not public) is left as it is. The switch is process-wide: a language server
    answering queries beside a bulk run gets small pages for those too, which changes only
    their speed."""
    core = getattr(np, "_core", None) or getattr(np, "core", None)  # numpy 2 / numpy 1.26
    setter = getattr(getattr(core, "multiarray", None), "_set_madvise_hugepage", None)
    if setter is None:
        yield
        return
    before = setter(False)
    try:
        yield
    finally:
        setter(before)


class Indexer:
    """Indexes tapes into `index.sqlite`; call `add` per tape, `flush` at the end."""

    def __init__(self, store: Store, k: int | None = None, w: int | None = None, merge_later: bool = False) -> None:
        """k and w default to the index's own (an existing index keeps its parameters until
        `engram reindex`), or to the anchor defaults for a new index. `merge_later`: the caller
        merges segments once it is idle (`merge_idle`), so a write merges only past
        MAX_SEGMENTS_UNMERGED."""
        self.store = store
        self.most_segments = postings.MAX_SEGMENTS_UNMERGED if merge_later else postings.MAX_SEGMENTS
        self.k, self.w = k, w  # type: ignore[assignment]
        self.pending: list[PendingTape] = []
        self.fps: list[np.ndarray] = []
        self.owners: list[np.ndarray] = []  # (tape index in pending, fragment index) packed
        self.n_postings = 0
        self.indexed_tapes = 0
        self.deferred: list[tuple[np.ndarray, np.ndarray]] = []  # written batches' postings, in stored order
        self.run = RunEdits()  # this run's code.edit postings, for lineage lookups
        self.newest: tuple[np.ndarray, np.ndarray] | None = None  # the last segment written, as stored
        # Tapes that ended before a tape indexed earlier began (old history captured after newer
        # work): their edits' lineage sources may be later work, until `engram reindex` (which
        # indexes by `tapes.begins`) puts the index in time order. Sessions that overlap in time
        # (agents working side by side, captured as they go) are not counted: no order of whole
        # tapes is right for them, and a note on every capture would only be noise.
        self.out_of_order = 0

    def __call__(self, db: apsw.Connection, written: Any) -> None:
        self.add(db, written.id, getattr(written, "events", None))

    def add(self, db: apsw.Connection, tape_id: str, events: list[dict[str, Any]] | None = None) -> None:
        """Index a tape; `events` are its events as written (else they are read back from disk)."""
        self.resolve_params(db)
        if events is None:
            with TapeReader(tape_path(self.store.tapes_dir, tape_id), self.store.objects_dir) as r:
                events = list(r.events(resolve_objects=True))
        self.accept(db, prepare_tape(tape_id, events, self.k, self.w))

    def resolve_params(self, db: apsw.Connection) -> tuple[int, int]:
        if self.k is None or self.w is None:
            self.k, self.w = index_params(db)
        return self.k, self.w

    def accept(self, db: apsw.Connection, prepared: "Prepared") -> None:
        """Queue a tape fingerprinted by `prepare_tape` (possibly in another process)."""
        ti = len(self.pending)
        self.pending.append(prepared.tape)
        self.fps.append(prepared.values)
        self.owners.append((np.int64(ti) << np.int64(32)) | prepared.owner.astype(np.int64))
        self.n_postings += len(prepared.values)
        if self.n_postings >= FLUSH_POSTINGS:
            self._flush(db, and_postings=False)

    def finish(self, db: apsw.Connection) -> None:
        """Write what is pending, then the run's postings, and refresh the stop-list if the store
        grew enough."""
        self.flush(db)
        one = db.execute("SELECT count(*) FROM segments").fetchall()[0][0] == 1
        # A bulk run into an empty store holds every posting in memory: the stop-list needs no re-read.
        stoplist.maybe_rebuild(db, self.store, self.newest if one else None)
        self.newest = None

    def _write_postings(self, db: apsw.Connection) -> None:
        tapes = int(db.execute("SELECT count(*) FROM tapes WHERE indexed=2").fetchall()[0][0])
        seg = postings.next_segment(db)
        # Flushes hold disjoint fragments: runs share no (key, fragment), nothing to drop.
        key, frags = postings.write_runs(db, seg, self.deferred)
        postings.write_sorted(db, seg, self.run.keys, self.run.frags, table=postings.EDITS)  # the same runs' edits
        db.execute("INSERT INTO segments(seg, postings, tapes) VALUES(?, ?, ?)", (seg, len(key), tapes))
        db.execute("UPDATE tapes SET indexed=1 WHERE indexed=2")
        self.newest = postings.merge_segments(db, self.most_segments) or (key, frags)

    def restore(self, db: apsw.Connection) -> int:
        """Take over the postings of tapes a dead run left at `indexed=2` (see the module
        docstring); the next `flush` writes them. Returns the number of tapes."""
        rows = db.execute("SELECT id, no FROM tapes WHERE indexed=2 ORDER BY no").fetchall()
        if not rows:
            return 0
        k, w = self.resolve_params(db)
        keys: list[np.ndarray] = []
        frags: list[np.ndarray] = []
        edit_no = KIND_NO[E.CODE_EDIT]
        for tape_id, no in rows:
            with TapeReader(tape_path(self.store.tapes_dir, tape_id), self.store.objects_dir) as r:
                prepared = prepare_tape(tape_id, list(r.events(resolve_objects=True)), k, w)
            first, last, n = db.execute("SELECT coalesce(min(id), 0), coalesce(max(id), -1), count(*)"
                                        " FROM fragments WHERE tape=?", (no,)).fetchall()[0]
            if n != len(prepared.tape.frags) or last - first + 1 != n:
                from engram.errors import EngramError  # noqa: PLC0415

                raise EngramError(f"tape {tape_id[:12]}: its fragments do not match the tape; run `engram reindex`")
            key, frag = postings.keys(prepared.values), first + prepared.owner.astype(np.int64)
            keys.append(key)
            frags.append(frag)
            # Their edits may be the sources of edits this run indexes: SQLite will not hold
            # their postings before the run writes its own, so the run's lookups must know them.
            is_edit = np.array([f[1] == edit_no for f in prepared.tape.frags], dtype=bool)
            edits = is_edit[prepared.owner] if len(prepared.owner) else np.zeros(0, dtype=bool)
            self.run.add(key[edits], frag[edits])
        self.deferred.append(postings.sort_keys(np.concatenate(keys), np.concatenate(frags)))
        log.info("restoring the postings of %s an interrupted run left unindexed", plural(len(rows), "tape"))
        return len(rows)

    def flush(self, db: apsw.Connection) -> None:
        """Write the pending batch and the postings of every batch of the run, in one transaction:
        afterwards every tape added is indexed and queryable."""
        self._flush(db, and_postings=True)

    def _flush(self, db: apsw.Connection, and_postings: bool) -> None:
        """Write the pending batch; `and_postings`: then the run's postings as one segment (a
        query reads one row per key range and segment) and their tapes marked indexed. Batches
        written during a run keep their postings in memory (see the module docstring); the last
        one commits with them, so an append commits once — each commit of a 1 MB session costs
        ~40 ms at 1 GB."""
        if not self.pending and not (and_postings and self.deferred):
            return
        deferred_before = len(self.deferred)
        run_before = self.run.keys, self.run.frags  # (`RunEdits.add` replaces its arrays)
        try:
            with immediate(db):
                if self.pending:
                    self._write(db)
                if and_postings and self.deferred:
                    self._write_postings(db)
        except BaseException:
            # Nothing of the rolled-back transaction stays: neither its batch's postings nor
            # their edits' (the run's edit postings are written with its postings: they must
            # stay those of `deferred`).
            self.run.keys, self.run.frags = run_before
            self.deferred = self.deferred[:deferred_before]
            raise
        if and_postings:
            self.deferred = []
            self.run = RunEdits()  # SQLite holds the run's postings now
        self.indexed_tapes += len(self.pending)
        self.pending, self.fps, self.owners, self.n_postings = [], [], [], 0

    # ------------------------------------------------------------------ writing

    def _write(self, db: apsw.Connection) -> None:
        _check_params(db, self.k, self.w)
        next_no = int(db.execute("SELECT coalesce(max(no), 0) + 1 FROM tapes").fetchall()[0][0])
        next_frag = int(db.execute("SELECT coalesce(max(id), 0) + 1 FROM fragments").fetchall()[0][0])
        latest = db.execute("SELECT coalesce(max(begins), '') FROM tapes WHERE indexed != 0").fetchall()[0][0]
        frag_base: list[int] = []
        tape_nos: list[int] = []
        file_ids: dict[str, int] = {}  # (one SELECT per fragment was a fifth of indexing a pull's writes)
        for pt in self.pending:
            already = db.execute("SELECT no, indexed, coalesce(begins, ''), coalesce(ended, begins, '') FROM tapes"
                                 " WHERE id=?", (pt.id,)).fetchall()
            if already and already[0][1]:
                tape_nos.append(-1)
                frag_base.append(-1)
                continue
            if already:
                begins, ended = already[0][2], already[0][3]
                if ended and ended < latest:  # (a tape with no time is in no order)
                    self.out_of_order += 1
                latest = max(latest, begins)
            no = already[0][0] if already and already[0][0] is not None else next_no
            if no == next_no:
                next_no += 1
            db.execute("UPDATE tapes SET no=? WHERE id=?", (no, pt.id))
            tape_nos.append(no)
            frag_base.append(next_frag)
            rows = []
            for i, (off, kind, file, ts, nfp, l0, l1) in enumerate(pt.frags):
                fid = (file_ids.get(file) or file_ids.setdefault(file, _file_id(db, file))) if file else None
                rows.append((next_frag + i, no, off, kind, fid, ts, nfp, l0, l1))
            db.executemany("INSERT INTO fragments(id, tape, offset, kind, file, ts, nfp, line0, line1)"
                           " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            db.executemany("INSERT INTO fts(rowid, text) VALUES(?, ?)",
                           ((next_frag + fi, text) for fi, text in pt.fts))
            db.executemany("INSERT INTO requests(frag, line, long) VALUES(?, ?, ?)",
                           ((next_frag + fi, line, int(long)) for fi, line, long in pt.requests))
            next_frag += len(pt.frags)
        fps = np.concatenate(self.fps) if self.fps else np.empty(0, np.int64)
        owners = np.concatenate(self.owners) if self.owners else np.empty(0, np.int64)
        base = np.array(frag_base, dtype=np.int64)
        ti = owners >> 32
        keep = base[ti] >= 0
        frag_ids = base[ti[keep]] + (owners[keep] & 0xFFFFFFFF)
        kept = fps[keep]
        self.deferred.append(postings.sort_keys(postings.keys(kept), frag_ids))  # written by flush
        edit_no = KIND_NO[E.CODE_EDIT]
        edit_ids = np.array([fb + i for pt, fb in zip(self.pending, frag_base) if fb >= 0
                             for i, f in enumerate(pt.frags) if f[1] == edit_no], dtype=np.int64)
        is_edit = member(frag_ids, edit_ids)  # edit_ids ascending: fragment ids grow with the batch
        self.run.add(postings.keys(kept[is_edit]), frag_ids[is_edit])
        stop = stoplist.load(db)
        from engram.index.lineage import Continuations, add_lineage, lookups, source_candidates  # noqa: PLC0415

        looks = [lookups(pt, fb) if fb >= 0 else [] for pt, fb in zip(self.pending, frag_base)]
        found = source_candidates(db, [(lk.bound, lk.fps) for tape in looks for lk in tape], stop, self.run)
        conts = Continuations()
        at = 0
        for pt, no, fb, tape in zip(self.pending, tape_nos, frag_base, looks):
            if no < 0:
                continue
            add_lineage(db, pt, fb, tape, found[at:at + len(tape)])
            at += len(tape)
            conts.add(db, pt, no)
            db.execute("UPDATE tapes SET indexed=2 WHERE id=?", (pt.id,))  # postings pending


def _file_id(db: apsw.Connection, path: str) -> int:
    row = db.execute("SELECT id FROM files WHERE path=?", (path,)).fetchall()
    if row:
        return int(row[0][0])
    db.execute("INSERT INTO files(path) VALUES(?)", (path,))
    return int(db.last_insert_rowid())


def _check_params(db: apsw.Connection, k: int, w: int) -> None:
    want = {"k": k, "w": w, "anchor": ANCHOR_VERSION, "bucket_bits": postings.BUCKET_BITS}
    got = stored_params(db)
    if not got:
        db.executemany("INSERT INTO state(key, value) VALUES(?, ?)", [*want.items(), ("text", TEXT_VERSION)])
        memo.new_epoch(db)
    elif {key: int(got.get(key, -1)) for key in want} != want:
        from engram.errors import EngramError  # noqa: PLC0415

        raise EngramError(f"the index was built with fingerprints {got}, this engram uses {want}; "
                          "run `engram reindex`")


def text_version(db: apsw.Connection) -> int | None:
    """The `TEXT_VERSION` the index was first filled with (1 when it predates keeping one; None when empty)."""
    if not stored_params(db):
        return None
    rows = db.execute("SELECT value FROM state WHERE key = 'text'").fetchall()
    return int(rows[0][0]) if rows else 1


def older_text_note(db: apsw.Connection) -> str | None:
    """What a user is told when the index was filled by an engram that read events differently."""
    version = text_version(db)
    if version is None or version >= TEXT_VERSION:
        return None
    return (f"note: the index was filled by an older engram, which indexed some events differently (text version "
            f"{version}, now {TEXT_VERSION}): run `engram reindex` to index every tape the current way")


def out_of_order_note(n: int) -> str:
    """What a user is told when a run indexed `n` tapes older than tapes indexed before them."""
    return (f"note: {plural(n, 'tape')} {agree(n, 'is')} older than tapes indexed before {agree(n, 'it', 'them')} "
            f"(history captured after newer work), so {agree(n, 'its', 'their')} lineage runs backwards in time: "
            "run `engram reindex` to link every tape in time order (it rebuilds the index from the tapes)")


def index_pending(store: Store, db: apsw.Connection, indexer: Indexer | None = None) -> int:
    """Index every catalogued tape not yet indexed (`engram index`)."""
    indexer = indexer or Indexer(store)
    indexer.restore(db)
    todo = [r[0] for r in db.execute("SELECT id FROM tapes WHERE indexed=0 ORDER BY begins, id")]
    with small_pages() if len(todo) > 1 else nullcontext():
        for tid in todo:
            indexer.add(db, tid)
        indexer.finish(db)
    return len(todo)
