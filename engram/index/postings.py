"""Postings: fingerprint → fragment ids, stored as blobs in segments.

Layout (measured in bench/scale.py; the constants are in layout.py): a fingerprint is stored as
its key, its top BUCKET_BITS bits above its low 32 bits — 48 of its 64 bits, enough that a false
match needs ~2^48/postings draws. The key's top BUCKET_BITS + ROW_BITS bits pick a row: each
segment has one row per such value, `(id, blob)` with `id = seg << ROW_KEY_BITS | row`, and the
blob is two little-endian uint32 arrays of equal length — the keys' low 32 bits, then the
fragment ids — in key order. Compared with one row per (fingerprint, fragment) this removes the
per-row key and overhead that dominate when most fingerprints occur once.

The row id is the table's rowid, so a segment's rows are one contiguous range: a new segment is
appended at the end of the table, a merge deletes ranges, and a query reads a row with one
b-tree search. (A secondary index on (row, seg) took an entry per row in pages shared with every
other segment: an append dirtied most of them, ~40 ms of commit per 1 MB session at 1 GB.)

New tapes are indexed into a new segment (insert-only, no read-modify-write), so appending a
session costs its own size; segments are merged when there are more than MAX_SEGMENTS (see
merge_segments).

`edit_postings` repeats, in the same layout and under the same segment ids, the postings of
code.edit fragments (7.5% of all at 1 GB): lineage looks an edit's sources up there. Looked up among all
postings, an append's edits read rows a dozen times larger and then had to sort thousands of
candidate reads and messages out by kind (bench/README.md, "Edit postings apart").
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Final

import apsw
import numpy as np

from engram import arrays
from engram.index import memo
from engram.index.layout import BUCKET_BITS, ROW_BITS, ROW_KEY_BITS, ROW_MASK
from engram.index.sql import int_array

log = logging.getLogger(__name__)

_SHIFT: Final = np.uint64(64 - BUCKET_BITS)
_LOW: Final = np.uint64(0xFFFFFFFF)
MAX_SEGMENTS: Final = 6
# Segments an append may leave when a long-lived process merges them once it is idle (`Indexer`,
# merge_later): its appends then never wait for a merge, and a burst of them still cannot leave
# queries more than this many statements per lookup.
MAX_SEGMENTS_UNMERGED: Final = 2 * MAX_SEGMENTS
ALL: Final = "postings"
EDITS: Final = "edit_postings"  # the code.edit fragments' postings (the module docstring)
# Rows a lookup reads and matches at a time. A span of a whole large file (or a bulk run's
# lineage lookup) wants most rows of every segment: read at once, that was the whole index held
# twice in memory (a 20,000-line span at 1 GB: 335 MB resident); a 20-line span wants ~110.
LOOKUP_ROWS: Final = 8192


def split(fps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bucket, low32) of int64 fingerprints."""
    u = fps.astype(np.int64, copy=False).view(np.uint64)
    return (u >> _SHIFT).astype(np.int64), (u & _LOW).astype(np.uint32)


def keys(fps: np.ndarray) -> np.ndarray:
    """The 52-bit identity of each fingerprint as stored: bucket << 32 | low."""
    b, low = split(fps)
    return (b << 32) | low.astype(np.int64)


