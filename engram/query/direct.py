"""Direct matches: the fragments whose text shares a span's fingerprints, with a confidence each.

The rule is stated once here; it runs in one of two ways. `direct_np.py` runs it with numpy,
which a process that already has numpy loaded (the language server, the MCP endpoint, a bulk
run, the benchmarks) does in well under a millisecond. A command-line `engram explain` of a short
span runs it here in plain Python: its few hundred fingerprints take about a millisecond, while
importing numpy first costs 50-100 ms on this machine, most of the command's time. Both give the
same answer (tests/test_explain.py compares them on real sessions). The rules the match applies
(which fingerprints count, kind weights, the floor, joined edits) are engram.query.ranking's.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, Union

import apsw

from engram.anchor import definition
from engram.index import layout, snapshot
from engram.index.sql import int_array
from engram.index.kinds import kinds_of
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

if TYPE_CHECKING:
    from engram.anchor.tokens import Tokens

#: A span's tokens: `Tokens` (numpy) or the plain list of token hashes (`definition.token_hashes`).
SpanTokens = Union["Tokens", list[int]]

# Longest text matched in plain Python while numpy is not loaded. Plain Python takes ~1.8 ms per
# KB of span at 1 GB (numpy ~0.55 ms, after its 50-100 ms import): a 400-line span (13 KB) 23 ms
# against numpy's 7 ms plus the import (bench/README.md, "CLI explain without numpy").
SMALL_TEXT: Final = 16_384


def use_small(text: str) -> bool:
    """Match `text` in plain Python? Only while numpy is not loaded (a command-line process), and
    for a short text: a process that has numpy, or a long text, is faster with it."""
    return len(text) <= SMALL_TEXT and "numpy" not in sys.modules


def span_tokens(text: str) -> SpanTokens:
    """The tokens of `text`, in the form `direct_hits` will match it in."""
    if use_small(text):
        return definition.token_hashes(text)
    from engram.anchor.tokens import tokenize  # noqa: PLC0415 - numpy

    return tokenize(text)


def direct_hits(db: apsw.Connection, text: str, k: int | None = None, w: int | None = None,
                tokens: SpanTokens | None = None, snap: snapshot.Snapshot | None = None,
                file: str | None = None, holders: Holders | None = None,
                exclude: Sequence[int] = (), trace: Trace | None = None,
                writes: Writes | None = None) -> dict[int, float]:
    """Fragment id → confidence of its direct match with `text` (k, w: the index's own by default;
    `tokens`: those of `text`, when the caller has them; `snap`: the index state the caller's
    query read; `file`: the repository path the text is at, when it is a file's span; `exclude`:
    fragments left out before anything is measured, ascending; `trace`: where the rules that
    changed the match are noted, for `--debug`; `writes`: filled with what each session whose
    edit is in the answer holds of the span in all its edits of `file` together, `session_writes`).

    Confidence is the share of the span's searched fingerprints a fragment holds — the winnowed
    ones (what a tape of the same text would hold) minus those the stop-list dropped — times its
    kind's weight; fragments below `floor_of` the best are dropped."""
    snap = snap or snapshot.read(db)
    if k is None or w is None:
        k, w = snap.k, snap.w
    if isinstance(tokens, list) or (tokens is None and use_small(text)):
        return _small_hits(db, definition.token_hashes(text) if tokens is None else tokens, k, w, snap, file,
                           holders, exclude, trace, writes, line_count(text))
    from engram.query.direct_np import vector_hits  # noqa: PLC0415 - numpy

    return vector_hits(db, text, k, w, tokens, snap, file, holders, exclude, trace, writes)


