"""The standing kill test (issue 50): a few kills of each phase through bench/kill_probe.py (the
bench figure runs 60); every tape intact, every re-run succeeds, no answer changes."""

from __future__ import annotations

from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.mark.slow
def test_killed_ingest_append_and_reindex_leave_a_store_that_answers_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))  # (taken back after the test: bench/ names no other test's modules)
    import kill_probe

    totals = kill_probe.main(["--kills", "3", "--spans", "3"])
    assert sum(t["kills"] for t in totals.values()) == 3
    for phase, t in totals.items():
        assert (t["corrupt"], t["failed"], t["changed"]) == (0, 0, 0), (phase, t)
