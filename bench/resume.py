"""`engram resume`: the package's size and build time on real sessions, and how well a package
built at a cut of a session predicts what the session did next (docs/resume.md).

    python bench/resume.py                       # the repository's fixtures + a generated 10 MB chain
    python bench/resume.py --transcripts DIR ... # more transcripts (Claude Code or Codex files, folders)
    python bench/resume.py --no-fixtures --long-mb 0 --transcripts DIR --map FROM={repo}  # a set apart

Sessions: the real Claude Code sessions in tests/fixtures (marot/spotter) and the Codex fixture,
plus whatever --transcripts adds. Every session is cut after 25 %, 50 % and 75 % of its edits
(where at least 10 edits follow), and the package is built from the events before the cut:

- next-files recall: the share of the distinct files edited in the next 10 edits that the
  package names, in its working set (files touched) or its `likely_next` (files named, not
  touched: engram.continuity.mentions; with --history, files the repository's commits up to the
  cut relate to the working set: engram.continuity.related); the package from the transcript
  alone (no history) and the working set alone too. Ceilings: the files touched
  before the cut, and those touched or named before it. Reference in the same run: the files of
  the last 10 edits before the cut, and where the harness compacted, its own summary (a file
  counts when its path or name is in the summary's text) with its size;
- open-failure recall: the share of commands failing at the cut (their last run before it
  failed) and run again after it, that the package flags (failing checks, commands whose last
  run failed, tool errors);
- size: tokens as the package counts them (4 bytes of compact JSON), at the default budget and
  unbounded; time: building the package in-process (best of 3; CPU: the process's and the git it
  runs to read --history), and for a generated 10 MB
  single-session chain (`gen_sessions.py` sessions joined into one).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from common import best_of, fmt_table, load, machine, pct

ROOT = Path(__file__).resolve().parent.parent
NEXT_EDITS = 10
CUTS = (0.25, 0.5, 0.75)
LONG_SESSION = "11111111-2222-4333-8444-555555555555"


def _unpack_fixtures(dst: Path) -> list[Path]:
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import unpack  # noqa: PLC0415

    spot = unpack(ROOT / "tests" / "fixtures" / "claude" / "spotter", dst / "spotter")
    codex = dst / "codex"
    codex.mkdir()
    shutil.copy(ROOT / "tests" / "fixtures" / "codex" / "codex_small_schema_coverage.jsonl", codex)
    return [spot, codex]


def _long_session(dst: Path, mb: float) -> Path:
    """One Claude Code session of about `mb` MB: the sessions of a generated corpus joined into one
    (each record's sessionId rewritten), so one chain holds that many bytes of transcript."""
    import gen_sessions  # noqa: PLC0415

    corpus = dst / "gen"
    gen_sessions.generate(corpus, int(mb * 4e6), 5, 1)
    files = sorted(p for p in (corpus / "projects").rglob("*.jsonl") if "subagents" not in p.parts)
    out = dst / "long" / f"{LONG_SESSION}.jsonl"
    out.parent.mkdir(parents=True)
    size = 0
    with out.open("wb") as f:
        for p in files:
            for line in p.read_bytes().splitlines():
                rec = orjson.loads(line)
                if isinstance(rec, dict) and "sessionId" in rec:
                    rec["sessionId"] = out.stem
                data = orjson.dumps(rec) + b"\n"
                f.write(data)
                size += len(data)
                if size >= mb * 1e6:
                    break
            if size >= mb * 1e6:
                break
    if size < mb * 1e6:
        print(f"(the generated corpus gave a {size / 1e6:.1f} MB session, not {mb} MB)")
    return out


def _repo(workdir: Path, sources: list[Path], maps: list[str] = ()) -> Path:  # type: ignore[assignment]
    repo = workdir / "repo"
    if (repo / ".engram").is_dir():
        return repo  # --work: ingested by an earlier run
    repo.mkdir(parents=True)  # (--work: a folder not made yet)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "engram.cli", "init"], cwd=repo, check=True, capture_output=True, env=env)
    mapped = [a for m in maps for a in ("--map", m.replace("{repo}", str(repo)))]
    for s in sources:
        subprocess.run([sys.executable, "-m", "engram.cli", "ingest", *mapped, str(s)], cwd=repo, check=True,
                       capture_output=True, env=env)
    return repo


def _events(store: Any, tapes: list[Any]) -> list[tuple[str, int, dict[str, Any]]]:
    from engram.index.catalog import tape_file  # noqa: PLC0415
    from engram.tape.reader import TapeReader  # noqa: PLC0415

    out = []
    for row in tapes:
        with TapeReader(tape_file(store, row.id), store.objects_dir) as r:
            out += [(row.id, off, ev) for off, ev in enumerate(r.events(resolve_objects=True))]
    return out


def _cpu() -> float:
    """This process's CPU time and its finished children's (the git the package runs)."""
    t = os.times()
    return time.process_time() + t.children_user + t.children_system


def _flagged(doc: dict[str, Any]) -> set[str]:
    from engram.continuity.commands import family  # noqa: PLC0415

    out = {family(x["command"]) for x in doc["failing"]}
    out |= {family(x["command"]) for x in doc["commands"] if x["last"] == "failed"}
    return out


SOURCES = ("request", "plan", "message", "output", "call")


def _texts(events: list[tuple[str, int, dict[str, Any]]]) -> dict[str, str]:
    """The texts of these events by where they were said: the person's requests (and compaction
    summaries), the harness's plan (TodoWrite, update_plan, Task tools, the accepted plan), the
    agent's messages (thinking included), the output of its tool calls, their input."""
    from engram.continuity.facts import _PLAN_TOOLS, _strings  # noqa: PLC0415
    from engram.index.kinds import is_request  # noqa: PLC0415

    out: dict[str, list[str]] = {k: [] for k in SOURCES}
    for _, _, ev in events:
        kind = ev.get("kind")
        if kind == "msg.in" and (ev.get("compact_summary") or (not ev.get("agent") and is_request(ev))):
            out["request"].append(str(ev.get("text") or ""))
        elif kind == "compact":
            out["request"].append(str(ev.get("message") or ""))
        elif kind == "msg.out":
            out["message"].append(str(ev.get("text") or ""))
        elif kind == "tool.call" and isinstance(ev.get("input"), dict):
            out["plan" if ev.get("name") in _PLAN_TOOLS else "call"].append("\n".join(_strings(ev["input"])))
        elif kind == "tool.result":
            out["output"] += [t for t in (ev.get("stdout"), ev.get("stderr")) if isinstance(t, str)]
    return {k: "\n".join(v) for k, v in out.items()}


def _ceiling(want: set[str], shown: set[str], touched: set[str], edited: set[str], tree: set[str] | None,
             texts: dict[str, str]) -> dict[str, int]:
    """Where each next file stood at the cut: in the package (a); in the tree or touched, not in
    the package (b: touched, named, other); not in the tree at the cut (c: named, by where, or a
    sibling of a file edited: same folder, same extension; or neither)."""
    c: dict[str, int] = {}
    folders = {(os.path.dirname(f), os.path.splitext(f)[1]) for f in edited}

    def add(k: str) -> None:
        c[k] = c.get(k, 0) + 1

    for f in want:
        said = [k for k in SOURCES if f in texts[k] or os.path.basename(f) in texts[k]]
        if f in shown or f in touched or (tree is not None and f in tree) or any(f in texts[k] for k in said):
            add("reach")  # a list could name it: it was there, or its path was written
        if f in shown:
            add("a")
        elif f in touched or (tree is not None and f in tree):
            add("b")
            add("b_touched" if f in touched else "b_named" if said else "b_other")
        else:
            add("c")
            for k in said:
                add("c_" + k)
            if any(f in texts[k] for k in said):
                add("c_path")
            add("c_named" if said else "c_sibling" if (os.path.dirname(f), os.path.splitext(f)[1]) in folders
                else "c_none")
    return c


def _cut_rows(store: Any, db: Any, chain: Any, events: list[tuple[str, int, dict[str, Any]]],
              history: Path | None, budget: int = 2000) -> list[dict[str, Any]]:
    from engram.continuity.commands import command_line, family  # noqa: PLC0415
    from engram.continuity.facts import read_facts  # noqa: PLC0415
    from engram.continuity.package import Options, file_entries, package  # noqa: PLC0415
    from engram.continuity.related import read_history  # noqa: PLC0415

    edits = [i for i, (_, _, ev) in enumerate(events) if ev.get("kind") == "code.edit" and ev.get("file")]
    rows = []
    cut_points = [(edits[int(len(edits) * q)], "edits") for q in CUTS if len(edits) - int(len(edits) * q) >= NEXT_EDITS]
    cut_points += [(i, "compaction") for i, (_, _, ev) in enumerate(events)
                   if ev.get("kind") == "msg.in" and ev.get("compact_summary")]
    for at, why in cut_points:
        tape, off, _ = events[at]
        nxt = [events[i][2]["file"] for i in edits if i >= at][:NEXT_EDITS]
        if not nxt:
            continue
        want = set(nxt)
        facts = read_facts(store, chain.tapes, (tape, off))
        doc = package(store, db, chain, facts, Options(budget=budget, history=history, history_until=facts.ended))
        alone = package(store, db, chain, facts, Options(budget=budget, history=Path(store.root)))  # (no commit)
        whole = package(store, db, chain, facts, Options(budget=0, history=history, history_until=facts.ended))
        files = lambda d, *sections: {e["file"] for k in sections for e in file_entries(d, k)}  # noqa: E731
        unbounded = files(whole, "working_set", "likely_next")
        named = files(doc, "working_set")
        likely = files(doc, "likely_next")
        said = files(alone, "working_set", "likely_next")
        touched = {f for f in facts.files}
        last10 = {events[i][2]["file"] for i in [i for i in edits if i < at][-NEXT_EDITS:]}
        row: dict[str, Any] = {"why": why, "want": len(want), "working": len(want & named) / len(want),
                               "package": len(want & (named | likely)) / len(want),
                               "unbounded": len(want & unbounded) / len(want),
                               "transcript": len(want & said) / len(want),
                               "related": sum(1 for w in doc.get("likely_next") or [] if "why" in w),
                               "named": len(want & (touched | {m.path for m in facts.likely_next})) / len(want),
                               "last10": len(want & last10) / len(want), "tokens": doc["budget"]["used"],
                               "ceiling": len(want & touched) / len(want)}
        if why == "compaction":
            summary = str(events[at][2].get("text") or "")
            row["summary"] = sum(1 for f in want if f in summary or os.path.basename(f) in summary) / len(want)
            row["summary_tokens"] = -(-len(summary.encode()) // 4)
        failing = {fam for fam, r in facts.runs.items() if r.failed}
        later = {family(line) for _, _, ev in events[at:] if ev.get("kind") == "tool.call"
                 and (line := command_line(str(ev.get("name") or ""), ev.get("input"))) is not None}
        rerun = failing & later
        hist = read_history(history, facts.ended, 1) if history else None
        row["where"] = _ceiling(want, named | likely, set(touched), {f for f, t in facts.files.items() if t.edited},
                                hist.tree if hist else None, _texts(events[:at]))
        row["reach"] = row["where"].get("reach", 0) / len(want)
        row["rerun_failures"] = len(rerun)
        row["flagged"] = len(rerun & _flagged(doc))
        rows.append(row)
    return rows


def _print_ceiling(rows: list[dict[str, Any]]) -> None:
    """The next files of all cuts (a file counts once a cut), by where they stood at the cut."""
    total: dict[str, int] = {}
    for r in rows:
        for k, n in r["where"].items():
            total[k] = total.get(k, 0) + n
    n = sum(r["want"] for r in rows)
    cell = lambda k: f"{total.get(k, 0)} ({total.get(k, 0) / n:.2f})"  # noqa: E731
    print("\n## Where the next files stood at the cut (files of all cuts; share of them)\n")
    print(fmt_table(["next files", "(a) in the package", "(b) in the tree, not in it: touched / named / other",
                     "(c) not in the tree", "(c) named: request / plan / message / output / call", "(c) named, any",
                     "(c) named by path",
                     "(c) not named, a sibling of a file edited", "(c) neither"],
                    [[str(n), cell("a"), " / ".join(str(total.get("b_" + k, 0)) for k in ("touched", "named", "other")),
                      cell("c"), " / ".join(str(total.get("c_" + k, 0)) for k in SOURCES), cell("c_named"), cell("c_path"),
                      cell("c_sibling"), cell("c_none")]]))
    print(f"\nceiling, mean of {len(rows)} cuts: {sum(r['reach'] for r in rows) / len(rows):.3f} (the next files in the tree "
          "or touched at the cut, or whose path the transcript wrote before it: what a list could name)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--transcripts", nargs="*", type=Path, default=[], help="more transcripts to ingest")
    ap.add_argument("--long-mb", type=float, default=10.0, help="size of the generated single-session chain (0: none)")
    ap.add_argument("--map", action="append", default=[], metavar="FROM=TO",
                    help="passed to `engram ingest` ({repo}: the bench's repository), for sessions recorded elsewhere")
    ap.add_argument("--work", type=Path, help="keep the ingested repository in this folder, and reuse it on a "
                    "later run (its sessions as ingested then; the long chain is not timed again)")
    ap.add_argument("--history", type=Path, help="the sessions' repository (a bare clone will do): the package "
                    "relates files to the working set from its commits up to each cut's time (default: none)")
    ap.add_argument("--budget", type=int, default=2000, help="the packages' token budget (default: resume's own)")
    ap.add_argument("--no-fixtures", action="store_true", help="only the --transcripts (a held-out set measured apart)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from engram.continuity.chain import resolve_chain  # noqa: PLC0415
    from engram.continuity.facts import read_facts  # noqa: PLC0415
    from engram.continuity.package import Options, package  # noqa: PLC0415
    from engram.index.db import open_db  # noqa: PLC0415
    from engram.store.repo import Store  # noqa: PLC0415

    print(f"machine: {machine()}  load: {load()}")
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-resume-"))
    again = (work / "repo" / ".engram").is_dir()
    try:
        sources = ([] if args.no_fixtures or again else _unpack_fixtures(work)) + [p.resolve() for p in args.transcripts]
        long = _long_session(work, args.long_mb) if args.long_mb and not again else None
        repo = _repo(work, sources + ([long] if long else []), args.map)
        store = Store.discover(repo)
        db = open_db(store)
        sessions = [r[0] for r in db.execute(
            "SELECT DISTINCT t.session_id FROM tapes t LEFT JOIN subagents s ON s.tape = t.id WHERE s.tape IS NULL")]
        size_rows, cut_rows, sizes, times, full = [], [], [], [], []
        for sid in sessions:
            chain = resolve_chain(db, sid)
            ids = [t.id for t in chain.tapes]
            mb = db.execute(f"SELECT coalesce(sum(end - start), 0) FROM captures WHERE tape IN ({','.join('?' * len(ids))})",
                            ids).fetchall()[0][0] / 1e6  # the transcript's bytes, as the harness wrote them

            def build(chain: Any = chain) -> dict[str, Any]:
                facts = read_facts(store, chain.tapes)
                return package(store, db, chain, facts, Options(budget=2000, history=args.history,
                                                                history_until=facts.ended))

            wall, cpu, doc = best_of(build, 3, _cpu)
            assert doc is not None
            whole = package(store, db, chain, read_facts(store, chain.tapes), Options(budget=0))
            n_full = -(-len(orjson.dumps(whole)) // 4)
            sizes.append(doc["budget"]["used"])
            full.append(n_full)
            times.append(wall)
            size_rows.append([sid[:8], f"{mb:.2f}", str(sum(t.events for t in chain.tapes)), str(doc["budget"]["used"]),
                              str(n_full), f"{wall * 1000:.0f} ms", f"{cpu * 1000:.0f} ms",
                              ", ".join(f"{n} {k}" for k, n in (doc["left_out"] or {}).items()) or "-"])
            if sid != LONG_SESSION:
                cut_rows += [{"session": sid[:8], **r}
                             for r in _cut_rows(store, db, chain, _events(store, chain.tapes), args.history, args.budget)]
        print("\n## Package size and build time (budget 2000)\n")
        print(fmt_table(["session", "transcript MB", "events", "tokens", "unbounded", "wall", "cpu", "left out"], size_rows))
        print(f"\ntokens at budget 2000: p50 {pct(sizes, 50):.0f}, max {max(sizes)}; unbounded: p50 {pct(full, 50):.0f}, "
              f"max {max(full)}; build: p50 {pct(times, 50) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms")
        if cut_rows:
            print("\n## Cuts: next-files recall (next 10 edits) and open failures\n")
            print(fmt_table(["session", "cut at", "files next", "touched before", "named before", "working set",
                             "transcript alone", "package", "unbounded", "related listed", "last 10 edited", "harness summary", "tokens (summary)", "failing & re-run",
                             "flagged"],
                            [[r["session"], r["why"], str(r["want"]), f"{r['ceiling']:.2f}", f"{r['named']:.2f}",
                              f"{r['working']:.2f}", f"{r['transcript']:.2f}", f"{r['package']:.2f}", f"{r['unbounded']:.2f}",
                              str(r["related"]), f"{r['last10']:.2f}",
                              f"{r['summary']:.2f}" if "summary" in r else "-",
                              f"{r['tokens']} ({r['summary_tokens']})" if "summary" in r else str(r["tokens"]),
                              str(r["rerun_failures"]), str(r["flagged"])] for r in cut_rows]))
            mean = lambda k: sum(r[k] for r in cut_rows) / len(cut_rows)  # noqa: E731
            reruns = sum(r["rerun_failures"] for r in cut_rows)
            flagged = sum(r["flagged"] for r in cut_rows)
            print(f"\nnext-files recall, mean of {len(cut_rows)} cuts: package {mean('package'):.3f} (target >= 0.85; "
                  f"unbounded {mean('unbounded'):.3f}; "
                  f"from the transcript alone {mean('transcript'):.2f}, its working set {mean('working'):.2f}), last 10 edited {mean('last10'):.2f}; files touched "
                  f"before the cut {mean('ceiling'):.2f}, touched or named before it (the ceiling of both lists) "
                  f"{mean('named'):.2f}; open-failure recall: "
                  + (f"{flagged}/{reruns} = {flagged / reruns:.2f} (target >= 0.9)" if reruns else "no failure re-run "
                     "after a cut in these sessions"))
            _print_ceiling(cut_rows)
        db.close()
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    t0 = time.perf_counter()
    rc = main()
    print(f"\n(ran in {time.perf_counter() - t0:.0f} s)")
    sys.exit(rc)
