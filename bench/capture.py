#!/usr/bin/env python3
"""Measures `engram ingest` throughput and tape size on a generated corpus, against ripgrep
(`rg -F -c toolUseResult` over the same files) timed in the same run.

    python bench/capture.py --corpus bench/data/c100m --size 100MB
    python bench/capture.py --corpus bench/data/c1g --size 1GB --profile

In one run it:

1. generates the corpus with bench/gen_sessions.py when `--corpus` holds no sessions yet;
2. reads every transcript once so both measurements below start from a warm page cache;
3. reference: times `rg -F -c toolUseResult CORPUS/projects` (best of `--rg-runs`) -> MB/s;
4. creates a throw-away git repository, runs `engram init` there and times
   `engram --repo REPO ingest CORPUS/projects [--engram-args ...]` end to end (a subprocess of
   the installed `engram` command: interpreter start-up, discovery, parsing, tape writing,
   catalog and — when engram.cli.capture._indexer returns an indexer — indexing; `--split-index` also
   times an ingest with that hook disabled);
5. prints raw MB, seconds, raw MB/s, events/s, tape bytes (.engram/tapes + .engram/objects) as %
   of raw, and the engram/rg time ratio, against the targets (>= 100 MB/s, tapes <= 10% of raw);
6. seekable-frame cost, on a sample of the written tapes: the size of each tape's canonical
   JSONL compressed as ONE zstd frame at the same level vs the stored framed tape (the % given up
   for seekability), and the median time of a 7-event window read (`TapeReader.window(at, 3, 3)`
   on a freshly opened reader, `--picks` random picks) vs decoding the whole tape;
7. with `--profile`, ingests again into a second fresh repository under cProfile
   (`python -m cProfile -m engram.cli ...`) and prints engram's hot spots.

No network access; everything runs on local files. Sizes are decimal (1 MB = 10**6 bytes).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (NO_INDEX_SETUP, NO_INDEX_SNIPPET, SUMMARY_RE, add_corpus_arguments, become_subreaper, best_of,  # noqa: E402
                    child_cpu, dir_bytes,
                    engram_version, ensure_corpus, fmt_table, fresh_repo, index_bytes, ingest_summary, load,
                    require_rg, timed, top_functions, verdict, warm_cache)

TARGET_MBPS = 100.0
TARGET_RATIO = 0.10
RG_NEEDLE = "toolUseResult"


@dataclass
class IngestResult:
    seconds: float
    cpu: float  # user + system CPU seconds of the ingest process: robust to other load on the machine
    stdout: str
    stderr: str
    sessions: int = 0
    tapes: int = 0
    events: int = 0
    edits: int = 0
    reads: int = 0
    tape_bytes: int = 0
    object_bytes: int = 0
    index_bytes: int = 0
    repo: Path = field(default_factory=Path)


def time_rg(projects: Path, runs: int) -> tuple[float, float, str]:
    """Best wall time and CPU time of `rg -F -c NEEDLE projects`, and its total match count."""
    rg = require_rg("the reference row needs it")
    best, best_cpu, proc = best_of(lambda: subprocess.run([rg, "-F", "-c", RG_NEEDLE, str(projects)],
                                                          capture_output=True, text=True, check=False),
                                   runs, cpu=child_cpu)
    out = proc.stdout if proc is not None else ""
    matches = sum(int(line.rsplit(":", 1)[1]) for line in out.splitlines() if ":" in line)
    return best, best_cpu, f"{matches} matching lines"


def run_ingest(engram: list[str], repo: Path, projects: Path, extra: list[str], *, no_index: bool = False) -> IngestResult:
    if no_index:  # the same CLI in-process with its per-tape index hook replaced by None
        engram = [sys.executable, "-c", NO_INDEX_SNIPPET]
    secs, cpu, proc = timed([*engram, "--repo", str(repo), "ingest", str(projects), *extra], repo, "ingest")
    res = IngestResult(secs, cpu, proc.stdout, proc.stderr, repo=repo)
    m = SUMMARY_RE.search(proc.stdout)
    if m:
        res.sessions, res.tapes, res.events, res.edits, res.reads = (int(x) for x in m.groups())
    store = repo / ".engram"
    res.tape_bytes = dir_bytes(store / "tapes")
    res.object_bytes = dir_bytes(store / "objects")
    res.index_bytes = sum(index_bytes(store).values())
    return res


def indexing_active(repo: Path) -> bool:
    """Whether `engram ingest` indexes each new tape: asks the CLI's own hook (engram.cli.capture._indexer)."""
    try:
        from engram.cli import capture as cli
        from engram.store.repo import Store
    except ImportError:
        return False
    hook = getattr(cli, "_indexer", None)
    if hook is not None:
        try:
            return hook(Store(repo)) is not None
        except Exception:  # noqa: BLE001 - a half-built index module counts as "not active"
            return False
    spec = importlib.util.find_spec("engram.index.build")
    return bool(spec and spec.origin and "def index_new_tape" in Path(spec.origin).read_text(errors="replace"))


