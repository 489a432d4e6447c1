"""Postings: fingerprint → fragment ids, stored as bucketed blobs in segments.

Layout (measured in bench/scale.py): a fingerprint is stored as its key, its top BUCKET_BITS
bits above its low 32 bits — 48 of its 64 bits, enough that a false match needs ~2^48/postings
draws. The key's top BUCKET_BITS + ROW_BITS bits pick a row: each row of each segment is
`(bucket, seg, blob)` where `bucket` holds those bits and the blob is two little-endian uint32
arrays of equal length — the keys' low 32 bits, then the fragment ids — in key order. Compared
with one row per (fingerprint, fragment) this removes the per-row key and overhead that dominate
when most fingerprints occur once.

New tapes are indexed into a new segment (insert-only, no read-modify-write), so appending a
session costs its own size; segments are merged when there are more than MAX_SEGMENTS (see
merge_segments) and once at the end of a bulk ingest.
"""

from __future__ import annotations

import logging
from typing import Final

import apsw
import numpy as np

from engram import arrays

log = logging.getLogger(__name__)

# The key: 16 top bits of the fingerprint above its low 32.
BUCKET_BITS: Final = 16
# A row holds the keys that agree on their top 18 bits: at 1 GB of transcripts (~17 M postings)
# ~550 bytes, so a 20-line span (~100 fingerprints) reads ~55 KB in ~110 rows. With 16 bits it
# read ~200 KB and spent as long copying and scanning them as on everything else; with 20 bits
# a bulk run writes ~3x the rows for ~0.1 ms less per query (bench/scale.py, measured on c1g).
ROW_BITS: Final = 2
_SHIFT: Final = np.uint64(64 - BUCKET_BITS)
_LOW: Final = np.uint64(0xFFFFFFFF)
MAX_SEGMENTS: Final = 6
_MAX_VARS: Final = 30000


def split(fps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bucket, low32) of int64 fingerprints."""
    u = fps.astype(np.int64, copy=False).view(np.uint64)
    return (u >> _SHIFT).astype(np.int64), (u & _LOW).astype(np.uint32)


def keys(fps: np.ndarray) -> np.ndarray:
    """The 52-bit identity of each fingerprint as stored: bucket << 32 | low."""
    b, low = split(fps)
    return (b << 32) | low.astype(np.int64)


def write_segment(db: apsw.Connection, seg: int, fps: np.ndarray, frags: np.ndarray) -> int:
    """Insert postings (parallel arrays) as segment `seg`; returns the number of rows written."""
    key, f = sort_keys(keys(fps), frags)
    return write_sorted(db, seg, key, f)


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


def write_sorted(db: apsw.Connection, seg: int, key: np.ndarray, frags: np.ndarray,
                 row_bits: int = ROW_BITS) -> int:
    """Insert postings already in stored order (`sort_keys`) as segment `seg`; returns the rows."""
    if len(key) == 0:
        return 0
    bucket = key >> (32 - row_bits)
    cuts = np.flatnonzero(np.diff(bucket)) + 1
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [len(bucket)]))
    low_b = (key & 0xFFFFFFFF).astype("<u4")
    frag_b = frags.astype("<u4")
    rows = ((int(bucket[s]), seg, low_b[s:e].tobytes() + frag_b[s:e].tobytes())
            for s, e in zip(starts.tolist(), ends.tolist()))
    db.executemany("INSERT INTO postings(bucket, seg, blob) VALUES(?, ?, ?)", rows)
    return len(starts)


def lookup(db: apsw.Connection, fps: np.ndarray, segs: list[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """All postings of the given fingerprints (in the given segments): (key, fragment id) arrays,
    one entry per posting."""
    if len(fps) == 0 or segs == []:
        return np.empty(0, np.int64), np.empty(0, np.uint32)
    qkeys = arrays.unique(keys(fps))
    buckets = arrays.unique(qkeys >> (32 - ROW_BITS)).tolist()
    rows: list[tuple[int, bytes]] = []
    in_segs = f" AND seg IN ({','.join(map(str, segs))})" if segs is not None else ""
    for i in range(0, len(buckets), _MAX_VARS):
        chunk = buckets[i:i + _MAX_VARS]
        rows += db.execute(f"SELECT bucket, blob FROM postings WHERE bucket IN ({','.join('?' * len(chunk))})"
                           + in_segs, chunk).fetchall()
    if not rows:
        return np.empty(0, np.int64), np.empty(0, np.uint32)
    return _match_rows(rows, qkeys)


def _match_rows(rows: list[tuple[int, bytes]], qkeys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The postings of `qkeys` (sorted) inside bucket rows, without decoding every entry.

    A query's rows hold ~100× more postings than it matches. Each 32-bit word of the rows (low
    halves and fragment halves alike) is compared with the query's low halves in one binary
    search; the few words that agree are then checked to be a low half of a row whose bucket
    matches, and their fragment read from the row's second half."""
    sizes = np.fromiter((len(r[1]) // 8 for r in rows), dtype=np.int64, count=len(rows))
    buckets = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)) >> ROW_BITS
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