def _small_hits(db: apsw.Connection, hashes: list[int], k: int, w: int, snap: snapshot.Snapshot,
                file: str | None, holders: Holders | None = None, exclude: Sequence[int] = (),
                trace: Trace | None = None, writes: Writes | None = None, lines: int = 1) -> dict[int, float]:
    """`direct_hits` in plain Python (the order of the result is `vector_hits`' too: lineage walks
    its fragments in that order)."""
    kgrams = definition.kgram_values(hashes, k)
    key_of = {fp: layout.key(fp) for fp in set(kgrams)}
    every = sorted(key_of)
    ok, stop = _searchable(db, [key_of[fp] for fp in every])
    searched = [fp for fp, o in zip(every, ok) if o]
    left_out = [fp for fp, o in zip(every, ok) if not o]
    winnowed = definition.winnowed(kgrams, w)
    own = winnowed.intersection(searched)
    expected = expected_count(len(own), len(searched))
    q, only_own = searched, expected >= WINNOWED_ONLY_FROM
    if only_own:
        q, left_out = [fp for fp in q if fp in own], [fp for fp in left_out if fp in winnowed]
    keys = [key_of[fp] for fp in q]
    found, present = layout.lookup_small(db, keys, snap.segs)
    counts = _without(Counter(found), exclude)
    back = _restored(stop, [key_of[fp] for fp in left_out], len(own),
                     len(present.intersection(key_of[fp] for fp in own)))
    restored = [fp for fp in left_out if key_of[fp] in back] if back else []
    first_searched = len(searched)
    if back:
        counts += _without(Counter(layout.lookup_small(db, back, snap.segs)[0]), exclude)
        keys += back
        searched += restored
        expected = expected_count(len(winnowed.intersection(searched)), len(searched))
    if trace is not None:
        note_lookup(trace, searched=first_searched, winnowed=len(own), winnowed_only=only_own,
                    restored=len(restored), all_kgrams=not winnowed.intersection(searched) and bool(searched),
                    expected=expected)
    ratio = {f: counts[f] / expected for f in counts}
    rest = sorted({key_of[fp] for fp in left_out} - back)  # stop-listed, not looked up

    def pairs_of_own(frags: set[int]) -> list[tuple[int, int]]:
        return layout.lookup_pairs_small(db, rest, snap.segs, frags, layout.EDITS)

    mine: set[int] = set()
    if rest and own_file_unheld(db, file, ratio.items()):
        more = _without(Counter(layout.lookup_small(db, rest, snap.segs, layout.EDITS)[0]), exclude)
        mine = set(own_file_edits(db, file, more))
        expected_all = expected_count(len(winnowed), len(every))
        for f in mine:
            ratio[f] = own_file_share(counts[f], expected, counts[f] + more[f], expected_all)
            counts[f] += more[f]
        if trace is not None:
            note_own_file(trace, len(mine), len({k for k, _ in pairs_of_own(mine)}))
    if holders is not None:
        holders.fill(counts)
    if not counts:
        return {}
    # A fragment's confidence is at most its share; fragments whose share cannot reach the floor
    # whatever their kind, nor be joined, are never looked up (as in vector_hits).
    share = {f: min(1.0, ratio[f]) for f in sorted(counts)}
    bar = candidate_bar(max(share.values()))
    ids = [f for f, s in share.items() if s >= bar]
    weighable = len(ids)
    if len(ids) > MAX_CANDIDATES:
        ids = sorted(ids, key=lambda f: -counts[f])[:MAX_CANDIDATES]
    kinds = kinds_of(db, ids)
    conf = [share[f] * KIND_WEIGHT.get(kinds.get(f, 0), OTHER_WEIGHT) for f in ids]
    best = max(conf)
    if best <= 0:
        return {}
    floor = floor_of(best)
    edits = [(f, c) for f, c in zip(ids, conf) if kinds.get(f) == EDIT]
    if writes is not None:
        writes.edits.update(edits)
    below, passing = dict(sorted((f, c) for f, c in edits if c < floor)), [f for f, c in edits if c >= floor]
    small: dict[int, float] = {}
    if file is not None and not passing:
        small = {f: sh for f, sh in share.items() if JOIN_MIN_SHARE_NO_EDIT <= sh < bar}
        if len(small) > MAX_CANDIDATES:
            small = dict(sorted(sorted(small.items(), key=lambda fs: -counts[fs[0]])[:MAX_CANDIDATES]))
    def pairs(frags: set[int]) -> list[tuple[int, int]]:
        own = frags & mine
        return layout.lookup_pairs_small(db, keys, snap.segs, frags) + (pairs_of_own(own) if own else [])

    joined = joined_edits(db, file, below, small, passing, expected, floor, pairs)
    if trace is not None:
        note_scoring(trace, kinds=[kinds.get(f, 0) for f in ids], cut=weighable - len(ids),
                     best=best, floor=floor, kept=sum(c >= floor for c in conf), joined=len(joined))
    session_writes(db, file, [*passing, *joined], expected, lines, pairs, writes)
    return {f: round(c, 4) for f, c in [*zip(ids, conf), *small.items()] if c >= floor or f in joined}


def _searchable(db: apsw.Connection, keys: list[int]) -> tuple[list[bool], dict[int, int]]:
    """`stoplist.searchable` for a one-off query: which keys to look up — all but stop-listed ones,
    keeping at least half of the distinct keys (the least common stop-listed ones first) — and
    the stop-listed ones among them, with their tape counts."""
    distinct = sorted(set(keys))
    stop: dict[int, int] = dict(db.execute("SELECT fp, tapes FROM stoplist WHERE fp IN carray(?)",
                                           (int_array(distinct),))) if distinct else {}
    mask = [key not in stop for key in keys]
    if not stop:
        return mask, stop
    want = (len(distinct) + 1) // 2
    kept = len({key for key, ok in zip(keys, mask) if ok})
    if kept >= want:
        return mask, stop
    extra = set(sorted(sorted(stop), key=stop.__getitem__)[: want - kept])
    return [ok or key in extra for key, ok in zip(keys, mask)], stop


def _without(counts: Counter[int], exclude: Sequence[int]) -> Counter[int]:
    """`counts` without the fragments `exclude` (a guardian reviewer's, `explain.run`)."""
    for f in exclude:
        counts.pop(f, None)
    return counts


def _restored(stop: dict[int, int], left_out: list[int], searched: int, found: int) -> set[int]:
    """`stoplist.restored` for a one-off query: which of the stop-listed keys `left_out` to look
    up after all, when `found` of the `searched` winnowed keys have postings."""
    if found * 2 >= searched:
        return set()
    distinct = sorted(set(left_out))
    more = (found + len(distinct) + 1) // 2 - found
    return set(sorted(distinct, key=stop.__getitem__)[:more]) if more > 0 else set()
