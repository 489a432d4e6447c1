"""The direct match of `direct.py`, with numpy: for processes that have numpy loaded anyway
(the language server, the MCP endpoint, a bulk run) and for long spans. The rules it applies are
engram.query.ranking's, as in plain Python."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import apsw
import numpy as np

from engram import arrays
from engram.anchor import Tokens, kgram_fingerprints, kgram_fingerprints_from_tokens, tokenize, winnowed_values
from engram.index import memo, postings, snapshot, stoplist
from engram.index.sql import int_array
from engram.query.ranking import (
    EDIT,
    JOIN_MIN_SHARE_NO_EDIT,
    KIND_WEIGHT,
    MAX_CANDIDATES,
    OTHER_WEIGHT,
    WINNOWED_ONLY_FROM,
    Holders,
    Trace,
    Writes,
    candidate_bar,
    expected_count,
    floor_of,
    joined_edits,
    line_count,
    note_lookup,
    note_own_file,
    note_scoring,
    own_file_edits,
    own_file_share,
    own_file_unheld,
    session_writes,
)

_KIND_WEIGHTS: Final = np.array([KIND_WEIGHT.get(i, OTHER_WEIGHT) for i in range(128)], dtype=np.float64)


def vector_hits(db: apsw.Connection, text: str, k: int, w: int, tokens: Tokens | None,
                snap: snapshot.Snapshot, file: str | None = None, holders: Holders | None = None,
                exclude: Sequence[int] = (), trace: Trace | None = None,
                writes: Writes | None = None) -> dict[int, float]:
    """`direct.direct_hits` with numpy."""
    kgrams = kgram_fingerprints_from_tokens(tokenize(text) if tokens is None else tokens, k).values
    every = arrays.unique(kgrams)
    span_keys = postings.keys(every)
    stop = stoplist.load(db, span_keys, snap)  # once: a second load in a one-shot process reads it whole
    ok = stoplist.searchable_among(*stop, span_keys)
    searched, left_out = every[ok], every[~ok]
    first_searched = len(searched)
    winnowed = winnowed_values(kgrams, w)
    own = searched[arrays.member(searched, winnowed)]
    expected = expected_count(len(own), len(searched))
    q, only_own = searched, expected >= WINNOWED_ONLY_FROM
    if only_own:
        q, left_out = own, left_out[arrays.member(left_out, winnowed)]
    held = postings.held_segments(db, snap.epoch, snap.segs, snap.seg_postings)
    every_key, every_frag = postings.lookup(db, q, snap.segs, held)
    keys, frags = _without(every_key, every_frag, exclude)
    # Postings are distinct (fingerprint, fragment) pairs: a fragment's count is its shared fingerprints.
    ids, counts = arrays.unique_counts(frags.astype(np.int64))
    back = left_out[:0]
    if len(left_out):
        found = _found(own, every_key, counts, only_own)
        back = left_out[stoplist.restored(*stop, postings.keys(left_out), len(own), found)]
        if len(back):
            more_keys, more_frags = _without(*postings.lookup(db, back, snap.segs, held), exclude)
            keys, frags = np.concatenate([keys, more_keys]), np.concatenate([frags, more_frags])
            ids, counts = arrays.unique_counts(frags.astype(np.int64))
            searched = arrays.unique(np.concatenate([searched, back]))
            expected = expected_count(int(arrays.member(winnowed, searched).sum()), len(searched))
    if trace is not None:
        note_lookup(trace, searched=first_searched, winnowed=len(own), winnowed_only=only_own,
                    restored=len(back), all_kgrams=bool(len(searched)) and not arrays.member(winnowed, searched).any(),
                    expected=expected)
    ratio = counts / expected
    rest = left_out[~arrays.member(left_out, back)] if len(back) else left_out
    if len(rest) and own_file_unheld(db, file, zip(ids.tolist(), ratio.tolist())):
        expected_all = expected_count(len(arrays.unique(winnowed)), len(every))
        keys, frags, ids, ratio = _own_file_stop_listed(db, file, rest, snap, exclude, keys, frags, ids, counts,
                                                        expected, expected_all, trace)
        counts = np.bincount(np.searchsorted(ids, frags.astype(np.int64)), minlength=len(ids))
    if not len(frags):
        return {}
    if holders is not None:
        holders.fill(ids)
    # A fragment's confidence is at most its share; the best one's at least the best share times
    # the lowest kind weight, and the floor is RELATIVE_FLOOR of the best: fragments whose share
    # is below that product of the best share cannot pass, nor be joined if it is also under
    # JOIN_MIN_SHARE (`candidate_bar`), so their kinds are never read (most candidates share one
    # or two common fingerprints with the span; a cold query reads a page each).
    share = np.minimum(1.0, ratio)
    possible = share >= candidate_bar(float(share.max()))
    all_ids, all_share, all_counts = ids, share, counts
    ids, counts, ratio = ids[possible], counts[possible], ratio[possible]
    weighable = len(ids)
    if len(ids) > MAX_CANDIDATES:
        top = np.argsort(-counts, kind="stable")[:MAX_CANDIDATES]
        ids, counts, ratio = ids[top], counts[top], ratio[top]
    kinds = memo.fragment_kinds(db, ids, snap.epoch)
    conf = np.minimum(1.0, ratio) * _KIND_WEIGHTS[kinds]
    best = float(conf.max())
    if best <= 0:
        return {}
    floor = floor_of(best)
    keep = conf >= floor
    edit = kinds == EDIT
    below = ~keep & edit
    passing = ids[keep & edit].tolist()
    if writes is not None:
        writes.edits.update(zip(ids[edit].tolist(), conf[edit].tolist()))
    out = {f: round(c, 4) for f, c in zip(ids[keep].tolist(), conf[keep].tolist())}
    small: dict[int, float] = {}
    joined: set[int] = set()

    def pairs(frs: set[int]) -> list[tuple[int, int]]:
        mine = arrays.member(frags, np.array(sorted(frs), dtype=frags.dtype))
        return list(zip(keys[mine].tolist(), frags[mine].tolist()))

    if file is not None and not (below.sum() < 2 and passing):
        small = {} if passing else _weak(all_ids, all_share, all_counts, possible)
        under_ids, under_conf = ids[below], conf[below]
        order = np.argsort(under_ids, kind="stable")
        under = dict(zip(under_ids[order].tolist(), under_conf[order].tolist()))
        joined = joined_edits(db, file, under, small, passing, expected, floor, pairs)
    if trace is not None:
        note_scoring(trace, kinds=kinds.tolist(), cut=weighable - len(ids), best=best, floor=floor,
                     kept=int(keep.sum()), joined=len(joined))
    session_writes(db, file, [*passing, *joined], expected, line_count(text), pairs, writes)
    if not joined:
        return out
    scored = [*zip(ids.tolist(), conf.tolist()), *small.items()]
    return {f: round(c, 4) for f, c in scored if f in out or f in joined}


def _own_file_stop_listed(db: apsw.Connection, file: str | None, rest: np.ndarray, snap: snapshot.Snapshot,
                          exclude: Sequence[int], keys: np.ndarray, frags: np.ndarray,
                          ids: np.ndarray, counts: np.ndarray, expected: int, expected_all: int,
                          trace: Trace | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The postings of the stop-listed fingerprints `rest` that edits of the span's own `file`
    hold, added (keys, frags, ids), and each fragment's share before the cap: `own_file_share`
    for those edits, the searched share for the others. Looked up among the edits' postings only
    (`postings.EDITS`): a stop-listed fingerprint has postings in a tenth of the tapes and more,
    which the stop-list is there not to read."""
    more_keys, more_frags = _without(*postings.lookup(db, rest, snap.segs, None, postings.EDITS), exclude)
    mine = np.array(own_file_edits(db, file, arrays.unique(more_frags.astype(np.int64)).tolist()), dtype=np.int64)
    if not len(mine):
        return keys, frags, ids, counts / expected
    sel = arrays.member(more_frags.astype(np.int64), mine)
    keys, frags = np.concatenate([keys, more_keys[sel]]), np.concatenate([frags, more_frags[sel]])
    all_ids, all_counts = arrays.unique_counts(frags.astype(np.int64))
    base = np.zeros(len(all_ids), dtype=np.float64)
    if len(ids):
        base[np.searchsorted(all_ids, ids)] = counts
    ratio = base / expected
    is_mine = arrays.member(all_ids, mine)
    ratio[is_mine] = [own_file_share(int(b), expected, int(a), expected_all)
                      for b, a in zip(base[is_mine], all_counts[is_mine])]
    if trace is not None:
        note_own_file(trace, int(is_mine.sum()), len(arrays.unique(more_keys[sel])))
    return keys, frags, all_ids, ratio


