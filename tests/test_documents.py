"""Region bookkeeping while a person types (server/documents.py), rule by rule."""

from __future__ import annotations

from pathlib import Path

from engram.query.regions import RegionSession
from engram_server.documents import DocState, LiveRegion

S = [RegionSession("s", "claude-code", "m", "t", 1, None)]


def doc(*spans: tuple[int, int]) -> DocState:
    d = DocState("file:///x", Path("/x"), None, 1, "")
    d.regions = [LiveRegion(a, b, S) for a, b in spans]
    return d


def spans(d: DocState) -> list[tuple[int, int, bool]]:
    return [(r.start, r.end, r.dirty) for r in d.regions]


def test_lines_inserted_above_shift_regions_without_dirtying_them() -> None:
    d = doc((10, 20), (30, 35))
    d.apply_change(2, 2, "a\nb\n", 0, 0)
    assert spans(d) == [(12, 22, False), (32, 37, False)]


def test_whole_lines_inserted_right_before_a_region_shift_it() -> None:
    d = doc((0, 5))
    d.apply_change(0, 0, "x\ny\n", 0, 0)
    assert spans(d) == [(2, 7, False)]


def test_typing_inside_a_region_dirties_only_it() -> None:
    d = doc((10, 20), (30, 35))
    d.apply_change(15, 15, "z", 4, 4)
    assert spans(d) == [(10, 20, True), (30, 35, False)]


def test_a_newline_typed_inside_grows_the_region_and_shifts_the_next() -> None:
    d = doc((10, 20), (30, 35))
    d.apply_change(15, 15, "\n", 4, 4)
    assert spans(d) == [(10, 21, True), (31, 36, False)]


def test_deleting_lines_above_moves_regions_up() -> None:
    d = doc((10, 20))
    d.apply_change(3, 6, "", 0, 0)
    assert spans(d) == [(7, 17, False)]


def test_region_at() -> None:
    d = doc((10, 20))
    assert d.region_at(15) is d.regions[0] and d.region_at(21) is None
