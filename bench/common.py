"""Helpers the benchmark scripts share; not a benchmark itself (nothing to run).

The scripts in bench/ are run as scripts (`python bench/scale.py ...`), so bench/ is first on
sys.path and they import this module as `common` (and gen_sessions as `gen_sessions`). What is
here is what more than one script needs, kept in one place so that two scripts measure the same
thing the same way: the machine and engram version lines, timing (child CPU, best of n,
percentiles), tables, the generated corpus, throw-away repositories and cold-start ingests, the
ripgrep reference, the sampled 20-line spans and in-process explains, cProfile listings, and a
minimal LSP client that starts `engram lsp` on a repository.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import pstats
import random
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import orjson

import gen_sessions

T = TypeVar("T")

SPAN_DIR = "_scale_spans"
SPAN_LINES = 20
SUMMARY_RE = re.compile(r"ingest: (\d+) sessions?, (\d+) new tapes?, (\d+) events?, (\d+) edits?, (\d+) reads?")
# `engram ...` in a fresh interpreter with indexing switched off in-process: capture only (parse, redact, write
# tapes, catalogue), in one process. Both ways an ingest indexes are replaced: the CLI's per-tape hook and the
# Indexer that `ingest_paths` (`engram ingest PATH`) builds (patching the hook alone indexed PATH ingests still).
NO_INDEX_SETUP = """import sys, engram.cli.capture as c, engram.cli.main as m, engram.capture.pipeline as p
c._indexer = lambda store: None
def _capture_only(store, paths, maps=None, progress=None, merge_later=False, again=False):
    stats = p.IngestStats()
    p.ingest(store, p.jobs_from_paths(paths, stats), maps=maps, stats=stats, progress=progress, again=again)
    return stats
p.ingest_paths = _capture_only
"""
# Ends as the `engram` command does (engram.cli.main.exit_process: an ingest without the
# interpreter's teardown where the engram under test does so).
NO_INDEX_SNIPPET = NO_INDEX_SETUP + "getattr(m, 'exit_process', lambda a, c: sys.exit(c))(sys.argv[1:], m.main(sys.argv[1:]))"


def _prog() -> str:
    """The running script's name, to prefix its error messages."""
    return Path(sys.argv[0]).stem or "bench"


# ------------------------------------------------------------------ the machine and the code under test

def machine() -> str:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        kb = int(next(ln for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal")).split()[1])
        mem = f"{kb / 1024 ** 2:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    return (f"{os.cpu_count()} CPUs ({model}), {mem} RAM, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def load() -> str:
    """The 1, 5 and 15 minute load averages: the machine is shared, and other load slows every figure."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def checkout_state(src: Path) -> str:
    """The short commit of the git checkout holding `src`, and whether `src` has local changes
    ('?' when git cannot tell): which engram a figure was measured on."""
    head = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=False).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--", "."], capture_output=True,
                           text=True, check=False).stdout.strip()
    return f"{head or '?'}{' + uncommitted changes in engram/' if dirty else ''}"


def engram_version() -> str:
    """The engram source under test: git commit of its checkout, and whether engram/ has local changes."""
    try:
        import engram
    except ImportError:
        return "engram not importable"
    src = Path(engram.__file__).resolve().parent
    try:
        return f"{src} at {checkout_state(src)}"
    except OSError:
        return str(src)


# ------------------------------------------------------------------ timing

def child_cpu() -> float:
    """user+sys CPU seconds of the reaped child processes so far (take the difference around a run)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def best_of(fn: Callable[[], T], repeat: int, cpu: Callable[[], float] = time.process_time
            ) -> tuple[float, float, T | None]:
    """Best wall time and best CPU time of `repeat` runs, and the last run's result. CPU time shows
    the cost when other processes compete for the cores; wall time is what a user waits. `cpu`:
    the clock, this process's by default, `child_cpu` for a subprocess."""
    walls, cpus, result = [], [], None
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), cpu()
        result = fn()
        cpus.append(cpu() - c0)
        walls.append(time.perf_counter() - w0)
    return min(walls, default=float("inf")), min(cpus, default=float("inf")), result


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs, dtype=float), q)) if xs else float("nan")


