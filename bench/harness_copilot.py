#!/usr/bin/env python3
"""VS Code Copilot Chat session logs committed in a repository (`.chat/*.json`, the events log
VS Code writes, exported by a hook): edits counted by this script vs the Copilot adapter's
code.edits, and whether the ranges it placed are right.

    python bench/harness_copilot.py --repo CLONE --map RECORDED_ROOT [--glob '.chat/*.json']

1. counts each log's successful `replace_string_in_file` replacements (one per pair of a
   `multi_replace_string_in_file`) and `create_file` calls with its own JSON reading;
2. parses each log with engram's adapter (the clone as the repository, `--map` of the folder the
   session ran in onto it) and counts the code.edits, those with line ranges, and how they were
   placed (the log keeps no tool results: by the old string's place in the file in the newest
   commit before the edit, `git history`, or by the new string's in the first commit after it,
   `commit after`);
3. *right*: for the last code.edit of each file in a session, its after_text stands at its
   after_range in the file of the first commit after that edit that changed the file (the user
   committed the session's work). *checked* counts the edits checked; an edit placed by that
   very commit (`commit after`) is not an independent check and is counted apart (*by the
   commit checked*), not in *checked*;
4. a cross-check of the `commit after` placement: each log parsed again with every state before
   an edit hidden (the adapter's `_Session.state` answering nothing), so that each replacement
   is placed by the commit after it; of the edits the first parse placed by `git history`, how
   many get the same ranges this way (*agree*), and how many it placed elsewhere (*disagree*)
   or not at all;
5. *writer r@1*: every log ingested into one store; for each checked last edit (3.), the file as
   the commit after it holds it is put in a scratch work tree, and `engram explain` is asked about
   5-line windows inside the edit's after_range (up to 3 per edit, 3+ lines with a word): is the
   session that made the edit first? *grep r@1* (reference): the session whose code.edits' after
   texts hold most of the window's lines (the earliest on a tie) first.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def own_count(path: Path) -> Counter[str]:
    """Successful edit calls of a log, read without engram."""
    starts: dict[str, tuple[str, dict[str, Any]]] = {}
    out: Counter[str] = Counter()
    for line in path.read_text("utf-8", "replace").splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        d = e.get("data") or {}
        if e.get("type") == "tool.execution_start":
            starts[d.get("toolCallId")] = (d.get("toolName"), d.get("arguments") or {})
        elif e.get("type") == "tool.execution_complete" and d.get("toolCallId") in starts:
            name, args = starts.pop(d["toolCallId"])
            ok = d.get("success") is True
            n = len(args.get("replacements") or []) if name == "multi_replace_string_in_file" else 1
            if name in ("replace_string_in_file", "multi_replace_string_in_file", "create_file"):
                out["edits ok" if ok else "edits failed"] += n
    return out


def _session(log: Path) -> str:
    """The session id of a log (its `session.start`'s `sessionId`)."""
    for line in log.read_text("utf-8", "replace").splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("type") == "session.start":
            return str((e.get("data") or {}).get("sessionId") or log.stem)
    return log.stem


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False).stdout


def file_after(repo: Path, rel: str, when: str) -> list[str] | None:
    """The file in the first commit after `when` that changed it."""
    commits = git(repo, "log", "--reverse", f"--since={when}", "--format=%H", "--", rel).split()
    if not commits:
        return None
    text = subprocess.run(["git", "-C", str(repo), "show", f"{commits[0]}:{rel}"], capture_output=True,
                          check=False).stdout
    return text.decode("utf-8", "replace").splitlines() if text else None


def commit_after_only(parse: Any) -> Any:
    """`parse` run with the adapter's states before an edit hidden: every replacement placed by
    the commit after it (or later fallbacks)."""
    from engram.adapters import copilot

    def hidden(self: Any, rel: str, ts: str) -> tuple[None, None]:
        return None, None

    saved = copilot._Session.state
    copilot._Session.state = hidden  # type: ignore[method-assign]
    try:
        return parse()
    finally:
        copilot._Session.state = saved  # type: ignore[method-assign]


def cross_check(edits: list[dict[str, Any]], alone: list[dict[str, Any]]) -> Counter[str]:
    """Edits placed by git history against the same edits placed by the commit after."""
    out: Counter[str] = Counter()
    for e, f in zip(edits, alone, strict=True):
        if e.get("placed") != "git history":
            continue
        if f.get("placed") != "commit after":
            out["not placed by it"] += 1
        else:
            same = (e["before_range"], e["after_range"]) == (f["before_range"], f["after_range"])
            out["agree" if same else "disagree"] += 1
    return out


