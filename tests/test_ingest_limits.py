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


def _workers(pid: int) -> list[int]:
    """The pool's workers below the ingest `pid`, from ONE scan of /proc: forked by the ingest
    itself (its own command line: the command forks them) or by the forkserver (two levels down;
    a threaded ingest starts them so), never the resource tracker nor a `git` the ingest runs.
    With a second scan for the direct children, a child started between the two scans (the
    resource tracker) was taken for a worker and killed: 1 run in ~5 on a loaded machine, a
    traceback from the tracker."""
    try:
        own = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    out = []
    for p, depth in _descendants(pid):
        try:
            cmdline = Path(f"/proc/{p}/cmdline").read_bytes()
        except OSError:
            continue
        if cmdline == own if depth == 1 else b"resource_tracker" not in cmdline:
            out.append(p)
    return out


def _descendants(pid: int) -> list[tuple[int, int]]:
    """Every process below `pid` (the forkserver and the workers it forked) with its depth (1: a
    child), from one scan of /proc."""
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
        for c in children.get(at, []):
            out.append((c, d + 1))
            todo.append((c, d + 1))
    return out


def test_a_killed_worker_is_one_line_and_the_rest_is_captured(repo: Path, tmp_path: Path) -> None:
    src = tmp_path / "sessions"
    src.mkdir()
    filler = "".join(f"build line {i} of a long make output with words\n" for i in range(40000))
    for n in range(32):  # (forked workers capture 16 of them within the half second waited below)
        write_session(src / f"s-{n:02}.jsonl", repo, f"s-{n:02}", f"session number {n}", filler + str(n))
    proc = subprocess.Popen([sys.executable, "-m", "engram.cli", "ingest", str(src)], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "ENGRAM_WORKERS": "2"})
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and time.monotonic() < deadline and proc.poll() is None:
        workers = _workers(proc.pid)
        if workers:
            time.sleep(0.3)  # a result or two back first
            try:
                os.kill(workers[-1], signal.SIGKILL)  # what the OOM killer does
            except ProcessLookupError:  # it ended meanwhile: look again
                continue
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
    assert sessions == {f"s-{n:02}" for n in range(32)}, "a re-run captures what the killed worker did not"


def peak_ingest(repo: Path, path: Path) -> tuple[subprocess.CompletedProcess[str], int]:
    """`engram ingest PATH` and its peak resident memory in bytes (the process's own ru_maxrss)."""
    code = ("import resource, sys\nfrom engram.cli.main import main\nrc = main(['ingest', sys.argv[1]])\n"
            "print('MAXRSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, file=sys.stderr)\n"
            "sys.exit(rc)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(path)], cwd=repo, capture_output=True, text=True,
                          timeout=600, check=False)
    peak = int(proc.stderr.rsplit("MAXRSS", 1)[1].split()[0])
    return proc, peak


def small_notes_peak(repo: Path, tmp_path: Path) -> int:
    """The peak of ingesting a few short notes: what a long line's peak is measured against."""
    small = tmp_path / "notes-small.txt"
    small.write_text("the first note about the parser\n\nthe second note\n")
    return peak_ingest(repo, small)[1]


def notes_around_a_line(path: Path, line: int) -> Path:
    """A plain-text session: a note, a line of `line` bytes of short words, another note."""
    with path.open("w") as f:
        f.write("a note kept before the long line\n")
        block = "word " * (1 << 18)
        for _ in range(line // len(block)):
            f.write(block)
        f.write("\nand a note kept after it\n")
    return path


def test_a_huge_line_of_a_plain_text_session_is_skipped_without_holding_it(repo: Path, tmp_path: Path) -> None:
    baseline = small_notes_peak(repo, tmp_path)
    line = 40 << 20  # over the 32 MiB default of ingest.max_line_bytes
    huge = notes_around_a_line(tmp_path / "notes.txt", line)
    proc, peak = peak_ingest(repo, huge)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "line longer than" in proc.stdout, proc.stdout
    assert peak < baseline + line // 2, f"peak {peak >> 20} MiB against {baseline >> 20} MiB for a small file"
    texts = json.dumps(json.loads(run_engram(repo, "search", "note kept", "--json").stdout))
    assert "before the long line" in texts and "after it" in texts
    assert "0 new tapes" in run_engram(repo, "ingest", str(huge)).stdout, "captured to its end"


def test_a_long_line_kept_costs_a_few_times_its_size_not_a_string_per_word(repo: Path, tmp_path: Path) -> None:
    """A 16 MiB line under the limit is kept; counting its words split all of it (1.7 million
    strings per 8 MiB of short words): that ingest peaked 260 MiB over a small file's."""
    baseline = small_notes_peak(repo, tmp_path)
    line = 16 << 20
    proc, peak = peak_ingest(repo, notes_around_a_line(tmp_path / "notes.txt", line))
    assert proc.returncode == 0 and "line longer than" not in proc.stdout, proc.stdout
    assert peak - baseline < 4 * line + (32 << 20), f"peak {peak >> 20} MiB against {baseline >> 20} MiB"


def test_a_last_line_nested_too_deep_is_not_left_for_the_next_ingest(repo: Path, tmp_path: Path) -> None:
    """Without its newline, a line nested past orjson's depth was taken for a half-written last
    line: "truncated last line (left for the next ingest)", though no ending could make it readable.
    It is a skip saying why (on every ingest while the file is there, as a deep line before the last),
    and the session is kept."""
    bad = write_session(tmp_path / "s-deep.jsonl", repo, "s-deep", "the deep session")
    bad.write_bytes(bad.read_bytes() + b'{"type":"user","x":' + b"[" * 5000 + b"]" * 5000 + b"}")
    first = json.loads(run_engram(repo, "ingest", str(bad), "--json").stdout)
    assert first["skipped"] == {"line nested deeper than 1024 levels": 1} and first["tapes"] == 1, first
    again = json.loads(run_engram(repo, "ingest", str(bad), "--json").stdout)
    assert again["skipped"] == first["skipped"] and again["tapes"] == 0, again
