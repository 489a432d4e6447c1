"""Direct matches: the fragments whose text shares a span's fingerprints, with a confidence each.

The rule is stated once here; it runs in one of two ways. `direct_np.py` runs it with numpy,
which a process that already has numpy loaded (the language server, the MCP endpoint, a bulk
run, the benchmarks) does in well under a millisecond. A command-line `engram explain` of a short
span runs it here in plain Python: its few hundred fingerprints take about a millisecond, while
importing numpy first costs 50-100 ms on this machine, most of the command's time. Both give the
same answer (tests/test_explain.py compares them on real sessions).
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final, Union

import apsw

from engram.anchor import definition
from engram.index import layout, snapshot
from engram.index.sql import int_array
from engram.index.kinds import CODE_CARRIED, KIND_NO, kinds_of
from engram.tape import events as E

if TYPE_CHECKING:
    from engram.anchor.tokens import Tokens

#: A span's tokens: `Tokens` (numpy) or the plain list of token hashes (`definition.token_hashes`).
SpanTokens = Union["Tokens", list[int]]

# A tool call weighs 0.9: under an edit or a read of the same text, as the specification has it,
# but close enough that the call of a writer's edit (a Write's content, an Edit's new string, a
# patch's code) still passes the floor beside its edit when a later reader holds a little more
# of the span. At 0.85 it fell under whenever the span had changed since: the writer was left
# one touch, tied with every reader, and came after them, being the oldest (bench/README.md,
# "A tool call's weight": R@1 over every mutation up on 8 of 10 repositories, down on none).
# The lines an edit held without changing them (`code.carried`: a patch's context, what a
# whole-file Write kept) weigh what the edit's call holding them weighs: at most a read's, and
# never more than the call that carried them already did (a Write's call holds the whole file).
KIND_WEIGHT: Final = {KIND_NO[E.CODE_EDIT]: 1.0, KIND_NO[E.CODE_READ]: 1.0, KIND_NO[E.TOOL_CALL]: 0.9,
                      KIND_NO[E.MSG_OUT]: 0.7, KIND_NO[E.MSG_IN]: 0.7, KIND_NO[E.TOOL_RESULT]: 0.6,
                      KIND_NO[E.SPAN_LINK]: 1.0, KIND_NO[CODE_CARRIED]: 0.9}
OTHER_WEIGHT: Final = 0.6  # any other kind, and a fragment missing from the index
EDIT: Final = KIND_NO[E.CODE_EDIT]
MIN_WEIGHT: Final = min(OTHER_WEIGHT, *KIND_WEIGHT.values())
MIN_CONFIDENCE_DIRECT: Final = 0.2  # a fragment weaker than this is not a touch
# An edit holding at least this share of a span may be kept with its session's other edits of
# the file (`joined_edits`), though under the floor alone: one that would be a touch on its own.
# (bench/provenance.py, as the only tier: 0.1 shows the writer's edit in 6 more of 2,290
# queries, 0.3 in 1 fewer, every other figure the same; 0.05 for every span weighed more
# candidates in every query, p50 +0.3 ms on the 1 GB store's spans.)
JOIN_MIN_SHARE: Final = MIN_CONFIDENCE_DIRECT
# ... and when no edit passes at all (the span is held only by reads, messages or tool calls),
# an edit holding this share: a long span, a whole file, is written in many small edits. Only
# then are the fragments under the candidate bar weighed (bench/provenance.py: the writer's edit
# shown in 2,284 of 2,290 queries, against 2,275 with one tier; every other figure the same).
JOIN_MIN_SHARE_NO_EDIT: Final = 0.05
# ... nor one weaker than this share of the best fragment: chosen with bench/provenance.py, where
# 0.35 let sessions with many weak matches (shared test boilerplate) outvote the writer.
RELATIVE_FLOOR: Final = 0.8
# A span with at least this many searchable winnowed fingerprints looks up only those: the ones a
# tape of the same text holds wherever a winnowing window lies inside the span. That halves the
# posting rows a 20-line span reads (warm explain at 1 GB: 0.98 → 0.80 ms). Shorter spans look up
# every k-gram: edited, they keep the writer found through k-grams the tape's windows happened to
# pick (bench/provenance.py, 3-line spans edited 20% on every line: R@1 0.82 with every k-gram,
# 0.73 with the winnowed ones only; from 24 on, every figure there is unchanged).
WINNOWED_ONLY_FROM: Final = 24
MAX_CANDIDATES: Final = 2000
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


def expected_count(winnowed_searched: int, searched: int) -> int:
    """How many of the searched fingerprints a tape holding the span's text is sure to hold: its
    winnowed ones. When the stop-list dropped every one of those (a short span of common code,
    `let timer = null;` twice), nothing is sure; then all `searched` k-grams count, so one shared
    k-gram is a weak match rather than a whole one. Counting it whole let any session holding
    that k-gram in another file take the answer at 1.0 while the writer, whose text the winnowing
    had sampled elsewhere, held none of them; now such a span is answered as one with weak
    evidence of its own, by its neighbours (`resolve`)."""
    return winnowed_searched if winnowed_searched else max(1, searched)


def candidate_bar(best_share: float) -> float:
    """The least share a fragment needs to be considered at all: what could pass the floor as the
    weakest kind, or be joined as an edit."""
    return min(RELATIVE_FLOOR * MIN_WEIGHT * best_share, JOIN_MIN_SHARE)


def floor_of(best: float) -> float:
    """The weakest confidence kept when the strongest is `best`."""
    return min(best, max(MIN_CONFIDENCE_DIRECT * min(1.0, best / 0.5), RELATIVE_FLOOR * best))


class Holders:
    """The fragments holding any of a span's searched fingerprints, however few: what a lineage
    walk may step back to (`explain.lineage_walk`). Filled by `direct_hits`."""

    def __init__(self) -> None:
        self._ids: Any = ()  # as the lookup left them: a Counter, or an ascending numpy array

    def fill(self, ids: Any) -> None:
        self._ids = ids  # kept, not copied: a large span is held by many fragments

    def __contains__(self, frag: int) -> bool:
        if hasattr(self._ids, "searchsorted"):
            i = int(self._ids.searchsorted(frag))
            return i < len(self._ids) and int(self._ids[i]) == frag
        return frag in self._ids


def direct_hits(db: apsw.Connection, text: str, k: int | None = None, w: int | None = None,
                tokens: SpanTokens | None = None, snap: snapshot.Snapshot | None = None,
                file: str | None = None, holders: Holders | None = None,
                exclude: Sequence[int] = ()) -> dict[int, float]:
    """Fragment id → confidence of its direct match with `text` (k, w: the index's own by default;
    `tokens`: those of `text`, when the caller has them; `snap`: the index state the caller's
    query read; `file`: the repository path the text is at, when it is a file's span; `exclude`:
    fragments left out before anything is measured, ascending).

    Confidence is the share of the span's searched fingerprints a fragment holds — the winnowed
    ones (what a tape of the same text would hold) minus those the stop-list dropped — times its
    kind's weight; fragments below `floor_of` the best are dropped."""
    snap = snap or snapshot.read(db)
    if k is None or w is None:
        k, w = snap.k, snap.w
    if isinstance(tokens, list) or (tokens is None and use_small(text)):
        return _small_hits(db, definition.token_hashes(text) if tokens is None else tokens, k, w, snap, file,
                           holders, exclude)
    from engram.query.direct_np import vector_hits  # noqa: PLC0415 - numpy

    return vector_hits(db, text, k, w, tokens, snap, file, holders, exclude)


