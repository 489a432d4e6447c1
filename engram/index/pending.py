"""A tape's rows as the indexer prepares them, before one transaction writes them: the
fragments, their text, edits and links, and the fingerprints lineage compares (head, tail).
Apart from `build` so lineage can take them without importing the indexer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class PendingPart:
    """An edit's changed regions together, or one of them (a hunk)."""

    before: np.ndarray  # winnowed fingerprints of the removed text: source lookup, tombstones
    after: np.ndarray  # of the written text: re-insertion
    confidence: float  # how much of the before-text survived into the after-text (see lineage.edit_confidence)
    before_range: list[int] | None
    after_range: list[int] | None


@dataclass
class PendingEdit:
    offset: int  # index into the batch's fragment list
    file: str
    ts: str | None
    op: str
    whole: PendingPart  # every changed region of the edit together
    hunks: list[PendingPart] = field(default_factory=list)  # each region alone, when it changed several
    carried: int | None = None  # the fragment index of the lines it held unchanged (kinds.carried_runs)
    runs: list[tuple[np.ndarray, list[int]]] = field(default_factory=list)  # their runs: fingerprints, lines


@dataclass
class PendingTape:
    id: str
    frags: list[tuple[int, int, str | None, str | None, int, int | None, int | None]] = field(default_factory=list)
    fts: list[tuple[int, str]] = field(default_factory=list)  # (fragment index, text)
    edits: list[PendingEdit] = field(default_factory=list)
    links: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    head: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    tail: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    marker: str | None = None
    session_id: str = ""
