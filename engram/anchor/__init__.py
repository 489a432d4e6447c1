"""Anchors: winnowed token k-gram fingerprints over any text (code, messages, tool output).

Tokenize once (``tokenize``), hash k consecutive tokens (``all_kgrams``), keep the
winnowed minimum of every window (``fingerprints``; ``fingerprints_many`` for the
thousands of small event texts of a tape), compare sets (``similarity``,
``containment``).  Everything is vectorised with numpy (``definition`` holds the
constants and a per-token twin for short texts); the hash definitions are in the
docstrings of ``tokens.py`` and ``winnow.py`` because stored fingerprints depend on
them bit for bit: changing either (or k, w) means a reindex.

Importing this package does not import numpy: a name is loaded from its module when first used
(PEP 562), so `engram.anchor.definition` serves a command-line query without numpy's ~50-100 ms.
No submodule is named like a function it exports (``tokens.py`` holds ``tokenize``): importing
the submodule would otherwise set the package's attribute to the module, hiding the function.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_HOME = {
    "similarity": "overlap", "containment": "overlap",
    "Tokens": "tokens", "iter_token_chunks": "tokens", "tokenize": "tokens", "tokenize_bytes": "tokens",
    "DEFAULT_K": "definition", "DEFAULT_W": "definition",
    **{name: "winnow" for name in (
        "BatchFingerprints", "Fingerprints", "all_kgrams", "fingerprint_set", "fingerprints",
        "fingerprints_by_line", "fingerprints_bytes", "fingerprints_from_tokens", "fingerprints_many",
        "kgram_fingerprints", "kgram_fingerprints_from_tokens", "kgram_hashes", "winnow_positions",
        "winnowed_values")},
}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


# ruff: noqa: F401 - the imports below are the names of __all__ for type checkers; ruff cannot read an
# __all__ built from _HOME, so it counted each one unused
if TYPE_CHECKING:
    from engram.anchor.definition import DEFAULT_K, DEFAULT_W
    from engram.anchor.overlap import containment, similarity
    from engram.anchor.tokens import Tokens, iter_token_chunks, tokenize, tokenize_bytes
    from engram.anchor.winnow import (
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
