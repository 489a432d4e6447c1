"""A tape's rows as the indexer prepares them, before one transaction writes them: the
fragments, their text, edits and links, and the fingerprints lineage compares (head, tail).
Apart from `build` so lineage can take them without importing the indexer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class PendingEdit:
    """One changed region (hunk) of a code.edit: a fragment of its own."""

    offset: int  # its fragment's index in the tape's fragment list
    first: int  # the index of the edit's first fragment: its sources are older than that
    file: str
    ts: str | None
    before: np.ndarray  # winnowed fingerprints of the removed text: source lookup, tombstones
    after: np.ndarray  # of the written text: re-insertion
    confidence: float  # how much of the before-text survived into the after-text (see lineage.edit_confidence)
    before_range: list[int] | None
    after_range: list[int] | None
    alone: bool = True  # the edit's only region, or one with enough text to be looked up alone


@dataclass
class PendingCarried:
    """A run of lines a code.edit held without changing them: a `code.carried` fragment."""

    offset: int
    first: int  # the index of the edit's first fragment
    file: str
    fps: np.ndarray
    lines: list[int]  # [first, last] in the file after the edit


@dataclass
class PendingTape:
    id: str
    frags: list[tuple[int, int, str | None, str | None, int, int | None, int | None]] = field(default_factory=list)
    fts: list[tuple[int, str]] = field(default_factory=list)  # (fragment index, text)
    edits: list[PendingEdit] = field(default_factory=list)
    carried: list[PendingCarried] = field(default_factory=list)
    links: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    requests: list[tuple[int, str, bool]] = field(default_factory=list)  # (fragment index, `kinds.request_line`)
    head: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    tail: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    marker: str | None = None
    session_id: str = ""
    continues: tuple[str, str] | None = None  # (session, how) a session's first tape says it continues