def seek_section(store: Path, sample: int, picks: int, seed: int) -> str:
    """Single-frame vs framed size, and window-read vs whole-tape decode times."""
    import zstandard

    from engram.tape.reader import TapeReader
    from engram.tape.writer import COMPRESSION_LEVEL, TAPE_SUFFIX

    tapes = sorted((store / "tapes").glob(f"*{TAPE_SUFFIX}"))
    if not tapes:
        return "no tapes written: seekable-frame section skipped"
    rng = random.Random(seed)
    chosen = rng.sample(tapes, min(sample, len(tapes)))
    objects = store / "objects"
    cctx = zstandard.ZstdCompressor(level=COMPRESSION_LEVEL)
    dctx = zstandard.ZstdDecompressor()
    framed_total = single_total = raw_total = 0
    overheads: list[float] = []
    full_framed: list[float] = []
    full_single: list[float] = []
    n_events: dict[Path, int] = {}
    frames: list[int] = []
    for p in chosen:
        with TapeReader(p, objects) as r:
            lines = list(r.raw_lines())
            n_events[p] = r.n_events
            frames.append(len(r.frames))
        canon = b"".join(line + b"\n" for line in lines)
        single = cctx.compress(canon)
        stored = p.stat().st_size
        framed_total += stored
        single_total += len(single)
        raw_total += len(canon)
        overheads.append(stored / len(single) - 1)
        t0 = time.perf_counter()
        with TapeReader(p, objects) as r:
            for _ in r.raw_lines():
                pass
        full_framed.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        dctx.decompress(single)
        full_single.append(time.perf_counter() - t0)
    window_times: list[float] = []
    for _ in range(picks):
        p = rng.choice(chosen)
        at = rng.randrange(n_events[p])
        t0 = time.perf_counter()
        with TapeReader(p, objects) as r:
            r.window(at, 3, 3)
        window_times.append(time.perf_counter() - t0)
    big = max(chosen, key=lambda q: q.stat().st_size)
    big_window: list[float] = []
    for _ in range(min(picks, 200)):
        at = rng.randrange(n_events[big])
        t0 = time.perf_counter()
        with TapeReader(big, objects) as r:
            r.window(at, 3, 3)
        big_window.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    with TapeReader(big, objects) as r:
        for _ in r.raw_lines():
            pass
    big_full = time.perf_counter() - t0
    ms = 1000.0
    rows = [
        ("tapes sampled", f"{len(chosen)} of {len(tapes)} (median {statistics.median(frames):.0f} frames, "
                          f"canonical JSONL {raw_total / 1e6:.1f} MB)"),
        ("stored (framed + seek table)", f"{framed_total:,} B ({framed_total / raw_total:.2%} of canonical)"),
        ("one zstd frame, same level", f"{single_total:,} B ({single_total / raw_total:.2%} of canonical)"),
        ("given up for seekability", f"{framed_total / single_total - 1:+.2%} overall; per tape median "
                                     f"{statistics.median(overheads):+.2%}, max {max(overheads):+.2%}"),
        (f"window(at,3,3), fresh reader, median of {picks}", f"{statistics.median(window_times) * ms:.3f} ms "
                                                           f"(p95 {sorted(window_times)[int(0.95 * (picks - 1))] * ms:.3f} ms)"),
        ("whole tape decode via TapeReader, median", f"{statistics.median(full_framed) * ms:.2f} ms"),
        ("whole tape single-frame decompress, median", f"{statistics.median(full_single) * ms:.2f} ms"),
        ("window vs whole-tape speed-up", f"{statistics.median(full_framed) / statistics.median(window_times):.1f}x"),
        ("largest sampled tape", f"{big.stat().st_size / 1e6:.2f} MB stored, {n_events[big]} events: window median "
                                 f"{statistics.median(big_window) * ms:.3f} ms vs whole decode {big_full * ms:.1f} ms "
                                 f"({big_full / statistics.median(big_window):.0f}x)"),
    ]
    return fmt_table(["metric", "value"], rows, pad_last=False) + "\n\n" + frame_sweep(chosen, objects)


