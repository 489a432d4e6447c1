"""Live evidence regions of open documents, kept attached to their text while the person types.

Regions move with edits above them (no recomputation), and a region whose own text changed is
marked dirty and re-fingerprinted after a debounce. This module is pure bookkeeping: no I/O,
no protocol types, so every rule is unit-tested directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from engram.memory.follow import follow_change
from engram.query.regions import Region, RegionSession
from engram.store.repo import Store


@dataclass
class LiveRegion:
    start: int  # 0-based, inclusive
    end: int
    sessions: list[RegionSession]
    dirty: bool = False


@dataclass
class DocState:
    uri: str
    path: Path
    store: Store | None
    version: int
    saved_text: str  # what is on disk: the before-text of the next editor-tape save
    regions: list[LiveRegion] = field(default_factory=list)
    computed_version: int = -1  # the version the regions were computed for (then shifted)

    def set_regions(self, regions: list[Region], version: int) -> None:
        self.regions = [LiveRegion(r.start, r.end, r.sessions) for r in regions]
        self.computed_version = version

    def apply_change(self, start_line: int, end_line: int, new_text: str, start_char: int = 1,
                     end_char: int = 1) -> None:
        """The replacement of the text between two positions (0-based lines) by `new_text`."""
        self.regions = follow_change(self.regions, start_line, end_line, new_text, start_char, end_char)

    def region_at(self, line: int) -> LiveRegion | None:
        for r in self.regions:
            if r.start <= line <= r.end:
                return r
        return None
