"""The stop-list: fingerprints so common across tapes that looking them up costs more than it tells.

Generated and real stores alike share text between most sessions (a base repository that every
session reads, harness prompts, idioms). A 20-line span of such code has postings in hundreds
of tapes, and decoding those lists is what an explain spends its time on. Fingerprints present
in more than `index.stoplist_share` of the tapes are listed with their tape counts, and a query
drops them (`searchable`) — unless that would leave less than half of the span, in which case
the least common of them are kept: the person asked about that text, and the tapes that hold its
rarest parts are still the best evidence of where it came from. For the same reason, when the
keys looked up find less than half of the span's own (it was edited), the least common of those
dropped are looked up after all (`restored`).
"""

from __future__ import annotations

import logging
from typing import Final

import apsw
import numpy as np

from engram import arrays
from engram.index import memo, postings, snapshot
from engram.index.sql import immediate, int_array
from engram.store.repo import Store

log = logging.getLogger(__name__)

REBUILD_GROWTH: Final = 1.25  # rebuild when the number of indexed tapes grew by a quarter
_cache: dict[tuple[str, str, int], tuple[np.ndarray, np.ndarray]] = {}
_LOOKUPS_MAX: Final = 2048  # keys looked up one by one without counting the list first


def _generation(db: apsw.Connection) -> int:
    row = db.execute("SELECT value FROM state WHERE key='stoplist_gen'").fetchall()
    return int(row[0][0]) if row else 0


