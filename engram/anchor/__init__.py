"""Anchors: winnowed token k-gram fingerprints over any text (code, messages, tool output).

Tokenize once (``tokenize``), hash k consecutive tokens (``all_kgrams``), keep the
winnowed minimum of every window (``fingerprints``; ``fingerprints_many`` for the
thousands of small event texts of a tape), compare sets (``similarity``,
``containment``).  Everything is vectorised with numpy; the hash definitions are in the
docstrings of ``tokenize.py`` and ``winnow.py`` because stored fingerprints depend on
them bit for bit: changing either (or k, w) means a reindex.
"""

from engram.anchor.similarity import containment, similarity
from engram.anchor.tokenize import Tokens, iter_token_chunks, tokenize, tokenize_bytes
from engram.anchor.winnow import (
    DEFAULT_K,
    DEFAULT_W,
    BatchFingerprints,
    Fingerprints,
    all_kgrams,
    fingerprint_set,
    fingerprints,
    fingerprints_by_line,
    fingerprints_bytes,
    fingerprints_from_tokens,
    fingerprints_many,
    kgram_fingerprints,
    kgram_fingerprints_from_tokens,
    kgram_hashes,
    winnow_positions,
    winnowed_values,
)

__all__ = [
    "DEFAULT_K", "DEFAULT_W", "Tokens", "Fingerprints", "BatchFingerprints", "tokenize", "tokenize_bytes", "iter_token_chunks",
    "fingerprints", "fingerprints_bytes", "fingerprints_from_tokens", "fingerprints_many", "fingerprint_set", "fingerprints_by_line",
    "all_kgrams", "kgram_fingerprints", "kgram_fingerprints_from_tokens", "kgram_hashes", "winnow_positions",
    "winnowed_values",
    "similarity", "containment",
]
