"""The direct-match rule of `direct.py`, with numpy: for processes that have numpy loaded anyway
(the language server, the MCP endpoint, a bulk run) and for long spans."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import apsw
import numpy as np

from engram import arrays
from engram.anchor import Tokens, kgram_fingerprints, kgram_fingerprints_from_tokens, tokenize, winnowed_values
from engram.index import memo, postings, snapshot, stoplist
from engram.index.db import int_array
from engram.query.direct import (
    EDIT,
    JOIN_MIN_SHARE_NO_EDIT,
    KIND_WEIGHT,
    MAX_CANDIDATES,
    OTHER_WEIGHT,
    WINNOWED_ONLY_FROM,
    Holders,
    candidate_bar,
    expected_count,
    floor_of,
    joined_edits,
)

_KIND_WEIGHTS: Final = np.array([KIND_WEIGHT.get(i, OTHER_WEIGHT) for i in range(128)], dtype=np.float64)


def vector_hits(db: apsw.Connection, text: str, k: int, w: int, tokens: Tokens | None,
                snap: snapshot.Snapshot, file: str | None = None, holders: Holders | None = None,
                exclude: Sequence[int] = ()) -> dict[int, float]:
    """`direct.direct_hits` with numpy."""
    kgrams = kgram_fingerprints_from_tokens(tokenize(text) if tokens is None else tokens, k).values
    q = arrays.unique(kgrams)
    q = q[stoplist.searchable(db, postings.keys(q), snap)]
    winnowed = winnowed_values(kgrams, w)
    expected = expected_count(int(arrays.member(winnowed, q).sum()), len(q))
    if expected >= WINNOWED_ONLY_FROM:
        q = q[arrays.member(q, arrays.unique(winnowed))]
    held = postings.held_segments(db, snap.epoch, snap.segs, snap.seg_postings)
    keys, frags = postings.lookup(db, q, snap.segs, held)
    if len(exclude):
        mine = ~arrays.member(frags.astype(np.int64), np.asarray(exclude, dtype=np.int64))
        keys, frags = keys[mine], frags[mine]
    if not len(frags):
        return {}
    # Postings are distinct (fingerprint, fragment) pairs: a fragment's count is its shared fingerprints.
    ids, counts = arrays.unique_counts(frags.astype(np.int64))
    if holders is not None:
        holders.fill(ids)
    # A fragment's confidence is at most its share; the best one's at least the best share times
    # the lowest kind weight, and the floor is RELATIVE_FLOOR of the best: fragments whose share
    # is below that product of the best share cannot pass, nor be joined if it is also under
    # JOIN_MIN_SHARE (`candidate_bar`), so their kinds are never read (most candidates share one
    # or two common fingerprints with the span; a cold query reads a page each).
    share = np.minimum(1.0, counts / expected)
    possible = share >= candidate_bar(float(share.max()))
    all_ids, all_share, all_counts = ids, share, counts
    ids, counts = ids[possible], counts[possible]
    if len(ids) > MAX_CANDIDATES:
        top = np.argsort(-counts, kind="stable")[:MAX_CANDIDATES]
        ids, counts = ids[top], counts[top]
    kinds = memo.fragment_kinds(db, ids, snap.epoch)
    conf = np.minimum(1.0, counts / expected) * _KIND_WEIGHTS[kinds]
    best = float(conf.max())
    if best <= 0:
        return {}
    floor = floor_of(best)
    keep = conf >= floor
    edit = kinds == EDIT
    below = ~keep & edit
    passing = ids[keep & edit].tolist()
    out = {f: round(c, 4) for f, c in zip(ids[keep].tolist(), conf[keep].tolist())}
    if file is None or (below.sum() < 2 and passing):
        return out
    small = {} if passing else _weak(all_ids, all_share, all_counts, possible)

    def pairs(frs: set[int]) -> list[tuple[int, int]]:
        mine = arrays.member(frags, np.array(sorted(frs), dtype=frags.dtype))
        return list(zip(keys[mine].tolist(), frags[mine].tolist()))

    under_ids, under_conf = ids[below], conf[below]
    order = np.argsort(under_ids, kind="stable")
    under = dict(zip(under_ids[order].tolist(), under_conf[order].tolist()))
    joined = joined_edits(db, file, under, small, passing, expected, floor, pairs)
    if not joined:
        return out
    scored = [*zip(ids.tolist(), conf.tolist()), *small.items()]
    return {f: round(c, 4) for f, c in scored if f in out or f in joined}


def _weak(ids: np.ndarray, share: np.ndarray, counts: np.ndarray, possible: np.ndarray) -> dict[int, float]:
    """Fragment → share for those under the candidate bar that could still be joined as edits
    when no edit passes (`direct.JOIN_MIN_SHARE_NO_EDIT`), the most matched MAX_CANDIDATES of them,
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
