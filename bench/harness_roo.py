#!/usr/bin/env python3
"""Roo Code on real tasks: are the edits Roo made captured at the right lines, and does
`engram explain` name the task that wrote a span?

    python bench/harness_roo.py --repo GIT_DIR --base COMMIT [--map FROM] [--spans 50] [--seed 1] REPORT...

REPORT: a Roo Code diagnostics file (what Roo Code writes for its support: `//` comment lines,
then `{"error": …, "history": [the task's api_conversation_history]}`), as projects commit them;
one whose text went through a markdown formatter has its stray back slashes (escapes JSON does
not know) taken out. Reports of one task (the same first message) count once, the longest kept.
GIT_DIR: the repository the tasks worked in; COMMIT: its state before them (the files their
edits start from); FROM: the directory the tasks recorded (their workspace), read as the
repository.

* **edit uses** — counted by this script, not the adapter: each apply_diff / write_to_file
  `tool_use` paired by id with its `tool_result`; ok when the result says the file was written
  (`"operation":"modified"|"created"`, `<operation>…`, `Changes successfully applied`);
* **truth** — the ok edits replayed in time order on the files of COMMIT: each apply_diff block
  where its SEARCH lines stand, nearest the line Roo was told (`:start_line:`, shifted by the
  blocks before it), a write_to_file as the whole file; the lines a block or a write changed (a
  line diff) are its range. A block whose SEARCH text is not in the replayed file has no truth;
* **right ranges** — the adapter's code.edits of each (task, file), in order, against those
  ranges (after_range equal);
* **writer recall@1** — the replayed files committed once per task; 5-line spans one task wrote
  (3+ lines with a word), sampled (seeded); `engram explain --brief` on a store holding every
  task: is the writer its first session? `git blame` on the same spans as a reference.

Targets (issue 52): right ranges >= 0.98 of the ok edits with truth; writer recall@1 >= 0.95.
"""

from __future__ import annotations

import argparse
import difflib
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import load
from harness_gemini import blame_found, commit, explain_top, sample_spans

OK = ('"operation":"modified"', '"operation":"created"', "<operation>modified</operation>",
      "<operation>created</operation>", "Changes successfully applied")
BLOCK = re.compile(r"^<{3,} SEARCH[ \t]*\n(?::start_line:[ \t]*(\d+)[ \t]*\n)?(?::end_line:[ \t]*\d+[ \t]*\n)?"
                   r"(?:-{3,}[ \t]*\n)?(.*?)^={3,}[ \t]*\n(.*?)^>{3,} REPLACE[ \t]*$", re.DOTALL | re.MULTILINE)

EDIT_TOOLS = ("apply_diff", "write_to_file", "insert_content", "search_and_replace")
Owned = list[tuple[str, str | None]]  # a file's lines with the task that last wrote each


def read_report(path: Path) -> list[dict[str, Any]]:
    """The task's conversation from a Roo Code diagnostics file."""
    text = "\n".join(line for line in path.read_text("utf-8").splitlines() if not line.startswith("//"))
    try:
        return json.loads(text)["history"]
    except json.JSONDecodeError:  # a markdown formatter's `\_`, `\*`: JSON knows no such escapes
        fixed = re.sub(r"\\(.)", lambda m: m.group(0) if m.group(1) in '"\\/bfnrtu' else m.group(1), text, flags=re.DOTALL)
        return json.loads(fixed, strict=False)["history"]