def frame_sweep(chosen: list[Path], objects: Path) -> str:
    """What other frame sizes / levels would cost: size vs one frame, and one-frame decode time."""
    import zstandard

    from engram.tape.reader import TapeReader
    from engram.tape.writer import COMPRESSION_LEVEL, encode_tape

    tapes: list[list[bytes]] = []
    for p in chosen:
        with TapeReader(p, objects) as r:
            tapes.append(list(r.raw_lines()))
    out = ["frame-size / level sweep on the same sample (re-encoded with engram.tape.writer.encode_tape):",
           "| frame bytes | level | framed size | vs one frame at that level | median frame decode | encode s |",
           "|---|---|---|---|---|---|"]
    dctx = zstandard.ZstdDecompressor()
    for level in sorted({COMPRESSION_LEVEL, 9, 19}):
        single = sum(len(zstandard.ZstdCompressor(level=level).compress(b"".join(x + b"\n" for x in t))) for t in tapes)
        for fb in (128 * 1024, 512 * 1024, 1024 * 1024):
            t0 = time.perf_counter()
            blobs = [encode_tape(t, frame_bytes=fb, level=level) for t in tapes]
            enc = time.perf_counter() - t0
            size = sum(len(b) for b in blobs)
            # decode time of a single frame: the first frame of each tape
            times = []
            for b in blobs:
                t1 = time.perf_counter()
                dobj = dctx.decompressobj()
                dobj.decompress(b)
                times.append(time.perf_counter() - t1)
            out.append(f"| {fb // 1024} KiB | {level} | {size:,} | {size / single - 1:+.1%} | "
                       f"{statistics.median(times) * 1000:.2f} ms | {enc:.2f} |")
    return "\n".join(out)


