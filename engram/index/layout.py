"""Where a fingerprint's postings are: its key and its row (postings.py describes the layout).

Plain Python, apart from postings.py (numpy): a command-line query of a short span reads its few
rows here (`lookup_small`) instead of paying numpy's import, which costs more than the query.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from itertools import compress
from sys import byteorder
from typing import Final

import apsw

from engram.index.db import int_array

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
_M64: Final = (1 << 64) - 1


def key(fp: int) -> int:
    """The key of a fingerprint (signed 64-bit), as `postings.keys` computes it."""
    u = fp & _M64
    return (u >> (64 - BUCKET_BITS)) << 32 | (u & _LOW)


def lookup_small(db: apsw.Connection, keys: Iterable[int], segs: Sequence[int]) -> list[int]:
    """The fragment of every posting of the fingerprints with these keys (`key`) in these
    segments: `postings.lookup`'s fragments (same multiset), for a query of a few hundred
    fingerprints."""
    qkeys = set(keys)
    if not qkeys or not segs:
        return []
    by_row: dict[int, set[int]] = {}
    for k in qkeys:
        by_row.setdefault(k >> (32 - ROW_BITS), set()).add(k & _LOW)
    rows = sorted(by_row)
    found: list[int] = []
    for seg in segs:
        for rid, blob in db.execute("SELECT id, blob FROM postings WHERE id IN carray(?)",
                                    (int_array([seg << ROW_KEY_BITS | r for r in rows]),)):
            words = array("I", blob)
            if byteorder == "big":
                words.byteswap()
            n = len(words) // 2
            lows = by_row[rid & ROW_MASK]
            found += compress(words[n:], map(lows.__contains__, words[:n]))
    return found
