#!/usr/bin/env python3
"""Measures the whole pipeline (ingest + index, sizes, appends) and `engram explain` latency on a
generated corpus (100 MB or 1 GB), against ripgrep (`rg -F -l` for each span's longest line over
the raw transcripts) timed in the same run, paired span block by span block.

    python bench/scale.py --corpus bench/data/c100m --size 100MB            # quick run
    python bench/scale.py --corpus bench/data/c1g   --size 1GB --keep       # the target run

In one run it:

1. generates the corpus with bench/gen_sessions.py when `--corpus` holds no sessions yet, and
   reads it once (warm page cache for ingest and rg);
2. ingest + index, cold start to committed index: a fresh git repository, `engram init`, then
   `engram --repo REPO ingest CORPUS/projects` (indexing runs inside ingest), `--ingest-runs`
   times, each into its own fresh repository; wall and CPU time (user+sys of the child);
3. the split (`--split`): capture only (`engram.cli.capture._indexer` patched to None, in-process, nothing
   in engram/ changed) into another fresh repository, then `engram --repo REPO index` there,
   which indexes every tape the capture left unindexed;
4. sizes: index.sqlite (+ -wal, -shm) and tapes + objects, as shares of the raw JSONL;
5. samples `--spans` 20-line spans of code that sessions wrote: code.edit after-texts (>= 20 lines)
   of random tapes, read with TapeReader; each after-text is written into the repository's working
   tree (`_scale_spans/NNN-<name>`) so `FILE:START-END` exists on disk for the CLI and MCP;
6. explain in-process (engram.query.explain.explain, Options(brief=True), span read with
   read_span): one warm-up pass, then `--passes` timed passes over all spans -> warm p50/p99 (wall
   and CPU); the same with default windows (brief=False) for reference; recall@1 = share of spans
   whose first session is the session of the tape the span was taken from;
7. cold cache: per query, the connection is closed, engram's files (index.sqlite*, tapes, objects)
   are fsynced and evicted from the OS page cache with posix_fadvise(DONTNEED) (verified with
   fincore when present), then a new connection is opened and one explain is timed (open + query).
   `--cold-mode drop_caches` drops the whole page cache instead (root; disturbs other processes);
8. the CLI: `engram --repo REPO explain FILE:A-B --brief`, wall p50 over `--cli-runs` spans, with
   `engram --help` as the interpreter + import floor;
9. the reference: `rg -F -l NEEDLE CORPUS/projects`, NEEDLE the span's longest line JSON-escaped as
   it is stored in the transcripts. The speed-up is rg p50 / explain p50 *paired*: spans go in
   blocks of 10 — rg on each, then one untimed explain pass over the block, then `--passes` timed
   passes (the connection of step 6 kept open). This machine's speed swings by up to 2x within
   seconds (a fixed Python loop took 196 to 395 ms in one minute), so a ratio of two phases
   measured minutes apart measured the swing; pairing samples both within seconds. The untimed
   pass is there because rg streams the corpus through the CPU caches: on the 100 MB corpus the
   first explain straight after an rg run took 2.4x a warm one, the second 1.6x. The ratio against
   step 6's warm p50 is printed beside it;
10. appending: `--appends` new ~1 MB sessions generated with other seeds, each ingested into the
   big store with `engram --repo REPO ingest DIR` (CLI, includes interpreter start-up) and, for as
   many more, with engram.capture.pipeline.ingest + Indexer in this process (no start-up), and for as many
   more with `engram hook` given a Stop payload on stdin, as Claude Code runs it: the hook's own
   time (what the agent waits for) and the time until the detached ingest has indexed the tape,
   and for as many more with the CLI again while `engram lsp` runs on the store (the command hands
   the ingest to it; one more append first, reported apart, pays the server's first imports);
11. `--profile`: cProfile of one warm explain pass and of one in-process append (saved under
   bench/out/), `--profile-ingest`: an extra full ingest under `py-spy record` (sampling).

The machine is shared: every timing is given with CPU time next to wall time, and the load
average is printed. Sizes are decimal (1 MB = 10**6 bytes).
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import importlib.util
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_sessions  # noqa: E402
from common import (SPAN_DIR, SPAN_LINES, Explainer, Lat, Run, SpanCase, add_corpus_arguments,  # noqa: E402
                    become_subreaper, compile_bytecode, any_session, child_cpu, cold_start_ingest, dir_bytes, engram_command, engram_files,
                    engram_version, ensure_corpus, explain_block, fmt_table, fresh_repo, index_bytes,
                    index_readonly, language_server, load, machine, ms, pct, reap_orphans, require_rg, rg_files,
                    sample_spans, timed, top_functions, top_session, verdict, warm_cache)

OUT_DIR = Path(__file__).resolve().parent / "out"

TARGETS = {
    "mbps": 40.0, "index_share": 0.25, "tape_share": 0.10, "warm_p50_ms": 2.0, "warm_p99_ms": 10.0,
    "rg_speedup": 100.0, "cold_p50_ms": 30.0, "cli_p50_ms": 150.0, "append_ms": 100.0,
}


# ------------------------------------------------------------------ explain timings

def explain_inprocess(ex: Explainer, cases: list[SpanCase], passes: int, profile: Path | None = None) -> Lat:
    lat = Lat()
    for c in cases:  # warm-up pass: page cache, SQLite cache, imports
        ex(c)
    for p in range(passes):
        for c in cases:
            doc = ex.timed(c, lat)
            if p == 0:
                lat.n += 1
                lat.top1 += top_session(doc) == c.session
                lat.anyhit += any_session(doc, c.session)
                lat.sessions.append(len(doc["sessions"]))
    if profile is not None:
        prof = cProfile.Profile()
        prof.enable()
        for c in cases:
            ex(c)
        prof.disable()
        prof.dump_stats(str(profile))
    return lat


def evict(files: list[Path]) -> None:
    """Drop these files' pages from the OS page cache (fsync first: dirty pages are not dropped)."""
    for p in files:
        try:
            fd = os.open(p, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def resident(path: Path) -> str:
    """Bytes of `path` in the page cache, per fincore (util-linux), or '?'."""
    if not shutil.which("fincore") or not path.exists():
        return "?"
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)], capture_output=True,
                         text=True, check=False).stdout.strip()
    return out or "?"