def sort_keys(key: np.ndarray, frags: np.ndarray, distinct: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(key, fragment) postings in stored order: by key, exact duplicates dropped.

    One stable sort by key groups the rows — several times faster than a three-key lexsort on
    millions of postings. Readers do not depend on the order of fragments within a key; a flush
    passes them ascending (so duplicates are adjacent), a merge passes disjoint segments."""
    frags = frags.astype(np.uint32, copy=False)
    lo = int(frags.min()) if len(frags) else 0
    if len(frags) and int(frags.max()) - lo < 1 << 16 and bool(np.all(frags[1:] >= frags[:-1])):
        # A flush: fragments ascending and few, so the stable order by key is the order by
        # (key, fragment), and both fit one uint64 (48 + 16 bits): a plain sort, ~5x faster
        # than an argsort of 4 M keys.
        packed = np.sort((key.astype(np.uint64) << np.uint64(16)) | (frags - np.uint32(lo)).astype(np.uint64))
        key = (packed >> np.uint64(16)).astype(np.int64)
        frags = (packed & np.uint64(0xFFFF)).astype(np.uint32) + np.uint32(lo)
    else:
        order = np.argsort(key, kind="stable")
        key, frags = key[order], frags[order]
    if distinct:  # a merge: segments hold disjoint (key, fragment) pairs, nothing to drop
        return key, frags
    # Drop exact duplicates (two fingerprints of one fragment that agree on the stored 48 bits).
    keep = np.ones(len(key), dtype=bool)
    keep[1:] = (key[1:] != key[:-1]) | (frags[1:] != frags[:-1])
    return key[keep], frags[keep]


def write_sorted(db: apsw.Connection, seg: int, key: np.ndarray, frags: np.ndarray, table: str = ALL) -> int:
    """Insert postings already in stored order (`sort_keys`) as segment `seg`; returns the rows."""
    return _write_into(db, table, seg, key, frags)


# Postings past which `write_runs` sorts and lays out parts of the key space in threads.
PARALLEL_POSTINGS: Final = 1 << 20


def write_runs(db: apsw.Connection, seg: int, runs: list[tuple[np.ndarray, np.ndarray]],
               parts: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Insert runs of postings, each in stored order and no two sharing a (key, fragment), as
    segment `seg`; returns the segment's postings in stored order.

    A bulk run's last step, with nothing else left to do on a 2-core machine: one core idled
    while the other merged and laid out 16 M postings (~3 s at 1 GB). The key space is cut at
    row boundaries into `parts`, which are merged and laid out in threads (numpy lets go of the
    GIL for its sorts and copies) and inserted in order as they come: the same rows as one merge."""
    total = sum(len(r[0]) for r in runs)
    if len(runs) == 1 or total < PARALLEL_POSTINGS or parts < 2:
        key, frags = runs[0] if len(runs) == 1 else sort_keys(np.concatenate([r[0] for r in runs]),
                                                             np.concatenate([r[1] for r in runs]), distinct=True)
        write_sorted(db, seg, key, frags)
        return key, frags
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    largest = max(runs, key=lambda r: len(r[0]))[0]
    shift = 32 - ROW_BITS
    cut_keys = [(int(largest[len(largest) * i // parts]) >> shift) << shift for i in range(1, parts)]
    cuts = [[0, *np.searchsorted(r[0], cut_keys).tolist(), len(r[0])] for r in runs]

    def part(i: int) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        key, frags = sort_keys(np.concatenate([r[0][c[i]:c[i + 1]] for r, c in zip(runs, cuts)]),
                               np.concatenate([r[1][c[i]:c[i + 1]] for r, c in zip(runs, cuts)]), distinct=True)
        return key, frags, layout_rows(key, frags)

    keys: list[np.ndarray] = []
    frags: list[np.ndarray] = []
    with ThreadPoolExecutor(max_workers=parts, thread_name_prefix="engram-postings") as pool:
        for key, frag, laid in pool.map(part, range(parts)):
            _insert_rows(db, ALL, seg, *laid)
            keys.append(key)
            frags.append(frag)
    return np.concatenate(keys), np.concatenate(frags)


def layout_rows(key: np.ndarray, frags: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(rows, starts, sizes, words) of postings in stored order: each stored row's number, first
    posting and number of postings, and every row's blob laid out in one buffer of words (row i
    is `words[2 * starts[i]:2 * (starts[i] + sizes[i])]`).

    Temporaries are few and narrow (32-bit positions, a mask rather than a difference): at
    1 GB a bulk run lays out 16 M postings, and on the benchmark VM faulting in fresh memory,
    not the arithmetic, was most of the time (half the time with half the temporaries)."""
    n = len(key)
    row = key >> (32 - ROW_BITS)
    first = np.empty(n, dtype=bool)
    first[:1] = True
    np.not_equal(row[1:], row[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    rows = row[starts]
    del row, first
    sizes = np.diff(np.append(starts, n))
    # Entry j of a row starting at s goes to s + j, its fragment `size` words further: rows are
    # then slices of one buffer, not two copies and a concatenation per row (a third of an
    # append's posting write).
    pos = np.int32 if 2 * n < 1 << 31 else np.int64
    at = np.repeat(starts.astype(pos), sizes)
    at += np.arange(n, dtype=pos)
    words = np.empty(2 * n, dtype="<u4")
    words[at] = key.astype(np.uint32)  # the low 32 bits
    at += np.repeat(sizes.astype(pos), sizes)
    words[at] = frags
    return rows, starts, sizes, words


def _write_into(db: apsw.Connection, table: str, seg: int, key: np.ndarray, frags: np.ndarray) -> int:
    if len(key) == 0:
        return 0
    return _insert_rows(db, table, seg, *layout_rows(key, frags))


def _insert_rows(db: apsw.Connection, table: str, seg: int, rows: np.ndarray, starts: np.ndarray, sizes: np.ndarray,
                 words: np.ndarray) -> int:
    """Insert rows laid out by `layout_rows` into segment `seg`; returns the rows."""
    if not len(rows):
        return 0
    buf = memoryview(words).cast("B")  # the rows' blobs are slices of it, bound without a copy
    ids = (rows | (seg << ROW_KEY_BITS)).tolist()
    offsets = (8 * starts).tolist()
    ends = (8 * (starts + sizes)).tolist()
    db.executemany(f"INSERT INTO {table}(id, blob) VALUES(?, ?)",
                   zip(ids, map(buf.__getitem__, map(slice, offsets, ends))))
    return len(starts)


def segment_range(seg: int) -> tuple[int, int]:
    """[first, end) of the row ids of segment `seg`."""
    return seg << ROW_KEY_BITS, (seg + 1) << ROW_KEY_BITS


def lookup(db: apsw.Connection, fps: np.ndarray, segs: Sequence[int] | None = None,
           held: Held | None = None, table: str = ALL) -> tuple[np.ndarray, np.ndarray]:
    """All postings of the given fingerprints (in the given segments, default all) in `table`:
    (key, fragment id) arrays, one entry per posting. `held`: segments of `table` already in
    memory (`held_segments`), searched there instead of read."""
    if segs is None:
        segs = [r[0] for r in db.execute("SELECT seg FROM segments ORDER BY seg")]
    if len(fps) == 0 or not segs:
        return np.empty(0, np.int64), np.empty(0, np.uint32)
    qkeys = arrays.unique(keys(fps))
    if held is None:
        return _lookup_read(db, qkeys, segs, table)
    found = [lookup_sorted(qkeys, held.keys, held.frags)]
    rest = [s for s in segs if s not in held.segs]
    if rest:
        found.append(_lookup_read(db, qkeys, rest, table))
    return np.concatenate([k for k, _ in found]), np.concatenate([f for _, f in found])


def lookup_sorted(qkeys: np.ndarray, keys: np.ndarray, frags: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The postings of `qkeys` among postings held in memory, `keys` ascending: (key, fragment)."""
    lo = np.searchsorted(keys, qkeys, "left")
    idx = arrays.ranges(lo, np.searchsorted(keys, qkeys, "right") - lo)
    return keys[idx], frags[idx]


def _lookup_read(db: apsw.Connection, qkeys: np.ndarray, segs: Sequence[int],
                 table: str) -> tuple[np.ndarray, np.ndarray]:
    """`lookup` of `qkeys` (sorted, distinct) by reading the segments' rows."""
    row_of = qkeys >> (32 - ROW_BITS)
    wanted = arrays.unique(row_of)
    if len(wanted) <= LOOKUP_ROWS:
        return _lookup_rows(db, qkeys, wanted, segs, table)
    found_keys: list[np.ndarray] = []
    found_frags: list[np.ndarray] = []
    for i in range(0, len(wanted), LOOKUP_ROWS):
        some = wanted[i:i + LOOKUP_ROWS]
        lo, hi = np.searchsorted(row_of, some[0], "left"), np.searchsorted(row_of, some[-1], "right")
        k, f = _lookup_rows(db, qkeys[lo:hi], some, segs, table)
        found_keys.append(k)
        found_frags.append(f)
    return np.concatenate(found_keys), np.concatenate(found_frags)


def _lookup_rows(db: apsw.Connection, qkeys: np.ndarray, wanted: np.ndarray,
                 segs: Sequence[int], table: str) -> tuple[np.ndarray, np.ndarray]:
    """The postings of `qkeys` (sorted) in rows `wanted` of every segment of `segs`."""
    rows: list[tuple[int, bytes]] = []
    for seg in segs:  # one statement per segment: a single list of every (segment, row) is slower
        # Bound as one array (carray): no per-value binding, and one statement text whatever the
        # number of rows, so SQLite's statement cache answers instead of a fresh prepare.
        rows += db.execute(f"SELECT id, blob FROM {table} WHERE id IN carray(?)",
                           (int_array((seg << ROW_KEY_BITS) | wanted),)).fetchall()
    if not rows:
        return np.empty(0, np.int64), np.empty(0, np.uint32)
    return _match_rows(rows, qkeys)


def _row_keys(rows: list[tuple[int, bytes]]) -> np.ndarray:
    """The key bits above the low 32 of each row (its id without the segment and row bits)."""
    return (np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)) & ROW_MASK) >> ROW_BITS


def _match_rows(rows: list[tuple[int, bytes]], qkeys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The postings of `qkeys` (sorted) inside rows, without decoding every entry.

    A query's rows hold ~100× more postings than it matches. Each 32-bit word of the rows (low
    halves and fragment halves alike) is compared with the query's low halves in one binary
    search; the few words that agree are then checked to be a low half of a row whose bucket
    matches, and their fragment read from the row's second half."""
    sizes = np.fromiter((len(r[1]) // 8 for r in rows), dtype=np.int64, count=len(rows))
    buckets = _row_keys(rows)
    flat = np.frombuffer(b"".join(r[1] for r in rows), dtype="<u4")
    starts = np.concatenate(([0], np.cumsum(2 * sizes)[:-1]))  # u4 offset of each row's low half
    qlow = arrays.unique((qkeys & 0xFFFFFFFF).astype(np.uint32))
    # A 65,536-entry table of the query's low 16 bits rules out nearly every word in one gather,
    # three times faster than a binary search of each word; survivors are then checked exactly.
    table = np.zeros(1 << 16, dtype=bool)
    table[qlow & 0xFFFF] = True
    cand = np.flatnonzero(table[flat & 0xFFFF])
    vals = flat[cand]
    pos = np.minimum(np.searchsorted(qlow, vals), len(qlow) - 1)
    cand = cand[qlow[pos] == vals]
    row = np.searchsorted(starts, cand, "right") - 1
    in_low = cand < starts[row] + sizes[row]
    cand, row = cand[in_low], row[in_low]
    keys = (buckets[row] << np.int64(32)) | flat[cand].astype(np.int64)
    kpos = np.minimum(np.searchsorted(qkeys, keys), len(qkeys) - 1)
    hit = qkeys[kpos] == keys
    return keys[hit], flat[cand[hit] + sizes[row[hit]]].astype(np.uint32)


def _decode_rows(rows: list[tuple[int, bytes]], buckets: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(key, fragment) arrays of many rows, decoded in one vector pass (`buckets`: each row's
    key bits above the low 32, when the rows are not in the current layout)."""
    if buckets is None:
        buckets = _row_keys(rows)
    sizes = np.fromiter((len(r[1]) // 8 for r in rows), dtype=np.int64, count=len(rows))  # entries per row
    flat = np.frombuffer(b"".join(r[1] for r in rows), dtype="<u4")
    starts = np.concatenate(([0], np.cumsum(2 * sizes)[:-1]))  # u4 offset of each row's low half
    row_of = np.repeat(np.arange(len(rows)), sizes)
    low_idx = arrays.ranges(starts, sizes)
    keys = (buckets[row_of] << np.int64(32)) | flat[low_idx].astype(np.int64)
    return keys, flat[low_idx + sizes[row_of]].astype(np.uint32)


def all_postings(db: apsw.Connection, segs: list[int] | None = None,
                 table: str = ALL) -> tuple[np.ndarray, np.ndarray]:
    """Every posting (of the given segments) in `table`: (key, fragment) arrays, segment by
    segment, each in key order. Used by merge and stop-list.

    Decoded in one vector pass over all blobs: a large store has millions of small rows."""
    if segs is None:
        rows = db.execute(f"SELECT id, blob FROM {table} ORDER BY id").fetchall()
    else:
        rows = []
        for seg in sorted(segs):
            rows += db.execute(f"SELECT id, blob FROM {table} WHERE id >= ? AND id < ? ORDER BY id",
                               segment_range(seg)).fetchall()
    if not rows:
        return np.empty(0, np.int64), np.empty(0, np.uint32)
    return _decode_rows(rows)


def from_v6(db: apsw.Connection) -> int:
    """Rewrite schema 6 postings — `(bucket, seg, blob)` rows of the keys' top 16 bits, with an
    index on (bucket, seg) — in the current layout (inside the caller's transaction); the
    postings themselves are unchanged. Returns the postings rewritten."""
    db.execute("CREATE TABLE postings_new(id INTEGER PRIMARY KEY, blob BLOB NOT NULL)")
    total = 0
    for (seg,) in db.execute("SELECT DISTINCT seg FROM postings ORDER BY seg").fetchall():
        rows = db.execute("SELECT bucket, blob FROM postings WHERE seg=? ORDER BY bucket", (seg,)).fetchall()
        key, frags = _decode_rows(rows, np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)))
        key, frags = sort_keys(key, frags, distinct=True)
        _write_into(db, "postings_new", seg, key, frags)
        total += len(key)
    db.execute("DROP TABLE postings")  # its index goes with it
    db.execute("ALTER TABLE postings_new RENAME TO postings")
    return total


def key_to_fp(k: np.ndarray) -> np.ndarray:
    """A stored key back to an int64 carrying the same bucket and low bits (middle bits zero)."""
    bucket = (k >> 32).astype(np.uint64)
    low = (k & 0xFFFFFFFF).astype(np.uint64)
    return ((bucket << _SHIFT) | low).view(np.int64)


def next_segment(db: apsw.Connection) -> int:
    """A segment id never used before in this index (inside the caller's write transaction).

    Ids used to be max + 1, so a merge of the newest segments gave its result the id of one it
    replaced; per-process copies of small segments (`held_segments`) are keyed by id and must
    never see a reused one."""
    top = int(db.execute("SELECT coalesce(max(seg), 0) + 1 FROM segments").fetchall()[0][0])
    row = db.execute("SELECT value FROM state WHERE key='next_seg'").fetchall()
    seg = max(top, int(row[0][0]) if row else 0)
    db.execute("INSERT OR REPLACE INTO state(key, value) VALUES('next_seg', ?)", (seg + 1,))
    return seg


# Segments of at most this many postings are held decoded in memory by a long-lived process (the
# language server, the MCP endpoint), from its second query on: appended sessions sit in a few
# small segments beside the large one, and reading each by SQL cost a statement and ~46 b-tree
# probes per query, nearly all misses (bench/README.md, "One read per query, and small segments
# in memory").
HELD_POSTINGS: Final = 1_000_000  # (12 bytes each in memory)
HELD_TOTAL: Final = 2_000_000  # the smallest segments first, up to this many postings in all


@dataclass(frozen=True)
class Held:
    """Small segments held in memory as one (key, fragment) array pair in key order.

    One pair, not one per segment: with five small segments beside the large one (an index a few
    appends after its last merge), a search per segment made a warm explain 11% slower."""

    sizes: tuple[tuple[int, int], ...]  # (segment, postings), ascending
    keys: np.ndarray
    frags: np.ndarray

    @cached_property
    def segs(self) -> frozenset[int]:
        """The segments held (asked by every lookup: computed once)."""
        return frozenset(seg for seg, _ in self.sizes)


_held: dict[tuple[str, str], Held] = {}  # by (index file, epoch)


def held_segments(db: apsw.Connection, epoch: str, segs: Sequence[int], sizes: Sequence[int]) -> Held | None:
    """The small segments among `segs` (`sizes`: their postings), copied on first need in this
    process; None on a process's first query (see memo.first_use: a one-shot command reads only
    its own rows). Keyed by segment id and size: segments are immutable and their ids are never
    reused (`next_segment`), so after an append only the new segment is read, and merged into
    the copy.

    Copies are made only inside a transaction (a query's `db.reading`): `segs` and the rows
    copied must come from one state of the index, or a merge committed in between would leave
    an empty copy of a segment the list still names."""
    if not db.in_transaction:
        return None
    small: list[tuple[int, int]] = []
    total = 0
    for n, seg in sorted((n, s) for s, n in zip(segs, sizes) if n <= HELD_POSTINGS):
        if total + n > HELD_TOTAL:
            break
        small.append((seg, n))
        total += n
    if not small or memo.first_use(("held", db.filename, epoch)):
        return None
    small.sort()
    want = tuple(small)
    key = (db.filename, epoch)
    got = _held.get(key)
    if got is not None and got.sizes == want:
        return got
    for stale in [k for k in list(_held) if k[0] == db.filename and k != key]:
        _held.pop(stale, None)  # an index rebuilt since (another thread may be here too)
    base = got if got is not None and set(got.sizes) <= set(want) else None  # else a merge took some
    new = [seg for seg, n in want if base is None or (seg, n) not in base.sizes]
    k, f = all_postings(db, new)
    if base is not None:
        k, f = np.concatenate((base.keys, k)), np.concatenate((base.frags, f))
    order = np.argsort(k, kind="stable")  # runs already in key order: a merge of runs
    got = _held[key] = Held(want, k[order], f[order])
    return got


def forget_held() -> None:
    _held.clear()


memo.on_forget(forget_held)


def merge_segments(db: apsw.Connection, most: int = MAX_SEGMENTS) -> tuple[np.ndarray, np.ndarray] | None:
    """Keep the number of segments small (inside the caller's write transaction).

    Past `most` segments, the smallest are merged down to MAX_SEGMENTS, together with any next
    one no more than twice their total: appends then rewrite small segments only, and each
    posting is rewritten O(log n) times as the store grows, never the whole index per append.
    Returns the merged segment's postings in stored order, or None when nothing was merged.
    """
    segs = db.execute("SELECT seg, postings FROM segments ORDER BY postings, seg").fetchall()
    if len(segs) > most:
        j = len(segs) - MAX_SEGMENTS + 1
        total = sum(n for _, n in segs[:j])
        while j < len(segs) and segs[j][1] <= 2 * total:
            total += segs[j][1]
            j += 1
        victims = [s for s, _ in segs[:j]]
    else:
        victims = []
    if len(victims) < 2:
        return None
    victims.sort()
    marks = ",".join("?" * len(victims))
    tapes = int(db.execute(f"SELECT coalesce(sum(tapes), 0) FROM segments WHERE seg IN ({marks})",
                           victims).fetchall()[0][0])
    db.execute(f"DELETE FROM segments WHERE seg IN ({marks})", victims)
    seg = next_segment(db)
    every = len(victims) == len(segs)
    merged = _merge_into(db, ALL, victims, seg, every)
    _merge_into(db, EDITS, victims, seg, every)
    db.execute("INSERT INTO segments(seg, postings, tapes) VALUES(?, ?, ?)", (seg, len(merged[0]), tapes))
    log.info("merged %d posting segments into segment %d (%d postings)", len(victims), seg, len(merged[0]))
    return merged


def _merge_into(db: apsw.Connection, table: str, victims: list[int], seg: int,
                every: bool) -> tuple[np.ndarray, np.ndarray]:
    """Replace the rows of segments `victims` of `table` by one segment `seg` holding their
    postings (`every`: the victims are all the segments). Returns its postings in stored order."""
    k, f = all_postings(db, victims, table)
    if every:
        db.execute(f"DELETE FROM {table}")  # SQLite drops the pages whole: no scan for the rows
    else:
        db.executemany(f"DELETE FROM {table} WHERE id >= ? AND id < ?", [segment_range(v) for v in victims])
    merged = sort_keys(k, f, distinct=True)
    write_sorted(db, seg, *merged, table=table)
    return merged
