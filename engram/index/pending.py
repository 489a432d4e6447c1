"""A tape's rows as the indexer prepares them, before one transaction writes them: the
fragments, their text, edits and links, and the fingerprints lineage compares (head, tail).
Apart from `build` so lineage can take them without importing the indexer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class PendingEdit:
    offset: int  # index into the batch's fragment list
    file: str
    before: np.ndarray  # winnowed fingerprints: source lookup, tombstones, re-insertion
    after: np.ndarray
    confidence: float  # how much of the before-text survived into the after-text (see lineage.edit_confidence)
    before_range: list[int] | None
    after_range: list[int] | None
    ts: str | None
    op: str


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
    continues: tuple[str, str] | None = None  # (session, how) a session's first tape says it continues
