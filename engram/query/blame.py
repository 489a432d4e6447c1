"""`engram blame FILE`: which session last changed each line of a file, as `git blame` names the
commit, from the index in one pass (never one explain per line).

Every k-gram of the file's text (less the stop-listed ones, boilerplate in a tenth of the tapes) is
looked up once among the postings of code.edit fragments (`edit_postings`: the lines an edit
changed, never those it only carried or read). A fragment's matches fall into runs of nearby
positions (at most MAX_GAP_WINDOWS winnowing windows apart: one copy of a text has a fingerprint in
every window); a run of LONG_RUN fingerprints, or of MIN_RUN holding MIN_COVER of its fragment's,
says that edit's text is there, and so does a shorter run that is the rest of such a copy a later
edit split (text inserted inside it: `_split_pieces`). A line goes to the latest edit (git blame's
"last change") among the runs eligible on it: those holding WRITER_SHARE of the strongest covering
run's fingerprints (explain's WRITER_FLOOR: a later edit's few chance k-grams do not make it the
writer), and those that are their fragment's text nearly whole (WHOLE_COVER) touching the line
WRITER_SHARE as much as the most touching one (a small later rewrite inside code an earlier edit
wrote). A gap of FILL_GAP lines or fewer between two lines of one session is that session's;
consecutive lines of one session are a region. Edits of the file count, and those of a file no
longer in the tree (the lines may have come from there); a resumed session's copy of another's edit
names the original.

Measured (bench/blame.py accuracy, lines with a writer in bench/provenance.py's --multi replay):
spotter 0.953, session-bridge 0.891, agentv 0.974 right (0.951 / 0.890 / 0.972 without the split
pieces, which left a file's first lines above a line inserted under them with no writer); comparing
whole runs alone (no WHOLE_COVER path) gave the same but lost a small later rewrite inside a
whole-file create (tests/test_blame.py), touching counts alone 0.876 / 0.800 / 0.971; the thresholds
were flat within ±0.01 over WRITER_SHARE 0.4-0.7, WHOLE_COVER 0.4-0.8, LONG_RUN 4-10, MIN_COVER
0.1-0.5.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import apsw
import numpy as np

from engram import arrays
from engram.anchor import kgram_hashes, tokenize
from engram.index import postings, stoplist
from engram.index.kinds import KIND_NO
from engram.index.snapshot import index_params
from engram.index.sql import int_array, reading
from engram.query.copies import Event, copies
from engram.query.spans import in_tree
from engram.tape import events as E

log = logging.getLogger(__name__)

MIN_RUN: Final = 2
LONG_RUN: Final = 6
MAX_GAP_WINDOWS: Final = 2  # a run's fingerprints are at most this many winnowing windows apart
# A line's writer is the latest edit among those whose run touches it with at least this share of
# the fingerprints the strongest one touches it with (explain's WRITER_FLOOR, per line): a few
# k-grams a later edit shares with the line by chance do not make it the writer.
WRITER_SHARE: Final = 0.5
WHOLE_COVER: Final = 0.6
MIN_COVER: Final = 0.3
FILL_GAP: Final = 2
_EDIT: Final = KIND_NO[E.CODE_EDIT]
_MSG_IN: Final = KIND_NO[E.MSG_IN]
_REQUEST_CANDIDATES: Final = 12  # user messages read back from an edit to find the person's request


@dataclass
class Writer:
    """The edit that last changed some lines: its fragment, event and session."""

    frag: int
    tape_no: int
    tape: str
    offset: int
    ts: str | None
    session_id: str
    harness: str
    model: str | None


@dataclass
class Region:
    """Lines `start`-`end` (1-based, inclusive) and the edit that last changed them (None: no
    recorded session did)."""

    start: int
    end: int
    writer: Writer | None
    request: str | None = None

    def porcelain(self) -> dict[str, Any]:
        w = self.writer
        return {"lines": [self.start, self.end], "session_id": w.session_id if w else None,
                "tape": w.tape if w else None, "harness": w.harness if w else None,
                "when": w.ts if w else None, "request": self.request}


def blame(db: apsw.Connection, root: Path, file: str, text: str, first: int | None = None,
          last: int | None = None) -> list[Region]:
    """The regions of `text` (the working-tree text of `file`, repository-relative), lines
    `first`-`last` of it (1-based; default all), each with its writer."""
    n_lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    first, last = max(1, first or 1), min(n_lines, last or n_lines)
    if n_lines == 0 or last < first:
        return []
    with reading(db):
        writer_of = _line_writers(db, root, file, text, n_lines)
    regions: list[Region] = []
    for line in range(first, last + 1):
        w = writer_of[line - 1]
        if regions and _same(regions[-1].writer, w):
            regions[-1].end = line
            if w is not None and regions[-1].writer is not None and (w.ts or "") > (regions[-1].writer.ts or ""):
                regions[-1].writer = w  # the region's latest edit names it
        else:
            regions.append(Region(line, line, w))
    return regions


def _same(a: Writer | None, b: Writer | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.harness, a.session_id) == (b.harness, b.session_id)


def _line_writers(db: apsw.Connection, root: Path, file: str, text: str, n_lines: int) -> list[Writer | None]:
    k, w = index_params(db)
    tok = tokenize(text)
    out: list[Writer | None] = [None] * n_lines
    if len(tok) < k:
        return out
    kg = kgram_hashes(tok.hashes, k)
    qk = postings.keys(kg)
    # Stop-listed k-grams (in more than a tenth of the tapes: boilerplate every session repeats)
    # are not looked up: their posting lists are the longest and name no writer; a run steps
    # over them (MAX_GAP).
    usable = stoplist.searchable(db, qk)
    keys, frags = postings.lookup(db, kg[usable], table=postings.EDITS)
    if not len(keys):
        return out
    # Each matched key's positions among the file's k-grams (a run of the sorted k-grams, from
    # `lo`), once per fragment holding it; then one fragment's runs of those positions.
    order = np.argsort(qk, kind="stable")
    sorted_k = qk[order]
    run_at, run_len = arrays.equal_runs(sorted_k)
    length = np.zeros(len(sorted_k), dtype=np.int64)
    length[run_at] = run_len
    # (fragment, key) pairs as one integer each (the key by its run's start): distinct by a
    # plain sort, not numpy's unique along an axis.
    at = np.searchsorted(sorted_k, keys, "left").astype(np.uint64)
    pairs = arrays.unique((frags.astype(np.uint64) << np.uint64(32)) | at)
    pair_frag, lo = (pairs >> np.uint64(32)).astype(np.int64), (pairs & np.uint64(0xFFFFFFFF)).astype(np.int64)
    pos = order[arrays.ranges(lo, length[lo])]
    frag = np.repeat(pair_frag, length[lo])
    by = np.lexsort((pos, frag))
    frag, pos = frag[by], pos[by]
    new = np.ones(len(pos), dtype=bool)
    new[1:] = (frag[1:] != frag[:-1]) | (pos[1:] - pos[:-1] > MAX_GAP_WINDOWS * w)
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], len(pos)) - 1
    counts = ends - starts + 1
    run_frag = frag[starts]
    long_enough = counts >= MIN_RUN
    run_frag, starts, ends, counts = run_frag[long_enough], starts[long_enough], ends[long_enough], counts[long_enough]
    ids = arrays.unique(run_frag)
    nfp_all = _column(db, ids, "nfp")
    covers = counts >= MIN_COVER * np.maximum(nfp_all[np.searchsorted(ids, run_frag)], 1)
    in_time = _time_order(db, ids)
    time_rank = np.empty(len(ids), dtype=np.int64)
    time_rank[np.searchsorted(ids, in_time)] = np.arange(len(ids))
    ok = _split_pieces(run_frag, pos, starts, ends, (counts >= LONG_RUN) | covers, k, len(kg), MAX_GAP_WINDOWS * w,
                       time_rank[np.searchsorted(ids, run_frag)], qk)
    run_frag, starts, ends, counts = run_frag[ok], starts[ok], ends[ok], counts[ok]
    meta = _writers(db, root, file, arrays.unique(run_frag).tolist())
    if not meta:
        return out
    mid = np.fromiter(sorted(meta), dtype=np.int64, count=len(meta))
    known = arrays.member(run_frag, mid)
    run_frag, starts, ends, counts = run_frag[known], starts[known], ends[known], counts[known]
    # The latest edit covering a line is its writer: rank fragments by (time, id), take each
    # line's highest.
    ranked = [f for f in in_time.tolist() if f in meta]
    rank_of = np.empty(len(mid), dtype=np.int64)
    rank_of[np.searchsorted(mid, np.array(ranked, dtype=np.int64))] = np.arange(len(ranked))
    run_rank = rank_of[np.searchsorted(mid, run_frag)]
    line_a = tok.lines[pos[starts]].astype(np.int64)
    line_b = tok.lines[np.minimum(pos[ends] + k - 1, len(tok) - 1)].astype(np.int64)
    span = line_b - line_a + 1
    lines = arrays.ranges(line_a, span)
    rank = np.repeat(run_rank, span)
    # Eligible on a line: a run holding at least WRITER_SHARE of the strongest covering run's
    # fingerprints (a later edit's few chance k-grams do not make it the writer), or a run that is
    # its fragment's text nearly whole (WHOLE_COVER) and touches the line at least WRITER_SHARE as
    # much as the most touching one (a later small rewrite inside code an earlier edit wrote).
    whole = np.repeat(counts, span)
    strongest = np.zeros(n_lines, dtype=np.int64)
    np.maximum.at(strongest, lines, whole)
    local = _local_strength(tok.lines, pos, starts, ends, k, n_lines, np.repeat(np.arange(len(starts)), span), lines)
    most = np.zeros(n_lines, dtype=np.int64)
    np.maximum.at(most, lines, local)
    cover = counts / np.maximum(nfp_all[np.searchsorted(ids, run_frag)], 1)
    entire = np.repeat(cover >= WHOLE_COVER, span)
    strong = (whole >= WRITER_SHARE * strongest[lines]) | (entire & (local > 0) & (local >= WRITER_SHARE * most[lines]))
    best = np.full(n_lines, -1, dtype=np.int64)
    np.maximum.at(best, lines[strong], rank[strong])
    winners = _owners(db, meta, set(best[best >= 0].tolist()), ranked)
    for line, r in enumerate(best.tolist()):
        if r >= 0:
            out[line] = winners[r]
    _fill_gaps(out)
    return out


def _time_order(db: apsw.Connection, ids: np.ndarray) -> np.ndarray:
    """`ids` in time order, by (timestamp, id): the order in which blame's "last change" wins."""
    ts = dict(db.execute("SELECT id, ts FROM fragments WHERE id IN carray(?)", (int_array(ids.tolist()),)))
    return np.array(sorted(ids.tolist(), key=lambda f: (ts.get(f) or "", f)), dtype=np.int64)