def _small_hits(db: apsw.Connection, hashes: list[int], k: int, w: int, snap: snapshot.Snapshot,
                file: str | None, holders: Holders | None = None, exclude: Sequence[int] = ()) -> dict[int, float]:
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
    q = searched
    if expected >= WINNOWED_ONLY_FROM:
        q, left_out = [fp for fp in q if fp in own], [fp for fp in left_out if fp in winnowed]
    keys = [key_of[fp] for fp in q]
    found, present = layout.lookup_small(db, keys, snap.segs)
    counts = _without(Counter(found), exclude)
    back = _restored(stop, [key_of[fp] for fp in left_out], len(own),
                     len(present.intersection(key_of[fp] for fp in own)))
    if back:
        counts += _without(Counter(layout.lookup_small(db, back, snap.segs)[0]), exclude)
        keys += back
        searched += [fp for fp in left_out if key_of[fp] in back]
        expected = expected_count(len(winnowed.intersection(searched)), len(searched))
    if holders is not None:
        holders.fill(counts)
    if not counts:
        return {}
    # A fragment's confidence is at most its share; fragments whose share cannot reach the floor
    # whatever their kind, nor be joined, are never looked up (as in vector_hits).
    share = {f: min(1.0, counts[f] / expected) for f in sorted(counts)}
    bar = candidate_bar(max(share.values()))
    ids = [f for f, s in share.items() if s >= bar]
    if len(ids) > MAX_CANDIDATES:
        ids = sorted(ids, key=lambda f: -counts[f])[:MAX_CANDIDATES]
    kinds = kinds_of(db, ids)
    conf = [share[f] * KIND_WEIGHT.get(kinds.get(f, 0), OTHER_WEIGHT) for f in ids]
    best = max(conf)
    if best <= 0:
        return {}
    floor = floor_of(best)
    edits = [(f, c) for f, c in zip(ids, conf) if kinds.get(f) == EDIT]
    below, passing = dict(sorted((f, c) for f, c in edits if c < floor)), [f for f, c in edits if c >= floor]
    small: dict[int, float] = {}
    if file is not None and not passing:
        small = {f: sh for f, sh in share.items() if JOIN_MIN_SHARE_NO_EDIT <= sh < bar}
        if len(small) > MAX_CANDIDATES:
            small = dict(sorted(sorted(small.items(), key=lambda fs: -counts[fs[0]])[:MAX_CANDIDATES]))
    joined = joined_edits(db, file, below, small, passing, expected, floor,
                          lambda frags: layout.lookup_pairs_small(db, keys, snap.segs, frags))
    return {f: round(c, 4) for f, c in [*zip(ids, conf), *small.items()] if c >= floor or f in joined}


