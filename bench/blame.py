#!/usr/bin/env python3
"""Measures `engram blame`: its time on a 5,000-line file against `git blame` of the same file in
the same run, and its per-line writer against the writer truth of bench/provenance.py's `--multi`
replay.

    python bench/blame.py speed --repo /tmp/engram-scale-XXXX      # a store bench/scale.py --keep left
    python bench/blame.py accuracy --sessions D/spotter/sessions --history D/spotter/history.git \\
        [--map FROM=TO ...] [--root PATH] [--name spotter]

`speed`: a 5,000-line file made of code.edit after-texts of random tapes of the store (so that
sessions wrote its lines), committed in 50 commits of 100 lines so that `git blame` has a history
to walk; then, alternating, `--runs` times each: `engram blame FILE --json` (the CLI: interpreter,
imports, a cold index connection), `git blame FILE` (the reference) and `engram --help` (the
interpreter and import floor); with `--with-lsp`, the CLI again while `engram lsp` runs (it answers). Wall and CPU (user + sys of the child) p50. Target (issue 46): the
CLI <= 300 ms. `--compare DIR`: another engram source tree (`git archive COMMIT | tar -x -C DIR`, then
`ln -s server DIR/engram_server`) run on PYTHONPATH, its commands alternating with this tree's (its
own `engram lsp` for its row with a server). The store's index is said to keep each edit's request
or not: one built before it did (`engram reindex` has not run since) reads them from the tapes. Also the per-line writer against the tape each chunk came from (generated sessions
share one base repository, so a later session often wrote the same lines again: a floor, not the
accuracy).

`accuracy`: bench/provenance.py's `--multi` preparation (every session's edits replayed in time
order: a line's writer is the session that last changed it) and ingest; then `engram blame` of
every replayed file (in-process, one connection): the share of lines with a writer that blame
gives to it, the share it gives to another session, the share it leaves without one, and lines
with no writer that blame gives to a session. Then per-region agreement with `engram explain
FILE:A-B --brief` on `--regions` sampled regions with a writer: is explain's first session
blame's writer, and which of the two names the writer of most of the region's lines?
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    child_cpu,
    compile_bytecode,
    engram_version,
    fmt_table,
    language_server,
    load,
    machine,
    pct,
    verdict,
)

TARGET_MS = 300.0
LINES = 5000
BENCH_FILE = "_blame/big5000.txt"


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@bench.invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "b@bench.invalid"}
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env).stdout


def make_file(repo: Path, seed: int) -> list[str]:
    """The 5,000-line file (after-texts of edits of random tapes, 15 lines or more each), committed
    100 lines at a time; returns the session each line came from."""
    from engram.store.repo import Store
    from engram.tape.reader import TapeReader
    from engram.tape.writer import TAPE_SUFFIX

    store = Store.discover(repo)
    tapes = sorted(store.tapes_dir.glob(f"*{TAPE_SUFFIX}"))
    rng = random.Random(seed)
    rng.shuffle(tapes)
    lines: list[str] = []
    truth: list[str] = []
    for p in tapes:
        with TapeReader(p, store.objects_dir) as r:
            sid = str(r.meta().get("session_id"))
            edits = [ev["after_text"].splitlines() for ev in r.events(resolve_objects=True)
                     if ev.get("kind") == "code.edit" and isinstance(ev.get("after_text"), str)
                     and len(ev["after_text"].splitlines()) >= 15]
        if edits:
            chunk = rng.choice(edits)
            lines += chunk
            truth += [sid] * len(chunk)
        if len(lines) >= LINES:
            break
    lines, truth = lines[:LINES], truth[:LINES]
    path = repo / BENCH_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    for i in range(100, LINES + 1, 100):
        path.write_text("\n".join(lines[:i]) + "\n", encoding="utf-8")
        _git(repo, "add", "-f", BENCH_FILE)
        _git(repo, "commit", "-q", "--allow-empty", "-m", f"lines {i - 99}-{i}")
    return truth


def timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float, bytes]:
    c0, t0 = child_cpu(), time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, check=True,
                         env={**os.environ, "ENGRAM_LOCAL": "1", **(env or {})}).stdout
    return time.perf_counter() - t0, child_cpu() - c0, out


def requests_kept(repo: Path) -> str:
    """Whether the store's index keeps every edit's request (else blame reads some from tapes)."""
    import apsw

    db = apsw.Connection(str(repo / ".engram" / "index.sqlite"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        row = db.execute("SELECT value FROM state WHERE key = 'requests_from'").fetchall()
        older = db.execute("SELECT count(*) FROM fragments WHERE id < ?", (int(row[0][0]),)).fetchall()[0][0] if row else 0
    finally:
        db.close()
    return ("the index keeps every edit's request" if not older else
            f"the index keeps no request of its {older:,} oldest fragments (read from the tapes: `engram reindex`)")


@contextlib.contextmanager
def on_path(tree: dict[str, str]) -> Iterator[None]:
    """os.environ's PYTHONPATH set as `tree` gives it for the block (the language server it starts)."""
    saved = os.environ.get("PYTHONPATH")
    if "PYTHONPATH" in tree:
        os.environ["PYTHONPATH"] = tree["PYTHONPATH"]
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def speed(args: argparse.Namespace) -> int:
    import orjson

    repo = args.repo.resolve()
    engram = args.engram.split()
    print(f"machine: {machine()}")
    print(f"engram under test: {engram_version()}")
    print(f"store: {repo}; {requests_kept(repo)}")
    compile_bytecode()  # as `pip install` leaves it (this machine sets PYTHONDONTWRITEBYTECODE)
    truth = make_file(repo, args.seed)
    print(f"file: {BENCH_FILE}, {len(truth)} lines from {len(set(truth))} sessions' edits, 50 commits; "
          f"{args.runs} runs each, alternating; load average {load()}", flush=True)
    trees: list[tuple[str, dict[str, str]]] = [("", {})]
    if args.compare is not None:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(args.compare / "engram"),
                        str(args.compare / "server")], check=False, capture_output=True)
        trees = [(" [before: --compare]", {"PYTHONPATH": str(args.compare.resolve())}),
                 (" [after: this tree]", {"PYTHONPATH": os.environ.get("PYTHONPATH", "")})]
    cmds = {"git": ["git", "blame", BENCH_FILE]}
    for label, _ in trees:
        cmds[f"blame{label}"] = [*engram, "blame", BENCH_FILE, "--json"]
        cmds[f"help{label}"] = [*engram, "--help"]
    envs = {f"{kind}{label}": env for label, env in trees for kind in ("blame", "help")}
    series: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in cmds}
    docs: dict[str, bytes] = {}
    for i in range(args.runs + 1):
        for name, cmd in cmds.items():
            wall, cpu, out = timed(cmd, repo, envs.get(name))
            if i:  # the first round warms the page cache and bytecode
                series[name][0].append(wall)
                series[name][1].append(cpu)
            if name.startswith("blame"):
                docs[name] = out
    doc = orjson.loads(docs[f"blame{trees[-1][0]}"])
    served: dict[str, tuple[list[float], list[float]]] = {}
    if args.with_lsp:  # the editor open: `engram lsp` runs and answers the command over its endpoint
        for label, env in trees:
            served[label] = ([], [])
            with on_path(env), language_server(engram, repo):
                for i in range(args.runs + 1):
                    c0, t0 = child_cpu(), time.perf_counter()
                    subprocess.run(cmds[f"blame{label}"], cwd=repo, capture_output=True, check=True,
                                   env={**os.environ, **env})
                    if i:
                        served[label][0].append(time.perf_counter() - t0)
                        served[label][1].append(child_cpu() - c0)
    right = none = 0
    for r in doc["regions"]:
        a, b = r["lines"]
        for n in range(a, b + 1):
            none += r["session_id"] is None
            right += r["session_id"] == truth[n - 1]

    def row(name: str, w: list[float], c: list[float]) -> list[str]:
        return [name, f"{pct(w, 50) * 1000:.0f}", f"{pct(c, 50) * 1000:.0f}", f"{max(w) * 1000:.0f}"]

    rows = [row(f"engram blame FILE --json{label}", *series[f"blame{label}"]) for label, _ in trees]
    rows += [row(f"engram blame, engram lsp running (it answers){label}", *served[label])
             for label, _ in trees if label in served]
    rows.append(row("git blame FILE (reference)", *series["git"]))
    rows += [row(f"engram --help (floor){label}", *series[f"help{label}"]) for label, _ in trees]
    print()
    print(fmt_table(["command", "wall p50 ms", "CPU p50 ms", "wall max ms"], rows))
    mine = series[f"blame{trees[-1][0]}"]
    ok = pct(mine[0], 50) * 1000 <= TARGET_MS
    if len(trees) > 1:
        print("\nblame's output: " + ("the same in both trees" if len(set(docs.values())) == 1 else "DIFFERS between the trees"))
    print(f"\n{len(doc['regions'])} regions; lines given to the session whose edit they were copied from: "
          f"{right / len(truth):.3f}, to none: {none / len(truth):.3f} (a floor: generated sessions rewrite the "
          f"same base code)")
    print(f"target: engram blame p50 <= {TARGET_MS:.0f} ms {verdict(ok)} (CPU p50 "
          f"{pct(mine[1], 50) * 1000:.0f} ms; load average {load()})")
    return 0 if ok else 1