def _split_pieces(run_frag: np.ndarray, pos: np.ndarray, starts: np.ndarray, ends: np.ndarray, ok: np.ndarray,
                  k: int, n_pos: int, max_gap: int, run_rank: np.ndarray, qk: np.ndarray) -> np.ndarray:
    """`ok` (the runs that say their edit's text is there) with the runs too short to say so alone
    that are a piece of a copy a later edit split: text inserted inside an edit's text leaves a
    gap of more than `max_gap` k-grams between the pieces, but counted runs of later edits hold
    it. Measured over the k-grams no such run holds, the gap from the piece to a counted run of
    its own fragment is under `max_gap`, as it would be without the insertion, and the piece
    holds no k-gram its fragment's counted runs hold (else it is a pattern the file repeats, not
    the rest of the copy): the piece counts too (a file's first lines before a line inserted
    under them keep their writer). Runs are in (fragment, position) order: a fragment's runs are
    neighbours."""
    near = np.flatnonzero((run_frag[1:] == run_frag[:-1]) & (ok[1:] != ok[:-1]))
    if not len(near):
        return ok
    # The latest counted edit holding each k-gram (-1: none).
    latest = np.full(n_pos, -1, dtype=np.int64)
    span = np.minimum(pos[ends[ok]] + k, n_pos) - pos[starts[ok]]
    np.maximum.at(latest, arrays.ranges(pos[starts[ok]], span), np.repeat(run_rank[ok], span))
    gap_a, gap_b = pos[ends[near]] + 1, pos[starts[near + 1]]
    held = np.zeros(len(near), dtype=bool)
    rank = run_rank[near]
    by = np.argsort(rank, kind="stable")
    cut = np.flatnonzero(np.diff(rank[by])) + 1
    for group in np.split(by, cut):
        bare = np.concatenate([[0], np.cumsum(latest <= rank[group[0]])])  # k-grams before each no later edit holds
        held[group] = bare[gap_b[group]] - bare[gap_a[group]] < max_gap
    piece = np.where(ok[near], near + 1, near)[held]
    if not len(piece):
        return ok
    grow = np.zeros(len(ok), dtype=bool)
    grow[piece[~_repeats(piece, run_frag, pos, starts, ends, ok, qk)]] = True
    return ok | grow


