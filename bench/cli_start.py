#!/usr/bin/env python3
"""What a process of the `engram` command costs before and around its work: two installs side by
side, on the commands an agent's hooks and a user run most, answered locally (ENGRAM_LOCAL=1).

    python bench/cli_start.py OLD/bin/engram NEW/bin/engram [--runs 15] [--store-size 10MB] [--workdir DIR]

In one run it builds a small store (a generated corpus of `--store-size`, ingested by the first
install; spans of its code.edit after-texts written into the tree, as scale.py does) and
`--runs` new ~1 MB sessions (other seeds), then times, alternating which install goes first:

- `engram --version` (the interpreter and the console script: the floor);
- `engram ingest SESSION_DIR` of a new 1 MB session into a fresh copy of the store (the copy is
  not timed): what a capture hook's detached ingest and a user's append pay, index included;
- `engram explain FILE:A-B --brief` of a sampled 20-line span;
- `engram hook` with a `PreToolUse` payload for an Edit (the notes lookup the agent waits for);
- `engram hook` with a `Stop` payload (the capture hook: starts a detached ingest and returns; the
  ingest is waited for, off the clock, before the next run).

Prints each command's p50 wall and p50 CPU (user+sys of the command's own process) per install,
the ratio of the second to the first, and whether the two installs' outputs (the ingest summary,
the explain JSON, the hook's answer) were identical. CPU is the figure to compare on these shared
machines; the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_sessions  # noqa: E402
from common import (SPAN_LINES, become_subreaper, fmt_table, load, reap_orphans, run_timed,  # noqa: E402
                    sample_spans)

LOCAL = {"ENGRAM_LOCAL": "1"}


def new_session(out: Path, seed: int, size: int) -> Path:
    """One ~`size` session (scale.py's appends: other seeds, later dates than the corpus)."""
    proj = out / "projects" / gen_sessions.PROJECT_DIR
    proj.mkdir(parents=True, exist_ok=True)
    start = gen_sessions.EPOCH_MS + 400 * 86_400_000 + seed * 3_600_000
    gen_sessions._gen_one((seed, 0, size, start, str(proj)))
    return out / "projects"


def build_store(engram: str, work: Path, size: int) -> Path:
    corpus = work / "corpus"
    subprocess.run([sys.executable, str(Path(__file__).with_name("gen_sessions.py")), "--out", str(corpus),
                    "--size", str(size), "--seed", "3"], check=True, capture_output=True)
    repo = work / "store"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run([engram, "init"], cwd=repo, check=True, capture_output=True, env={**os.environ, **LOCAL})
    subprocess.run([engram, "ingest", str(corpus / "projects")], cwd=repo, check=True, capture_output=True,
                   env={**os.environ, **LOCAL})
    return repo


def timed(cmd: list[str], cwd: Path, stdin: str | None = None) -> tuple[float, float, str]:
    """Wall and CPU seconds of `cmd` and its output; the script stops if it fails."""
    if stdin is None:
        wall, cpu, proc = run_timed(cmd, cwd, LOCAL)
    else:
        import time  # noqa: PLC0415

        from common import child_cpu  # noqa: PLC0415

        c0, t0 = child_cpu(), time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, input=stdin, capture_output=True, text=True, check=False,
                              env={**os.environ, **LOCAL})
        wall, cpu = time.perf_counter() - t0, child_cpu() - c0
    if proc.returncode != 0:
        raise SystemExit(f"cli_start: `{' '.join(cmd)}` exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return wall, cpu, proc.stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("engrams", nargs=2, metavar="ENGRAM", help="the two installs' `engram` (reference first)")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--store-size", default="10MB", type=gen_sessions.parse_size)
    ap.add_argument("--session-size", default="1MB", type=gen_sessions.parse_size)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args(argv)
    become_subreaper()  # the Stop hook's detached ingest is reaped here
    work = Path(tempfile.mkdtemp(prefix="engram-cli-start-", dir=args.workdir))
    try:
        return run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, work: Path) -> int:
    a, b = args.engrams
    store = build_store(a, work, args.store_size)
    span = sample_spans(store, 1, seed=1)[0]
    target = f"{span.rel}:{span.start}-{span.start + SPAN_LINES - 1}"
    sessions = [new_session(work / f"s{i}", 1000 + i, args.session_size) for i in range(args.runs)]
    edit = json.dumps({"session_id": "x", "cwd": str(store), "hook_event_name": "PreToolUse", "tool_name": "Edit",
                       "tool_use_id": "toolu_1", "tool_input": {"file_path": str(store / span.rel),
                                                                "old_string": span.text.splitlines()[0],
                                                                "new_string": span.text.splitlines()[0]}})
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    outputs: dict[tuple[str, str], list[str]] = {}
    loads = [load()]

    def record(cmd: str, exe: str, got: tuple[float, float, str]) -> None:
        times.setdefault((cmd, exe), []).append(got[:2])
        env = str(Path(exe).resolve().parent.parent)  # (`--version` names the install's path)
        outputs.setdefault((cmd, exe), []).append(got[2].replace(env, "ENV"))

    for i in range(args.runs):
        for exe in ((a, b) if i % 2 == 0 else (b, a)):
            record("--version", exe, timed([exe, "--version"], store))
            copy = work / "copy"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(store, copy, symlinks=True)
            wall, cpu, out = timed([exe, "ingest", str(sessions[i])], copy)
            record("ingest 1 MB session", exe, (wall, cpu, out.replace(str(copy), "REPO")))
            record("explain --brief", exe, timed([exe, "explain", target, "--brief"], store))
            record("hook (PreToolUse: Edit)", exe, timed([exe, "hook"], store, edit))
            main_file = next(sessions[i].rglob("*.jsonl"))
            stop = json.dumps({"session_id": main_file.stem, "transcript_path": str(main_file), "cwd": str(copy),
                               "hook_event_name": "Stop"})
            record("hook (Stop: starts a detached ingest)", exe, timed([exe, "hook"], copy, stop))
            reap_orphans(120.0)
        loads.append(load())
    rows = []
    for cmd in dict.fromkeys(c for c, _ in times):
        cells = [cmd]
        p50 = {}
        for exe in (a, b):
            w = statistics.median(x[0] for x in times[(cmd, exe)])
            c = statistics.median(x[1] for x in times[(cmd, exe)])
            p50[exe] = (w, c)
            cells.append(f"{w * 1e3:,.0f} ms / {c * 1e3:,.0f} ms")
        cells.append(f"{p50[b][0] / p50[a][0]:.2f} / {p50[b][1] / p50[a][1]:.2f}")
        same = sum(x == y for x, y in zip(outputs[(cmd, a)], outputs[(cmd, b)]))
        cells.append(f"{same}/{len(outputs[(cmd, a)])}")
        rows.append(cells)
    print(f"{args.runs} alternating runs; load average {loads[0]} at the start, {loads[-1]} at the end")
    print(f"A = {a}\nB = {b}")
    print(fmt_table(["command", "A p50 wall / CPU", "B p50 wall / CPU", "B/A wall / CPU", "same output"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
