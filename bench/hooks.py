"""The agent's hooks: what an edit waits for (`engram hook` on PreToolUse) with and without a
running language server, on a store of 10,000 memories, and how many tokens the hooks inject.

    python bench/hooks.py [--memories 10000] [--anchored 0.1] [--repeat 1] [--compare DIR] [--workdir DIR] [--keep]
                          [--tapes-from REPO]   # the store starts from REPO's tapes and index (1 GB)

The repository holds the files the two real Claude Code sessions shipped in tests/fixtures
(spotter: 67 Edit and 20 Write calls) wrote, and the store their tapes and N memories (synthetic
notes, --anchored of them anchored to 2-12 line spans of those files, the rest unanchored; a
tenth pinned or important). The payloads are the sessions' own Edit/MultiEdit/Write calls as
Claude Code sends them to a PreToolUse hook (file paths moved into the repository); before each
call the file is put back as it was before that edit (the tool result's `originalFile`), so the
hook finds the old_string where the session did and resolves the file's anchors against changed
text, as in a live session. Each call is a fresh process, as Claude Code starts it, with a 10 s
deadline (the shipped 1 s deadline would hide the tail) and bytecode compiled.

Rows: the pre-edit hook without a language server (ENGRAM_LOCAL=1) and with `engram lsp` running
(handed over to its endpoint), the SessionStart hook both ways, and, as references measured in
the same run, `python -c pass` and `python -S -c pass` (the interpreter with and without the
site-packages' .pth files: the floor any Python hook pays here; the pre-edit hook with a server is
also run as `python -S` with the packages' directories on PYTHONPATH, what it costs without them), `engram --version` (the console
script's start; with --compare, both trees') and, last, the PostToolUse capture hook (`engram hook` starting a detached
ingest; the ingests it started are waited for, at most 60 s, then ended: one embeds the 10,000
memories for minutes and would load every row after it). Then the size of what the hooks inject
(tokens: 4 bytes of text each, engram.memory.briefs) over the payloads that inject something,
and how many say nothing.

`--compare DIR`: another engram's source tree (`git archive COMMIT | tar -x -C DIR`, then
`ln -s server DIR/engram_server`), measured in the same run on the same store: its pre-edit hook
without a server alternates with this tree's call by call; with a server, its `engram lsp` runs
the block before this tree's. "before"/"after" rows on the same load.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import child_cpu, compile_bytecode, fmt_table, language_server, load, machine, pct  # noqa: E402

from engram.memory.interchange import import_records  # noqa: E402
from engram.memory.memories import Memories  # noqa: E402
from engram.store.repo import init_store  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SPOTTER = ROOT / "tests" / "fixtures" / "claude" / "spotter"
SESSIONS = ("4d5611e5-241a-462a-8d15-5122611a9569", "258c7280-ae70-4798-800f-63464d01a85d")
ENGRAM = [sys.executable, "-m", "engram_server.entry"]
TARGETS = {"server_p50": 0.060, "server_p99": 0.150, "local_p50": 0.150}
WORDS = ("retry backoff cache invalidation lock schema migration token parser session render queue worker "
         "timeout config plugin loader index budget anchor tape fragment hover lens").split()


def transcripts(workdir: Path) -> list[Path]:
    out = []
    for sid in SESSIONS:
        dst = workdir / f"{sid}.jsonl"
        dst.write_bytes(zstandard.ZstdDecompressor().decompress((SPOTTER / f"{sid}.jsonl.zst").read_bytes(),
                                                                max_output_size=1 << 30))
        out.append(dst)
    return out


def session_cwd(transcript: Path) -> str:
    for raw in transcript.read_bytes().splitlines():
        rec = orjson.loads(raw)
        if isinstance(rec, dict) and rec.get("cwd"):
            return str(rec["cwd"]).rstrip("/") + "/"
    raise SystemExit(f"{transcript}: no cwd")


def edit_calls(transcript: Path, repo: Path) -> list[tuple[dict[str, Any], str | None]]:
    """(PreToolUse payload, the file's text before the call) for each Edit, MultiEdit and Write
    the session made, in order, with paths moved into `repo`."""
    cwd = session_cwd(transcript)
    uses: dict[str, dict[str, Any]] = {}
    out = []
    for raw in transcript.read_bytes().splitlines():
        rec = orjson.loads(raw)
        msg = rec.get("message") if isinstance(rec, dict) else None
        content = msg.get("content") if isinstance(msg, dict) else None
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and block.get("name") in ("Edit", "MultiEdit", "Write"):
                uses[block["id"]] = block
            elif block.get("type") == "tool_result" and block.get("tool_use_id") in uses:
                use = uses.pop(block["tool_use_id"])
                path = str(use["input"].get("file_path", ""))
                if not path.startswith(cwd):
                    continue
                tur = rec.get("toolUseResult")
                before = tur.get("originalFile") if isinstance(tur, dict) else None
                tool_input = {**use["input"], "file_path": str(repo / path[len(cwd):])}
                out.append(({"session_id": rec.get("sessionId"), "transcript_path": str(transcript),
                             "cwd": str(repo), "permission_mode": "acceptEdits", "hook_event_name": "PreToolUse",
                             "tool_name": use["name"], "tool_input": tool_input, "tool_use_id": use["id"]},
                            before if isinstance(before, str) else None))
    return out


def build(workdir: Path, n_memories: int, anchored: float, rng: random.Random,
          tapes_from: Path | None = None) -> tuple[Path, list, list[Path]]:
    from engram.cli.demo import final_files

    repo = workdir / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    paths = transcripts(workdir)
    for t in paths:
        cwd = session_cwd(t)
        for path, text in final_files(t).items():
            if path.startswith(cwd):
                (repo / path[len(cwd):]).parent.mkdir(parents=True, exist_ok=True)
                (repo / path[len(cwd):]).write_text(text)
    store, _ = init_store(repo)
    if tapes_from is not None:
        take_store(tapes_from, repo / ".engram")
    subprocess.run([*ENGRAM, "ingest", *map(str, paths)], cwd=repo, check=True, capture_output=True)
    calls = [c for t in paths for c in edit_calls(t, repo)]
    files = sorted({c[0]["tool_input"]["file_path"] for c in calls if Path(c[0]["tool_input"]["file_path"]).exists()})
    mem = Memories(store)
    records = []
    for i in range(n_memories):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40)))
        rec: dict[str, Any] = {"content": f"note {i}: {text}", "kind": rng.choice(["fact", "decision", "pattern"]),
                               "importance": round(rng.random(), 2), "pinned": rng.random() < 0.01,
                               "created": f"2026-{rng.randint(1, 11):02d}-{rng.randint(1, 28):02d}"}
        if rng.random() < anchored and files:
            f = rng.choice(files)
            lines = Path(f).read_text().count("\n")
            if lines >= 3:
                a = rng.randint(1, max(1, lines - 12))
                rec["at"] = [f"{os.path.relpath(f, repo)}:{a}-{min(lines, a + rng.randint(1, 11))}"]
        records.append(("bench", i + 1, rec))
    import_records(mem, records, dedup=False)
    mem.db.close()
    return repo, calls, paths


def take_store(src_repo: Path, dst: Path) -> None:
    """Start from another repository's ingested store (`--tapes-from`, e.g. bench/scale.py's 1 GB
    one): its tapes and objects hard-linked (copied across file systems), its index copied whole, so
    the hooks run against an index of that size. The source must not be written meanwhile."""
    src = src_repo / ".engram"
    if not (src / "index.sqlite").is_file():
        raise SystemExit(f"--tapes-from {src_repo}: no .engram/index.sqlite there (an ingested repository)")

    def link(a: str, b: str) -> None:
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)

    for name in ("tapes", "objects"):
        if (src / name).is_dir():
            shutil.copytree(src / name, dst / name, copy_function=link, dirs_exist_ok=True)
    for name in ("index.sqlite", "index.sqlite-wal", "index.sqlite-shm"):
        if (src / name).exists():
            shutil.copy2(src / name, dst / name)


CPU: list[float] = []  # the hook process's own CPU time (user + sys) of every `run`, in order


def run(cmd: list[str], repo: Path, stdin: str | None, env: dict[str, str]) -> tuple[float, str]:
    """(wall seconds, stdout) of one command; its CPU seconds go to CPU: on a shared machine the
    wall time includes waiting for a core, the CPU time does not."""
    c0, t0 = child_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=repo, input=stdin, capture_output=True, text=True,
                          env={**os.environ, **env}, check=False)
    wall = time.perf_counter() - t0
    CPU.append(child_cpu() - c0)
    if proc.returncode != 0:
        raise SystemExit(f"`{' '.join(cmd)}` exited {proc.returncode}: {proc.stderr[-2000:]}")
    return wall, proc.stdout


def measured(fn: Any) -> tuple[Any, list[float]]:
    """What `fn()` returns, and the CPU seconds of the commands it ran."""
    n = len(CPU)
    out = fn()
    return out, CPU[n:]


SERVER_CPU: list[float] = []  # the language server's CPU seconds during each call with `server` given


def process_cpu(pid: int) -> float:
    """User + system CPU seconds a process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bare_path(env: dict[str, str]) -> str:
    """PYTHONPATH for `python -S`: the tree's and the installed packages' directories, so that engram
    and its dependencies import without site's processing of the .pth files (an editable install's
    finder and this machine's own: ~80 ms CPU of every Python start here)."""
    import sysconfig  # noqa: PLC0415

    dirs = [env.get("PYTHONPATH", ""), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    return os.pathsep.join(dict.fromkeys(d for d in dirs if d))


@dataclass
class Timed:
    """One row's calls: wall seconds, the hook process's CPU seconds, injected tokens, and the
    language server's CPU seconds per call (when one ran)."""

    walls: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    server_cpu: list[float] = field(default_factory=list)


def pre_edit(repo: Path, calls: list, envs: list[dict[str, str]], repeat: int, server: int | None = None,
             engram: list[str] = ENGRAM) -> list[Timed]:
    """The pre-edit hook over the sessions' calls, each call run once with each of `envs` in turn
    (alternating: the same load for each), one Timed per env (`server`: the language server's
    pid, whose CPU time per call is counted)."""
    out = [Timed() for _ in envs]
    for _ in range(repeat):
        for payload, before in calls:
            for env, timed in zip(envs, out, strict=True):
                target = Path(payload["tool_input"]["file_path"])
                if before is not None:
                    target.write_text(before)
                s0 = process_cpu(server) if server else 0.0
                wall, said = run([*engram, "hook"], repo, json.dumps(payload), env)
                if server:
                    timed.server_cpu.append(process_cpu(server) - s0)
                timed.walls.append(wall)
                timed.cpu.append(CPU[-1])
                timed.sizes.append(_tokens(said))
    return out


def detached_ingests(repo: Path) -> list[int]:
    """Pids of the processes running in `repo` (the ingests the capture hook started, detached)."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if os.readlink(d / "cwd") == str(repo) and b"ingest" in (d / "cmdline").read_bytes():
                    found.append(int(d.name))
            except OSError:
                continue
    return found


def end_ingests(repo: Path, wait_s: float) -> int:
    """Wait up to `wait_s` for the detached ingests in `repo` to finish, then end them; how many
    had to be ended."""
    deadline = time.monotonic() + wait_s
    while detached_ingests(repo) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = detached_ingests(repo)
    for pid in left:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    return len(left)


def _tokens(out: str) -> int:
    if not out.strip():
        return 0
    text = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    return -(-len(text.encode()) // 4)


def row(name: str, walls: list[float], cpu: list[float], target: str = "—") -> list[str]:
    return [name, str(len(walls)), f"{pct(walls, 50) * 1000:.0f}", f"{pct(walls, 99) * 1000:.0f}",
            f"{max(walls) * 1000:.0f}", f"{pct(cpu, 50) * 1000:.0f}", f"{pct(cpu, 99) * 1000:.0f}", target]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memories", type=int, default=10000)
    ap.add_argument("--anchored", type=float, default=0.1, help="share of the memories anchored to code")
    ap.add_argument("--repeat", type=int, default=1, help="passes over the sessions' edit calls")
    ap.add_argument("--compare", type=Path, metavar="DIR",
                    help="another engram source tree, measured alternately in the same run (see above)")
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--tapes-from", type=Path, metavar="REPO",
                    help="start the store from this ingested repository's tapes and index (e.g. 1 GB of tapes)")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    compile_bytecode()
    if args.compare is not None:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(args.compare / "engram"),
                        str(args.compare / "server")], check=False, capture_output=True)
    workdir = Path(tempfile.mkdtemp(prefix="engram-hooks-", dir=args.workdir))
    rng = random.Random(48)
    repo = None
    try:
        t0 = time.perf_counter()
        repo, calls, paths = build(workdir, args.memories, args.anchored, rng, args.tapes_from)
        built = time.perf_counter() - t0
        report(args, repo, calls, paths, built)
    finally:
        if repo is not None and end_ingests(repo, 0):
            print("(ended detached ingests left in the bench's repository)")
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def report(args: argparse.Namespace, repo: Path, calls: list, paths: list[Path], built: float) -> None:
    here = {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    trees = [("", here)]
    if args.compare is not None:
        trees = [(" [before: --compare]", {"PYTHONPATH": str(args.compare.resolve())}), (" [after: this tree]", here)]
    local_envs = [{**env, "ENGRAM_LOCAL": "1", "ENGRAM_HOOK_DEADLINE_MS": "10000"} for _, env in trees]
    start = json.dumps({"session_id": "bench", "cwd": str(repo), "hook_event_name": "SessionStart",
                        "source": "startup", "transcript_path": str(paths[0])})
    post = json.dumps({"session_id": "bench", "cwd": str(repo), "hook_event_name": "PostToolUse",
                       "transcript_path": str(paths[0]), "tool_name": "Edit"})
    n_ref = max(20, len(calls) // 4)
    floor, c_floor = measured(lambda: [run([sys.executable, "-c", "pass"], repo, None, {})[0] for _ in range(n_ref)])
    bare, c_bare = measured(lambda: [run([sys.executable, "-S", "-c", "pass"], repo, None, {})[0]
                                     for _ in range(n_ref)])
    versions = [Timed() for _ in trees]  # alternating, as the pre-edit calls
    for _ in range(n_ref):
        for (_, env), timed in zip(trees, versions, strict=True):
            timed.walls.append(run([*ENGRAM, "--version"], repo, None, env)[0])
            timed.cpu.append(CPU[-1])
    local = pre_edit(repo, calls, local_envs, args.repeat)
    session_local, c_session_local = measured(lambda: [run([*ENGRAM, "hook"], repo, start, local_envs[-1])
                                                       for _ in range(n_ref)])
    served: list[Timed] = []
    served_bare: list[Timed] = []
    session_served: list[float] = []
    c_session_served: list[float] = []
    for _, env in trees:
        server_env = {**env, "ENGRAM_LOCAL": "", "ENGRAM_HOOK_DEADLINE_MS": "10000"}
        saved = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = env["PYTHONPATH"]  # the language server of the same tree
        try:
            with language_server(ENGRAM, repo):
                pid = json.loads((repo / ".engram" / "run" / "mcp.json").read_text())["pid"]
                served += pre_edit(repo, calls, [server_env], args.repeat, pid)
                if env is here:
                    bare_env = {**server_env, "PYTHONPATH": bare_path(env)}
                    served_bare += pre_edit(repo, calls, [bare_env], args.repeat, pid,
                                            [sys.executable, "-S", "-m", "engram_server.entry"])
                    n0 = len(CPU)
                    session_served = [run([*ENGRAM, "hook"], repo, start, server_env)[0] for _ in range(n_ref)]
                    c_session_served = CPU[n0:]
        finally:
            if saved is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = saved
    capture, c_capture = measured(lambda: [run([*ENGRAM, "hook"], repo, post, local_envs[-1])[0] for _ in range(n_ref)])
    ended = end_ingests(repo, 60)
    brief = _tokens(session_local[0][1])
    mine_local, mine_served = local[-1], served[-1]
    said = [s for s in mine_local.sizes if s]
    print(f"# bench/hooks.py — {machine()}; load {load()}")
    tapes = sum(p.stat().st_size for p in (repo / ".engram" / "tapes").iterdir())
    print(f"store: {args.memories:,} memories ({args.anchored:.0%} anchored), {len(paths)} real sessions "
          f"({tapes / 1e6:.1f} MB of tapes), {len(calls)} real edit calls x {args.repeat}; "
          f"built in {built:.0f} s\n")
    rows = [row("reference: `python -c pass`", floor, c_floor),
            row("reference: `python -S -c pass` (no .pth files)", bare, c_bare),
            *(row(f"reference: `engram --version`{label}", timed.walls, timed.cpu)
              for (label, _), timed in zip(trees, versions, strict=True))]
    for (label, _), timed in zip(trees, local, strict=True):
        rows.append(row(f"pre-edit hook, no language server{label}", timed.walls, timed.cpu, "p50 ≤ 150"))
    for (label, _), timed in zip(trees, served, strict=True):
        rows.append(row(f"pre-edit hook, `engram lsp` running{label}", timed.walls, timed.cpu,
                        "p50 ≤ 60, p99 ≤ 150"))
        rows.append(row(f"… the same calls, CPU of hook + language server{label}", timed.walls,
                        [a + b for a, b in zip(timed.cpu, timed.server_cpu, strict=True)]))
    rows.append(row("… the same, `python -S`, packages on PYTHONPATH (no .pth files)", served_bare[0].walls,
                    served_bare[0].cpu, "p50 ≤ 60, p99 ≤ 150"))
    rows += [row("SessionStart hook, no language server", [w for w, _ in session_local], c_session_local),
             row("SessionStart hook, `engram lsp` running", session_served, c_session_served),
             row("reference: PostToolUse capture hook (starts an ingest)", capture, c_capture)]
    print(fmt_table(["what the agent waits for", "runs", "p50 ms", "p99 ms", "max ms", "CPU p50 ms",
                     "CPU p99 ms", "target (wall)"], rows))
    print("\n(CPU: the hook process's own user + sys time; the language server's only where it says so)")
    print(f"detached ingests the capture rows started and that had not finished 60 s later (ended): {ended}")
    walls = mine_local.walls + mine_served.walls
    print(f"\ncalls over the shipped 1 s deadline (which would say nothing): {sum(w > 1.0 for w in walls)} of "
          f"{len(walls)}; over this run's 10 s (said nothing, counted silent below): {sum(w > 10 for w in walls)}")
    same = sum(a == b for a, b in zip(mine_local.sizes, mine_served.sizes, strict=True))
    print("\nwhat the hooks inject (tokens of 4 bytes of text; budgets 800 before an edit, 1,500 at start):\n")
    print(fmt_table(["hook", "calls", "silent", "p50", "p99", "max"], [
        ["pre-edit, no language server", str(len(mine_local.sizes)), str(len(mine_local.sizes) - len(said)),
         f"{pct(said, 50):.0f}" if said else "—", f"{pct(said, 99):.0f}" if said else "—",
         str(max(said, default=0))],
        ["SessionStart", "1", "0" if brief else "1", str(brief), str(brief), str(brief)]]))
    print(f"\nthe server's answers had the local answers' sizes on {same} of {len(mine_local.sizes)} calls "
          "(without a server, a note whose code changed since it was last resolved is given where it was "
          "last found, among the changed ones)")
    checks = [("server p50", pct(mine_served.walls, 50) <= TARGETS["server_p50"]),
              ("server p99", pct(mine_served.walls, 99) <= TARGETS["server_p99"]),
              ("local p50", pct(mine_local.walls, 50) <= TARGETS["local_p50"])]
    print("targets (this tree): " + ", ".join(f"{n} {'met' if ok else 'NOT met'}" for n, ok in checks))


if __name__ == "__main__":
    main()