def _repeats(piece: np.ndarray, run_frag: np.ndarray, pos: np.ndarray, starts: np.ndarray, ends: np.ndarray,
             ok: np.ndarray, qk: np.ndarray) -> np.ndarray:
    """Which runs of `piece` hold a k-gram their fragment's counted runs hold elsewhere in the file."""
    kid = np.searchsorted(arrays.unique(qk), qk).astype(np.uint64)

    def pairs(runs: np.ndarray) -> np.ndarray:
        n = ends[runs] - starts[runs] + 1
        return (np.repeat(run_frag[runs].astype(np.uint64), n) << np.uint64(32)) | kid[pos[arrays.ranges(starts[runs], n)]]

    counted = np.flatnonzero(ok)
    hit = arrays.member(pairs(piece), arrays.unique(pairs(counted)))
    return np.bincount(np.repeat(np.arange(len(piece)), ends[piece] - starts[piece] + 1), weights=hit,
                       minlength=len(piece)) > 0


def _local_strength(tok_lines: np.ndarray, pos: np.ndarray, starts: np.ndarray, ends: np.ndarray, k: int,
                    n_lines: int, run_of: np.ndarray, lines: np.ndarray) -> np.ndarray:
    """For each (run, line) pair (`run_of`, `lines`), how many of the run's fingerprints touch the
    line (a k-gram touches the lines it starts and ends on): how strongly that edit holds this line,
    not how much of the file it holds."""
    idx = arrays.ranges(starts, ends - starts + 1)
    run_id = np.repeat(np.arange(len(starts), dtype=np.int64), ends - starts + 1)
    first = tok_lines[pos[idx]].astype(np.int64)
    last = tok_lines[np.minimum(pos[idx] + k - 1, len(tok_lines) - 1)].astype(np.int64)
    keys = np.concatenate([run_id * n_lines + first, (run_id * n_lines + last)[last != first]])
    uniq, counts = arrays.unique_counts(keys)
    want = run_of.astype(np.int64) * n_lines + lines
    at = np.minimum(np.searchsorted(uniq, want), len(uniq) - 1)
    return np.where(uniq[at] == want, counts[at], 0)