def ms(x: float) -> str:
    return f"{x * 1000:.2f} ms" if x < 1 else f"{x * 1000:,.0f} ms"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux PR_SET_CHILD_SUBREAPER), so that worker processes `engram ingest`
    starts and does not wait for itself (multiprocessing's forkserver and its workers) are reaped here and
    their CPU time is counted in RUSAGE_CHILDREN. Without it the CPU column misses the capture workers."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def reap_orphans(timeout: float = 2.0) -> int:
    """Wait for adopted descendants still running after the command returned (a forkserver winding down)."""
    n = 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            time.sleep(0.01)
            continue
        n += 1
    return n


def run_timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, *, reap: bool = False
              ) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Run `cmd` (with `env` added to this process's environment): (wall s, child CPU s, the process).
    `reap`: wait for the workers it left behind first, so that their CPU is counted when this
    process is their subreaper (the wall time stops when the command returns)."""
    c0 = child_cpu()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False,
                          env={**os.environ, **env} if env else None)
    wall = time.perf_counter() - t0
    if reap:
        reap_orphans()
    return wall, child_cpu() - c0, proc


def compile_bytecode() -> None:
    """Byte-compile engram as `pip install` does. Under PYTHONDONTWRITEBYTECODE (set on this
    machine) a module changed since its last .pyc is compiled from source on every command,
    30-60 ms that a user's installed engram never pays."""
    for name in ("engram", "engram_server"):
        spec = importlib.util.find_spec(name)
        for where in (spec.submodule_search_locations or []) if spec else []:
            subprocess.run([sys.executable, "-m", "compileall", "-q", where], check=False, capture_output=True)


def timed(cmd: list[str], cwd: Path, what: str, env: dict[str, str] | None = None
          ) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """`run_timed` with the workers reaped, and the script stopped when the command fails."""
    wall, cpu, proc = run_timed(cmd, cwd, env, reap=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"{_prog()}: {what}: `{shlex.join(cmd)}` exited {proc.returncode}")
    return wall, cpu, proc


# ------------------------------------------------------------------ tables

def fmt_table(header: list[str], rows: list[list[str]] | list[tuple[str, ...]], pad_last: bool = True) -> str:
    """A Markdown table, columns padded to their widest cell (the last one too unless `pad_last` is off)."""
    n = len(header)
    w = [max(len(str(r[i])) for r in [header, *rows]) for i in range(n)]
    if not pad_last:
        w[-1] = len(header[-1])

    def line(r: list[str] | tuple[str, ...]) -> str:
        return "| " + " | ".join(str(c) if i == n - 1 and not pad_last else str(c).ljust(w[i])
                                 for i, c in enumerate(r)) + " |"

    return "\n".join([line(header), "|" + "|".join("-" * (x + 2) for x in w) + "|", *map(line, rows)])


# ------------------------------------------------------------------ the generated corpus

def corpus_files(projects: Path) -> list[Path]:
    return sorted(p for p in projects.rglob("*.jsonl") if p.is_file())


def add_corpus_arguments(ap: argparse.ArgumentParser, *, seed_help: str) -> None:
    """The options every corpus benchmark takes: which corpus (generated when missing), which engram."""
    ap.add_argument("--corpus", required=True, type=Path, help="corpus directory (CORPUS/projects/...)")
    ap.add_argument("--size", default="100MB", type=gen_sessions.parse_size,
                    help="corpus size to generate when CORPUS holds no sessions (default 100MB)")
    ap.add_argument("--seed", type=int, default=1, help=seed_help)
    ap.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), help="generator worker processes")
    ap.add_argument("--engram", default="engram", help="the engram command (default: the installed `engram`)")


def ensure_corpus(args: argparse.Namespace) -> tuple[Path, list[Path]]:
    """CORPUS/projects and its session files, generating the corpus first when it holds none."""
    args.corpus = args.corpus.resolve()
    projects = args.corpus / "projects"
    files = corpus_files(projects) if projects.is_dir() else []
    if not files:
        print(f"generating {args.size / 1e6:.0f} MB corpus in {args.corpus} (seed {args.seed}) ...", flush=True)
        st = gen_sessions.generate(args.corpus, args.size, args.seed, args.jobs)
        print(f"  {st.sessions} sessions, {st.files} files, {st.records} records, {st.bytes / 1e6:.1f} MB "
              f"in {st.seconds:.1f}s", flush=True)
        files = corpus_files(projects)
    return projects, files


