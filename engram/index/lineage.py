"""Lineage edges, tombstones and continuation edges, computed when a tape is indexed.

All stored as raw facts (similarities, locations, markers); interpretation — which edges to
follow, at what confidence — happens at query time (engram.query.explain).
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import apsw
import numpy as np

from engram.anchor import all_kgrams, iter_token_chunks, kgram_hashes, similarity
from engram.anchor.winnow import text_groups
from engram.arrays import equal_runs, ranges, unique, within_runs
from engram.index import postings, stoplist
from engram.index.edges import LINK_THRESHOLD, REINSERT_SIMILARITY
from engram.index.kinds import KIND_NO
from engram.index.sql import int_array
from engram.tape import events as E

if TYPE_CHECKING:
    from engram.index.pending import PendingEdit, PendingTape

log = logging.getLogger(__name__)

SOURCE_CONTAINMENT: Final = 0.50  # share of an edit's before-text found in an earlier edit's after-text
MAX_SOURCES: Final = 3
PART_MIN_FPS: Final = 3  # a hunk or carried run with fewer fingerprints is not looked up alone
ADJACENT_LINES: Final = 10
CONTINUATION_MIN_SHARED: Final = 5
CONTINUATION_MIN_CONFIDENCE: Final = 0.15
MARKER_BONUS: Final = 0.25
COMMON_TEXT_TAPES: Final = 8  # a fingerprint in more tapes' heads/tails than this is boilerplate
# Rows kept per fingerprint in head_fps / tail_fps. Rows past COMMON_TEXT_TAPES only ever say
# "boilerplate", which one more row says as well; the second spare keeps that verdict exact
# while a tape being indexed again has its own rows removed. Without the cap, each 1 MB append
# wrote ~600 scattered pages of these tables (80% of its WAL) and its checkpoint copied them back.
FP_ROWS_CAP: Final = COMMON_TEXT_TAPES + 2
MAX_CONTINUATIONS: Final = 3  # per tape and direction: the strongest overlaps only


CONFIDENCE_K: Final = 2


def edit_confidence(before: str, after: str) -> float:
    """How much of an edit's before-text survives in its after-text: shared token bigrams over
    the larger bigram set.

    Token bigrams rather than the index's k-grams: one changed token destroys k index k-grams
    but only two bigrams, so a person's scattered edits (renames, reworded arguments) keep a
    confidence that reflects how much code survived, while a rewrite still scores near zero.
    """
    a = np.unique(all_kgrams(before, CONFIDENCE_K))
    b = np.unique(all_kgrams(after, CONFIDENCE_K))
    if not len(a) or not len(b):
        return 0.0
    return float(len(np.intersect1d(a, b, assume_unique=True)) / max(len(a), len(b)))


def edit_confidences(pairs: list[tuple[str, str]]) -> list[float]:
    """`edit_confidence` of many (before, after) texts, equal value for value.

    Small texts are tokenized together, as `fingerprints_many` does: one tokenizer call per
    text has a fixed numpy cost, and 3,400 calls per 100 MB of transcripts were 12% of a worker's
    CPU. Texts are joined with a line holding one punctuation token, so no token spans two texts,
    and a bigram is kept only when both of its tokens belong to the same text."""
    texts = [t for pair in pairs for t in pair]
    vals: list[np.ndarray] = []
    docs: list[np.ndarray] = []
    for ids, group, large in text_groups(texts, joint=3):
        if large:
            v = all_kgrams(texts[ids[0]], CONFIDENCE_K)
            vals.append(v)
            docs.append(np.full(len(v), ids[0], dtype=np.int64))
        else:
            v, d = _bigrams_of_group(group)
            vals.append(v)
            docs.append(np.asarray(ids, dtype=np.int64)[d])
    v = np.concatenate(vals) if vals else np.empty(0, np.int64)
    d = np.concatenate(docs) if docs else np.empty(0, np.int64)
    o = np.lexsort((v, d))
    v, d = v[o], d[o]
    first = np.ones(len(v), dtype=bool)
    first[1:] = (v[1:] != v[:-1]) | (d[1:] != d[:-1])
    v, d = v[first], d[first]  # distinct bigrams of each text
    n_of = np.bincount(d, minlength=len(texts))
    e = d >> 1  # the edit; a bigram in both of its texts appears twice for (e, value)
    o = np.lexsort((v, e))
    v, e = v[o], e[o]
    both = np.flatnonzero((v[1:] == v[:-1]) & (e[1:] == e[:-1]))
    shared = np.bincount(e[both], minlength=len(pairs))
    out = []
    for i in range(len(pairs)):
        a, b = int(n_of[2 * i]), int(n_of[2 * i + 1])
        out.append(float(int(shared[i]) / max(a, b)) if a and b else 0.0)
    return out


def _bigrams_of_group(datas: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """(bigram values, text index) of small texts, tokenized in one pass."""
    sep = b"\n~\n"
    lens = np.fromiter((len(x) for x in datas), dtype=np.int64, count=len(datas))
    starts = np.cumsum(lens + len(sep)) - (lens + len(sep))
    joined = sep.join(datas)
    parts = list(iter_token_chunks(joined, len(joined) + 1))
    if not parts:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    h, _, offs = parts[0]
    doc = np.searchsorted(starts, offs, side="right") - 1
    doc[offs >= (starts + lens)[doc]] = -1  # the separator tokens
    k = CONFIDENCE_K
    v_parts: list[np.ndarray] = []
    d_parts: list[np.ndarray] = []
    if len(h) >= k:
        v = kgram_hashes(h, k)
        ok = (doc[: len(v)] == doc[k - 1:]) & (doc[: len(v)] >= 0)
        v_parts.append(v[ok])
        d_parts.append(doc[: len(v)][ok])
    cnt = np.bincount(doc[doc >= 0], minlength=len(datas))
    for t in np.flatnonzero((cnt > 0) & (cnt < k)).tolist():  # shorter than k tokens: one value
        at = int(np.searchsorted(offs, starts[t]))
        v_parts.append(kgram_hashes(h[at:at + int(cnt[t])], k))
        d_parts.append(np.array([t], dtype=np.int64))
    if not v_parts:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(v_parts), np.concatenate(d_parts)


def location_delta(src_file: str | None, src_lines: tuple[int | None, int | None], file: str,
                   lines: list[int] | None) -> str:
    """Where the source span lies relative to the edited span: same / adjacent / moved / absent."""
    if src_file is None or src_lines[0] is None or not lines:
        return "absent"
    if src_file != file:
        return "moved"
    a0, a1 = src_lines[0], max(src_lines[0], src_lines[1] or src_lines[0])
    b0, b1 = lines[0], max(lines[0], lines[1])
    if a0 <= b1 and b0 <= a1:
        return "same"
    gap = b0 - a1 if b0 > a1 else a0 - b1
    return "adjacent" if gap <= ADJACENT_LINES else "moved"


def _fragment_info(db: apsw.Connection, ids: list[int]) -> dict[int, tuple[str | None, int | None, int | None]]:
    if not ids:
        return {}
    rows = db.execute(
        "SELECT f.id, files.path, f.line0, f.line1 FROM fragments f LEFT JOIN files ON files.id = f.file "
        "WHERE f.id IN carray(?)", (int_array(ids),)).fetchall()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


class RunEdits:
    """The postings of the code.edit fragments one Indexer wrote in this run, in memory.

    A run writes its postings to SQLite only when it ends (see engram.index.build), so the
    sources of a flush's edits among the run's earlier flushes come from here; SQLite answers for
    everything indexed before the run. Sources are code.edit fragments only, 7.5% of the postings.
    When the run ends they are also written as its segment's edit postings (postings.EDITS), so
    they must stay those of the batches the run still holds (`Indexer._flush` restores them when
    a flush rolls back).
    """

    def __init__(self) -> None:
        self.keys = np.empty(0, np.int64)  # sorted
        self.frags = np.empty(0, np.int64)

    def add(self, keys: np.ndarray, frags: np.ndarray) -> None:
        """The postings of a batch's code.edit fragments (one entry per distinct key and
        fragment, as a segment stores them)."""
        if not len(keys):
            return
        o = np.lexsort((frags, keys))
        k, f = keys[o], frags[o].astype(np.int64)
        new = np.ones(len(k), dtype=bool)
        new[1:] = (k[1:] != k[:-1]) | (f[1:] != f[:-1])
        k = np.concatenate((self.keys, k[new]))
        f = np.concatenate((self.frags, f[new]))
        o = np.argsort(k, kind="stable")
        self.keys, self.frags = k[o], f[o]

    def lookup(self, qkeys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(key, fragment) of this run's postings of the given keys."""
        return postings.lookup_sorted(qkeys, self.keys, self.frags)