def drop_caches() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def explain_cold(repo: Path, cases: list[SpanCase], n: int, mode: str) -> tuple[Lat, str]:
    from engram.index.db import open_db
    from engram.index.memo import forget
    from engram.query.explain import Options, explain
    from engram.query.spans import read_span
    from engram.store.repo import Store

    store = Store.discover(repo)
    files = engram_files(store.dir)
    idx = store.dir / "index.sqlite"
    lat = Lat()
    note = ""
    for i, c in enumerate(cases[:n]):
        span = read_span(repo, c.rel, c.start, c.end, repo)
        if mode == "drop_caches":
            drop_caches()
        else:
            evict(files)
        if i == 0:
            note = f"index.sqlite resident after eviction: {resident(idx)} B of {idx.stat().st_size:,} B"
        forget()  # engram's per-process copies (stop-list, fragment kinds): as in a new process
        c0, t0 = time.process_time(), time.perf_counter()
        db = open_db(store)
        doc = explain(store, db, span, Options(brief=True))
        lat.wall.append(time.perf_counter() - t0)
        lat.cpu.append(time.process_time() - c0)
        db.close()
        lat.n += 1
        lat.top1 += top_session(doc) == c.session
    return lat, note


def explain_cli(engram: list[str], repo: Path, cases: list[SpanCase], n: int, env: dict[str, str] | None = None
                ) -> tuple[Lat, Lat]:
    """The command as a user runs it; answered locally unless `env` says otherwise (a running
    language server answers `engram explain` when ENGRAM_LOCAL is unset)."""
    lat, floor = Lat(), Lat()
    for c in cases[:n]:
        wall, cpu, proc = timed([*engram, "--repo", str(repo), "explain", f"{c.rel}:{c.start}-{c.end}", "--brief"],
                                repo, "explain", env=env or {"ENGRAM_LOCAL": "1"})
        lat.wall.append(wall)
        lat.cpu.append(cpu)
        doc = json.loads(proc.stdout)
        lat.n += 1
        lat.top1 += top_session(doc) == c.session
    for _ in range(min(n, 15)):
        wall, cpu, _ = timed([*engram, "--help"], repo, "--help")
        floor.wall.append(wall)
        floor.cpu.append(cpu)
    return lat, floor


