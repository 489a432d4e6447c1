"""Set operations on small integer arrays, for the query path.

numpy's `unique` and `isin` are general (hash tables, masked-array checks; the first call in a
process imports `numpy.ma`, ~17 ms) and cost 20-40 µs each on the few hundred fingerprints of a
query, which calls them a dozen times. A sort and a neighbour comparison do the same work here
in a few microseconds, and give the sorted order the callers rely on.
"""

from __future__ import annotations

import numpy as np


def unique(a: np.ndarray) -> np.ndarray:
    """Sorted distinct values."""
    s = np.sort(a)
    if len(s) < 2:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def equal_runs(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, length) of each run of equal adjacent values of `a` (sorted, or grouped); none
    for an empty `a`."""
    if not len(a):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate(([True], a[1:] != a[:-1])))
    return starts, np.diff(np.append(starts, len(a)))


def unique_counts(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values and how often each occurs."""
    s = np.sort(a)
    starts, counts = equal_runs(s)
    return s[starts], counts


def within_runs(lengths: np.ndarray) -> np.ndarray:
    """For runs of these lengths laid end to end (as `equal_runs` finds them), each element's
    position in its own run: 0, 1, … from each run's start."""
    return np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions of the runs `[starts[i], starts[i] + lengths[i])`, one after another, in
    one vector pass (no Python loop per run)."""
    return np.repeat(starts, lengths) + within_runs(lengths)


def member(a: np.ndarray, sorted_b: np.ndarray) -> np.ndarray:
    """Mask of the values of `a` present in `sorted_b` (sorted ascending)."""
    if not len(sorted_b):
        return np.zeros(len(a), dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_b, a), len(sorted_b) - 1)
    return sorted_b[pos] == a