# Capture only, in one process, with a CPU timer around each step (few calls each: no profiler's
# distortion). Prints one `step seconds` line per step, then `total seconds`.
PHASES_SNIPPET = """import sys, time, collections
from pathlib import Path
import engram.capture.pipeline as p, engram.tape.writer as w, engram.capture.redact as r, engram.adapters.base as b
from engram.store.repo import Store
from engram.capture.discovery import jobs_from_paths
from engram.capture.stats import IngestStats
T = collections.Counter()
def wrap(mod, name, label):
    fn = getattr(mod, name)
    T[label] += 0.0  # (the table's order)
    def timed(*a, **k):
        c = time.process_time()
        try:
            return fn(*a, **k)
        finally:
            T[label] += time.process_time() - c
    setattr(mod, name, timed)
wrap(p, "parse_job", "parse (engram.adapters)")
if hasattr(b, "sha256_hex"):  # (hashed as the adapters read the sources)
    wrap(b, "sha256_hex", "  of which sha256 of the sources")
else:
    wrap(p, "_prefix_sha", "sha256 of the sources")
wrap(p, "write_tape", "write tapes, all")
wrap(w, "_encode_frames" if hasattr(w, "_encode_frames") else "encode_tape", "  of which zstd frames")
wrap(w, "atomic_write", "  of which write + fsync")
wrap(r.Redactor, "events" if hasattr(r.Redactor, "events") else "event", "  of which redaction")
c0 = time.process_time()
stats = IngestStats()
p.ingest(Store(Path(sys.argv[1])), jobs_from_paths([Path(sys.argv[2])], stats), stats=stats, workers=1)
for k, v in T.items():
    print(k, round(v, 3), sep="\t")
print("total", round(time.process_time() - c0, 3), sep="\t")
"""


def capture_phases(projects: Path, workdir: Path | None, engram: list[str]) -> str:
    """Where capture's CPU goes, in one process (PHASES_SNIPPET), as a table of shares."""
    repo = fresh_repo(workdir, "engram-bench-", engram)
    _, _, proc = timed([sys.executable, "-c", PHASES_SNIPPET, str(repo), str(projects)], repo, "phases")
    shutil.rmtree(repo, ignore_errors=True)
    steps = [line.split("\t") for line in proc.stdout.splitlines() if "\t" in line]
    total = float(steps[-1][1])
    rows = [(name, f"{float(sec):.2f} s", f"{float(sec) / total:.0%}") for name, sec in steps]
    return "capture only, one process, CPU by step:\n" + fmt_table(["step", "CPU", "share"], rows)


# Capture only with the worker pool, each session's capture timed where it runs (the wrapper
# reaches the workers because they are forked from this process: engram.capture.pipeline
# ._start_method). Writes one JSON line per session to OUT/<pid>.txt; prints the ingest's span.
TIMELINE_SNIPPET = """import sys, os, time, json
from pathlib import Path
import engram.capture.pipeline as p
from engram.store.repo import Store
from engram.capture.discovery import jobs_from_paths
from engram.capture.stats import IngestStats
if getattr(p, "_start_method", lambda: "forkserver")() != "fork":
    sys.exit("--timeline needs workers forked from this process (engram.capture.pipeline._start_method)")
out, write = Path(sys.argv[3]), p.capture_write
def sched():  # (ns on a core, ns waiting in the run queue) of this process's main thread
    with open("/proc/self/schedstat") as f:
        return [int(x) for x in f.read().split()[:2]]
def timed(db, store, job, **kw):
    w0, c0, s0 = time.perf_counter(), time.process_time(), sched()
    got = write(db, store, job, **kw)
    s1 = sched()
    with open(out / f"{os.getpid()}.txt", "a") as f:
        f.write(json.dumps([w0, time.perf_counter(), time.process_time() - c0, p._job_bytes(job),
                            (s1[0] - s0[0]) / 1e9, (s1[1] - s0[1]) / 1e9]) + "\\n")
    return got
p.capture_write = timed
t0, s0 = time.perf_counter(), sched()
stats = IngestStats()
p.ingest(Store(Path(sys.argv[1])), jobs_from_paths([Path(sys.argv[2])], stats), stats=stats, workers=2)
s1 = sched()
print(json.dumps([t0, time.perf_counter(), time.process_time(), (s1[0] - s0[0]) / 1e9, (s1[1] - s0[1]) / 1e9]))
"""