def _column(db: apsw.Connection, ids: np.ndarray, column: str) -> np.ndarray:
    """`fragments.<column>` of each of `ids` (ascending), 0 where missing."""
    vals = dict(db.execute(f"SELECT id, {column} FROM fragments WHERE id IN carray(?)", (int_array(ids.tolist()),)))
    return np.fromiter((vals.get(int(i)) or 0 for i in ids), dtype=np.int64, count=len(ids))


def _owners(db: apsw.Connection, meta: dict[int, tuple[Writer, int, tuple[Any, ...]]], ranks: set[int],
            ranked: list[int]) -> dict[int, Writer]:
    """The writer of each winning rank: its fragment's, or when that is a resumed session's copy
    of another session's edit (the same event in both transcripts), the session it copied."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for f, (_, _, key) in meta.items():
        groups.setdefault(key, []).append(f)
    chosen = {r: meta[ranked[r]][0] for r in ranks}
    shared = [groups[meta[ranked[r]][2]] for r in ranks if len(groups[meta[ranked[r]][2]]) > 1]
    if not shared:
        return chosen
    events = [Event(f, meta[f][0].session_id, meta[f][0].harness, _EDIT, meta[f][0].ts, key[1], key[2], key[3])
              for group in shared for f in group for key in (meta[f][2],)]
    dropped = copies(db, events)
    for r in ranks:
        group = groups[meta[ranked[r]][2]]
        if ranked[r] in dropped:
            keep = [f for f in group if f not in dropped]
            if keep:
                chosen[r] = meta[keep[0]][0]
    return chosen


def _fill_gaps(out: list[Writer | None]) -> None:
    """Lines without a writer, FILL_GAP or fewer, between two lines of one session: that session's
    (a blank line or a lone brace holds no k-gram of its own)."""
    i = 0
    while i < len(out):
        if out[i] is not None:
            i += 1
            continue
        j = i
        while j < len(out) and out[j] is None:
            j += 1
        if 0 < i and j < len(out) and j - i <= FILL_GAP and _same(out[i - 1], out[j]):
            for m in range(i, j):
                out[m] = out[i - 1]
        i = j


def _writers(db: apsw.Connection, root: Path, file: str, ids: list[int]) -> dict[int, tuple[Writer, int, tuple[Any, ...]]]:
    """Each code.edit fragment among `ids` that may have written lines of `file` (an edit of it,
    or of a file no longer in the tree), with its fingerprint count and what identifies its event
    across transcripts (a resumed session holds a copy: `copies`)."""
    if not ids:
        return {}
    rows = db.execute(
        "SELECT f.id, f.tape, f.offset, f.ts, f.nfp, files.path, f.line0, f.line1, t.id, t.session_id, t.harness,"
        " t.model FROM fragments f JOIN tapes t ON t.no = f.tape LEFT JOIN files ON files.id = f.file"
        f" WHERE f.id IN carray(?) AND f.kind = {_EDIT}", (int_array(ids),)).fetchall()
    live: dict[str, bool] = {}

    def here(path: str | None) -> bool:
        if path is None:
            return False
        if path == file:
            return True
        if path not in live:
            live[path] = not in_tree(root, path)
        return live[path]

    return {r[0]: (Writer(r[0], r[1], r[8], r[2], r[3], r[9], r[10], r[11]), int(r[4] or 0),
                   (r[10], r[5], r[6], r[7], r[3]))
            for r in rows if here(r[5])}


def add_requests(db: apsw.Connection, store_tapes: Path, objects: Path, regions: list[Region]) -> None:
    """Each region's `request`: the first line of the person's request that led to its edit (the
    last user message before it that is a request, found through the index's msg.in fragments),
    as the index keeps it (`requests`); from the tape for a tape indexed before the index kept
    them (an index not rebuilt since: `engram reindex`)."""
    rows = db.execute("SELECT value FROM state WHERE key = 'requests_from'").fetchall()
    kept_from = int(rows[0][0]) if rows else 0
    readers: dict[str, Any] = {}
    found: dict[tuple[int, int], str | None] = {}
    try:
        for r in regions:
            w = r.writer
            if w is None:
                continue
            key = (w.tape_no, w.offset)
            if key not in found:
                if w.frag >= kept_from:
                    found[key] = _pick(_kept_requests(db, w.tape_no, w.offset))
                else:
                    found[key] = _pick(_tape_requests(db, readers, store_tapes, objects, w))
            r.request = found[key]
    finally:
        for reader in readers.values():
            reader.close()


def _candidates(db: apsw.Connection, tape_no: int, offset: int, columns: str) -> Any:
    """`columns` of the last _REQUEST_CANDIDATES msg.in fragments of tape `tape_no` before `offset`, latest first."""
    return db.execute(f"SELECT {columns} FROM fragments f LEFT JOIN requests r ON r.frag = f.id WHERE f.tape = ?"
                      f" AND f.kind = {_MSG_IN} AND f.offset < ? ORDER BY f.offset DESC LIMIT ?",
                      (tape_no, offset, _REQUEST_CANDIDATES))


def _kept_requests(db: apsw.Connection, tape_no: int, offset: int) -> Iterator[tuple[str, bool] | None]:
    for line, long in _candidates(db, tape_no, offset, "r.line, r.long"):
        yield None if line is None else (line, bool(long))


def _tape_requests(db: apsw.Connection, readers: dict[str, Any], store_tapes: Path, objects: Path,
                   w: Writer) -> Iterator[tuple[str, bool] | None]:
    from engram.index.kinds import request_line  # noqa: PLC0415
    from engram.tape.objects import resolve  # noqa: PLC0415
    from engram.tape.reader import TapeReader  # noqa: PLC0415
    from engram.tape.writer import tape_path  # noqa: PLC0415

    reader = readers.get(w.tape)
    if reader is None:
        reader = readers[w.tape] = TapeReader(tape_path(store_tapes, w.tape), objects)
    for (off,) in _candidates(db, w.tape_no, w.offset, "f.offset"):
        ev = reader.event(off)
        yield request_line(resolve(ev, reader.objects_dir) if reader.objects_dir is not None else ev)


def _pick(candidates: Iterable[tuple[str, bool] | None]) -> str | None:
    """The first line of the latest request among `candidates` (latest first; None: no request);
    when that is a word or three ("continue"), of the last longer one before it
    (kinds.SHORT_REQUEST_WORDS)."""
    short = None
    for c in candidates:
        if c is None:
            continue
        line, long = c
        if long:
            return line
        short = short or line
    return short
