"""Capture with no indexer runs in the worker processes an ingest already has: the same tapes,
redacted the same way, as one process writes."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import git, run_engram
from test_store_safety import write_session

import engram.capture.pipeline as pipeline
from engram.capture.discovery import jobs_from_paths
from engram.capture.pipeline import ingest
from engram.capture.redact import Redactor
from engram.index.db import open_db
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


# Run in a fresh process (one thread: its workers are forked, and inherit the counting fsync).
FSYNC_PIDS = """import os, sys
from pathlib import Path
from engram.capture.discovery import jobs_from_paths
from engram.capture.pipeline import ingest
from engram.capture.stats import IngestStats
from engram.store.repo import Store
real, log = os.fsync, Path(sys.argv[3])
def fsync(fd):
    with open(log, "a") as f:
        f.write(f"{os.getpid()}\\n")
    real(fd)
os.fsync = fsync
stats = IngestStats()
ingest(Store(Path(sys.argv[1])), jobs_from_paths([Path(sys.argv[2])], stats), stats=stats, workers=2)
print(os.getpid(), stats.tapes)
"""


def test_capture_workers_never_wait_for_the_disk(tmp_path: Path) -> None:
    """The workers parse, redact and compress; the ingest process, which waits for their results
    anyway, syncs each tape and puts it in place before cataloguing it: a worker's core is never
    idle on an fsync (2-9 ms a tape on the benchmark machines)."""
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    for i in range(6):
        write_session(sessions / f"s{i}.jsonl", tmp_path / "r", f"s{i}", f"session {i} says hello")
    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q")
    run_engram(root, "init")
    log = tmp_path / "fsyncs"
    out = subprocess.run([sys.executable, "-c", FSYNC_PIDS, str(root), str(sessions), str(log)], capture_output=True,
                         text=True, check=True, timeout=120).stdout.split()
    assert out[1] == "6"
    assert set(log.read_text().split()) == {out[0]}  # every fsync was the ingest process's own
    tapes = sorted(p.name for p in (root / ".engram" / "tapes").iterdir())
    assert len(tapes) == 6 and not [t for t in tapes if t.startswith(".tmp-")]
    db = open_db(Store(root))
    try:
        assert db.execute("SELECT count(*) FROM tapes").fetchall()[0][0] == 6
    finally:
        db.close()


def test_a_tape_the_ingest_cannot_put_on_disk_is_not_catalogued(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's tape that cannot be synced (the disk full) is reported as not written, leaves
    no file and no catalogue row, and the next ingest captures its session."""
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    write_session(sessions / "s0.jsonl", tmp_path / "r", "s0", "one session")
    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q")
    run_engram(root, "init")
    store = Store(root)
    job = jobs_from_paths([sessions], IngestStats())[0]
    db = open_db(store)
    try:
        got = pipeline.capture_write(db, store, job, maps=[], redactor=Redactor([]), publish_later=True)
        assert got.written is not None and not got.written.path.exists()

        def disk_full(written: object) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(pipeline, "publish_tape", disk_full)
        stats = IngestStats()
        assert pipeline._commit(db, got, stats) is None
        assert stats.tapes == 0 and stats.skipped == {"tape not written (OSError)": 1}
        assert list(store.tapes_dir.iterdir()) == []
        assert db.execute("SELECT count(*) FROM tapes").fetchall()[0][0] == 0
    finally:
        db.close()
    monkeypatch.undo()
    stats = IngestStats()
    ingest(store, jobs_from_paths([sessions], stats), stats=stats, workers=1)
    assert stats.tapes == 1 and len(list(store.tapes_dir.iterdir())) == 1



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


