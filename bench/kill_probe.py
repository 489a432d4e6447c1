"""The kill test as a standing probe (issue 50): SIGKILL `engram ingest`, a growing session's
append and `engram reindex` at random moments, then check what a user would: every tape on disk
matches its id, re-running the command succeeds, and `engram explain` gives the answers of a store
that was never interrupted (the reference, built in the same run).

    python bench/kill_probe.py [--kills 60] [--spans 6] [--seed 50]

Uses the real Claude Code sessions in tests/fixtures/claude/spotter (MIT). The whole process group
is killed (the parent and its workers). tests/test_kill_probe.py runs a few kills of each phase.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FIXTURE = HERE.parent / "tests" / "fixtures" / "claude" / "spotter"
PHASES = ("ingest", "append", "reindex")


def engram(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "engram.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=900, check=False)
    if check and proc.returncode:
        raise RuntimeError(f"engram {' '.join(args)}: {proc.stderr.strip()}")
    return proc


def unpack(dst: Path) -> Path:
    import zstandard

    dst.mkdir(parents=True)
    for p in sorted(FIXTURE.glob("*.jsonl.zst")):
        with p.open("rb") as f, (dst / p.name[: -len(".zst")]).open("wb") as g:
            zstandard.ZstdDecompressor().copy_stream(f, g)
    return dst


def repository(root: Path, sessions: Path) -> list[str]:
    """A git repository holding the files the sessions wrote, with an empty store; returns
    repository-relative files to explain."""
    from engram.cli.demo import final_files

    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    files: list[str] = []
    for t in sorted(sessions.glob("*.jsonl")):
        cwd = next((json.loads(line).get("cwd") for line in t.read_text().splitlines()
                    if '"cwd"' in line), None)
        for path, text in final_files(t).items():
            if cwd and path.startswith(cwd.rstrip("/") + "/"):
                rel = path[len(cwd.rstrip("/")) + 1:]
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(text)
                files.append(rel)
    engram(root, "init")
    return sorted(set(files))


def answers(root: Path, spans: list[str]) -> list[Any]:
    out = []
    for span in spans:
        doc = json.loads(engram(root, "explain", span).stdout)
        out.append([(s.get("session_id"), s.get("tape")) for s in doc.get("sessions", [])])
    return out


def corrupt_tapes(root: Path) -> int:
    from engram.errors import CorruptTape
    from engram.tape.reader import TapeReader

    bad = 0
    for p in (root / ".engram" / "tapes").glob("*.jsonl.zst"):
        try:
            with TapeReader(p) as r:
                r.verify()
        except CorruptTape:
            bad += 1
    return bad


def timed_run(root: Path, args: list[str]) -> float:
    t0 = time.monotonic()
    engram(root, *args)
    return time.monotonic() - t0


def trial(phase: str, template: Path, work: Path, sessions: Path, half: Path, when: float,
          spans: list[str], reference: list[Any]) -> dict[str, int]:
    root = work / "trial"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(template, root, symlinks=True)
    src = half if phase == "append" else sessions
    if phase == "append":  # the sessions grow: the rest of each file arrives, then the ingest is killed
        for f in sessions.glob("*.jsonl"):
            shutil.copy(f, half / f.name)
    args = ["reindex"] if phase == "reindex" else ["ingest", str(src)]
    proc = subprocess.Popen([sys.executable, "-m", "engram.cli", *args], cwd=root, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(when)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    got = {"kills": 1, "corrupt": corrupt_tapes(root), "failed": 0, "changed": 0, "compared": len(spans)}
    for again in (args, ["ingest", str(src)]):
        if engram(root, *again, check=False).returncode:
            got["failed"] += 1
    got["changed"] = sum(a != b for a, b in zip(answers(root, spans), reference, strict=True))
    return got


def main(argv: list[str] | None = None) -> dict[str, dict[str, int]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=60, help="kills in all, spread over the three phases")
    ap.add_argument("--spans", type=int, default=6, help="explain queries compared after each kill")
    ap.add_argument("--seed", type=int, default=50)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        sessions = unpack(work / "sessions")
        half = work / "half"
        half.mkdir()
        files = repository(work / "base", sessions)
        spans = [f"{f}:1-20" for f in rng.sample(files, min(args.spans, len(files)))]
        reference_root = work / "reference"
        shutil.copytree(work / "base", reference_root)
        full = timed_run(reference_root, ["ingest", str(sessions)])
        reference = answers(reference_root, spans)
        t_reindex = timed_run(reference_root, ["reindex"])
        assert answers(reference_root, spans) == reference, "reindex changes the answers"
        templates = {"ingest": work / "base", "reindex": reference_root}
        appended = work / "appended"  # the first half of every session captured
        shutil.copytree(work / "base", appended)
        for f in sessions.glob("*.jsonl"):
            lines = f.read_bytes().splitlines(keepends=True)
            (half / f.name).write_bytes(b"".join(lines[: len(lines) // 2]))
        engram(appended, "ingest", str(half))
        templates["append"] = appended
        # An append's reference is the same two captures uninterrupted: a session captured in two
        # parts has two tapes (segments), whose ids differ from the one tape of a single capture.
        ref_append = work / "reference-append"
        shutil.copytree(appended, ref_append)
        for f in sessions.glob("*.jsonl"):  # the same files grow (each trial cuts them back first)
            shutil.copy(f, half / f.name)
        engram(ref_append, "ingest", str(half))
        references = {"ingest": reference, "reindex": reference, "append": answers(ref_append, spans)}
        t_append = full / 2
        durations = {"ingest": full, "append": t_append, "reindex": t_reindex}
        totals = {p: {"kills": 0, "corrupt": 0, "failed": 0, "changed": 0, "compared": 0} for p in PHASES}
        for i in range(args.kills):
            phase = PHASES[i % len(PHASES)]
            if phase == "append":
                for f in sessions.glob("*.jsonl"):  # back to the half the template captured
                    lines = f.read_bytes().splitlines(keepends=True)
                    (half / f.name).write_bytes(b"".join(lines[: len(lines) // 2]))
            got = trial(phase, templates[phase], work, sessions, half, rng.uniform(0, durations[phase] * 1.1),
                        spans, references[phase])
            for k, v in got.items():
                totals[phase][k] += v
    print(f"kill probe: {args.kills} kills, {len(spans)} spans, reference (never interrupted): ingest "
          f"{full:.1f} s, reindex {t_reindex:.1f} s")
    print(f"{'phase':<8} {'kills':>5} {'corrupt tapes':>13} {'failed re-runs':>14} {'changed answers':>16}")
    for p in PHASES:
        t = totals[p]
        print(f"{p:<8} {t['kills']:>5} {t['corrupt']:>13} {t['failed']:>14} {t['changed']:>8} of {t['compared']:<5}")
    return totals


if __name__ == "__main__":
    main()