def explain_cli_served(engram: list[str], repo: Path, cases: list[SpanCase], n: int) -> Lat:
    """`engram explain` while `engram lsp` runs on the repository (the editor open)."""
    with language_server(engram, repo):
        for c in cases[:3]:  # the server's first queries load its copies of the stop-list and kinds
            timed([*engram, "--repo", str(repo), "explain", f"{c.rel}:{c.start}-{c.end}", "--brief"], repo,
                  "explain", env={"ENGRAM_LOCAL": ""})
        return explain_cli(engram, repo, cases, n, env={"ENGRAM_LOCAL": ""})[0]


def rg_reference(rg_exe: str, projects: Path, cases: list[SpanCase], n: int, ex: Explainer, passes: int,
                 block: int = 10) -> tuple[Lat, int, Lat]:
    """rg (the executable `rg_exe`) over the raw files per span, and warm explains of the same spans
    paired with it (see step 9): (rg, spans whose session rg found, the paired explains)."""
    lat, paired = Lat(), Lat()
    found = 0
    todo = cases[:n]
    for b in range(0, len(todo), block):
        group = todo[b:b + block]
        for c in group:
            c0, t0 = child_cpu(), time.perf_counter()
            proc = rg_files(rg_exe, projects, c.needle)
            lat.wall.append(time.perf_counter() - t0)
            lat.cpu.append(child_cpu() - c0)
            found += any(c.session in ln for ln in proc.stdout.splitlines())
            lat.n += 1
        explain_block(ex, group, passes, paired)
    return lat, found, paired


# ------------------------------------------------------------------ appending

def make_session(out: Path, seed: int, size: int) -> int:
    """One session (plus its subagent files) of ~`size` bytes under out/projects/...; returns bytes."""
    proj = out / "projects" / gen_sessions.PROJECT_DIR
    proj.mkdir(parents=True, exist_ok=True)
    start = gen_sessions.EPOCH_MS + 400 * 86_400_000 + seed * 3_600_000  # after every corpus session
    gen_sessions._gen_one((seed, 0, size, start, str(proj)))
    return sum(p.stat().st_size for p in proj.rglob("*.jsonl"))


def captured_sessions(repo: Path) -> set[str]:
    with index_readonly(repo) as db:
        return {r[0] for r in db.execute("SELECT session_id FROM tapes")}


def new_session(tmp: Path, seed: int, size: int, taken: set[str]) -> tuple[Path, int, int]:
    """A ~`size` session no earlier run appended: tries seeds from `seed` up. (dir, bytes, seed)."""
    while True:
        d = tmp / f"append-{seed}"
        raw = make_session(d, seed, size)
        sid = next((d / "projects" / gen_sessions.PROJECT_DIR).glob("*.jsonl")).stem
        if sid not in taken:
            taken.add(sid)
            return d, raw, seed
        shutil.rmtree(d)
        seed += 1


def segments(repo: Path) -> int:
    with index_readonly(repo, busy_ms=5000) as db:  # (a language server may be merging)
        return int(db.execute("SELECT count(*) FROM segments").fetchall()[0][0])


@dataclass
class Append:
    how: str
    raw: int
    wall: float
    cpu: float
    segs_before: int
    segs_after: int
    indexed: float | None = None  # `engram hook`: from the hook's start to the tape indexed


def wait_indexed(repo: Path, session: str, timeout: float = 120.0) -> float:
    """perf_counter() when the session's tape is indexed (polled every 5 ms, read-only)."""
    with index_readonly(repo, busy_ms=1000) as db:
        end = time.perf_counter() + timeout
        while time.perf_counter() < end:
            if db.execute("SELECT 1 FROM tapes WHERE session_id=? AND indexed=1", (session,)).fetchall():
                return time.perf_counter()
            time.sleep(0.005)
    raise SystemExit(f"scale: the session {session} `engram hook` started was not indexed in {timeout:.0f} s")