def _ingest_with_fault(root: Path, tmp_path: Path, script: str, timeout: int
                       ) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """Six sessions, and `engram ingest SESSIONS --json` into the store at `root` run by `script`
    (two forked workers, a fault planted in them) in a process of its own."""
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    for i in range(6):
        write_session(sessions / f"s{i}.jsonl", root, f"s{i}", f"session {i} says hello")
    env = {**os.environ, "ENGRAM_WORKERS": "2", "ENGRAM_LOCAL": "1"}
    proc = subprocess.run([sys.executable, "-c", script, str(sessions), "--json"], cwd=root,
                          capture_output=True, text=True, env=env, timeout=timeout)
    return sessions, proc


# Run in a fresh process (one thread: forked workers inherit the patch). The worker that gets
# session s3 dies by SIGKILL, as the OOM killer ends one: a real kill, of a real worker.
KILL_ONE_WORKER = """import os, signal, sys
import engram.capture.pipeline as pipeline
from engram.cli.main import main
parent, real = os.getpid(), pipeline.capture_write
def capture_write(db, store, job, **kw):
    if os.getpid() != parent and any(src.path.name == "s3.jsonl" for src in job.sources):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(db, store, job, **kw)
pipeline.capture_write = capture_write
sys.exit(main(["ingest", *sys.argv[1:]]))
"""


def test_an_ingest_whose_worker_was_killed_exits_1_and_a_rerun_captures_the_rest(repo: Path, tmp_path: Path) -> None:
    """A hook or script that runs `engram ingest` learns from the exit status that sessions were
    left (exit 0 with a warning on stderr read as done), and the next run captures them."""
    sessions, proc = _ingest_with_fault(repo, tmp_path, KILL_ONE_WORKER, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "ingest incomplete" in proc.stderr and "run `engram ingest` again" in proc.stderr
    first = json.loads(proc.stdout)
    assert first["failed"] >= 1 and first["tapes"] + first["failed"] == 6
    again = run_engram(repo, "ingest", str(sessions), "--json", env={"ENGRAM_LOCAL": "1"})
    second = json.loads(again.stdout)
    assert second["failed"] == 0 and first["tapes"] + second["tapes"] == 6
    assert len(list((repo / ".engram" / "tapes").iterdir())) == 6


# The worker that captured s3 dies half-way through writing its result to the pool's pipe (a
# SIGKILL can land there: its results are megabytes of fingerprints), leaving part of a message.
KILL_MID_RESULT = """import os, signal, struct, sys
from multiprocessing.queues import SimpleQueue
from multiprocessing.reduction import ForkingPickler
import engram.capture.pipeline as pipeline
from engram.cli.main import main
parent, real_capture, real_put = os.getpid(), pipeline.capture_write, SimpleQueue.put
doomed = []
def capture_write(db, store, job, **kw):
    if os.getpid() != parent and any(src.path.name == "s3.jsonl" for src in job.sources):
        doomed.append(True)
    return real_capture(db, store, job, **kw)
def put(self, obj):
    if doomed and os.getpid() != parent:
        data = bytes(ForkingPickler.dumps(obj))
        with self._wlock:
            self._writer._send(struct.pack("!i", len(data)) + data[: len(data) // 2])
            os.kill(os.getpid(), signal.SIGKILL)
    return real_put(self, obj)
pipeline.capture_write, SimpleQueue.put = capture_write, put
sys.exit(main(["ingest", *sys.argv[1:]]))
"""


def test_a_worker_killed_while_sending_its_result_does_not_hang_the_ingest(repo: Path, tmp_path: Path) -> None:
    """CPython's process pool reads the half-written result and waits for the rest for ever (the
    pipe's write end stays open in the other processes): the ingest hung, as a hook's detached
    ingest would, holding the store's ingest lock. It ends, exit 1, and a re-run captures the rest."""
    sessions, proc = _ingest_with_fault(repo, tmp_path, KILL_MID_RESULT, timeout=60)
    assert proc.returncode == 1 and "run `engram ingest` again" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    run_engram(repo, "ingest", str(sessions), env={"ENGRAM_LOCAL": "1"})
    assert len(list((repo / ".engram" / "tapes").iterdir())) == 6