def warm_cache(files: list[Path]) -> float:
    """Read every file once; returns seconds (a cold-cache read, for the record)."""
    t0 = time.perf_counter()
    for p in files:
        with p.open("rb") as f:
            while f.read(1 << 24):
                pass
    return time.perf_counter() - t0


def json_strings(value: Any, out: list[str], skip: frozenset[str] = frozenset()) -> None:
    """Every string in a parsed JSON value, in document order, into `out`; the values of the keys
    in `skip` are left out (ids and signatures are not text anyone searches for)."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for v in value:
            json_strings(v, out, skip)
    elif isinstance(value, dict):
        for key, v in value.items():
            if key not in skip:
                json_strings(v, out, skip)


# ------------------------------------------------------------------ repositories, stores, ingests

def engram_command(engram: list[str]) -> list[str]:
    """The engram command with its executable resolved on PATH (for runners that do not search it)."""
    return [shutil.which(engram[0]) or engram[0], *engram[1:]]


def fresh_repo(workdir: Path | None, prefix: str, engram: list[str] | None = None) -> Path:
    """A new empty git repository in a temporary directory under `workdir` (the system's by
    default); with `engram`, `engram init` has run in it."""
    repo = Path(tempfile.mkdtemp(prefix=prefix, dir=workdir))
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    if engram is not None:
        subprocess.run([*engram, "init"], cwd=repo, check=True, capture_output=True)
    return repo


def dir_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file()) if d.is_dir() else 0


def index_bytes(store_dir: Path) -> dict[str, int]:
    """index.sqlite and its -wal and -shm files, by name: bytes."""
    return {p.name: p.stat().st_size for p in sorted(store_dir.glob("index.sqlite*"))}


def engram_files(store_dir: Path) -> list[Path]:
    """What an explain reads: the index, the tapes and the objects."""
    files = list(store_dir.glob("index.sqlite*"))
    files += [p for p in (store_dir / "tapes").iterdir() if p.is_file()]
    if (store_dir / "objects").is_dir():
        files += [p for p in (store_dir / "objects").rglob("*") if p.is_file()]
    return files


@contextmanager
def index_readonly(repo: Path, busy_ms: int | None = None) -> Iterator[Any]:
    """The repository's index.sqlite opened read-only with apsw, beside whatever engram process
    writes it; `busy_ms`: how long a query waits for that writer (a language server merging),
    engram's own busy timeout when not given (without one a read during a merge fails at once
    with "database is locked")."""
    import apsw

    from engram.index.db import BUSY_TIMEOUT_MS

    db = apsw.Connection(str(repo / ".engram" / "index.sqlite"), flags=apsw.SQLITE_OPEN_READONLY)
    db.set_busy_timeout(BUSY_TIMEOUT_MS if busy_ms is None else busy_ms)
    try:
        yield db
    finally:
        db.close()


def ingest_summary(stdout: str) -> str:
    """The `ingest: N sessions, ...` line of `engram ingest`'s output (all of it when there is none)."""
    return next((ln for ln in stdout.splitlines() if ln.startswith("ingest:")), stdout.strip())


@dataclass
class Run:
    wall: float
    cpu: float
    stdout: str
    repo: Path
    summary: str = ""


def cold_start_ingest(workdir: Path | None, engram: list[str], projects: Path, tag: str, *,
                      no_index: bool = False) -> Run:
    """Fresh git repo, `engram init`, `engram ingest CORPUS`: timed from `engram init` to exit."""
    repo = fresh_repo(workdir, f"engram-scale-{tag}-")
    ingest = [sys.executable, "-c", NO_INDEX_SNIPPET] if no_index else engram
    c0 = child_cpu()
    t0 = time.perf_counter()
    subprocess.run([*engram, "init"], cwd=repo, check=True, capture_output=True)
    _, _, proc = timed([*ingest, "--repo", str(repo), "ingest", str(projects)], repo, "ingest")
    wall, cpu = time.perf_counter() - t0, child_cpu() - c0  # timed() reaped the workers: CPU counted
    return Run(wall, cpu, proc.stdout, repo, ingest_summary(proc.stdout))


# ------------------------------------------------------------------ the ripgrep reference