def capture_timeline(projects: Path, workdir: Path | None, engram: list[str]) -> str:
    """Capture only with 2 workers: per worker, its sessions, MB, when its first began and its
    last ended (from the start of discovery), its busy wall time, its CPU, and how that wall time
    splits (/proc/self/schedstat) into time on a core, time waiting for one (other load) and time
    blocked (the disk: what an idle machine would still wait for); the parent's CPU, and its
    time blocked from discovery to the last commit."""
    import json
    import tempfile

    repo = fresh_repo(workdir, "engram-bench-", engram)
    with tempfile.TemporaryDirectory(dir=workdir) as out:
        _, _, proc = timed([sys.executable, "-c", TIMELINE_SNIPPET, str(repo), str(projects), out], repo, "timeline")
        t0, t1, parent_cpu, *parent_sched = json.loads(proc.stdout.strip().splitlines()[-1])
        rows = []
        for f in sorted(Path(out).iterdir()):
            runs = [json.loads(line) for line in f.read_text().splitlines()]
            busy = sum(r[1] - r[0] for r in runs)
            on, queued = (sum(r[i] for r in runs) for i in (4, 5)) if all(len(r) > 5 for r in runs) else (0.0, 0.0)
            rows.append((f.stem, str(len(runs)), f"{sum(r[3] for r in runs) / 1e6:.1f}",
                         f"{min(r[0] for r in runs) - t0:.2f} s", f"{max(r[1] for r in runs) - t0:.2f} s",
                         f"{busy:.2f} s", f"{sum(r[2] for r in runs):.2f} s", f"{on:.2f} s", f"{queued:.2f} s",
                         f"{max(0.0, busy - on - queued):.2f} s"))
    shutil.rmtree(repo, ignore_errors=True)
    blocked = max(0.0, t1 - t0 - sum(parent_sched)) if parent_sched else 0.0
    return (f"capture only, 2 workers: {t1 - t0:.2f} s from discovery to the last commit, parent CPU {parent_cpu:.2f} s, "
            f"parent blocked {blocked:.2f} s (load {load()})\n"
            + fmt_table(["worker", "sessions", "MB", "first began", "last ended", "busy (wall)", "CPU", "on a core",
                         "waiting for a core", "blocked"], rows))


def compare_capture(projects: Path, raw_mb: float, workdir: Path | None, pythons: list[str], runs: int) -> str:
    """Capture only (index off), this interpreter's engram against each of `pythons` (another
    install: a venv of an older commit), in one process (ENGRAM_WORKERS=1) and with the worker
    pool, alternating `runs` times; median and best wall and CPU of each, and the load seen."""
    confs = [(f"{py} ({label})", py, env) for py in [sys.executable, *pythons]
             for label, env in (("1 process", {"ENGRAM_WORKERS": "1"}), ("workers", {}))]
    got: dict[str, list[tuple[float, float, float]]] = {label: [] for label, _, _ in confs}
    for _ in range(runs):
        for label, py, env in confs:
            repo = fresh_repo(workdir, "engram-bench-", [str(Path(py).with_name("engram"))])
            seen = os.getloadavg()[0]
            wall, cpu, _ = timed([py, "-c", NO_INDEX_SNIPPET, "--repo", str(repo), "ingest", str(projects)], repo,
                                 "ingest", env)
            got[label].append((wall, cpu, seen))
            shutil.rmtree(repo, ignore_errors=True)
    rows = []
    for label, v in got.items():
        walls, cpus = [x[0] for x in v], [x[1] for x in v]
        rows.append((label, *(f"{raw_mb / statistics.median(xs):,.1f} ({raw_mb / min(xs):,.1f}) MB/s"
                              for xs in (walls, cpus)),
                     f"{min(x[2] for x in v):.1f}-{max(x[2] for x in v):.1f}"))
    return (f"capture only, {runs} alternating runs, median (best):\n"
            + fmt_table(["interpreter (engram it imports)", "wall", "CPU (user+sys, workers counted)", "load"], rows))


PROFILE_NO_INDEX = NO_INDEX_SETUP + "import cProfile\ncProfile.run('m.main(sys.argv[2:])', sys.argv[1])"