def _decode_rows(rows: list[tuple[int, bytes]], row_bits: int = ROW_BITS) -> tuple[np.ndarray, np.ndarray]:
    """(key, fragment) arrays of many bucket rows, decoded in one vector pass."""
    buckets = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)) >> row_bits
    sizes = np.fromiter((len(r[1]) // 8 for r in rows), dtype=np.int64, count=len(rows))  # entries per row
    flat = np.frombuffer(b"".join(r[1] for r in rows), dtype="<u4")
    starts = np.concatenate(([0], np.cumsum(2 * sizes)[:-1]))  # u4 offset of each row's low half
    row_of = np.repeat(np.arange(len(rows)), sizes)
    within = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    low_idx = starts[row_of] + within
    keys = (buckets[row_of] << np.int64(32)) | flat[low_idx].astype(np.int64)
    return keys, flat[low_idx + sizes[row_of]].astype(np.uint32)


def all_postings(db: apsw.Connection, segs: list[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every posting (of the given segments): (key, fragment) arrays. Used by merge and stop-list.

    Decoded in one vector pass over all blobs: a large store has millions of small rows."""
    sql = "SELECT bucket, blob FROM postings"
    args: list[int] = []
    if segs is not None:
        sql += f" WHERE seg IN ({','.join('?' * len(segs))})"
        args = segs
    sql += " ORDER BY bucket, seg"  # already grouped by key: the merge's sort has little to do
    rows = db.execute(sql, args).fetchall()
    if not rows:
        return np.empty(0, np.int64), np.empty(0, np.uint32)
    return _decode_rows(rows)


def relayout(db: apsw.Connection, from_row_bits: int, to_row_bits: int = ROW_BITS) -> int:
    """Rewrite every segment's rows from one row split to another (inside the caller's
    transaction); the postings themselves are unchanged. Returns the postings rewritten."""
    total = 0
    for (seg,) in db.execute("SELECT DISTINCT seg FROM postings ORDER BY seg").fetchall():
        rows = db.execute("SELECT bucket, blob FROM postings WHERE seg=? ORDER BY bucket", (seg,)).fetchall()
        key, frags = _decode_rows(rows, from_row_bits)
        db.execute("DELETE FROM postings WHERE seg=?", (seg,))
        write_sorted(db, seg, key, frags, to_row_bits)
        total += len(key)
    return total


def key_to_fp(k: np.ndarray) -> np.ndarray:
    """A stored key back to an int64 carrying the same bucket and low bits (middle bits zero)."""
    bucket = (k >> 32).astype(np.uint64)
    low = (k & 0xFFFFFFFF).astype(np.uint64)
    return ((bucket << _SHIFT) | low).view(np.int64)


def next_segment(db: apsw.Connection) -> int:
    return int(db.execute("SELECT coalesce(max(seg), 0) + 1 FROM segments").fetchall()[0][0])


Known = dict[int, tuple[np.ndarray, np.ndarray]]


def merge_segments(db: apsw.Connection, since: int | None = None, known: Known | None = None) -> bool:
    """Keep the number of segments small (inside the caller's write transaction).

    `since`: merge every segment numbered from `since` on into one (the end of a bulk ingest,
    which wrote several). Otherwise, past MAX_SEGMENTS, the smallest segments are merged, together
    with any next one no more than twice their total: appends then rewrite small segments only,
    and each posting is rewritten O(log n) times as the store grows, never the whole index per
    append.

    `known`: segment -> its postings in stored order, as the caller wrote them. When it holds
    every victim, they are merged from memory instead of read back and decoded (at the end of a
    1 GB bulk ingest: 16 M postings, ~2 s); it is updated with the result, which is identical.
    """
    segs = db.execute("SELECT seg, postings FROM segments ORDER BY postings, seg").fetchall()
    if since is not None:
        victims = [s for s, _ in segs if s >= since]
    elif len(segs) > MAX_SEGMENTS:
        j = len(segs) - MAX_SEGMENTS + 1
        total = sum(n for _, n in segs[:j])
        while j < len(segs) and segs[j][1] <= 2 * total:
            total += segs[j][1]
            j += 1
        victims = [s for s, _ in segs[:j]]
    else:
        victims = []
    if len(victims) < 2:
        return False
    victims.sort()
    count = dict(segs)
    if known is not None and all(v in known and len(known[v][0]) == count[v] for v in victims):
        # The order all_postings reads them in, as far as the stable sort by key can tell: for
        # one key, segment by segment, each in its stored order.
        k = np.concatenate([known[v][0] for v in victims])
        f = np.concatenate([known[v][1] for v in victims])
    else:
        k, f = all_postings(db, victims)
    marks = ",".join("?" * len(victims))
    tapes = int(db.execute(f"SELECT coalesce(sum(tapes), 0) FROM segments WHERE seg IN ({marks})",
                           victims).fetchall()[0][0])
    if len(victims) == len(segs):
        db.execute("DELETE FROM postings")  # SQLite drops the pages whole: no scan for the rows
    else:
        db.execute(f"DELETE FROM postings WHERE seg IN ({marks})", victims)
    db.execute(f"DELETE FROM segments WHERE seg IN ({marks})", victims)
    seg = next_segment(db)
    merged = sort_keys(k, f, distinct=True)
    write_sorted(db, seg, *merged)
    db.execute("INSERT INTO segments(seg, postings, tapes) VALUES(?, ?, ?)", (seg, len(k), tapes))
    if known is not None:
        for v in victims:
            known.pop(v, None)
        known[seg] = merged
    log.info("merged %d posting segments into segment %d (%d postings)", len(victims), seg, len(k))
    return True