def require_rg(why: str = "the reference rows need it") -> str:
    """The rg executable; the script stops at once when ripgrep is missing, not after minutes of work."""
    rg = shutil.which("rg")
    if rg is None:
        raise SystemExit(f"{_prog()}: ripgrep (rg) is not installed, and {why}: install it (apt-get install ripgrep)")
    return rg


def rg_files(rg_exe: str, projects: Path, needle: str) -> subprocess.CompletedProcess[str]:
    """The reference search: the files under `projects` holding `needle` verbatim."""
    return subprocess.run([rg_exe, "-F", "-l", "--no-messages", "--", needle, str(projects)],
                          capture_output=True, text=True, check=False)


# ------------------------------------------------------------------ spans and in-process explains

@dataclass
class SpanCase:
    rel: str  # repository-relative file holding the after-text
    start: int
    end: int
    text: str
    session: str  # the session of the tape the span came from
    tape: str
    offset: int
    needle: str  # longest line of the span, JSON-escaped as it appears in the raw transcripts


def json_escaped(line: str) -> str:
    return orjson.dumps(line).decode()[1:-1]


def sample_spans(repo: Path, n: int, seed: int, lines: int = SPAN_LINES, per_tape: int = 2,
                 span_dir: str = SPAN_DIR, corpus: Path | None = None) -> list[SpanCase]:
    """`n` spans of `lines` lines from code.edit after-texts of random tapes, written into the tree.

    With `corpus`, only tapes captured from files under it (not, say, sessions appended earlier)."""
    from engram.store.repo import Store
    from engram.tape.reader import TapeReader
    from engram.tape.writer import TAPE_SUFFIX

    store = Store.discover(repo)
    tapes = sorted(store.tapes_dir.glob(f"*{TAPE_SUFFIX}"))
    rng = random.Random(seed)
    rng.shuffle(tapes)
    out_dir = repo / span_dir
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    cases: list[SpanCase] = []
    pools: list[tuple[Path, str, list[tuple[int, dict[str, Any], list[str]]]]] = []
    used: set[tuple[str, int]] = set()

    def take(p: Path, session: str, edits: list[tuple[int, dict[str, Any], list[str]]], limit: int) -> None:
        taken = 0
        for off, ev, tl in edits:
            if taken >= limit or len(cases) >= n:
                return
            if (p.name, off) in used:
                continue
            a = rng.randrange(len(tl) - lines + 1)
            chunk = tl[a:a + lines]
            if sum(len(x.strip()) for x in chunk) < 200:  # mostly blank: not a meaningful span
                continue
            used.add((p.name, off))
            name = Path(str(ev.get("file") or "f.txt")).name
            rel = f"{span_dir}/{len(cases):03d}-{name}"
            (repo / rel).write_text("\n".join(tl) + "\n", encoding="utf-8")
            cases.append(SpanCase(rel, a + 1, a + lines, "\n".join(chunk) + "\n", session, p.name.split(".")[0],
                                  off, json_escaped(max(chunk, key=len))))
            taken += 1

    for p in tapes:  # first pass: at most `per_tape` spans per tape, so many sessions are covered
        if len(cases) >= n:
            break
        with TapeReader(p, store.objects_dir) as r:
            meta = r.meta()
            session = str(meta.get("session_id") or "")
            if corpus is not None and not all(str(src.get("path", "")).startswith(str(corpus) + os.sep)
                                              for src in meta.get("sources") or [{}]):
                continue
            edits = []
            for off, ev in enumerate(r.events(resolve_objects=True)):
                if ev.get("kind") != "code.edit":
                    continue
                text = ev.get("after_text")
                if not isinstance(text, str):
                    continue
                tl = text.splitlines()
                if len(tl) >= lines:
                    edits.append((off, ev, tl))
        rng.shuffle(edits)
        pools.append((p, session, edits))
        take(p, session, edits, per_tape)
    for p, session, edits in pools:  # a small corpus: more spans per tape
        if len(cases) >= n:
            break
        take(p, session, edits, n)
    return cases


def top_session(doc: dict[str, Any]) -> str | None:
    s = doc.get("sessions") or []
    return s[0]["session_id"] if s else None


def any_session(doc: dict[str, Any], sid: str) -> bool:
    return any(s["session_id"] == sid for s in doc.get("sessions") or [])