def edit_uses(history: list[dict[str, Any]]) -> list[tuple[int, str, dict[str, Any], bool]]:
    """(message ts, tool, input, ok) of each apply_diff / write_to_file / insert_content /
    search_and_replace use, in order."""
    results = {b.get("tool_use_id"): b.get("content") for m in history if isinstance(m.get("content"), list)
               for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"}
    out = []
    for m in history:
        for b in m.get("content") if isinstance(m.get("content"), list) else []:
            if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") in EDIT_TOOLS:
                res = results.get(b.get("id"))
                res = res if isinstance(res, str) else json.dumps(res)
                out.append((int(m.get("ts") or 0), b["name"], b.get("input") or {}, any(k in res for k in OK)))
    return out


def read_uses(history: list[dict[str, Any]]) -> int:
    """read_file uses whose result shows numbered lines (`  12 | text`): each should be a code.read."""
    results = {b.get("tool_use_id"): b.get("content") for m in history if isinstance(m.get("content"), list)
               for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"}
    n = 0
    for m in history:
        for b in m.get("content") if isinstance(m.get("content"), list) else []:
            if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") == "read_file":
                res = results.get(b.get("id"))
                n += bool(re.search(r"^\s*\d+ \|", res if isinstance(res, str) else json.dumps(res), re.MULTILINE))
    return n


def changed(old: list[str], new: list[str]) -> list[int] | None:
    """The new-side range a line diff gives (None: nothing changed)."""
    ops = [op for op in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes() if op[0] != "equal"]
    if not ops:
        return None
    return [ops[0][3] + 1, ops[-1][4]]


def nearest(lines: list[str], search: list[str], target: int) -> int | None:
    hits = [i for i in range(len(lines) - len(search) + 1) if lines[i:i + len(search)] == search] if search else []
    return min(hits, key=lambda i: abs(i - target)) if hits else None


def replay(tasks: dict[str, list[dict[str, Any]]], base: dict[str, str], counts: Counter[str],
           repo: Path, states: dict[tuple[str, str], list[Any]] | None = None,
           seen: list[tuple[int, str, str, str]] | None = None, lost: set[str] | None = None
           ) -> tuple[dict[str, Owned], dict[tuple[str, str], list[list[int]]]]:
    """Every ok edit of every task, in time order, on the base files: the files with their
    writers (committed once per task in `repo`) and the ranges each (task, file) changed, in order
    (and in `states`, beside each range, the file's lines before and after that change). `seen`:
    (time, task, file, text) of whole reads; where the replay's file differs from what a task
    read, the read is what the file was (changed outside the tasks replayed: the user, another
    agent), and the replay goes on from it, those lines of no task. `lost`: the files the replay
    could not follow (a block whose SEARCH text it did not hold), whose writers it does not know."""
    states = {} if states is None else states
    files: dict[str, Owned] = {rel: [(t, None) for t in text.splitlines()] for rel, text in base.items()}
    truth: dict[tuple[str, str], list[list[int]]] = defaultdict(list)
    uses = sorted([(ts, sid, i, tool, inp, ok) for sid, h in tasks.items() for i, (ts, tool, inp, ok) in enumerate(edit_uses(h))]
                  + [(ts, sid, k - len(seen or []), "read", {"path": rel, "content": text}, True)
                     for k, (ts, sid, rel, text) in enumerate(seen or [])])
    last = None
    for _, sid, _, tool, inp, ok in uses:
        if tool == "read":  # not an edit: the file as the task saw it
            rel, new = str(inp["path"]), str(inp["content"]).splitlines()
            if rel in files and [t for t, _ in files[rel]] != new:
                counts["whole reads that moved the replay to the file the task saw"] += 1
                files[rel] = owned(files[rel], new, None)
            continue
        counts[f"{tool} ok" if ok else f"{tool} failed"] += 1
        if not ok:
            continue
        if last is not None and last != sid:
            commit(repo, files, last)
        last = sid
        rel = str(inp.get("path") or "")
        cur = files.get(rel)
        if tool == "insert_content":  # its lines go before line N (0: after the last)
            n = int(str(inp.get("line") or "0").strip() or 0)
            if cur is None or n > len(cur) + 1:  # a line past the replay's end: not the file the task saw
                counts["insert_content without truth (file not in the replay, or its line past the end)"] += 1
                truth[(sid, rel)].append(None)
                states.setdefault((sid, rel), []).append(None)
                if lost is not None:
                    lost.add(rel)
                continue
            lines = [t for t, _ in cur]
            at = len(lines) if n <= 0 else n - 1
            new = lines[:at] + str(inp.get("content") or "").splitlines() + lines[at:]
            files[rel] = owned(cur, new, sid)
            if (r := changed(lines, new)) is not None:
                truth[(sid, rel)].append(r)
                states.setdefault((sid, rel), []).append((lines, new))
            continue
        if tool == "search_and_replace":  # every match replaced; the result keeps no file
            after = replaced_all(cur, inp) if cur is not None else None
            if cur is None or after is None:
                counts["search_and_replace without truth (file not in the replay, or a pattern not read)"] += 1
                truth[(sid, rel)].append(None)
                states.setdefault((sid, rel), []).append(None)
                files.pop(rel, None)
                if lost is not None:
                    lost.add(rel)
                continue
            lines = [t for t, _ in cur]
            files[rel] = owned(cur, after, sid)
            if (r := changed(lines, after)) is not None:
                truth[(sid, rel)].append(r)
                states.setdefault((sid, rel), []).append((lines, after))
            continue
        if tool == "write_to_file":
            new = str(inp.get("content") or "").splitlines()
            old = [t for t, _ in cur] if cur is not None else []
            files[rel] = owned(cur or [], new, sid)
            if (r := changed(old, new)) is not None:
                truth[(sid, rel)].append(r)
                states.setdefault((sid, rel), []).append((old, new))
            continue
        blocks = sorted((((int(s) if s else 1), x.splitlines(), y.splitlines()) for s, x, y in BLOCK.findall(str(inp.get("diff") or ""))),
                        key=lambda b: b[0])  # Roo's order: by the line each names, else as written
        delta = 0
        for start, search, rep in blocks:
            lines = [t for t, _ in cur] if cur is not None else None
            at = nearest(lines, search, start - 1 + delta) if lines is not None else None
            if at is None or cur is None:
                counts["apply_diff blocks without truth (file or SEARCH text not in the replayed file)"] += 1
                truth[(sid, rel)].append(None)  # its place in the order, so later edits pair with theirs
                states.setdefault((sid, rel), []).append(None)
                if lost is not None:
                    lost.add(rel)
                files.pop(rel, None)
                cur = None
                continue
            new = lines[:at] + rep + lines[at + len(search):]
            cur = owned(cur, new, sid)
            if (r := changed(lines, new)) is not None:
                truth[(sid, rel)].append(r)
                states.setdefault((sid, rel), []).append((lines, new))
                counts["apply_diff blocks with truth"] += 1
            delta += len(rep) - len(search)
        if cur is not None:
            files[rel] = cur
    if last is not None:
        commit(repo, files, last)
    return files, truth


def replaced_all(cur: Owned, inp: dict[str, Any]) -> list[str] | None:
    """The lines after Roo's search_and_replace (one search: `search`, `replace`, `use_regex`,
    `ignore_case`, `start_line`, `end_line`): every match in the file, or in those lines, replaced
    (a replacement's `$&` and `$1` as JavaScript reads them). None: a pattern Python does not read."""
    text = "\n".join(t for t, _ in cur)
    search, rep = str(inp.get("search") or ""), str(inp.get("replace") or "")
    try:
        pat = re.compile(search if str(inp.get("use_regex")).lower() == "true" else re.escape(search),
                         re.I if str(inp.get("ignore_case")).lower() == "true" else 0)
    except re.error:
        return None
    if not search:
        return None
    js = lambda m: re.sub(r"\$(\$|&|\d)", lambda t: "$" if t.group(1) == "$" else m.group(0) if t.group(1) == "&"  # noqa: E731
                          else (m.group(int(t.group(1))) or "") if int(t.group(1)) <= pat.groups else t.group(0), rep)
    first, last = (int(str(inp.get(k) or 0)) if str(inp.get(k) or "").isdigit() else None for k in ("start_line", "end_line"))
    if first is None and last is None:
        return pat.sub(js, text).split("\n")
    lines = text.split("\n")
    a, b = max((first or 1) - 1, 0), min((last or len(lines)) - 1, len(lines) - 1)
    return lines[:a] + pat.sub(js, "\n".join(lines[a:b + 1])).split("\n") + lines[b + 1:]


def owned(cur: Owned, new: list[str], sid: str | None) -> Owned:
    old = [t for t, _ in cur]
    out: Owned = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        out += [(new[j1 + k], cur[i1 + k][1]) for k in range(i2 - i1)] if tag == "equal" else [(t, sid) for t in new[j1:j2]]
    return out


def committed_files(git_dir: Any, commit: str, paths: set[str]) -> dict[str, str]:
    """The text of each of `paths` at `commit` (those it holds): the files as the tasks found them."""
    base: dict[str, str] = {}
    for rel in sorted(paths):
        out = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{commit}:{rel}"],
                             capture_output=True, check=False)
        if out.returncode == 0:
            base[rel] = out.stdout.decode("utf-8", "replace")
    return base


def replayed_repo(work: Path, tasks: dict[str, list[dict[str, Any]]], base: dict[str, str],
                  states: dict[tuple[str, str], list[Any]] | None = None,
                  seen: list[tuple[int, str, str, str]] | None = None, lost: set[str] | None = None
                  ) -> tuple[Path, Counter[str], dict[str, Any], dict[tuple[str, str], list[Any]]]:
    """A fresh repository under `work` with the tasks' edits replayed on `base`: (its root, the
    edit uses counted, each file's final lines and owners, each task's true ranges per file)."""
    repo = work / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    counts: Counter[str] = Counter()
    final, truth = replay(tasks, base, counts, repo, states, seen, lost)
    return repo, counts, final, truth


def writer_hits(store: Any, repo: Path, spans: list[tuple[str, int, str]]) -> tuple[int, int, int]:
    """(explain names the writing task first, git blame names its commit, spans) over `spans`."""
    from engram.index.db import open_db

    db = open_db(store)
    hit = sum(explain_top(store, db, repo, rel, start) == f"roo-{w}" for rel, start, w in spans)
    blamed = sum(blame_found(repo, rel, start, w) for rel, start, w in spans)
    return hit, blamed, len(spans)


def captured_ranges(store: Any) -> tuple[dict[tuple[str, str], list[Any]], int]:
    """Each task's code.edit ranges per file, in tape order (the order the replay's truth has), and
    the code.reads counted: what the adapter made of the tasks, read back from the tapes."""
    from engram.tape.reader import TapeReader

    got: dict[tuple[str, str], list[Any]] = defaultdict(list)
    code_reads = 0
    for tape in sorted(store.tapes_dir.rglob("*")):
        if tape.is_file():
            with TapeReader(tape, store.objects_dir) as rd:
                evs = list(rd.events())
            sid = str(evs[0].get("session_id", "")).removeprefix("roo-") if evs else ""
            code_reads += sum(ev.get("kind") == "code.read" for ev in evs)
            for ev in evs:
                if ev.get("kind") == "code.edit":
                    got[(sid, ev["file"])].append(ev.get("after_range"))
    return got, code_reads


def range_counts(truth: dict[tuple[str, str], list[Any]],
                 got: dict[tuple[str, str], list[Any]]) -> tuple[int, int, int]:
    """(edits with truth, at the right range, captured), edit by edit in order per task and file
    (a block without truth, None, holds its place in the order and is not counted)."""
    edits = sum(a is not None for v in truth.values() for a in v)
    right = sum(a is not None and a == b for k, v in truth.items() for a, b in zip(v, got.get(k, [])))
    captured = sum(a is not None and i < len(got.get(k, [])) for k, v in truth.items() for i, a in enumerate(v))
    return edits, right, captured


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", type=Path, nargs="+")
    ap.add_argument("--repo", type=Path, required=True, help="the repository the tasks worked in (a clone or mirror)")
    ap.add_argument("--base", required=True, help="its commit before the tasks")
    ap.add_argument("--map", default=None, help="the directory the tasks recorded as their workspace")
    ap.add_argument("--spans", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = ap.parse_args()
    from engram.capture.pipeline import ingest_paths
    from engram.store.repo import init_store

    print(f"load {load()}")
    work = args.keep or Path(tempfile.mkdtemp(prefix="engram-roo-"))
    tasks: dict[str, list[dict[str, Any]]] = {}
    for r in args.reports:
        h = read_report(r)
        sid = str(h[0].get("ts"))
        if len(h) > len(tasks.get(sid, [])):
            tasks[sid] = h
    folders = []
    for sid, h in tasks.items():
        d = work / "rooveterinaryinc.roo-cline" / "tasks" / sid
        d.mkdir(parents=True, exist_ok=True)
        (d / "api_conversation_history.json").write_text(json.dumps(h), "utf-8")
        folders.append(d / "api_conversation_history.json")
    paths = {str(inp.get("path")) for h in tasks.values() for _, _, inp, _ in edit_uses(h)}
    base = committed_files(args.repo, args.base, paths)
    repo, counts, final, truth = replayed_repo(work, tasks, base)
    store, _ = init_store(repo)
    cwd = args.map or next((m.group(1) for h in tasks.values()
                            if (m := re.search(r"# Current Workspace Directory \((.+?)\)", json.dumps(h[0])))), None)
    stats = ingest_paths(store, folders, maps=[(cwd, str(repo))] if cwd else [])
    got, code_reads = captured_ranges(store)
    edits, right, captured = range_counts(truth, got)
    ok_uses = sum(counts[f"{t} ok"] for t in EDIT_TOOLS)
    failed = sum(counts[f"{t} failed"] for t in EDIT_TOOLS)
    all_got = sum(len(v) for v in got.values())
    spans = sample_spans({k: v for k, v in final.items()}, args.spans, random.Random(args.seed))
    hit, blamed, n = writer_hits(store, repo, spans)
    reads = sum(read_uses(h) for h in tasks.values())
    print("| tasks | edit uses ok (failed) | edits with truth | captured | right ranges | code.edits in all "
          "| read uses | code.reads | spans | writers | recall@1 | blame |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {len(tasks)} | {ok_uses} ({failed}) | {edits} | {captured} | {right} ({right / edits:.3f}) | {all_got} | "
          f"{reads} | {code_reads} | {n} | "
          f"{len({w for _, _, w in spans})} | {hit / n if n else float('nan'):.3f} | {blamed / n if n else float('nan'):.3f} |")
    print(f"  {stats.summary().splitlines()[0]}; {dict(counts)}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