def load(db: apsw.Connection, keys: np.ndarray | None = None,
         snap: snapshot.Snapshot | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(keys, tape counts) of the stop-listed fingerprints, keys sorted (see postings.keys).

    The whole list is copied once per process, database file, index epoch and stop-list
    generation — from the second query on: it has thousands of rows on a large store, which a
    one-shot CLI query should not pay for. Until then only the rows of `keys` are read, unless
    they are more than the list (a blame of a whole file: a scan is cheaper than that many lookups).
    `snap`: the index's state as the caller's query read it (default: read now)."""
    snap = snap or snapshot.read(db)
    key = (db.filename, snap.epoch, snap.stoplist_gen)
    hit = _cache.get(key)
    if hit is not None:
        return hit
    if keys is not None and memo.first_use(("stoplist", *key)):
        ks = arrays.unique(keys)
        if len(ks) <= _LOOKUPS_MAX or len(ks) <= db.execute("SELECT count(*) FROM stoplist").fetchall()[0][0]:
            rows = db.execute("SELECT fp, tapes FROM stoplist WHERE fp IN carray(?) ORDER BY fp",
                              (int_array(ks),)).fetchall() if len(ks) else []
            return _arrays(rows)
    hit = _arrays(db.execute("SELECT fp, tapes FROM stoplist ORDER BY fp").fetchall())
    _cache.clear()
    _cache[key] = hit
    return hit


def forget() -> None:
    _cache.clear()


memo.on_forget(forget)


def _arrays(rows: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    return (np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)),
            np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows)))


def searchable(db: apsw.Connection, keys: np.ndarray, snap: snapshot.Snapshot | None = None) -> np.ndarray:
    """Mask of the query keys to look up: all but stop-listed ones, keeping at least half of the
    distinct keys (the least common stop-listed ones first)."""
    stop, tapes = load(db, keys, snap)
    return searchable_among(stop, tapes, keys)


def searchable_among(stop: np.ndarray, tapes: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """`searchable` against a stop-list already loaded (`load`): (keys, tape counts)."""
    mask = np.ones(len(keys), dtype=bool)
    if not len(stop) or not len(keys):
        return mask
    listed = arrays.member(keys, stop)
    mask = ~listed
    want = (len(arrays.unique(keys)) + 1) // 2
    kept = arrays.unique(keys[mask])
    if len(kept) >= want:
        return mask
    cand = arrays.unique(keys[listed])
    counts = tapes[np.searchsorted(stop, cand)]
    extra = arrays.unique(cand[np.argsort(counts, kind="stable")[: want - len(kept)]])
    return mask | arrays.member(keys, extra)


def restored(stop: np.ndarray, tapes: np.ndarray, left_out: np.ndarray, searched: int, found: int) -> np.ndarray:
    """Mask of the stop-listed keys a query left out (`left_out`, from `searchable_among` against
    the same stop-list, `load`) to look up after all: none while at least half of the `searched`
    winnowed keys were `found` (have postings); else the least common, as many as make them and
    the found keys half of the found keys and those left out together.

    `searchable` keeps half of a span's keys, but it cannot tell a key no tape holds from one a
    tape does. A span edited on every line is mostly new k-grams: they count as searchable, and
    find nothing. On a small store, where a tenth of the tapes is a few tapes, its writer's
    surviving k-grams were then all stop-listed, and the span went unanswered
    (chikachow/cyspbot, 80 rollouts, bench/README.md). Its winnowed keys tell the two apart: a
    tape of the same text holds them. A span with no searched winnowed key at all is common
    code, answered by its neighbours (`direct.expected_count`)."""
    none = np.zeros(len(left_out), dtype=bool)
    if found * 2 >= searched:
        return none
    distinct = arrays.unique(left_out)
    more = (found + len(distinct) + 1) // 2 - found
    if more <= 0:
        return none
    counts = tapes[np.searchsorted(stop, distinct)]
    return arrays.member(left_out, arrays.unique(distinct[np.argsort(counts, kind="stable")[:more]]))


def rebuild(db: apsw.Connection, share: float, min_tapes: int,
            every: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[int, int]:
    """Stop-list fingerprints present in more than `share` of the tapes (when there are at
    least `min_tapes`). Returns (fingerprints stop-listed, tapes). Inside a write transaction.

    `every`: all postings of the store as (key, fragment), when the caller has them in memory."""
    n_tapes = int(db.execute("SELECT count(*) FROM tapes WHERE indexed=1").fetchall()[0][0])
    db.execute("DELETE FROM stoplist")
    db.execute("INSERT OR REPLACE INTO state(key, value) VALUES('stoplist_gen', ?)", (_generation(db) + 1,))
    db.execute("INSERT OR REPLACE INTO state(key, value) VALUES('stoplist_tapes', ?)", (n_tapes,))
    if n_tapes < min_tapes:
        return 0, n_tapes
    keys, frags = every if every is not None else postings.all_postings(db)
    if not len(keys):
        return 0, n_tapes
    uk, counts = tapes_per_key(db, keys, frags)
    limit = max(2, int(share * n_tapes))
    common = counts > limit
    db.executemany("INSERT INTO stoplist(fp, tapes) VALUES(?, ?)",
                   zip(uk[common].tolist(), counts[common].tolist()))
    log.info("stop-list: %d fingerprints in more than %d of %d tapes", int(common.sum()), limit, n_tapes)
    return int(common.sum()), n_tapes


def tapes_per_key(db: apsw.Connection, keys: np.ndarray, frags: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct keys sorted, number of tapes holding each) of the given postings.

    Fragment ids are dense, so a fragment's tape is one array index away (a binary search per
    posting took 2 s at 1 GB). Key and tape are packed into one int64 and sorted stably: the
    postings of a bulk run's merged segment come sorted by key and, within a key, by fragment, so
    the sort finds one sorted run (a two-key lexsort of 16 M postings took 3 s)."""
    rows = np.array(db.execute("SELECT id, tape FROM fragments").fetchall(), dtype=np.int64).reshape(-1, 2)
    tape_by_id = np.zeros(int(rows[:, 0].max()) + 1 if len(rows) else 1, dtype=np.int64)
    tape_by_id[rows[:, 0]] = rows[:, 1]
    tape_of = tape_by_id[frags.astype(np.int64)]
    bits = max(1, int(tape_of.max()).bit_length())
    if int(keys.max()).bit_length() + bits <= 63:
        packed = np.sort((keys << bits) | tape_of, kind="stable")
        first = np.ones(len(packed), dtype=bool)
        first[1:] = packed[1:] != packed[:-1]  # one entry per (fingerprint, tape)
        k = packed[first] >> bits
    else:
        order = np.lexsort((tape_of, keys))
        k, t = keys[order], tape_of[order]
        first = np.ones(len(k), dtype=bool)
        first[1:] = (k[1:] != k[:-1]) | (t[1:] != t[:-1])
        k = k[first]
    starts, counts = arrays.equal_runs(k)
    return k[starts], counts


def rebuild_from_config(db: apsw.Connection, store: Store,
                        every: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[int, int]:
    cfg = store.config["index"]
    return rebuild(db, float(cfg["stoplist_share"]), int(cfg["stoplist_min_tapes"]), every)


def maybe_rebuild(db: apsw.Connection, store: Store, every: tuple[np.ndarray, np.ndarray] | None = None) -> None:
    """Recompute the stop-list when the number of tapes grew enough since the last time.
    `every`: all postings of the store, when the caller has them in memory (see `rebuild`)."""
    cfg = store.config["index"]
    n = int(db.execute("SELECT count(*) FROM tapes WHERE indexed=1").fetchall()[0][0])
    row = db.execute("SELECT value FROM state WHERE key='stoplist_tapes'").fetchall()
    last = int(row[0][0]) if row else 0
    if n >= int(cfg["stoplist_min_tapes"]) and (last == 0 or n >= last * REBUILD_GROWTH):
        with immediate(db):
            rebuild_from_config(db, store, every)