def source_candidates(db: apsw.Connection, edits: list[tuple[int, np.ndarray]], stop: tuple[np.ndarray, np.ndarray],
                      run: RunEdits | None = None) -> list[list[tuple[int, float]]]:
    """For each (bound, fingerprints) lookup: the edit fragments before fragment `bound` holding
    at least SOURCE_CONTAINMENT of the fingerprints, best first (one list per lookup, in their
    order; several lookups may share a bound). One postings lookup for the whole batch;
    with `run`, the run's own postings come from memory (SQLite holds only what earlier runs wrote).

    `stop` is the stop-list (keys, tape counts): an edit of common code keeps the least common
    half of its before-text, as a query does, so its lineage is still found."""
    out: list[list[tuple[int, float]]] = [[] for _ in edits]
    q_id: list[np.ndarray] = []
    q_dst: list[np.ndarray] = []
    q_keys: list[np.ndarray] = []
    for i, (dst, before) in enumerate(edits):
        k = unique(postings.keys(before))
        if len(stop[0]):
            k = k[stoplist.searchable_among(stop[0], stop[1], k)]
        if len(k):
            q_id.append(np.full(len(k), i, dtype=np.int64))
            q_dst.append(np.full(len(k), dst, dtype=np.int64))
            q_keys.append(k)
    if not q_keys:
        return out
    qi, qe, qk = np.concatenate(q_id), np.concatenate(q_dst), np.concatenate(q_keys)
    uq = unique(qk)
    # Only code.edit fragments can be sources: their postings are kept apart (postings.EDITS).
    pk, pf = postings.lookup(db, postings.key_to_fp(uq), table=postings.EDITS)
    pf = pf.astype(np.int64)
    if run is not None:  # its postings are not in SQLite until the run writes them, all at once
        mk, mf = run.lookup(uq)
        pk, pf = np.concatenate((pk, mk)), np.concatenate((pf, mf))
    if not len(pk):
        return out
    # Each posting as one int64 (rank of its key among the query keys, fragment), sorted: a query
    # key's postings are one run, fragments ascending, so those of fragments before the lookup's
    # own fragment are a prefix found by binary search, and later ones are never paired.
    packed = np.sort((np.searchsorted(uq, pk) << 32) | pf)
    qrank = np.searchsorted(uq, qk) << 32
    lo = np.searchsorted(packed, qrank, "left")
    n = np.searchsorted(packed, qrank | qe, "left") - lo  # earlier fragments holding each query key
    if not n.any():
        return out
    ue, uf, share = _contained(packed, qi, qrank, lo, n)
    good = share >= SOURCE_CONTAINMENT
    ue, uf, share = ue[good], uf[good], share[good]
    if not len(ue):
        return out
    # Best first (share, then the later fragment), MAX_SOURCES per lookup.
    order = np.lexsort((-uf, -share, ue))
    ue, uf, share = ue[order], uf[order], share[order]
    _, per_edit = equal_runs(ue)
    top = within_runs(per_edit) < MAX_SOURCES
    for d, f, c in zip(ue[top].tolist(), uf[top].tolist(), share[top].tolist()):
        out[d].append((f, c))
    return out