def profile_ingest(repo: Path, projects: Path, extra: list[str], out: Path, top: int, *, no_index: bool = False) -> str:
    """Ingest under cProfile (in-process CLI) and return engram's hottest functions."""
    if no_index:
        cmd = [sys.executable, "-c", PROFILE_NO_INDEX, str(out), "--repo", str(repo), "ingest", str(projects), *extra]
    else:
        cmd = [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "engram.cli", "--repo", str(repo), "ingest",
               str(projects), *extra]
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=repo, check=True, capture_output=True)
    secs = time.perf_counter() - t0
    what = "capture only, index hook off" if no_index else "full ingest"
    return (f"profiled ingest ({what}): {secs:.1f}s under cProfile (profile saved to {out})\n\n"
            + top_functions(out, top))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_arguments(ap, seed_help="generator seed, also used to sample tapes")
    ap.add_argument("--engram-args", default="", help="extra arguments for `engram ingest`, one shell-quoted string")
    ap.add_argument("--rg-runs", type=int, default=3, help="ripgrep runs (best is kept)")
    ap.add_argument("--sample", type=int, default=40, help="tapes sampled for the seekable-frame section (0: no such section)")
    ap.add_argument("--picks", type=int, default=1000, help="random window reads timed")
    ap.add_argument("--workdir", type=Path, help="where the throw-away repositories go (default: system temp)")
    ap.add_argument("--keep", action="store_true", help="keep the throw-away repositories")
    ap.add_argument("--split-index", action="store_true",
                    help="also time an ingest with the index hook disabled (engram.cli.capture._indexer patched in-process)")
    ap.add_argument("--compare", nargs="+", default=[], metavar="PYTHON",
                    help="also time capture only against the engram each of these interpreters imports (a venv of an "
                         "older commit), alternating, in one process and with workers")
    ap.add_argument("--compare-runs", type=int, default=3, help="alternating runs for --compare (median and best shown)")
    ap.add_argument("--phases", action="store_true", help="also time each step of capture (parse, hash, redact, "
                    "compress, write) in one process")
    ap.add_argument("--timeline", action="store_true", help="also time each session where the 2 workers capture it "
                    "(needs workers forked, as `engram ingest` starts them)")
    ap.add_argument("--profile", action="store_true", help="also ingest under cProfile and print hot spots")
    ap.add_argument("--profile-mode", choices=["full", "capture", "both"], default="both",
                    help="profile the full ingest, capture only (index hook off), or both (default)")
    ap.add_argument("--profile-top", type=int, default=25, help="rows per profile listing")
    ap.add_argument("--profile-out", type=Path, default=Path(__file__).resolve().parent / "out" / "ingest.prof",
                    help="where the cProfile data goes (default bench/out/ingest.prof, git-ignored)")
    args = ap.parse_args(argv)

    engram = shlex.split(args.engram)
    extra = shlex.split(args.engram_args)
    projects, files = ensure_corpus(args)
    raw = sum(p.stat().st_size for p in files)
    raw_mb = raw / 1e6
    cold = warm_cache(files)
    print(f"corpus: {projects} — {len(files)} files, {raw_mb:.1f} MB (first read {cold:.2f}s; timings below are warm-cache)")

    subreaper = become_subreaper()
    print(f"CPU times count the ingest's worker processes: {'yes' if subreaper else 'NO (parent only)'}")
    print(f"load average before: {load()} on {os.cpu_count()} CPUs "
          "(other processes on the machine slow every figure below)")
    rg_s, rg_cpu, rg_note = time_rg(projects, args.rg_runs)
    print(f"rg -F -c {RG_NEEDLE}: {rg_s:.2f}s, {rg_note}", flush=True)
    print(f"engram under test: {engram_version()}")

    repo = fresh_repo(args.workdir, "engram-bench-", engram)
    indexing = indexing_active(repo)
    print(f"engram ingest into {repo} ...", flush=True)
    res = run_ingest(engram, repo, projects, extra)
    print(f"  {ingest_summary(res.stdout)}")
    stored = res.tape_bytes + res.object_bytes
    mbps = raw_mb / res.seconds
    rows = [
        ("raw JSONL", f"{raw_mb:,.1f} MB ({len(files)} files)"),
        ("engram ingest wall time", f"{res.seconds:.2f} s" + (" (includes indexing)" if indexing else " (no indexing step present)")),
        ("engram ingest CPU time (user+sys)", f"{res.cpu:.2f} s"),
        ("capture throughput", f"{mbps:,.1f} MB/s raw by wall time, {raw_mb / res.cpu:,.1f} MB/s by CPU time — target >= "
                               f"{TARGET_MBPS:.0f}: {verdict(mbps >= TARGET_MBPS)}"),
        ("events/s", f"{res.events / res.seconds:,.0f} ({res.events:,} events, {res.sessions} sessions, {res.tapes} tapes)"),
        ("tape bytes (tapes + objects)", f"{stored:,} B = {stored / raw:.2%} of raw — target <= {TARGET_RATIO:.0%}: "
                                         f"{verdict(stored / raw <= TARGET_RATIO)}"),
        ("  of which objects", f"{res.object_bytes:,} B"),
        ("index.sqlite (catalog + index, not counted)", f"{res.index_bytes:,} B"),
        ("rg -F -c reference", f"{rg_s:.2f} s wall = {raw_mb / rg_s:,.0f} MB/s ({rg_cpu:.2f} s CPU over its threads)"),
        ("engram / rg time", f"{res.seconds / rg_s:.1f}x (wall)"),
    ]
    if args.split_index:
        nrepo = fresh_repo(args.workdir, "engram-bench-", engram)
        nres = run_ingest(engram, nrepo, projects, extra, no_index=True)
        shutil.rmtree(nrepo, ignore_errors=True)
        rows.insert(4, ("  capture only (index hook off)", f"{nres.seconds:.2f} s wall ({raw_mb / nres.seconds:,.1f} MB/s), "
                                                            f"{nres.cpu:.2f} s CPU ({raw_mb / nres.cpu:,.1f} MB/s); indexing "
                                                            f"adds ~{res.seconds - nres.seconds:.2f} s wall, "
                                                            f"{res.cpu - nres.cpu:.2f} s CPU"))
    rows.append(("load average after", load()))
    print()
    print(fmt_table(["metric", "value"], rows, pad_last=False))
    if indexing:
        print("\nnote: ingest's per-tape index hook (engram.cli.capture._indexer) is active: the ingest figure includes indexing.")
    if args.phases:
        print()
        print(capture_phases(projects, args.workdir, engram))
    if args.timeline:
        print()
        print(capture_timeline(projects, args.workdir, engram))
    if args.compare:
        print()
        print(compare_capture(projects, raw_mb, args.workdir, args.compare, args.compare_runs))
    if args.sample > 0:  # --sample 0: the throughput figures alone
        print("\nseekable-frame cost:")
        print(seek_section(repo / ".engram", args.sample, args.picks, args.seed))

    if args.profile:
        args.profile_out.parent.mkdir(parents=True, exist_ok=True)
        modes = {"full": [False], "capture": [True], "both": [False, True]}[args.profile_mode]
        for no_index in modes:
            prepo = fresh_repo(args.workdir, "engram-bench-", engram)
            out = args.profile_out.with_name(args.profile_out.stem + ("-capture" if no_index else "") + args.profile_out.suffix)
            print()
            print(profile_ingest(prepo, projects, extra, out, args.profile_top, no_index=no_index))
            if not args.keep:
                shutil.rmtree(prepo, ignore_errors=True)
    if args.keep:
        print(f"\nkept {repo}")
    else:
        shutil.rmtree(repo, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
