"""Set overlap of fingerprints.

Why sets of unique values: a fingerprint repeated in boilerplate (a license header
quoted ten times) must not outweigh the rest of the code, and lineage confidence and
re-insertion detection (DESIGN.md: LINK_THRESHOLD 0.30, relink at 0.90) are defined on
fingerprint sets.
"""

from __future__ import annotations

import logging

import numpy as np

from engram import arrays

log = logging.getLogger(__name__)

__all__ = ["similarity", "containment"]


def _unique(a: np.ndarray) -> np.ndarray:
    return arrays.unique(np.asarray(a, dtype=np.int64))


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Jaccard index of the unique values; 0.0 when both are empty (nothing to vouch
    for a link, rather than a division by zero or a vacuous 1.0)."""
    ua, ub = _unique(a), _unique(b)
    union = ua.shape[0] + ub.shape[0]
    if union == 0:
        return 0.0
    inter = np.intersect1d(ua, ub, assume_unique=True).shape[0]
    return inter / (union - inter)


def containment(a: np.ndarray, b: np.ndarray) -> float:
    """Share of ``a``'s unique values found in ``b``: asymmetric on purpose, a small
    query span fully quoted inside a long transcript scores 1.0 where Jaccard is tiny.
    0.0 when ``a`` is empty."""
    ua, ub = _unique(a), _unique(b)
    if ua.shape[0] == 0:
        return 0.0
    return np.intersect1d(ua, ub, assume_unique=True).shape[0] / ua.shape[0]