def _contained(packed: np.ndarray, qe: np.ndarray, qrank: np.ndarray, lo: np.ndarray,
               n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(edit, fragment, share of the edit's keys the fragment holds) for every pair that may
    reach SOURCE_CONTAINMENT; pairs left out cannot. Query entry i is key `qrank[i] >> 32` of
    edit `qe[i]`, held by the `n[i]` earlier fragments at `packed[lo[i]:lo[i] + n[i]]`.

    Pairing every key with every fragment holding it made 8.4 M pairs for a 1 GB bulk batch of
    4,400 edits (code shared by many files: imports, signatures), whose sort was half the
    lineage work. A fragment holding at least `need` of an edit's `size` keys holds one of any
    `size - need + 1` of them (pigeonhole), so only the edit's rarest keys are paired, giving
    the candidates (0.26 M); each candidate is then checked for the edit's other keys by binary
    search in `packed` (0.62 M probes). Exact: the same pairs and shares, 8x faster there."""
    order = np.lexsort((n, qe))  # each edit's keys, rarest first
    qe, qrank, lo, n = qe[order], qrank[order], lo[order], n[order]
    first, size = equal_runs(qe)
    # A lower bound on the keys a source must hold (a shorter bound only lengthens the prefix).
    need = np.maximum(1, np.floor(SOURCE_CONTAINMENT * size).astype(np.int64))
    prefix = size - need + 1
    in_prefix = within_runs(size) < np.repeat(prefix, size)
    held = np.sort((np.repeat(qe[in_prefix], n[in_prefix]) << 32)
                   | (packed[ranges(lo[in_prefix], n[in_prefix])] & 0xFFFFFFFF))
    starts, count = equal_runs(held)  # none when no prefix key has an earlier holder
    held = held[starts]
    group = np.searchsorted(qe[first], held >> 32)
    rest = size[group] - prefix[group]
    maybe = count + rest >= need[group]
    held, count, group, rest = held[maybe], count[maybe], group[maybe], rest[maybe]
    frag = held & 0xFFFFFFFF
    probe = qrank[ranges(first[group] + prefix[group], rest)] | np.repeat(frag, rest)
    at = np.minimum(np.searchsorted(packed, probe), len(packed) - 1)
    found = np.bincount(np.repeat(np.arange(len(held)), rest)[packed[at] == probe], minlength=len(held))
    return held >> 32, frag, (count + found) / size[group].astype(np.float64)


@dataclass(frozen=True)
class Lookup:
    """One search for the sources of a text an edit removed (or, for a carried run, kept)."""

    bound: int  # sources are fragments before this one: the edit's first (its own regions are never its sources)
    fps: np.ndarray  # the text's fingerprints
    # The fragments the edges lead from, each with the edge's confidence (None: the share of the
    # text the source holds, for a carried run) and where its text was, for the location.
    edges: tuple[tuple[int, float | None, list[int] | None], ...]
    file: str
    note: str | None = None


def lookups(pt: "PendingTape", frag_base: int) -> list[Lookup]:
    """The source lookups of a tape's edits, region by region (`frag_base`: the id of the tape's
    first fragment).

    Each changed region is a fragment with edges of its own: an edit whose regions changed code of
    two earlier sessions held less than SOURCE_CONTAINMENT of either in its removed text taken
    together and was linked to neither, and a span of one region reached the sources of the other.
    Regions of one edit with fewer than PART_MIN_FPS fingerprints each (one or two shared k-grams
    say little about where a line came from) are looked up together, as the edit's one text was.
    Each run of carried lines is looked up too, and linked to what wrote it: a span of two lines
    that a later deletion brought together is held whole by the deleting edit's context, and in
    part by the block's writer, whose edit fell under the floor and out of the answer."""
    out: list[Lookup] = []
    small: dict[int, list["PendingEdit"]] = {}
    for e in pt.edits:
        if not len(e.before):
            continue
        if e.alone:
            out.append(Lookup(frag_base + e.first, e.before, ((frag_base + e.offset, e.confidence, e.before_range),),
                              e.file))
        else:
            small.setdefault(e.first, []).append(e)
    for first, group in small.items():
        out.append(Lookup(frag_base + first, unique(np.concatenate([e.before for e in group])),
                          tuple((frag_base + e.offset, e.confidence, e.before_range) for e in group), group[0].file))
    for c in pt.carried:
        if len(c.fps) >= PART_MIN_FPS:
            out.append(Lookup(frag_base + c.first, c.fps, ((frag_base + c.offset, None, c.lines),), c.file, "carried"))
    return out


def add_lineage(db: apsw.Connection, pt: "PendingTape", frag_base: int, looks: list[Lookup],
                found: list[list[tuple[int, float]]]) -> None:
    """A tape's lineage: edges to the sources `found` for its lookups (`looks`), tombstones of
    the text each changed region deleted, edges from re-inserted text to its tombstones, and the
    tape's agent links."""
    _link_sources(db, looks, found)
    for e in pt.edits:
        dst = frag_base + e.offset
        if len(e.before) and not len(e.after):
            r = e.before_range or [None, None]
            db.execute("INSERT INTO tombstones(frag, file, line0, line1, ts, anchors) VALUES(?, "
                       "(SELECT id FROM files WHERE path=?), ?, ?, ?, ?)",
                       (dst, e.file, r[0], r[1], e.ts, e.before.astype("<i8").tobytes()))
            tomb = db.last_insert_rowid()
            db.executemany("INSERT OR IGNORE INTO tombstone_fps(fp, tomb) VALUES(?, ?)",
                           ((v, tomb) for v in e.before.tolist()))
        if len(e.after) and (not len(e.before) or e.confidence < LINK_THRESHOLD):
            _relink_reinsertion(db, dst, e)
    for fi, ev in pt.links:
        _agent_link(db, frag_base + fi, ev)


def _link_sources(db: apsw.Connection, looks: list[Lookup], found: list[list[tuple[int, float]]]) -> None:
    """Write the edges of a tape's lookups (for a fragment and a source reached by two lookups,
    the stronger)."""
    best: dict[int, dict[int, tuple[float, float, str, list[int] | None, str | None]]] = {}
    for lk, sources in zip(looks, found):
        for src, contain in sources:
            for dst, conf, lines in lk.edges:
                c = contain if conf is None else conf
                have = best.setdefault(dst, {}).get(src)
                if have is None or (c, contain) > have[:2]:
                    best[dst][src] = (c, contain, lk.file, lines, lk.note)
    if not best:
        return
    info = _fragment_info(db, sorted({src for chosen in best.values() for src in chosen}))
    for dst, chosen in sorted(best.items()):
        card = "N:1" if len(chosen) > 1 else "1:1"
        for src, (conf, contain_v, file, lines, note) in sorted(chosen.items(), key=lambda kv: (-kv[1][0], kv[0])):
            f, l0, l1 = info.get(src, (None, None, None))
            if card == "1:1" and db.execute("SELECT count(*) FROM lineage WHERE src=?", (src,)).fetchall()[0][0]:
                card_v = "1:N"
                db.execute("UPDATE lineage SET cardinality='1:N' WHERE src=? AND cardinality='1:1'", (src,))
            else:
                card_v = card
            db.execute("INSERT OR REPLACE INTO lineage(dst, src, confidence, containment, location_delta, cardinality,"
                       " agent_link, note) VALUES(?, ?, ?, ?, ?, ?, 0, ?)",
                       (dst, src, round(conf, 4), round(contain_v, 4), location_delta(f, (l0, l1), file, lines),
                        card_v, note))


def _relink_reinsertion(db: apsw.Connection, dst: int, e: "PendingEdit") -> None:
    """Text put back verbatim after a deletion rejoins the chain of the code it was.

    Candidates come from the tombstones' fingerprints (a lookup), and only those sharing enough
    fingerprints to possibly reach the similarity threshold are compared in full."""
    if not len(e.after):
        return
    need = int(REINSERT_SIMILARITY * len(e.after))
    candidates = [t for t, n in db.execute("SELECT tomb, count(*) FROM tombstone_fps WHERE fp IN carray(?)"
                                           " GROUP BY tomb", (int_array(e.after),)) if n >= need]
    if not candidates:
        return
    for tid, frag, path, l0, l1, anchors in db.execute(
            "SELECT t.id, t.frag, files.path, t.line0, t.line1, t.anchors FROM tombstones t "
            "LEFT JOIN files ON files.id = t.file WHERE t.frag < ? AND t.id IN carray(?)",
            (dst, int_array(candidates))).fetchall():
        old = np.frombuffer(anchors, dtype="<i8")
        sim = similarity(old, e.after)
        if sim >= REINSERT_SIMILARITY:
            db.execute("INSERT OR REPLACE INTO lineage(dst, src, confidence, containment, location_delta, cardinality,"
                       " agent_link, note) VALUES(?, ?, ?, ?, ?, '1:1', 0, 'reinserted')",
                       (dst, frag, round(sim, 4), round(sim, 4), location_delta(path, (l0, l1), e.file, e.after_range)))


def _agent_link(db: apsw.Connection, dst: int, ev: dict[str, Any]) -> None:
    target = ev.get("target") or {}
    src = None
    if isinstance(target, dict) and "tape" in target and "offset" in target:
        row = db.execute("SELECT f.id FROM fragments f JOIN tapes t ON t.no = f.tape WHERE t.id LIKE ? AND f.offset=?"
                         " ORDER BY f.id LIMIT 1",  # (an edit is several fragments: its first region)
                         (str(target["tape"]) + "%", int(target["offset"]))).fetchall()
        src = row[0][0] if row else None
    elif isinstance(target, dict) and "file" in target:
        r = target.get("range") or [None, None]
        row = db.execute("SELECT f.id FROM fragments f JOIN files ON files.id = f.file WHERE files.path=? AND "
                         "f.kind=? AND f.line0 <= ? AND f.line1 >= ? ORDER BY f.id DESC LIMIT 1",
                         (target["file"], KIND_NO[E.CODE_EDIT], r[1] or 10**9, r[0] or 0)).fetchall()
        src = row[0][0] if row else None
    if src is None:
        return
    db.execute("INSERT OR REPLACE INTO lineage(dst, src, confidence, containment, location_delta, cardinality,"
               " agent_link, note) VALUES(?, ?, 1.0, 1.0, 'absent', '1:1', 1, ?)", (dst, src, ev.get("note")))


class Continuations:
    """Tail-of-one-tape / head-of-another overlaps.

    Candidates come from `head_fps` / `tail_fps` (one row per fingerprint and tape), looked up
    with the new tape's own fingerprints: an append reads the few tapes that share text with it
    instead of rebuilding a map of every tape's head and tail (0.2 s of a 0.3 s append at 1 GB).
    A tape's rows are written as soon as it is added, so later tapes of the same batch see it.
    """

    def add(self, db: apsw.Connection, pt: "PendingTape", no: int) -> None:
        started = db.execute("SELECT coalesce(started, '') FROM tapes WHERE no=?", (no,)).fetchall()[0][0]
        old = db.execute("SELECT head, tail FROM heads WHERE tape=?", (no,)).fetchall()
        if old:  # the tape is indexed again: drop its previous fingerprints
            for table, blob in zip(("head_fps", "tail_fps"), old[0]):
                db.executemany(f"DELETE FROM {table} WHERE fp=? AND tape=?",
                               ((v, no) for v in np.frombuffer(blob, "<i8").tolist()))
        # This tape's head continuing an earlier tail, and this tape's tail continued by a later head.
        # Text in the heads or tails of many tapes is boilerplate nobody continues from.
        shared_prev = _shared(db, "tail_fps", "head_fps", pt.head)
        shared_next = _shared(db, "head_fps", "tail_fps", pt.tail)
        meta = _tape_meta(db, set(shared_prev) | set(shared_next))
        db.execute("INSERT OR REPLACE INTO heads(tape, head, tail, marker) VALUES(?, ?, ?, ?)",
                   (no, pt.head.astype("<i8").tobytes(), pt.tail.astype("<i8").tobytes(), pt.marker))
        for table, values in (("head_fps", pt.head), ("tail_fps", pt.tail)):
            if len(values):  # a row for each fingerprint not yet held by FP_ROWS_CAP tapes
                db.execute(f"INSERT OR IGNORE INTO {table}(fp, tape) SELECT c.value, ? FROM carray(?) c "
                           f"WHERE (SELECT count(*) FROM {table} t WHERE t.fp = c.value) < ?",
                           (no, int_array(values), FP_ROWS_CAP))
        prev = [(n, other) for other, n in shared_prev.items()
                if meta[other][0] != pt.session_id and meta[other][1] <= started]
        for n, other in sorted(prev, key=lambda x: (-x[0], x[1]))[:MAX_CONTINUATIONS]:
            self._edge(db, other, no, n, len(pt.head), pt.marker)
        nxt = [(n, other) for other, n in shared_next.items()
               if meta[other][0] != pt.session_id and started <= meta[other][1]]
        for n, other in sorted(nxt, key=lambda x: (-x[0], x[1]))[:MAX_CONTINUATIONS]:
            _, _, o_head, o_marker = meta[other]
            self._edge(db, no, other, n, o_head, o_marker)

        if pt.continues is not None:
            _stated_continuation(db, no, *pt.continues)
        _continued_later(db, no, pt.session_id)

    @staticmethod
    def _edge(db: apsw.Connection, src: int, dst: int, shared: int, head_size: int, marker: str | None) -> None:
        if shared < CONTINUATION_MIN_SHARED:
            return
        conf = shared / max(1, head_size)
        if marker:
            conf += MARKER_BONUS
        if conf < CONTINUATION_MIN_CONFIDENCE:
            return
        db.execute("INSERT OR REPLACE INTO continuations(src_tape, dst_tape, confidence, marker) VALUES(?, ?, ?, ?)",
                   (src, dst, round(min(1.0, conf), 4), marker))


def continued_session(meta: dict[str, Any]) -> tuple[str, str] | None:
    """(session, how) for a tape whose meta says its session continues another one (`continues`,
    `continues_via`: a Claude Code session resumed from another, or implementing a plan another
    accepted); None for any other tape. Every segment of such a session says so (its first may
    not: captured before any record of its own was written)."""
    other = meta.get("continues")
    if not isinstance(other, str) or not other:
        return None
    return other, str(meta.get("continues_via") or "resume")


def _stated_continuation(db: apsw.Connection, no: int, session: str, how: str) -> None:
    """The edge from the session this tape's session continues (its latest tape begun before
    this one) to this tape. The copied records that say so are left out of this tape, so its
    head shares no text with that session's tail for `Continuations` to find. A session not
    indexed yet (captured later) is waited for: `_continued_later` adds the edge."""
    begins = db.execute("SELECT coalesce(begins, started, '') FROM tapes WHERE no=?", (no,)).fetchall()[0][0]
    rows = db.execute("SELECT no FROM tapes WHERE session_id=? AND no IS NOT NULL AND no != ? "
                      "AND coalesce(begins, started, '') <= ? ORDER BY coalesce(begins, started, '') DESC, no DESC "
                      "LIMIT 1", (session, no, begins)).fetchall()
    if rows:
        _stated_edge(db, rows[0][0], no, how)
        return
    key = _WAITING + session
    waiting = db.execute("SELECT value FROM state WHERE key=?", (key,)).fetchall()
    pairs = json.loads(waiting[0][0]) if waiting else []
    if [no, how] not in pairs:
        db.execute("INSERT OR REPLACE INTO state(key, value) VALUES(?, ?)", (key, json.dumps([*pairs, [no, how]])))


_WAITING: Final = "continued_by:"  # state key prefix: tapes whose session continues a session not indexed yet


def _continued_later(db: apsw.Connection, no: int, session: str) -> None:
    """Edges from this tape to the tapes, indexed before it, whose session continues its session."""
    key = _WAITING + session
    waiting = db.execute("SELECT value FROM state WHERE key=?", (key,)).fetchall()
    if not waiting:
        return
    for dst, how in json.loads(waiting[0][0]):
        _stated_edge(db, no, int(dst), str(how))
    db.execute("DELETE FROM state WHERE key=?", (key,))


def _stated_edge(db: apsw.Connection, src: int, dst: int, how: str) -> None:
    db.execute("INSERT OR REPLACE INTO continuations(src_tape, dst_tape, confidence, marker) VALUES(?, ?, 1.0, ?)",
               (src, dst, how))


def _shared(db: apsw.Connection, table: str, other: str, values: np.ndarray) -> dict[int, int]:
    """Tape -> how many of `values` it has in `table` (head_fps or tail_fps), counting only
    fingerprints held by at most COMMON_TEXT_TAPES tapes in `table` and in `other` alike.

    Boilerplate is a property of the text, whichever end of a tape it is found at: judged by
    `table` alone, a tape captured after many others that end with the same text would still
    link to an opener that quotes it, because few heads hold it yet. The common ones are dropped
    inside SQLite; their rows say nothing about which tape this one continues."""
    shared: dict[int, int] = defaultdict(int)
    if not len(values):
        return shared
    for (tape,) in db.execute(
            f"SELECT tape FROM {table} WHERE fp IN (SELECT fp FROM {table} WHERE fp IN carray(?1) GROUP BY fp "
            f"HAVING count(*) <= ?2) AND fp NOT IN (SELECT fp FROM {other} WHERE fp IN carray(?1) GROUP BY fp "
            "HAVING count(*) > ?2)", (int_array(values), COMMON_TEXT_TAPES)):
        shared[tape] += 1
    return shared


def _tape_meta(db: apsw.Connection, tapes: set[int]) -> dict[int, tuple[str, str, int, str | None]]:
    """no -> (session, started, |head|, marker) of the given indexed tapes."""
    if not tapes:
        return {}
    rows = db.execute("SELECT h.tape, t.session_id, coalesce(t.started, ''), length(h.head) / 8, h.marker "
                      "FROM heads h JOIN tapes t ON t.no = h.tape WHERE h.tape IN carray(?)",
                      (int_array(sorted(tapes)),)).fetchall()
    return {r[0]: (r[1], r[2], int(r[3]), r[4]) for r in rows}
