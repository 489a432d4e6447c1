"""Capture with no indexer runs in the worker processes an ingest already has: the same tapes,
redacted the same way, as one process writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import git, run_engram
from test_store_safety import write_session

from engram.capture.discovery import jobs_from_paths
from engram.capture.pipeline import ingest
from engram.capture.stats import IngestStats
from engram.store.repo import Store

SECRET = "ghp_" + "Zq8xLm3Np7Rt5Vw2Kc9Yb4Hd6Jf1Gs0Ta3Ue"


def _capture(root: Path, sessions: Path, workers: int) -> tuple[list[str], IngestStats]:
    root.mkdir()
    git(root, "init", "-q")
    run_engram(root, "init")
    store = Store(root)
    stats = IngestStats()
    ingest(store, jobs_from_paths([sessions], stats), stats=stats, workers=workers)
    return sorted(p.name for p in store.tapes_dir.iterdir()), stats


def test_capture_in_workers_writes_the_tapes_one_process_writes(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    for i in range(5):
        write_session(sessions / f"s{i}.jsonl", tmp_path / "one", f"s{i}", f"push with token={SECRET} please {i}")
    one, stats_one = _capture(tmp_path / "one", sessions, workers=1)
    two, stats_two = _capture(tmp_path / "two", sessions, workers=2)
    assert len(one) == 5 and one == two
    assert stats_two.tapes == 5 and stats_two.redactions == stats_one.redactions and stats_two.redactions
    for tape in (tmp_path / "two" / ".engram" / "tapes").iterdir():
        assert SECRET.encode() not in run_engram(tmp_path / "two", "show", tape.name.split(".")[0][:12]).stdout.encode()



def test_workers_are_forked_only_by_a_process_without_other_threads() -> None:
    """The command forks its workers (no second interpreter to wait for); a process with another
    thread running (a language server calling ingest) starts them from a forkserver, as a fork
    could copy a lock that thread holds. (In fresh processes: the test run may have threads.)"""
    code = ("import sys, threading\nfrom engram.capture.pipeline import _start_method\n"
            "if sys.argv[1] == 'thread':\n    threading.Thread(target=threading.Event().wait, daemon=True).start()\n"
            "print(_start_method())\n")
    got = {how: subprocess.run([sys.executable, "-c", code, how], capture_output=True, text=True, check=True,
                               timeout=120).stdout.strip() for how in ("alone", "thread")}
    assert got == {"alone": "fork", "thread": "forkserver"}
