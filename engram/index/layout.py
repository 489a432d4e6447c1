"""Where a fingerprint's postings are: its key and its row (postings.py describes the layout).

Plain Python, apart from postings.py (numpy): a command-line query of a short span reads its few
rows here (`lookup_small`) instead of paying numpy's import, which costs more than the query.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from itertools import compress
from sys import byteorder
from typing import Final

import apsw

from engram.index.sql import int_array

# The key: 16 top bits of the fingerprint above its low 32.
BUCKET_BITS: Final = 16
# A row holds the keys that agree on their top 18 bits: at 1 GB of transcripts (~17 M postings)
# ~550 bytes, so a 20-line span (~100 fingerprints) reads ~55 KB in ~110 rows. With 16 bits it
# read ~200 KB and spent as long copying and scanning them as on everything else; with 20 bits
# a bulk run writes ~3x the rows for ~0.1 ms less per query (bench/scale.py, measured on c1g).
ROW_BITS: Final = 2
ROW_KEY_BITS: Final = BUCKET_BITS + ROW_BITS
ROW_MASK: Final = (1 << ROW_KEY_BITS) - 1  # a row id without its segment
_LOW: Final = 0xFFFFFFFF
EDITS: Final = "edit_postings"  # postings.EDITS: the code.edit fragments' postings
_M64: Final = (1 << 64) - 1


def key(fp: int) -> int:
    """The key of a fingerprint (signed 64-bit), as `postings.keys` computes it."""
    u = fp & _M64
    return (u >> (64 - BUCKET_BITS)) << 32 | (u & _LOW)


def lookup_small(db: apsw.Connection, keys: Iterable[int], segs: Sequence[int],
                 table: str = "postings") -> tuple[list[int], set[int]]:
    """The fragment of every posting of the fingerprints with these keys (`key`) in these
    segments — `postings.lookup`'s fragments (same multiset), for a query of a few hundred
    fingerprints — and the keys that have any (`table`: or `edit_postings`, the edits' only)."""
    found: list[int] = []
    present: set[int] = set()
    for high, lows, frags, wanted in _rows(db, keys, segs, table):
        mine = list(map(wanted.__contains__, lows))
        found += compress(frags, mine)
        present.update(high | low for low in compress(lows, mine))
    return found, present


def lookup_pairs_small(db: apsw.Connection, keys: Iterable[int], segs: Sequence[int],
                       frags: set[int], table: str = "postings") -> list[tuple[int, int]]:
    """(key, fragment) of the postings of these keys that belong to `frags`: which of a span's
    fingerprints each of a few fragments holds (`postings.lookup`'s pairs, for those fragments)."""
    out: list[tuple[int, int]] = []
    for high, lows, row_frags, wanted in _rows(db, keys, segs, table):
        out += [(high | low, f) for low, f in zip(lows, row_frags) if f in frags and low in wanted]
    return out


def _rows(db: apsw.Connection, keys: Iterable[int], segs: Sequence[int],
          table: str = "postings") -> Iterator[tuple[int, array, array, set[int]]]:
    """For each stored row holding some of these keys: the high half its keys share (a key is
    `high | low`), its low halves, its fragments, and the low halves of the keys wanted from it."""
    qkeys = set(keys)
    if not qkeys or not segs:
        return
    by_row: dict[int, set[int]] = {}
    for k in qkeys:
        by_row.setdefault(k >> (32 - ROW_BITS), set()).add(k & _LOW)
    rows = sorted(by_row)
    for seg in segs:
        for rid, blob in db.execute(f"SELECT id, blob FROM {table} WHERE id IN carray(?)",
                                    (int_array([seg << ROW_KEY_BITS | r for r in rows]),)):
            words = array("I", blob)
            if byteorder == "big":
                words.byteswap()
            n = len(words) // 2
            row = rid & ROW_MASK
            yield (row >> ROW_BITS) << 32, words[:n], words[n:], by_row[row]
