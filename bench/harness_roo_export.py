#!/usr/bin/env python3
"""Roo Code's markdown exports (`roo_task_*.md`; Kilo Code's `kilo_code_task_*.md`, IBM Bob's
`bob_task_*.md`) on real tasks: are the edits captured at the right lines, and does `engram
explain` name the task that wrote a span?

    python bench/harness_roo_export.py [--repo GIT_DIR --base COMMIT] [--map FROM] EXPORT...

The same measures as harness_roo.py, from the exports instead of diagnostics files, each read by
this script (not the adapter): its `**User:**` / `**Assistant:**` messages, each `[Tool Use: NAME]`
with its `Path:` and `Diff:` / `Content:` parameters, paired in order with the `[Tool]` results of
the next user message. The files the edits start from are those of COMMIT in GIT_DIR when given,
else the task's own first read of each file that showed it whole (`File: path` and numbered lines
without a truncation notice): exports of a repository that cannot be cloned still have a base.

*state checks*: lines of a file Roo showed after the task's edits (a `search_files` result: `# path`
then `N | text` lines, or a read), against the replayed file at that moment; a mismatch means the
replay (the truth) is wrong there. The engram side ingests each export as `engram ingest FILE` does.
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import load
from harness_gemini import sample_spans
from harness_roo import (captured_ranges, committed_files, edit_uses, range_counts, read_uses, replay,
                         replayed_repo, writer_hits)

MESSAGE = re.compile(r"(?:\A|\n---\n\n)\*\*(User|Assistant):\*\*\n\n")
NOW = re.compile(r"Current time in ISO 8601 UTC format: (\S+)")
WHOLE_READ = re.compile(r"\A\[Tool\]\nFile: (\S[^\n]*)\n((?:\s*\d+ \| [^\n]*\n)+)")
SHOWN = re.compile(r"^# (\S+)\n((?:\s*\d+ \| [^\n]*\n(?:----\n)?)+)", re.MULTILINE)
EDIT_PARAMS = {"apply_diff": ("Path", "Diff"), "write_to_file": ("Path", "Content")}


def history(text: str) -> list[dict[str, Any]]:
    """The export as harness_roo.py's conversation: messages with `ts`, tool uses with ids, the
    results paired with them in order, and each result's text."""
    heads = list(MESSAGE.finditer(text))
    out: list[dict[str, Any]] = []
    pending: list[str] = []
    for i, m in enumerate(heads):
        body = text[m.end(): heads[i + 1].start() if i + 1 < len(heads) else len(text)]
        now = NOW.search(body)
        ts = int(datetime.fromisoformat(now.group(1)).timestamp() * 1000) if now else 0
        blocks: list[dict[str, Any]] = []
        if m.group(1) == "Assistant":
            for k, use in enumerate(re.split(r"^\[Tool Use: ", body, flags=re.MULTILINE)[1:]):
                name, _, rest = use.partition("]\n")
                uid = f"u{i}-{k}"
                pending.append(uid)
                blocks.append({"type": "tool_use", "id": uid, "name": name, "input": params(name, rest)})
        else:
            for res in re.split(r"^(?=\[Tool(?: \(Error\))?\]\n)", body, flags=re.MULTILINE)[1:]:
                if pending:
                    blocks.append({"type": "tool_result", "tool_use_id": pending.pop(0),
                                   "content": res.split("\n<environment_details>")[0]})
        out.append({"role": m.group(1).lower(), "ts": ts, "content": blocks})
    for i, msg in enumerate(out):  # a reply runs its tools before the next message's time
        if msg["role"] == "assistant" and i + 1 < len(out):
            msg["ts"] = out[i + 1]["ts"]
    return out


def params(name: str, rest: str) -> dict[str, str]:
    """An edit tool's path and its diff or content (the rest of the use: the last parameter)."""
    if name not in EDIT_PARAMS:
        return {}
    first, last = EDIT_PARAMS[name]
    path = re.search(rf"^{first}: (.*)$", rest, re.MULTILINE)
    body = re.search(rf"^{last}: ", rest, re.MULTILINE)
    value = rest[body.end():].rstrip("\n") if body else ""
    if name == "write_to_file":
        value = re.sub(r"\nLine_count: \d+$", "", value)
    return {"path": path.group(1).strip() if path else "", last.lower(): value}


