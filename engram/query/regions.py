"""Evidence regions of a whole document: which lines have evidence, and from which sessions.

The editor asks this for a buffer (unsaved text included). Every k-gram of the buffer is looked
up once; each matched fragment marks the lines its k-grams cover; runs of lines with the same
sessions become regions, and regions closer than MIN_GAP lines are merged so the editor never
shows a wall of lenses.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Final

import apsw
import numpy as np

from engram.anchor import kgram_hashes, tokenize
from engram.index import postings, stoplist
from engram.index.sql import int_array, reading
from engram.index.kinds import KIND_NAME
from engram.index.snapshot import index_params
from engram.query.copies import Event, copies
from engram.query.touches import touch_count

log = logging.getLogger(__name__)

MIN_KGRAMS: Final = 3  # a fragment must share at least this many k-grams with a run of lines
MIN_GAP: Final = 4  # regions closer than this many lines merge
MAX_FRAGMENTS: Final = 3000


@dataclass
class RegionSession:
    session_id: str
    harness: str
    model: str | None
    tape: str
    touches: int
    last_touch: str | None
    kinds: list[str] = field(default_factory=list)
    offset: int = 0  # the session's most telling fragment here: its latest edit, else its latest touch
    _rank: tuple = ()


@dataclass
class Region:
    start: int  # 0-based first line
    end: int  # 0-based last line (inclusive)
    sessions: list[RegionSession]  # ranked: touches, then most recent

    @property
    def key(self) -> tuple[str, ...]:
        return tuple(sorted(s.session_id for s in self.sessions))


def _fragment_meta(db: apsw.Connection, ids: list[int]) -> dict[int, tuple]:
    """kind, ts, tape, session, harness, model, offset, file id of each fragment, without those a
    session holds only as a copy of a session it resumed (`copies`)."""
    if not ids:
        return {}
    rows = db.execute(
        "SELECT f.id, f.kind, f.ts, t.id, t.session_id, t.harness, t.model, f.offset, f.file, f.line0, f.line1"
        " FROM fragments f JOIN tapes t ON t.no = f.tape WHERE f.id IN carray(?)", (int_array(ids),)).fetchall()
    copied = copies(db, (Event(r[0], r[4], r[5], r[1], r[2], r[8], r[9], r[10]) for r in rows))
    return {r[0]: r[1:9] for r in rows if r[0] not in copied}


def evidence_regions(db: apsw.Connection, text: str, k: int | None = None) -> list[Region]:
    with reading(db):  # the segment list, the postings and the fragments of one index state
        return _evidence_regions(db, text, k)


def _evidence_regions(db: apsw.Connection, text: str, k: int | None) -> list[Region]:
    k = k or index_params(db)[0]
    tok = tokenize(text)
    if len(tok) < k:
        return []
    kg = kgram_hashes(tok.hashes, k)
    start_line = tok.lines[: len(kg)]
    end_line = tok.lines[k - 1:]
    qk = postings.keys(kg)
    usable = stoplist.searchable(db, qk)
    keys, frags = postings.lookup(db, kg[usable])
    if not len(keys):
        return []
    pairs = np.unique(np.stack([frags.astype(np.int64), keys]), axis=1)
    fids, counts = np.unique(pairs[0], return_counts=True)
    keep = counts >= MIN_KGRAMS
    fids = fids[keep]
    if len(fids) > MAX_FRAGMENTS:
        fids = fids[np.argsort(-counts[keep], kind="stable")[:MAX_FRAGMENTS]]
    pairs = pairs[:, np.isin(pairs[0], fids)]
    if not pairs.shape[1]:
        return []
    meta = _fragment_meta(db, fids.tolist())
    # Positions of each matched key in the buffer.
    order = np.argsort(qk, kind="stable")
    sorted_k = qk[order]
    n_lines = int(tok.lines[-1]) + 1
    line_frags: dict[int, set[int]] = {}
    for fid, key in zip(pairs[0].tolist(), pairs[1].tolist()):
        lo = np.searchsorted(sorted_k, key, "left")
        hi = np.searchsorted(sorted_k, key, "right")
        for pos in order[lo:hi].tolist():
            if not usable[pos]:
                continue
            for line in range(int(start_line[pos]), int(end_line[pos]) + 1):
                line_frags.setdefault(line, set()).add(fid)
    return _regions(line_frags, meta, n_lines)


def _regions(line_frags: dict[int, set[int]], meta: dict[int, tuple], n_lines: int) -> list[Region]:
    def sessions_of(frag_ids: set[int]) -> frozenset[str]:
        return frozenset(meta[f][3] for f in frag_ids if f in meta)

    runs: list[tuple[int, int, set[int]]] = []
    for line in range(n_lines):
        fr = line_frags.get(line)
        if not fr:
            continue
        if runs and runs[-1][1] == line - 1 and sessions_of(runs[-1][2]) == sessions_of(fr):
            runs[-1] = (runs[-1][0], line, runs[-1][2] | fr)
        else:
            runs.append((line, line, set(fr)))
    merged: list[tuple[int, int, set[int]]] = []
    for run in runs:
        if merged and run[0] - merged[-1][1] <= MIN_GAP:
            merged[-1] = (merged[-1][0], run[1], merged[-1][2] | run[2])
        else:
            merged.append(run)
    return [Region(a, b, _rank(frs, meta)) for a, b, frs in merged]


_TELLING = {"code.edit": 3, "tool.call": 2, "code.read": 1, "code.carried": 1}


def _rank(frag_ids: set[int], meta: dict[int, tuple]) -> list[RegionSession]:
    by: dict[str, RegionSession] = {}
    touched: dict[str, list[tuple[int, int | None, tuple[str, int]]]] = {}  # (kind, file id, event) per session
    for f in sorted(frag_ids):
        if f not in meta:
            continue
        kind, ts, tape, session, harness, model, offset, file = meta[f]
        s = by.get(session)
        if s is None:
            s = by[session] = RegionSession(session, harness, model, tape, 0, None)
        touched.setdefault(session, []).append((kind, file, (tape, offset)))
        if ts and (s.last_touch is None or ts > s.last_touch):
            s.last_touch = ts
        name = KIND_NAME.get(kind, "?")
        if name not in s.kinds:
            s.kinds.append(name)
        rank = (_TELLING.get(name, 0), ts or "", f)
        if rank > s._rank:
            s._rank, s.tape, s.offset = rank, tape, offset
    for session, s in by.items():
        s.touches = touch_count(touched[session])
    return sorted(by.values(), key=lambda s: (-s.touches, "".join(chr(0x10FFFF - ord(c)) for c in (s.last_touch or "")),
                                              s.session_id))
