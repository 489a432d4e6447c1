"""What git's line tracking (`engram.memory.anchors._git_kept`) costs the commands that resolve notes
on a real file: notes remembered on one busy file of a real repository at many commits of its history,
the file then edited in the working tree, as a person's notes age while the code moves on.

    python bench/anchors_git.py MIRROR [--file PATH] [--commits 60] [--notes 300] [--calls 15]
                                [--compare DIR ...] [--workdir DIR] [--only-inproc | --only-server]

MIRROR: a git repository (a mirror: `git clone --mirror URL`; never committed), cloned to a
temporary directory. The newest --commits commits that changed --file (evenly spaced over them
when it has more) are checked out oldest first, and at each --notes / --commits notes of 5-15 lines
are remembered on the file (`Memories.remember`, in-process: `capture` records the commit). Then
the tip is checked out and the file edited in the working tree (a block of lines changed in the
middle, lines inserted near the top): most notes are then `edited` against text none of their
commits had, the case where git is asked.

Each engram tree (`--compare DIR`: another source tree, `git archive COMMIT | tar -x -C DIR &&
ln -s server DIR/engram_server`; this tree last) is measured on the same store and load, its calls
alternating with the other trees' call by call:
- in-process: every anchor of the file resolved (`places_of` as `engram recall` calls it), in a
  fresh process (cold: nothing kept from an earlier call) and again in it with the file changed by
  one line (the caches of the same process: a language server's second resolution); with the
  number of git processes and the CPU of the children (git) apart;
- `engram recall --at FILE`, the file's modification time bumped before each call (so that no
  resolution kept in the store answers: the first recall after an edit);
- the pre-edit hook for an Edit of the file, without a language server (`ENGRAM_LOCAL=1`: the
  anchors are only looked for as they were, no git) and with `engram lsp` running (the server
  resolves the file's anchors against the disk, then only those the edits since touched:
  `engram.memory.follow`); one line of the file changed before each call (an agent's previous edit);
- `engram lsp` with the file open: a character typed inside a note's lines, then codeLens; the
  server's CPU per edit (its worker resolving the notes the edit touched and the vanished ones).
CPU = user + sys (the commands' children, git, included); the machine is shared: read the CPU
beside the wall clock, and the load printed with every table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import child_cpu, fmt_table, load, machine, pct, start_lsp  # noqa: E402

ENGRAM = [sys.executable, "-m", "engram_server.entry"]
WORDS = ("retry backoff cache invalidation lock schema migration token parser session render queue worker "
         "timeout config plugin loader index budget anchor tape fragment hover lens").split()


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def build(mirror: Path, workdir: Path, file: str, n_commits: int, n_notes: int, rng: random.Random) -> Path:
    """The clone with the notes remembered at the file's commits, the tip checked out and the file
    edited in the working tree."""
    from engram.memory.memories import Memories  # noqa: PLC0415
    from engram.store.repo import init_store  # noqa: PLC0415

    repo = workdir / "repo"
    subprocess.run(["git", "clone", "-q", str(mirror), str(repo)], check=True)
    tip = git(repo, "rev-parse", "HEAD").strip()
    history = [c for c in git(repo, "log", "--format=%H", "--", file).split() if _has(repo, c, file)]
    step = max(1, len(history) // n_commits) if len(history) > n_commits else 1
    commits = list(reversed(history[::step][:n_commits]))
    store, _ = init_store(repo)
    mem = Memories(store)
    per = max(1, n_notes // len(commits))
    for c in commits:
        git(repo, "checkout", "-q", "--detach", c)
        n = len((repo / file).read_text().split("\n")) - 1
        for _ in range(per):
            a = rng.randint(1, max(1, n - 15))
            b = min(n, a + rng.randint(4, 14))
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30)))
            mem.remember(f"note at {c[:10]} {file}:{a}-{b}: {words}", at=[f"{file}:{a}-{b}"], dedup=False)
    mem.db.close()
    git(repo, "checkout", "-q", "--detach", tip)
    lines = (repo / file).read_text().split("\n")
    mid = len(lines) // 2
    lines[mid:mid + 6] = [f"{x}  // edited" if x.strip() else x for x in lines[mid:mid + 6]]
    lines[10:10] = ["// a block an agent added", "// over a few lines", ""]
    (repo / file).write_text("\n".join(lines))
    print(f"built: {len(commits)} commits of {file} ({len(history)} in its history), {per * len(commits)} notes",
          file=sys.stderr)
    return repo


def _has(repo: Path, commit: str, file: str) -> bool:
    return subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{commit}:{file}"], check=False,
                          capture_output=True).returncode == 0


def touch_line(repo: Path, file: str, rng: random.Random) -> int:
    """One line of the file changed (a comment appended or taken off): new text, new stamp."""
    path = repo / file
    lines = path.read_text().split("\n")
    i = rng.randrange(len(lines) - 1)
    lines[i] = lines[i][:-len("  // x")] if lines[i].endswith("  // x") else lines[i] + "  // x"
    path.write_text("\n".join(lines))
    return i


# ---------------------------------------------------------------- in-process (run in a child per tree)

def inproc(repo: Path, file: str) -> None:
    """Print, as JSON, the file's anchors resolved twice in this process (cold, then after a
    one-line change), with the git processes started and their CPU."""
    from engram.memory import anchors  # noqa: PLC0415
    from engram.memory.memories import Memories  # noqa: PLC0415
    from engram.memory.places import places_of  # noqa: PLC0415
    from engram.store.repo import Store  # noqa: PLC0415

    spawned = [0]
    real_popen = subprocess.Popen.__init__

    def popen_counting(self: Any, *a: Any, **k: Any) -> None:
        spawned[0] += 1
        real_popen(self, *a, **k)

    subprocess.Popen.__init__ = popen_counting  # type: ignore[method-assign]

    mem = Memories(Store(repo))
    nos = mem.anchored_in(file)
    out: dict[str, Any] = {"notes": len(nos)}
    rng = random.Random(7)
    for label in ("cold", "again"):
        if label == "again":
            touch_line(repo, file, rng)
        n0, w0, c0, g0 = spawned[0], time.perf_counter(), time.process_time(), child_cpu()
        places = places_of(mem.db, repo, nos, attribute=False)
        out[label] = {"wall": time.perf_counter() - w0, "cpu": time.process_time() - c0 + child_cpu() - g0,
                      "git_cpu": child_cpu() - g0, "git": spawned[0] - n0}
        states: dict[str, int] = {}
        for ps in places.values():
            for p in ps:
                states[p.state] = states.get(p.state, 0) + 1
        out[label]["states"] = states
        out[label]["places"] = sorted([no, p.state, p.file, p.start, p.end, p.retained, p.best_partial]
                                      for no, ps in places.items() for p in ps)
    out["git_lines"] = getattr(anchors, "GIT_LINES", None)
    print(json.dumps(out))


def run_inproc(tree: str, repo: Path, file: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": tree}
    before = (repo / file).read_text()
    try:
        out = subprocess.run([sys.executable, __file__, "--inproc", str(repo), "--file", file], env=env,
                             capture_output=True, text=True, check=True).stdout
    finally:
        (repo / file).write_text(before)
    return json.loads(out.strip().splitlines()[-1])


# ---------------------------------------------------------------- commands

def timed(cmd: list[str], repo: Path, env: dict[str, str], stdin: str | None = None) -> tuple[float, float, str]:
    c0, t0 = child_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=repo, input=stdin, capture_output=True, text=True, env={**os.environ, **env},
                          check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"`{' '.join(cmd)}` exited {proc.returncode}: {proc.stderr[-2000:]}")
    return wall, child_cpu() - c0, proc.stdout


def recall_cli(repo: Path, file: str, trees: list[str], calls: int) -> list[tuple[list[float], list[float]]]:
    out: list[tuple[list[float], list[float]]] = [([], []) for _ in trees]
    path = repo / file
    for i in range(calls):
        for tree, (walls, cpus) in zip(trees, out, strict=True):
            os.utime(path, ns=(time.time_ns(), time.time_ns() + i))  # no kept resolution answers
            w, c, _ = timed([*ENGRAM, "recall", "--at", file, "--json"], repo, {"PYTHONPATH": tree})
            walls.append(w)
            cpus.append(c)
    return out


def edit_payload(repo: Path, file: str) -> str:
    lines = (repo / file).read_text().split("\n")
    i = len(lines) // 3
    while not lines[i].strip():
        i += 1
    return json.dumps({"session_id": "bench", "cwd": str(repo), "permission_mode": "acceptEdits",
                       "hook_event_name": "PreToolUse", "tool_name": "Edit", "tool_use_id": "t",
                       "tool_input": {"file_path": str(repo / file), "old_string": lines[i],
                                      "new_string": lines[i] + " // changed"}})


def hook_local(repo: Path, file: str, trees: list[str], calls: int, rng: random.Random
               ) -> list[tuple[list[float], list[float]]]:
    out: list[tuple[list[float], list[float]]] = [([], []) for _ in trees]
    for _ in range(calls):
        touch_line(repo, file, rng)
        payload = edit_payload(repo, file)
        for tree, (walls, cpus) in zip(trees, out, strict=True):
            w, c, _ = timed([*ENGRAM, "hook"], repo, {"PYTHONPATH": tree, "ENGRAM_LOCAL": "1",
                                                      "ENGRAM_HOOK_DEADLINE_MS": "60000"}, payload)
            walls.append(w)
            cpus.append(c)
    return out


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a process and its reaped children (its git processes)."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in f[11:15]) / os.sysconf("SC_CLK_TCK")


def with_server(repo: Path, file: str, tree: str, calls: int, rng: random.Random) -> dict[str, list[float]]:
    """The pre-edit hook with `engram lsp` of `tree` running, then the server with the file open:
    a character typed inside a note, codeLens, the server's CPU per edit."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = tree
    try:
        lsp, info = start_lsp([*ENGRAM, "lsp"], repo, repo.parent / "lsp.log", timeout=300)
    finally:
        os.environ["PYTHONPATH"] = saved or ""
    pid = lsp.proc.pid
    out: dict[str, list[float]] = {"hook": [], "hook_cpu": [], "hook_server_cpu": [], "lens": [], "edit_cpu": [],
                                   "open": []}
    try:
        env = {"PYTHONPATH": tree, "ENGRAM_LOCAL": "", "ENGRAM_HOOK_DEADLINE_MS": "60000"}
        for _ in range(calls):
            touch_line(repo, file, rng)
            payload = edit_payload(repo, file)
            s0 = proc_cpu(pid)
            w, c, _ = timed([*ENGRAM, "hook"], repo, env, payload)
            out["hook"].append(w)
            out["hook_cpu"].append(c)
            out["hook_server_cpu"].append(proc_cpu(pid) - s0)
        uri = (repo / file).as_uri()
        lines = (repo / file).read_text().split("\n")
        s0, t0 = proc_cpu(pid), time.perf_counter()
        lsp.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "go", "version": 1,
                                                              "text": "\n".join(lines)}})
        res = lsp.request("textDocument/codeLens", {"textDocument": {"uri": uri}}, timeout=300)
        out["open"] = [time.perf_counter() - t0, proc_cpu(pid) - s0]
        covered = sorted({r["range"]["start"]["line"] for r in res.get("result") or []}) or [len(lines) // 2]
        version = 1
        for _ in range(calls):
            line = rng.choice(covered) + rng.randint(0, 3)
            line = min(line, len(lines) - 2)
            text = lines[line]
            new = text[:-1] if text.endswith("q") else text + "q"
            version += 1
            s0 = proc_cpu(pid)
            lsp.notify("textDocument/didChange", {
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [{"range": {"start": {"line": line, "character": 0},
                                              "end": {"line": line, "character": len(text)}}, "text": new}]})
            lines[line] = new
            t = time.perf_counter()
            lsp.request("textDocument/codeLens", {"textDocument": {"uri": uri}})
            out["lens"].append(time.perf_counter() - t)
            time.sleep(1.0)  # the debounced resolution on the worker, as a person pausing
            out["edit_cpu"].append(proc_cpu(pid) - s0)
    finally:
        lsp.close()
    return out


def ms(x: float) -> str:
    return f"{x * 1000:.0f}" if x >= 0.01 else f"{x * 1000:.1f}"


def p(xs: list[float]) -> str:
    return f"{ms(pct(xs, 50))} / {ms(pct(xs, 99))}"


def in_and_out(repo: Path, args: argparse.Namespace, names: list[str], trees: list[str], rng: random.Random) -> None:
    """The in-process rows, then `recall --at` and the hook without a server."""
    rows = []
    answers = {}
    for name, tree in zip(names, trees, strict=True):
        r = run_inproc(tree, repo, args.file)
        answers[name] = (r["cold"]["places"], r["again"]["places"])
        for label in ("cold", "again"):
            x = r[label]
            same = ", ".join(other for other, ans in answers.items() if other != name
                             and ans[label == "again"] == x["places"]) or "-"
            rows.append([name, label, str(r["notes"]), f"{ms(x['wall'])}", f"{ms(x['cpu'])} ({ms(x['git_cpu'])})",
                         str(x["git"]), " ".join(f"{k} {v}" for k, v in sorted(x["states"].items())), same])
    print(fmt_table(["tree", "resolution in-process", "notes", "wall ms", "CPU ms (git's)", "processes",
                     "states", "same places as"], rows))
    print(f"load {load()}")
    if args.only_inproc:
        sys.exit(0)
    rows = []
    cli = recall_cli(repo, args.file, trees, args.calls)
    local = hook_local(repo, args.file, trees, args.calls, rng)
    for name, (w, c), (hw, hc) in zip(names, cli, local, strict=True):
        rows.append([name, p(w), p(c), p(hw), p(hc)])
    print(fmt_table(["tree", "recall --at FILE wall p50 / p99 ms", "CPU", "pre-edit hook, no server, wall",
                     "CPU"], rows))
    print(f"load {load()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mirror", type=Path, nargs="?")
    ap.add_argument("--file", default="src/segments/git.go")
    ap.add_argument("--commits", type=int, default=60)
    ap.add_argument("--notes", type=int, default=300)
    ap.add_argument("--calls", type=int, default=15)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--compare", type=Path, action="append", default=[], metavar="DIR")
    ap.add_argument("--workdir", type=Path, help="keep the built repository here (reused when it exists)")
    ap.add_argument("--inproc", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--only-inproc", action="store_true", help="the in-process rows alone")
    ap.add_argument("--only-server", action="store_true", help="the language server's rows alone")
    args = ap.parse_args()
    if args.inproc is not None:
        inproc(args.inproc, args.file)
        return
    if args.mirror is None:
        ap.error("MIRROR is required")
    rng = random.Random(args.seed)
    here = os.environ.get("PYTHONPATH", "")
    trees = [str(d.resolve()) for d in args.compare] + [here]
    names = [str(d) for d in args.compare] + ["this tree"]
    tmp = None
    if args.workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="engram-anchorsgit-")
        args.workdir = Path(tmp.name)
    repo = args.workdir / "repo"
    if not repo.exists():
        args.workdir.mkdir(parents=True, exist_ok=True)
        build(args.mirror.resolve(), args.workdir, args.file, args.commits, args.notes, rng)
    print(f"# bench/anchors_git.py — {machine()}")
    print(f"{args.file} of {args.mirror}: {args.notes} notes at {args.commits} commits; load {load()}")
    if not args.only_server:
        in_and_out(repo, args, names, trees, rng)
    rows = []
    for name, tree in zip(names, trees, strict=True):
        s = with_server(repo, args.file, tree, args.calls, rng)
        rows.append([name, p(s["hook"]), p(s["hook_cpu"]), p(s["hook_server_cpu"]),
                     f"{ms(s['open'][0])} / {ms(s['open'][1])}", p(s["lens"]), p(s["edit_cpu"])])
        print(f"load {load()}", file=sys.stderr)
    print(fmt_table(["tree", "pre-edit hook with lsp, wall p50 / p99 ms", "hook CPU", "server CPU per hook",
                     "open + first codeLens wall / server CPU", "codeLens after a typed character",
                     "server CPU per edit (1 s)"], rows))
    print(f"load {load()}")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