def joined_edits(db: apsw.Connection, file: str | None, below: dict[int, float], small: dict[int, float],
                 passing: list[int], expected: int, floor: float,
                 pairs: Callable[[set[int]], Iterable[tuple[int, int]]]) -> set[int]:
    """Edits kept though under the floor: those of the span's own `file` whose session's edits of
    it hold `floor` of the span together, in a session none of whose edits passes on its own.

    `below`: code.edit fragments under the floor → confidence (their share); `small`: fragments
    of any kind under the candidate bar → share, given when no edit passes (`passing` is empty);
    both in ascending id order. A member holds at least JOIN_MIN_SHARE, or JOIN_MIN_SHARE_NO_EDIT
    when no edit passes.

    A span written by two edits (a function, then the one added after it) is held whole only by
    what came later, typically a read of the file: alone, each edit falls under the floor, and
    the session that wrote the span was shown by its read only, or, when another session read the
    file, not at all. A session with an edit that passes is already shown writing the span, and
    edits of other files are weaker evidence: joining either let a session that wrote the same
    3 lines of test boilerplate elsewhere outrank the span's writer on touches
    (bench/provenance.py). Each kept edit keeps its own confidence. `pairs(frags)`: the (key,
    fragment) postings of the span's searched fingerprints that these fragments hold."""
    least = JOIN_MIN_SHARE if passing else JOIN_MIN_SHARE_NO_EDIT
    members = {f: c for f, c in [*below.items(), *small.items()] if c >= least}
    if len(members) < 2 or file is None or sum(members.values()) < floor:
        return set()  # (no group can hold more than the sum of its members)
    found: dict[tuple[str, str], list[int]] = defaultdict(list)
    writing: set[tuple[str, str]] = set()
    for fid, kind, harness, session, same_file in db.execute(
            "SELECT f.id, f.kind, t.harness, t.session_id, f.file = (SELECT id FROM files WHERE path = ?)"
            " FROM fragments f JOIN tapes t ON t.no = f.tape WHERE f.id IN carray(?) ORDER BY f.id",
            (file, int_array([*members, *passing]))):
        if fid not in members:
            writing.add((harness, session))
        elif same_file and kind == EDIT:
            found[(harness, session)].append(fid)
    groups = {g: group for g, group in found.items() if len(group) > 1 and g not in writing}
    if not groups:
        return set()
    held: dict[int, set[int]] = defaultdict(set)
    for key, frag in pairs({f for group in groups.values() for f in group}):
        held[frag].add(key)
    joined: set[int] = set()
    for group in groups.values():
        together = set().union(*(held[f] for f in group))
        if min(1.0, len(together) / expected) * KIND_WEIGHT[EDIT] >= floor:
            joined.update(group)
    return joined


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