@dataclass
class Lat:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    top1: int = 0
    anyhit: int = 0
    n: int = 0
    sessions: list[int] = field(default_factory=list)

    def row(self) -> str:
        return (f"p50 {ms(pct(self.wall, 50))}, p90 {ms(pct(self.wall, 90))}, p99 {ms(pct(self.wall, 99))} wall; "
                f"CPU p50 {ms(pct(self.cpu, 50))}, p99 {ms(pct(self.cpu, 99))} (n={len(self.wall)})")


class Explainer:
    """In-process explain on one open connection: what a language server or MCP endpoint does."""

    def __init__(self, repo: Path, brief: bool) -> None:
        from engram.index.db import open_db
        from engram.query.explain import Options
        from engram.store.repo import Store

        self.repo = repo
        self.store = Store.discover(repo)
        cfg = self.store.config["explain"]
        self.opts = Options(before=int(cfg["window"]["before"]), after=int(cfg["window"]["after"]), brief=brief)
        self.db = open_db(self.store)

    def __call__(self, c: SpanCase) -> dict[str, Any]:
        from engram.query.explain import explain
        from engram.query.spans import read_span

        return explain(self.store, self.db, read_span(self.repo, c.rel, c.start, c.end, self.repo), self.opts)

    def timed(self, c: SpanCase, lat: Lat) -> dict[str, Any]:
        c0, t0 = time.process_time(), time.perf_counter()
        doc = self(c)
        lat.wall.append(time.perf_counter() - t0)
        lat.cpu.append(time.process_time() - c0)
        return doc

    def close(self) -> None:
        self.db.close()


def explain_block(ex: Explainer, group: list[SpanCase], passes: int, lat: Lat) -> None:
    """A block of the paired measure: one untimed explain pass over `group`, then `passes` timed."""
    for c in group:
        ex(c)
    for _ in range(passes):
        for c in group:
            ex.timed(c, lat)


# ------------------------------------------------------------------ profiles

