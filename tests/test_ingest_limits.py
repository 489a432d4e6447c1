"""Bad input met by ingest (issue 50): a line nested too deep, a killed worker, a huge line of a
plain-text session. Each is a counted skip or a one-line report, never a traceback, and what can be
captured is."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import run_engram
from test_store_safety import write_session


def test_a_line_nested_too_deep_is_a_counted_skip(repo: Path, tmp_path: Path) -> None:
    good = write_session(tmp_path / "s-good.jsonl", repo, "s-good", "the good session")
    bad = write_session(tmp_path / "s-deep.jsonl", repo, "s-deep", "the deep session")
    deep = b'{"type":"user","x":' + b"[" * 5000 + b"]" * 5000 + b"}\n"
    bad.write_bytes(bad.read_bytes() + deep)
    for _ in range(2):  # and every later ingest while the file is there
        proc = run_engram(repo, "ingest", str(good), str(bad), check=False)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        assert "1 skipped" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    sessions = {t["session_id"] for t in json.loads(run_engram(repo, "tapes", "--json").stdout)}
    assert {"s-good", "s-deep"} <= sessions
    shown = json.loads(run_engram(repo, "show", "s-deep", "--json").stdout)["events"]
    assert any(e.get("text") == "the deep session" for e in shown)


def _descendants_of(pid: int) -> list[int]:
    """The children of `pid`."""
    return [p for p in _descendants(pid, depth=1)]


def _descendants(pid: int, depth: int = 99) -> list[int]:
    """Every process below `pid` (the forkserver and the workers it forked), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [(pid, 0)]
    while todo:
        at, d = todo.pop()
        for c in children.get(at, []) if d < depth else []:
            out.append(c)
            todo.append((c, d + 1))
    return out


def test_a_killed_worker_is_one_line_and_the_rest_is_captured(repo: Path, tmp_path: Path) -> None:
    src = tmp_path / "sessions"
    src.mkdir()
    filler = "".join(f"build line {i} of a long make output with words\n" for i in range(40000))
    for n in range(16):
        write_session(src / f"s-{n:02}.jsonl", repo, f"s-{n:02}", f"session number {n}", filler + str(n))
    proc = subprocess.Popen([sys.executable, "-m", "engram.cli", "ingest", str(src)], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "ENGRAM_WORKERS": "2"})
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and time.monotonic() < deadline and proc.poll() is None:
        direct = set(_descendants_of(proc.pid))
        workers = [p for p in _descendants(proc.pid) if p not in direct]  # forked by the forkserver
        if workers:
            time.sleep(0.5)  # a result or two back first
            os.kill(workers[-1], signal.SIGKILL)  # what the OOM killer does
            killed = workers[-1]
        time.sleep(0.02)
    out, err = proc.communicate(timeout=600)
    assert killed is not None, "a worker was seen"
    assert "Traceback" not in err and "BrokenProcessPool" not in err, err
    lines = [line for line in err.splitlines() if "worker" in line]
    assert len(lines) == 1 and "engram ingest" in lines[0], err
    again = run_engram(repo, "ingest", str(src))
    assert "Traceback" not in again.stderr
    sessions = {t["session_id"] for t in json.loads(run_engram(repo, "tapes", "--json").stdout)}
    assert sessions == {f"s-{n:02}" for n in range(16)}, "a re-run captures what the killed worker did not"