def windows(lines: list[str], a: list[int]) -> list[int]:
    """Up to three 5-line windows (their first lines) inside after_range `a`, each with 3+ lines
    holding a word: at its start, middle and end."""
    from harness_gemini import SPAN, WORD

    starts = sorted({a[0], max(a[0], (a[0] + a[1] - SPAN + 1) // 2), a[1] - SPAN + 1})
    return [s for s in starts if a[0] <= s and s + SPAN - 1 <= a[1] and s + SPAN - 1 <= len(lines)
            and sum(bool(WORD.search(t)) for t in lines[s - 1:s + SPAN - 1]) >= 3]


def writer_recall(logs: list[Path], maps: list[tuple[str, str]], work: Path,
                  checks: list[tuple[str, str, list[str], list[int]]],
                  misses: list[tuple[str, int, str, str | None]] | None = None) -> Counter[str]:
    """explain's first session and the grep reference on windows of the checked edits.
    `checks`: (writer session, file, its lines in the commit after the edit, after_range);
    `maps`: the recorded root onto `work`, a scratch git work tree."""
    from harness_gemini import SPAN, explain_top

    from engram.capture.pipeline import ingest_paths
    from engram.index.db import open_db
    from engram.store.repo import init_store
    from engram.tape.reader import TapeReader

    store, _ = init_store(work)
    ingest_paths(store, logs, maps=maps)
    db = open_db(store)
    written: dict[str, list[tuple[str, str, str]]] = {}  # file -> (session, start, after_text)
    for tape in sorted(store.tapes_dir.rglob("*")):
        if tape.is_file():
            with TapeReader(tape, store.objects_dir) as rd:
                evs = list(rd.events())
            sid = str(evs[0].get("session_id", "")) if evs else ""
            for ev in evs:
                if ev.get("kind") == "code.edit":
                    written.setdefault(ev["file"], []).append((sid, str(evs[0].get("started") or ""),
                                                               ev.get("after_text") or ""))
    out: Counter[str] = Counter()
    for writer, rel, lines, a in checks:
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text("".join(t + "\n" for t in lines), "utf-8")
        for start in windows(lines, a):
            out["spans"] += 1
            top = explain_top(store, db, work, rel, start)
            out["writer"] += top == writer
            if top != writer and misses is not None:
                misses.append((rel, start, writer, top))
            span = lines[start - 1:start - 1 + SPAN]
            held = Counter()
            for sid, began, text in written.get(rel, []):
                held[(sid, began)] += sum(t in text for t in span)
            best = max(held.items(), key=lambda kv: (kv[1], [-ord(c) for c in kv[0][1]]))[0][0] if held else None
            out["grep"] += best == writer
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, required=True, help="a clone of the repository (a work tree)")
    ap.add_argument("--map", required=True, help="the folder the sessions ran in, as they recorded it")
    ap.add_argument("--glob", default=".chat/*.json")
    ap.add_argument("--no-recall", action="store_true", help="skip writer recall (5.)")
    args = ap.parse_args()
    from engram.capture.discovery import COPILOT, detect_format, jobs_from_paths
    from engram.capture.pipeline import parse_job
    from engram.capture.stats import IngestStats

    repo = args.repo.resolve()
    rows, total, cross = [], Counter(), Counter()
    logs: list[Path] = []
    checks: list[tuple[str, str, list[str], list[int]]] = []
    for f in sorted(repo.glob(args.glob)):
        if detect_format(f) != COPILOT:
            continue
        seen = own_count(f)
        def parse(f: Path = f) -> list[dict[str, Any]]:
            cap = parse_job(jobs_from_paths([f], IngestStats())[0], repo, [(args.map, str(repo))], 64 << 20)
            return [e for e in cap.events if e["kind"] == "code.edit"]
        edits = parse()
        logs.append(f)
        cross.update(cross_check(edits, commit_after_only(parse)))
        last = {e["file"]: e for e in edits}
        right = checked = circular = 0
        for rel, e in last.items():
            a = e.get("after_range")
            lines = file_after(repo, rel, e["ts"]) if a else None
            if lines is None:
                continue
            if e.get("placed") == "commit after":
                circular += 1
                continue
            checked += 1
            ok = lines[a[0] - 1:a[1]] == (e.get("after_text") or "").splitlines()
            right += ok
            if ok:
                checks.append((_session(f), rel, lines, a))
        row = Counter({"sessions": 1, "edits ok": seen["edits ok"], "edits failed": seen["edits failed"],
                       "code.edits": len(edits), "with ranges": sum(e.get("after_range") is not None for e in edits),
                       "placed (git history)": sum(e.get("placed") == "git history" for e in edits),
                       "placed (commit after)": sum(e.get("placed") == "commit after" for e in edits),
                       "placed (working tree)": sum(e.get("placed") == "working tree" for e in edits),
                       "checked": checked, "right": right, "by the commit checked": circular})
        total.update(row)
        rows.append((f.name, row))
    cols = ["edits ok", "edits failed", "code.edits", "with ranges", "placed (git history)", "placed (commit after)",
            "placed (working tree)", "checked", "right", "by the commit checked"]
    print("| log | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for name, row in [*rows, (f"all ({total['sessions']} sessions)", total)]:
        print(f"| {name} | " + " | ".join(str(row[c]) for c in cols) + " |")
    if not args.no_recall:
        import tempfile

        work = Path(tempfile.mkdtemp(prefix="engram-copilot-"))
        subprocess.run(["git", "init", "-q", str(work)], check=True)
        rec = writer_recall(logs, [(args.map, str(work))], work, checks)
        n = rec["spans"] or 1
        print(f"\nwriter r@1 on {rec['spans']} windows of {len(checks)} checked edits: {rec['writer'] / n:.3f} "
              f"(grep r@1, reference: {rec['grep'] / n:.3f})")
    print(f"\ncommit-after cross-check, of {total['placed (git history)']} edits placed by git history: "
          f"{cross['agree']} agree, {cross['disagree']} disagree, {cross['not placed by it']} not placed by it")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