def top_functions(prof: Path, top: int, only_engram: bool = True) -> str:
    """A cProfile file's hottest functions: engram's by cumulative time, then all by own time."""
    st = pstats.Stats(str(prof))
    rows = []
    for (fname, line, func), (_cc, nc, tt, ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
        i = fname.find("engram/")
        name = (fname[i:] if i >= 0 else Path(fname).name) + f":{line}({func})"
        rows.append((ct, tt, nc, name, i >= 0 or "server/" in fname))
    lines = [f"{'cum s':>8} {'own s':>8} {'calls':>9}  function (engram code, by cumulative time)"]
    for ct, tt, nc, name, eng in sorted(rows, reverse=True):
        if eng or not only_engram:
            lines.append(f"{ct:8.3f} {tt:8.3f} {nc:9d}  {name}")
        if len(lines) > top:
            break
    lines.append(f"{'own s':>8} {'cum s':>8} {'calls':>9}  function (all code, by own time)")
    for ct, tt, nc, name, _ in sorted(rows, key=lambda r: r[1], reverse=True)[:top]:
        lines.append(f"{tt:8.3f} {ct:8.3f} {nc:9d}  {name}")
    return "\n".join(lines)


# ------------------------------------------------------------------ a minimal LSP client for `engram lsp`

class MiniLsp:
    """Just enough of an LSP client: framed JSON-RPC over a subprocess's stdin/stdout."""

    def __init__(self, cmd: list[str], cwd: Path, log: Path) -> None:
        self.log = log.open("wb")
        self.proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        self.responses: dict[int, dict[str, Any]] = {}
        self.cond = threading.Condition()
        self.next_id = 1
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _send(self, msg: dict[str, Any]) -> None:
        body = json.dumps(msg).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    return
                line = line.strip()
                if not line:
                    break
                k, _, v = line.partition(b":")
                if k.lower() == b"content-length":
                    length = int(v)
            if length is None:
                continue
            msg = json.loads(out.read(length))
            if "method" in msg and "id" in msg:  # a request from the server: answer null
                self._send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
            elif "id" in msg:
                with self.cond:
                    self.responses[msg["id"]] = msg
                    self.cond.notify_all()

    def request(self, method: str, params: Any, timeout: float = 60) -> dict[str, Any]:
        i = self.next_id
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
        with self.cond:
            if not self.cond.wait_for(lambda: i in self.responses, timeout):
                raise TimeoutError(f"LSP {method}: no response in {timeout}s")
            return self.responses.pop(i)

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def close(self) -> None:
        try:
            self.request("shutdown", None, timeout=10)
            self.notify("exit", None)
            self.proc.wait(10)
        except Exception:  # noqa: BLE001 - whatever state it is in, it goes
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def start_lsp(cmd: list[str], repo: Path, log: Path, timeout: float = 60) -> tuple[MiniLsp, dict[str, Any]]:
    """`engram lsp` initialised on `repo`, once its endpoint's run file names it; (client, run file)."""
    lsp = MiniLsp(cmd, repo, log)
    init = lsp.request("initialize", {"processId": os.getpid(), "rootUri": repo.as_uri(), "capabilities": {},
                                      "workspaceFolders": [{"uri": repo.as_uri(), "name": repo.name}]},
                       timeout=max(60, timeout))
    if "error" in init:
        lsp.close()
        raise SystemExit(f"LSP initialize failed: {init['error']}")
    lsp.notify("initialized", {})
    run_file = repo / ".engram" / "run" / "mcp.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            info = json.loads(run_file.read_text())
            if info.get("pid") == lsp.proc.pid:
                return lsp, info
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    lsp.close()
    raise SystemExit(f"the language server wrote no {run_file} within {timeout:.0f}s (log: {log})")


@contextmanager
def language_server(engram: list[str], repo: Path) -> Iterator[None]:
    """`engram lsp` running on the repository for the block (the editor open)."""
    lsp, _ = start_lsp([*engram_command(engram), "lsp"], repo, repo.parent / f"{repo.name}-lsp.log")
    try:
        yield
    finally:
        lsp.close()


# ------------------------------------------------------------------ session sets: Entire checkpoint branches

@dataclass
class EntireExtract:
    """What `entire_sessions` wrote and what it left out (counted, never silently dropped)."""
    sessions: dict[str, str] = field(default_factory=dict)  # session id -> "claude" | "codex"
    pieces: int = 0  # distinct full.jsonl versions read
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> pieces


def _entire_key(raw: bytes, rec: Any) -> bytes:
    """What makes two lines of two pieces of one session the same line: a Claude Code record's
    uuid and type; any other line (Codex rollouts have no uuid) its bytes."""
    if isinstance(rec, dict) and isinstance(rec.get("uuid"), str):
        return f"{rec['uuid']}/{rec.get('type')}".encode()
    return raw


def _entire_identity(lines: list[bytes]) -> tuple[str, str] | None:
    """(session id, harness) of a checkpoint's full.jsonl, from its own records."""
    for raw in lines[:200]:
        try:
            rec = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(rec, dict):
            return None  # a JSON document other than a transcript line (OpenCode's export)
        if rec.get("type") == "session_meta" and isinstance(rec.get("payload"), dict) \
                and isinstance(rec["payload"].get("id"), str):
            return rec["payload"]["id"], "codex"
        if isinstance(rec.get("sessionId"), str) and "uuid" in rec:
            return rec["sessionId"], "claude"
    return None


def entire_sessions(git_dir: Path, out: Path) -> EntireExtract:
    """Rebuild every Claude Code session and Codex rollout an Entire CLI checkpoint history holds
    (the `entire/checkpoints/v1` branch, or one ref per checkpoint under refs/entire/checkpoints/)
    into `out/<session id>.jsonl`.

    A checkpoint's `full.jsonl` is sometimes the whole session so far and sometimes only the part
    since the previous checkpoint, and a later commit may overwrite it: every version of every
    `full.jsonl` in the history is read, grouped by the session id its records carry, and merged in
    commit-time order, lines verbatim: a piece that starts with everything merged so far replaces
    it; otherwise its lines are appended, except a line an earlier piece already had (same
    uuid and type for Claude Code records, same bytes otherwise). Pieces that are not a Claude
    Code or Codex transcript (OpenCode's JSON export) are counted in `skipped`."""
    def git(*args: str, inp: bytes | None = None) -> bytes:
        return subprocess.run(["git", f"--git-dir={git_dir}", *args], input=inp, capture_output=True,
                              check=True).stdout

    refs = [r for r in git("for-each-ref", "--format=%(refname)").decode().split() if "entire/checkpoints" in r]
    if not refs:
        raise SystemExit(f"{git_dir}: no entire/checkpoints ref (is this an Entire CLI repository's git dir?)")
    log = git("log", "--reverse", "--no-abbrev", "--raw", "--format=C %ct", "--stdin", inp="\n".join(refs).encode())
    order: list[tuple[int, int, str]] = []  # (commit time, position, blob)
    seen_blobs: set[str] = set()
    when = 0
    for line in log.decode("utf-8", "replace").splitlines():
        if line.startswith("C "):
            when = int(line[2:])
        elif line.startswith(":") and (line.endswith("/full.jsonl") or line.endswith("\tfull.jsonl")):
            meta, _, _path = line.partition("\t")
            fields = meta.split()
            blob, status = fields[3], fields[4]
            if status[:1] in ("A", "M") and blob not in seen_blobs:
                seen_blobs.add(blob)
                order.append((when, len(order), blob))
    order.sort()
    res = EntireExtract(pieces=len(order))
    merged: dict[str, list[bytes]] = {}
    keys: dict[str, set[bytes]] = {}
    for _, _, blob in order:
        try:
            lines = [x for x in git("cat-file", "blob", blob).split(b"\n") if x.strip()]
        except subprocess.CalledProcessError:  # snapshots leave out files of 4 MiB and more
            res.skipped["blob absent from the clone"] = res.skipped.get("blob absent from the clone", 0) + 1
            continue
        ident = _entire_identity(lines)
        if ident is None:
            res.skipped["not a Claude Code or Codex transcript"] = \
                res.skipped.get("not a Claude Code or Codex transcript", 0) + 1
            continue
        sid, harness = ident
        res.sessions[sid] = harness
        have = merged.setdefault(sid, [])
        if lines[:len(have)] == have:
            merged[sid] = lines
            keys[sid] = {_entire_key(x, _loads(x)) for x in lines}
            continue
        ks = keys.setdefault(sid, set())
        for raw in lines:
            k = _entire_key(raw, _loads(raw))
            if k not in ks:
                ks.add(k)
                have.append(raw)
    out.mkdir(parents=True, exist_ok=True)
    for sid, lines in merged.items():
        (out / f"{sid}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return res


def _loads(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def history_jsonl(git_dir: Path, out: Path, prefixes: list[str]) -> tuple[int, int]:
    """The newest stored version of every `.jsonl` file ever committed under `prefixes` (any branch),
    written to `out` with its path below the prefix: transcripts a repository moved between folders
    or rewrote (redaction) come out once, as last published. Returns (written, absent from the clone)."""
    log = subprocess.run(["git", f"--git-dir={git_dir}", "log", "--all", "--no-abbrev", "--raw", "--format=C %ct"],
                         capture_output=True, check=True).stdout.decode("utf-8", "replace")
    newest: dict[str, tuple[int, str]] = {}
    when = 0
    for line in log.splitlines():
        if line.startswith("C "):
            when = int(line[2:])
            continue
        if not line.startswith(":") or not line.endswith(".jsonl"):
            continue
        meta, _, path = line.partition("\t")
        fields = meta.split()
        if fields[4][:1] not in ("A", "M"):
            continue
        for pre in prefixes:
            pre = pre.rstrip("/") + "/"
            if path.startswith(pre):
                rel = path[len(pre):]
                if rel not in newest or when >= newest[rel][0]:
                    newest[rel] = (when, fields[3])
                break
    written = absent = 0
    for rel, (_, blob) in sorted(newest.items()):
        r = subprocess.run(["git", f"--git-dir={git_dir}", "cat-file", "blob", blob], capture_output=True)
        if r.returncode != 0:
            absent += 1
            continue
        dest = out / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(r.stdout)
        written += 1
    return written, absent


@contextmanager
def written(repo: Path, files: dict[str, str]) -> Iterator[None]:
    """The working tree with `files` (repository path → content) written into it, then restored."""
    backup = {p: ((repo / p).read_bytes() if (repo / p).exists() else None) for p in files}
    try:
        for p, content in files.items():
            (repo / p).parent.mkdir(parents=True, exist_ok=True)
            (repo / p).write_text(content, encoding="utf-8")
        yield
    finally:
        for p, old in backup.items():
            if old is None:
                (repo / p).unlink()
            else:
                (repo / p).write_bytes(old)