def _found(own: np.ndarray, keys: np.ndarray, counts: np.ndarray, only_own: bool) -> int:
    """How many of the span's winnowed fingerprints looked up (`own`, ascending) have postings
    (`keys`) — or, when that is surely at least half of them, a lower bound that says so.

    With only `own` looked up (`only_own`), no fragment holds more of them than have postings:
    the best count is such a bound, and an unedited span, whose writer holds all of them, is
    never counted (a first version of the rule that counted on every query cost +0.2 ms p50 on
    the 1 GB store's 20-line spans)."""
    if only_own and len(counts) and 2 * int(counts.max()) >= len(own):
        return int(counts.max())
    if not len(own) or not len(keys):
        return 0
    mine = arrays.unique(postings.keys(own))
    pos = np.minimum(np.searchsorted(mine, keys), len(mine) - 1)
    return int(np.count_nonzero(np.bincount(pos[mine[pos] == keys], minlength=len(mine))))


def _without(keys: np.ndarray, frags: np.ndarray, exclude: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """The postings (key, fragment) not of the fragments `exclude` (ascending)."""
    if not len(exclude):
        return keys, frags
    keep = ~arrays.member(frags.astype(np.int64), np.asarray(exclude, dtype=np.int64))
    return keys[keep], frags[keep]


def _weak(ids: np.ndarray, share: np.ndarray, counts: np.ndarray, possible: np.ndarray) -> dict[int, float]:
    """Fragment → share for those under the candidate bar that could still be joined as edits
    when no edit passes (`ranking.JOIN_MIN_SHARE_NO_EDIT`), the most matched MAX_CANDIDATES of them,
    in ascending id order (as `direct._small_hits` takes them)."""
    low = (share >= JOIN_MIN_SHARE_NO_EDIT) & ~possible
    some, some_share = ids[low], share[low]
    if len(some) > MAX_CANDIDATES:
        top = np.sort(np.argsort(-counts[low], kind="stable")[:MAX_CANDIDATES])
        some, some_share = some[top], some_share[top]
    return dict(zip(some.tolist(), some_share.tolist()))


def tombstone_hits(db: apsw.Connection, text: str, k: int | None = None) -> dict[int, float]:
    """Deleting fragments whose deleted text is at least half made of the span's k-grams.

    Only tombstones sharing a k-gram with the span can qualify: they are looked up in
    `tombstone_fps` rather than every tombstone compared (at 1 GB, 1,800 tombstones made
    `--include-deleted` 60-110 ms slower; real histories delete far more)."""
    q = np.unique(kgram_fingerprints(text, k or snapshot.index_params(db)[0]).values)
    out: dict[int, float] = {}
    if not len(q):
        return out
    for frag, anchors in db.execute(
            "SELECT frag, anchors FROM tombstones WHERE id IN (SELECT tomb FROM tombstone_fps WHERE fp IN carray(?))"
            " ORDER BY id", (int_array(q),)):
        a = np.frombuffer(anchors, "<i8")
        if len(a):
            share = float(np.isin(a, q).mean())
            if share >= 0.5:
                out[frag] = round(share, 4)
    return out