def appends(engram: list[str], repo: Path, n: int, size: int, seed0: int, tmp: Path,
            profile: Path | None = None) -> tuple[list[Append], str]:
    """The appends of each phase, and what the language server did with the segments its appends
    left once they stopped (it merges them when idle, not while they come)."""
    out: list[Append] = []
    taken = captured_sessions(repo)
    seed = seed0
    idle = ""
    for phase in ("CLI", "in-process", "hook", "served"):
        with language_server(engram, repo) if phase == "served" else nullcontext():
            for i in range(n + (phase == "served")):
                d, raw, seed = new_session(tmp, seed, size, taken)
                seed += 1
                before = segments(repo)
                prof = profile if phase == "in-process" and i == 0 else None
                got = append_one(engram, repo, d, phase, prof)
                how = phase + (" (cProfile)" if prof else "")
                if phase == "served" and i == 0:
                    how += " (first after the server started: its imports)"
                out.append(Append(how, raw, got[0], got[1], before, segments(repo), got[2]))
            if phase == "served":
                idle = idle_merge(repo)
    return out, idle


def idle_merge(repo: Path, timeout: float = 60.0) -> str:
    """How long after the last append the language server had merged its appends' segments."""
    from engram.index.postings import MAX_SEGMENTS

    t0, before = time.perf_counter(), segments(repo)
    while time.perf_counter() - t0 < timeout:
        now = segments(repo)
        if now <= MAX_SEGMENTS:
            if now == before:
                return f"{now} segments after the appends: nothing to merge"
            return (f"the server merged {before} segments into {now} when idle, done "
                    f"{time.perf_counter() - t0:.1f} s after the last append")
        time.sleep(0.02)
    return f"the server left {segments(repo)} segments unmerged {timeout:.0f} s after the last append"


def append_one(engram: list[str], repo: Path, d: Path, phase: str, profile: Path | None
               ) -> tuple[float, float, float | None]:
    """Ingest the session under `d` as `phase` says: (wall, CPU, seconds until indexed or None)."""
    if phase == "hook":  # what an agent's hook does: start the ingest detached, return at once
        main = next((d / "projects" / gen_sessions.PROJECT_DIR).glob("*.jsonl"))
        payload = json.dumps({"session_id": main.stem, "transcript_path": str(main), "cwd": str(repo),
                              "hook_event_name": "Stop"})
        t0 = time.perf_counter()
        subprocess.run([*engram, "hook"], input=payload, text=True, cwd=repo, check=True, capture_output=True,
                       env={**os.environ, "ENGRAM_LOCAL": "1"})
        wall = time.perf_counter() - t0
        indexed = wait_indexed(repo, main.stem) - t0
        reap_orphans(60.0)  # the detached ingest ends (closing the index) before the next append
        return wall, 0.0, indexed
    if phase in ("CLI", "served"):  # the command as a user (or a hook that waited) runs it
        served = phase == "served"
        verbose = ["-v"] if served else []  # (its log line says who ingested)
        wall, cpu, proc = timed([*engram, "--repo", str(repo), *verbose, "ingest", str(d / "projects")], repo,
                                "append", env={"ENGRAM_LOCAL": "" if served else "1"})
        if " 1 new tape," not in proc.stdout:
            raise SystemExit(f"scale: append {d} wrote no tape: {proc.stdout}")
        if served != ("answered by the language server" in proc.stderr):
            raise SystemExit(f"scale: append {d} was {'not ' if served else ''}handed to the language server: "
                             f"{proc.stderr[-500:]}")
        return wall, cpu, None
    # in-process: what the language server or a long-lived hook pays
    from engram.capture.pipeline import ingest_paths
    from engram.store.repo import Store

    store = Store.discover(repo)
    prof = cProfile.Profile() if profile is not None else None
    c0, t0 = time.process_time(), time.perf_counter()
    if prof:
        prof.enable()
    stats = ingest_paths(store, [d / "projects"])
    if prof:
        prof.disable()
        prof.dump_stats(str(profile))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if stats.tapes != 1:
        raise SystemExit(f"scale: in-process append {d} wrote {stats.tapes} tapes")
    return wall, cpu, None


# ------------------------------------------------------------------ profiles

def pyspy_ingest(workdir: Path | None, engram: list[str], projects: Path, out: Path, rate: int) -> str:
    """A full cold-start ingest under `py-spy record` (raw collapsed stacks), summarised by function."""
    if not shutil.which("py-spy"):
        return "py-spy is not installed (pip install py-spy): ingest profile skipped"
    repo = fresh_repo(workdir, "engram-scale-pyspy-", engram)
    cmd = ["py-spy", "record", "--nonblocking", "-r", str(rate), "-f", "raw", "-o", str(out), "--",
           *engram_command(engram), "--repo", str(repo), "ingest", str(projects)]
    wall, cpu, _ = timed(cmd, repo, "py-spy ingest")
    shutil.rmtree(repo, ignore_errors=True)
    return (f"ingest under py-spy --nonblocking at {rate} Hz: {wall:,.1f} s wall, {cpu:,.1f} s CPU (engram + py-spy)\n"
            + summarise_collapsed(out))