def first_reads(text: str) -> dict[str, str]:
    """Each file's text as the task's first whole read showed it."""
    out: dict[str, str] = {}
    for part in re.split(r"\n---\n\n\*\*User:\*\*\n\n", text):
        m = WHOLE_READ.match(part)
        if m and m.group(1) not in out:
            lines = [re.sub(r"^\s*\d+ \| ", "", line) for line in m.group(2).splitlines()]
            lines = lines[:-1] if lines and not lines[-1] else lines  # Roo numbers the end after the last newline
            out[m.group(1)] = "".join(line + "\n" for line in lines)
    return out


def state_checks(tasks: dict[str, list[dict[str, Any]]], base: dict[str, str], scratch: Path) -> Counter[str]:
    """Lines Roo showed (search results) after an edit, against the files replayed up to then."""
    out: Counter[str] = Counter()
    sid, h = next(iter(tasks.items()))
    for i, msg in enumerate(h):
        if msg["role"] != "user" or not any(b["type"] == "tool_result" and b["content"].startswith("[Tool]\nFound")
                                            for b in msg["content"]):
            continue
        shutil.rmtree(scratch, ignore_errors=True)
        subprocess.run(["git", "init", "-q", str(scratch)], check=True)
        files, _ = replay({sid: h[:i]}, base, Counter(), scratch)
        for b in msg["content"]:
            for m in SHOWN.finditer(b["content"]):
                lines = [t for t, _ in files.get(m.group(1), [])]
                for line in m.group(2).splitlines():
                    if (n := re.match(r"\s*(\d+) \| (.*)$", line)) and lines:
                        k = int(n.group(1))
                        out["agree" if k <= len(lines) and lines[k - 1] == n.group(2) else "disagree"] += 1
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("exports", type=Path, nargs="+")
    ap.add_argument("--repo", type=Path, help="the repository the tasks worked in (a clone or mirror)")
    ap.add_argument("--base", help="its commit before the tasks")
    ap.add_argument("--map", default=None, help="the directory the tasks recorded as their workspace")
    ap.add_argument("--spans", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    from engram.capture.pipeline import ingest_paths
    from engram.store.repo import init_store

    print(f"load {load()}")
    work = Path(tempfile.mkdtemp(prefix="engram-roo-export-"))
    tasks: dict[str, list[dict[str, Any]]] = {}
    texts: dict[str, str] = {}
    for f in args.exports:
        text = f.read_text("utf-8")
        h = history(text)
        sid = str(next((m["ts"] for m in h if m["ts"]), f.stem))
        tasks[sid], texts[sid] = h, text
    base: dict[str, str] = {}
    for sid in tasks:
        for rel, body in first_reads(texts[sid]).items():
            base.setdefault(rel, body)
    if args.repo and args.base:
        base.update(committed_files(args.repo, args.base,
                                    {str(inp.get("path")) for h in tasks.values() for _, _, inp, _ in edit_uses(h)}))
    repo, counts, final, truth = replayed_repo(work, tasks, base)
    checks: Counter[str] = Counter()
    for sid, h in tasks.items():
        checks.update(state_checks({sid: h}, base, work / "scratch"))
    store, _ = init_store(repo)
    cwd = args.map or next((m.group(1) for t in texts.values()
                            if (m := re.search(r"# Current Workspace Directory \((.+?)\)", t))), None)
    stats = ingest_paths(store, list(args.exports), maps=[(cwd, str(repo))] if cwd else [])
    got, code_reads = captured_ranges(store)
    edits, right, captured = range_counts(truth, got)
    ok_uses = counts["apply_diff ok"] + counts["write_to_file ok"]
    failed = counts["apply_diff failed"] + counts["write_to_file failed"]
    spans = sample_spans(dict(final), args.spans, random.Random(args.seed))
    hit, blamed, n = writer_hits(store, repo, spans)
    reads = sum(read_uses(h) for h in tasks.values())
    print("| tasks | edit uses ok (failed) | edits with truth | captured | right ranges | code.edits in all "
          "| state checks agree (disagree) | read uses | code.reads | spans | writers | recall@1 | blame |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {len(tasks)} | {ok_uses} ({failed}) | {edits} | {captured} | {right} ({right / edits if edits else 0:.3f}) "
          f"| {sum(len(v) for v in got.values())} | {checks['agree']} ({checks['disagree']}) | {reads} | {code_reads} "
          f"| {n} | {len({w for _, _, w in spans})} | {hit / n if n else float('nan'):.3f} "
          f"| {blamed / n if n else float('nan'):.3f} |")
    print(f"  {stats.summary().splitlines()[0]}; {dict(counts)}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