def accuracy(args: argparse.Namespace) -> int:
    import provenance as pv

    from engram.query.blame import blame
    from engram.query.explain import Options, explain
    from engram.query.spans import read_span

    work = Path(tempfile.mkdtemp(prefix="engram-blame-"))
    try:
        print(f"machine: {machine()}")
        print(f"engram under test: {engram_version()}")
        here = str((work / "repo").resolve())
        maps = [(a.replace("{repo}", here), b.replace("{repo}", here)) for a, b in args.maps]
        run = pv.prepare_multi(work, 1, args.seed, args.sessions, args.history, maps, False,
                               args.root.replace("{repo}", here) if args.root else None)
        store = pv.engram_env(run.repo, [work / "transcripts"], maps)
        db, _, _ = pv.build_index(store, 4, 3)
        c: Counter[str] = Counter()
        regions_with_writer = []
        t0 = time.perf_counter()
        files = 0
        for rel, st in sorted(run.replay.files.items()):
            path = run.repo / rel
            if not st.lines or not path.is_file():
                continue
            text = path.read_text(encoding="utf-8")
            if text.split("\n")[:-1] != st.lines:  # a line separator other than \n: not comparable
                c["files left out"] += 1
                continue
            files += 1
            got = [None] * len(st.lines)
            for r in blame(db, run.repo, rel, text):
                for n in range(r.start, r.end + 1):
                    got[n - 1] = r.writer.session_id if r.writer else None
                if r.writer is not None:
                    truth = Counter(st.writer[r.start - 1:r.end]).most_common(1)[0][0]
                    regions_with_writer.append((rel, r.start, r.end, r.writer.session_id, truth))
            for want, have in zip(st.writer, got):
                if want is None:
                    c["no writer: none"] += have is None
                    c["no writer: a session"] += have is not None
                else:
                    c["writer"] += 1
                    c["right"] += have == want
                    c["wrong"] += have is not None and have != want
                    c["none"] += have is None
        secs = time.perf_counter() - t0
        rng = random.Random(args.seed)
        sample = rng.sample(regions_with_writer, min(args.regions, len(regions_with_writer)))
        agree = blame_right = explain_right = 0
        for rel, a, b, sid, truth in sample:
            doc = explain(store, db, read_span(run.repo, rel, a, b, run.repo), Options(brief=True),
                          file_lines=(run.repo / rel).read_text(encoding="utf-8").splitlines())
            first = doc["sessions"][0]["session_id"] if doc["sessions"] else None
            agree += first == sid
            blame_right += sid == truth
            explain_right += first == truth
        db.close()
        n, nw = c["writer"], c["no writer: none"] + c["no writer: a session"]
        name = args.name or args.sessions.resolve().parent.name
        print()
        print(fmt_table(["set", "files", "lines with a writer", "right", "another session", "none",
                         "lines with none: given one", "blame s", "explain agrees", "region's writer: blame / explain"], [[
            name, str(files), f"{n:,}", f"{c['right'] / max(n, 1):.3f}", f"{c['wrong'] / max(n, 1):.3f}",
            f"{c['none'] / max(n, 1):.3f}", f"{c['no writer: a session'] / max(nw, 1):.3f} of {nw:,}",
            f"{secs:.1f}", f"{agree}/{len(sample)}", f"{blame_right} / {explain_right}"]]))
        print(f"\nBLAME {name}: per-line writer {c['right'] / max(n, 1):.3f} (another {c['wrong'] / max(n, 1):.3f}, "
              f"none {c['none'] / max(n, 1):.3f}); explain's first session is blame's writer on {agree}/{len(sample)} "
              f"regions; the region's (most lines') writer: blame {blame_right}, explain {explain_right}")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("speed", help="blame a 5,000-line file of a generated store, git blame alongside")
    s.add_argument("--repo", type=Path, required=True, help="an ingested repository (bench/scale.py --keep)")
    s.add_argument("--engram", default=f"{sys.executable} -m engram_server.entry", help="the engram command")
    s.add_argument("--runs", type=int, default=10)
    s.add_argument("--with-lsp", action="store_true", help="also time it with `engram lsp` running on the store")
    s.add_argument("--compare", type=Path, metavar="DIR",
                   help="another engram source tree, its commands alternating with this tree's (see above)")
    s.add_argument("--seed", type=int, default=5)
    s = sub.add_parser("accuracy", help="per-line writer against bench/provenance.py --multi's replay")
    s.add_argument("--sessions", type=Path, required=True)
    s.add_argument("--history", type=Path)
    s.add_argument("--map", dest="maps", action="append", default=[], type=lambda v: tuple(v.split("=", 1)),
                   help="FROM=TO, as bench/provenance.py --map")
    s.add_argument("--root")
    s.add_argument("--name")
    s.add_argument("--regions", type=int, default=60, help="regions sampled for the agreement with explain")
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args(argv)
    return speed(args) if args.what == "speed" else accuracy(args)


if __name__ == "__main__":
    sys.exit(main())