def summarise_collapsed(path: Path, top: int = 30) -> str:
    """py-spy raw stacks by function (line numbers dropped): inclusive share of engram functions, and
    'self' share of the innermost engram frame (its own code plus the numpy/SQLite/... it calls)."""
    inc: collections.Counter[str] = collections.Counter()
    inner: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        stack, n_s = line.rsplit(" ", 1)
        n = int(n_s)
        total += n
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
        eng = [f for f in frames if "engram/" in f or "engram_server/" in f]
        for f in set(eng):
            inc[f] += n
        inner[eng[-1] if eng else frames[-1]] += n
    lines = [f"py-spy: {total} samples ({path})", "inclusive (engram functions):"]
    lines += [f"{c / total:7.1%}  {f}" for f, c in inc.most_common(top)]
    lines += ["innermost engram frame (own code + the library calls it makes):"]
    lines += [f"{c / total:7.1%}  {f}" for f, c in inner.most_common(top)]
    return "\n".join(lines)


# ------------------------------------------------------------------ main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_arguments(ap, seed_help="generator seed; also seeds the span sample")
    ap.add_argument("--repo", type=Path, help="reuse this already ingested repository: no ingest timing")
    ap.add_argument("--ingest-runs", type=int, default=1, help="cold-start ingests timed (each into a fresh repo)")
    ap.add_argument("--split", action="store_true", help="also time capture only + `engram index` separately")
    ap.add_argument("--spans", type=int, default=200, help="20-line spans sampled")
    ap.add_argument("--passes", type=int, default=3, help="timed warm passes over the spans (after one warm-up)")
    ap.add_argument("--cold", type=int, default=40, help="cold-cache queries")
    ap.add_argument("--cold-mode", choices=["fadvise", "drop_caches"], default="fadvise",
                    help="evict engram's files only (default) or drop the whole page cache (root)")
    ap.add_argument("--cli-runs", type=int, default=30, help="CLI explain runs")
    ap.add_argument("--rg-spans", type=int, default=200, help="spans searched with rg")
    ap.add_argument("--appends", type=int, default=5,
                    help="1 MB sessions appended via the CLI (as many in-process, as many via `engram hook`)")
    ap.add_argument("--append-size", default="1MB", type=gen_sessions.parse_size)
    ap.add_argument("--workdir", type=Path, help="where the throw-away repositories go (default: system temp)")
    ap.add_argument("--keep", action="store_true", help="keep the measured repository (for bench/mcp_latency.py)")
    ap.add_argument("--profile", action="store_true", help="cProfile a warm explain pass and an in-process append")
    ap.add_argument("--profile-ingest", action="store_true", help="also run one full ingest under py-spy")
    ap.add_argument("--profile-top", type=int, default=25)
    args = ap.parse_args(argv)

    engram = shlex.split(args.engram)
    if importlib.util.find_spec("engram") is None:  # before minutes of ingest, not after them
        raise SystemExit("scale: this Python cannot import engram, which the in-process rows measure: "
                         "run `pip install -e .` from the checkout first")
    rg_exe = require_rg()  # the reference rows come after minutes of ingest
    subreaper = become_subreaper()
    projects, files = ensure_corpus(args)
    raw = sum(p.stat().st_size for p in files)
    raw_mb = raw / 1e6
    first_read = warm_cache(files)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine()}")
    print(f"engram under test: {engram_version()}")
    print(f"corpus: {projects}: {len(files)} files, {raw_mb:,.1f} MB (first read {first_read:.1f}s)")
    print(f"load average at start: {load()}; CPU of worker processes counted: "
          f"{'yes (child subreaper)' if subreaper else 'NO: CPU figures miss the ingest workers'}", flush=True)

    rows: list[list[str]] = []
    runs: list[Run] = []
    repo = args.repo.resolve() if args.repo else None
    if repo is None:
        for i in range(args.ingest_runs):
            r = cold_start_ingest(args.workdir, engram, projects, f"run{i}")
            print(f"  ingest run {i + 1}: {r.wall:.1f}s wall, {r.cpu:.1f}s CPU; {r.summary} (load {load()})", flush=True)
            runs.append(r)
            if i and not args.keep:
                shutil.rmtree(r.repo, ignore_errors=True)
        repo = runs[0].repo
        walls, cpus = [r.wall for r in runs], [r.cpu for r in runs]
        best = min(walls)
        rows.append(["ingest + index, cold start (wall)",
                     f"{raw_mb / best:,.1f} MB/s (best of {len(runs)}: {best:,.1f} s; all: "
                     f"{', '.join(f'{w:,.0f}' for w in walls)} s)", f">= {TARGETS['mbps']:.0f} MB/s",
                     verdict(raw_mb / best >= TARGETS["mbps"])])
        # Per CPU-second, all processes together: what one core would do. The target is the wall
        # row's (end to end); this one shows how much of it is parallelism.
        rows.append(["ingest + index per CPU-second (user+sys, all processes)",
                     f"{raw_mb / min(cpus):,.1f} MB/s ({', '.join(f'{c:,.0f}' for c in cpus)} s CPU)",
                     "(reference)", ""])
        if args.split:
            cap = cold_start_ingest(args.workdir, engram, projects, "capture", no_index=True)
            print(f"  capture only: {cap.wall:.1f}s wall, {cap.cpu:.1f}s CPU (load {load()})", flush=True)
            iw, ic, proc = timed([*engram, "--repo", str(cap.repo), "index"], cap.repo, "index")
            print(f"  engram index: {iw:.1f}s wall, {ic:.1f}s CPU: {proc.stdout.strip()} (load {load()})", flush=True)
            shutil.rmtree(cap.repo, ignore_errors=True)
            rows.append(["  capture only (index hook off)",
                         f"{cap.wall:,.1f} s wall = {raw_mb / cap.wall:,.1f} MB/s; {cap.cpu:,.1f} s CPU = "
                         f"{raw_mb / cap.cpu:,.1f} MB/s", "", ""])
            rows.append(["  index only (`engram index` after it)",
                         f"{iw:,.1f} s wall = {raw_mb / iw:,.1f} MB/s; {ic:,.1f} s CPU = {raw_mb / ic:,.1f} MB/s "
                         f"({ic / (ic + cap.cpu):.0%} of CPU)", "", ""])
    store_dir = repo / ".engram"
    ib = index_bytes(store_dir)
    tb = dir_bytes(store_dir / "tapes") + dir_bytes(store_dir / "objects")
    idx_total = ib.get("index.sqlite", 0) + ib.get("index.sqlite-wal", 0)
    rows.append(["index size (index.sqlite + -wal)",
                 f"{idx_total:,} B = {idx_total / raw:.1%} of raw ({', '.join(f'{k} {v:,}' for k, v in ib.items())})",
                 f"<= {TARGETS['index_share']:.0%}", verdict(idx_total / raw <= TARGETS["index_share"])])
    rows.append(["tape size (tapes + objects)", f"{tb:,} B = {tb / raw:.1%} of raw",
                 f"<= {TARGETS['tape_share']:.0%}", verdict(tb / raw <= TARGETS["tape_share"])])

    cases = sample_spans(repo, args.spans, args.seed, corpus=projects)
    print(f"spans: {len(cases)} x {SPAN_LINES} lines from code.edit after-texts of "
          f"{len({c.tape for c in cases})} tapes, written under {repo / SPAN_DIR}", flush=True)
    prof_explain = OUT_DIR / "explain.prof" if args.profile else None
    brief = Explainer(repo, brief=True)  # kept open: the rg reference pairs its runs with explains
    warm = explain_inprocess(brief, cases, args.passes, profile=prof_explain)
    print(f"  warm brief: {warm.row()} (load {load()})", flush=True)
    with_windows = Explainer(repo, brief=False)
    windows = explain_inprocess(with_windows, cases, 1)
    with_windows.close()
    print(f"  warm with windows: {windows.row()}", flush=True)
    p50, p99 = pct(warm.wall, 50), pct(warm.wall, 99)
    rows.append(["explain warm, in-process, --brief",
                 f"p50 {ms(p50)}, p99 {ms(p99)} wall (CPU p50 {ms(pct(warm.cpu, 50))}, p99 {ms(pct(warm.cpu, 99))}; "
                 f"n={len(warm.wall)})", f"p50 <= {TARGETS['warm_p50_ms']:.0f} ms, p99 <= {TARGETS['warm_p99_ms']:.0f} ms",
                 verdict(p50 * 1000 <= TARGETS["warm_p50_ms"] and p99 * 1000 <= TARGETS["warm_p99_ms"])])
    rows.append(["explain warm, in-process, windows 3/3",
                 f"p50 {ms(pct(windows.wall, 50))}, p99 {ms(pct(windows.wall, 99))} wall "
                 f"(CPU p50 {ms(pct(windows.cpu, 50))}; n={len(windows.wall)})", "(reference)", ""])
    rows.append(["recall@1 (sanity: first session = span's tape's session)",
                 f"{warm.top1}/{warm.n} = {warm.top1 / max(1, warm.n):.1%}; in the answer at all "
                 f"{warm.anyhit}/{warm.n}; sessions per answer median {statistics.median(warm.sessions or [0]):.0f}, "
                 f"max {max(warm.sessions or [0])}", "", ""])

    cold, cold_note = explain_cold(repo, cases, args.cold, args.cold_mode)
    cold_how = ("engram's files evicted (fadvise DONTNEED)" if args.cold_mode == "fadvise"
                else "whole page cache dropped")
    print(f"  cold ({cold_how}): {cold.row()}; {cold_note} (load {load()})", flush=True)
    rows.append(["explain cold cache, new connection + query, --brief",
                 f"p50 {ms(pct(cold.wall, 50))}, p90 {ms(pct(cold.wall, 90))} wall (CPU p50 {ms(pct(cold.cpu, 50))}; "
                 f"n={len(cold.wall)}; {cold_how})", f"p50 <= {TARGETS['cold_p50_ms']:.0f} ms",
                 verdict(pct(cold.wall, 50) * 1000 <= TARGETS["cold_p50_ms"])])

    compile_bytecode()
    cli, floor = explain_cli(engram, repo, cases, args.cli_runs)
    print(f"  CLI: {cli.row()}; `engram --help`: {floor.row()} (load {load()})", flush=True)
    rows.append(["CLI `engram explain FILE:A-B --brief`",
                 f"p50 {ms(pct(cli.wall, 50))} wall, CPU p50 {ms(pct(cli.cpu, 50))} (n={len(cli.wall)}; "
                 f"`engram --help` floor: p50 {ms(pct(floor.wall, 50))} wall, {ms(pct(floor.cpu, 50))} CPU)",
                 f"p50 <= {TARGETS['cli_p50_ms']:.0f} ms", verdict(pct(cli.wall, 50) * 1000 <= TARGETS["cli_p50_ms"])])
    if args.cli_runs:
        served = explain_cli_served(engram, repo, cases, args.cli_runs)
        print(f"  CLI with `engram lsp` running: {served.row()} (load {load()})", flush=True)
        rows.append(["CLI explain, `engram lsp` running (answers it)",
                     f"p50 {ms(pct(served.wall, 50))} wall, CPU p50 {ms(pct(served.cpu, 50))} (n={len(served.wall)})",
                     f"p50 <= {TARGETS['cli_p50_ms']:.0f} ms",
                     verdict(pct(served.wall, 50) * 1000 <= TARGETS["cli_p50_ms"])])

    rg, rg_found, paired = rg_reference(rg_exe, projects, cases, args.rg_spans, brief, args.passes)
    brief.close()
    print(f"  rg: {rg.row()}; found the span's session in {rg_found}/{rg.n} (load {load()})", flush=True)
    print(f"  explain paired with rg: {paired.row()}", flush=True)
    speed = pct(rg.wall, 50) / pct(paired.wall, 50)
    rows.append(["rg -F -l LONGEST_LINE corpus (reference)",
                 f"p50 {ms(pct(rg.wall, 50))} wall, CPU p50 {ms(pct(rg.cpu, 50))} (n={rg.n}; span's session among "
                 f"the files {rg_found}/{rg.n})", "", ""])
    rows.append(["explain warm, in-process, paired with rg (blocks of 10 spans)",
                 f"p50 {ms(pct(paired.wall, 50))}, p99 {ms(pct(paired.wall, 99))} wall (CPU p50 "
                 f"{ms(pct(paired.cpu, 50))}; n={len(paired.wall)})", "", ""])
    rows.append(["explain warm speed-up vs rg (p50/p50, paired)",
                 f"{speed:,.0f}x (CPU: {pct(rg.cpu, 50) / pct(paired.cpu, 50):,.0f}x; against the warm row "
                 f"measured earlier: {pct(rg.wall, 50) / p50:,.0f}x)",
                 f">= {TARGETS['rg_speedup']:.0f}x", verdict(speed >= TARGETS["rg_speedup"])])

    if args.appends:
        # (inside the repository unless --workdir says otherwise: a running server ingests only
        # transcript locations, the repository among them, and answers 403 to a file in /tmp)
        with tempfile.TemporaryDirectory(prefix=".engram-scale-append-", dir=args.workdir or repo) as tmp:
            prof_append = OUT_DIR / "append.prof" if args.profile else None
            apps, idle = appends(engram, repo, args.appends, args.append_size, 1000 + args.seed, Path(tmp),
                                 prof_append)
        for a in apps:
            if a.indexed is not None:
                print(f"  append (hook): {a.raw / 1e6:.2f} MB; the hook returned in {a.wall * 1000:,.0f} ms, the tape "
                      f"was indexed {a.indexed * 1000:,.0f} ms after the hook started; segments {a.segs_before} -> "
                      f"{a.segs_after}", flush=True)
                continue
            print(f"  append ({a.how}): {a.raw / 1e6:.2f} MB in {a.wall * 1000:,.0f} ms wall, {a.cpu * 1000:,.0f} ms "
                  f"CPU; segments {a.segs_before} -> {a.segs_after}", flush=True)
        print(f"  append (served): {idle}", flush=True)
        cli_a = [a for a in apps if a.how == "CLI"]
        inp_a = [a for a in apps if a.how == "in-process"]
        served_a = [a for a in apps if a.how == "served"]
        for label, group in (("append ~1 MB session, CLI `engram ingest FILE`", cli_a),
                             ("append ~1 MB session, in-process ingest()", inp_a),
                             ("append ~1 MB session, the same CLI with `engram lsp` running (it ingests)", served_a)):
            if not group:
                continue
            w = [a.wall for a in group]
            rows.append([label, f"p50 {ms(pct(w, 50))}, max {ms(max(w))} wall; CPU p50 {ms(pct([a.cpu for a in group], 50))} "
                                f"(n={len(group)}, {statistics.mean(a.raw for a in group) / 1e6:.2f} MB each; "
                                f"{sum(a.segs_after < a.segs_before + 1 for a in group)} merged segments)",
                         f"<= {TARGETS['append_ms']:.0f} ms", verdict(pct(w, 50) * 1000 <= TARGETS["append_ms"])])
        hook_a = [a for a in apps if a.how == "hook"]
        if hook_a:
            w, ix = [a.wall for a in hook_a], [a.indexed or 0.0 for a in hook_a]
            rows.append(["append ~1 MB session, `engram hook` (what the agent waits for)",
                         f"p50 {ms(pct(w, 50))}, max {ms(max(w))} wall (n={len(hook_a)})", "(reference)", ""])
            rows.append(["  ... and from the hook's start to the tape indexed (detached ingest)",
                         f"p50 {ms(pct(ix, 50))}, max {ms(max(ix))} wall", "(reference)", ""])

    print()
    print(f"## engram scale: {raw_mb:,.0f} MB corpus ({len(files)} files), {machine()}")
    print(f"engram: {engram_version()}; load average at the end: {load()}")
    print()
    print(fmt_table(["metric", "measured", "target", ""], rows))

    if args.profile:
        print("\nprofile: one warm explain pass (--brief), cProfile")
        print(top_functions(prof_explain, args.profile_top))
        if args.appends and (OUT_DIR / "append.prof").exists():
            print("\nprofile: one in-process append of a ~1 MB session, cProfile")
            print(top_functions(OUT_DIR / "append.prof", args.profile_top))
    if args.profile_ingest:
        print("\nprofile: one full cold-start ingest under py-spy")
        print(pyspy_ingest(args.workdir, engram, projects, OUT_DIR / "ingest-pyspy.txt", 20))
    if args.keep or args.repo:
        print(f"\nrepository: {repo}  (bench/mcp_latency.py --repo {repo})")
    else:
        for r in runs:
            shutil.rmtree(r.repo, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
