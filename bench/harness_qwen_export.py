#!/usr/bin/env python3
"""Qwen Code's `/export md` files committed in a repository (`qwen-code-export-<time>.md`): edits
counted by this script vs the adapter's code.edits, whether the file texts the export shows are
real states of the files, and whether the ranges are git's.

    python bench/harness_qwen_export.py --git-dir MIRROR --map RECORDED_ROOT EXPORT...

1. *Edit / WriteFile ok*: the export's `### Tool: Edit|WriteFile` sections whose status is
   `completed`, counted with this script's own reading (*failed*: the others);
2. the adapter's code.edits (each export ingested as `engram ingest FILE --map` does), and how
   many have line ranges;
3. *committed as shown*: code.edits whose whole file after the call, as the export shows it, is
   byte for byte a blob of the repository (a state the user committed); *last of file*: the same
   for the last edit of each file in a session (earlier states are often never committed);
4. *git's ranges*: for the code.edits whose file before (this script's: the previous text the
   export showed of the file, or for a first Edit the text with its new string put back) and after
   are both blobs of the repository, `git diff -U0` of the two blobs spans the code.edit's ranges
   (its first hunk's first line to its last hunk's last; a line diff by git, not by engram;
   *same change at tied lines*: of the others, those whose text put at their before-range gives
   the file after and that name no more changed lines than git's diff — the same change, aligned
   another way where identical lines let it slide; *git splits*: how many git shows as several hunks);
5. *writer r@1*: as harness_copilot.py measures it (5-line windows inside the after_range of each
   session's last edit of a file whose text after it is committed as shown; every export ingested
   into one store), with its grep reference.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

TOOL = re.compile(r"^### Tool: (Edit|WriteFile)\b[^\n]*\n\*\*Status\*\*: (\w+)", re.MULTILINE)
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)


def own_count(text: str) -> Counter[str]:
    """Edit / WriteFile sections by status, outside fenced blocks (a read's output may quote
    another export, whose sections are not this session's)."""
    out: Counter[str] = Counter()
    lines = text.split("\n")
    fence = ""
    for i, line in enumerate(lines):
        if fence:
            fence = "" if line.strip() == fence else fence
        elif re.match(r"^`{3,}", line):
            fence = re.match(r"^`+", line).group(0)
        elif (m := TOOL.match("\n".join(lines[i:i + 2]))) is not None:
            out["ok" if m.group(2) == "completed" else "failed"] += 1
    return out


def has_blob(git_dir: Path, text: str) -> str | None:
    """The blob id of `text` when the repository holds it."""
    from engram.tape import events as E

    sha = E.git_blob_sha(text)
    ok = subprocess.run(["git", f"--git-dir={git_dir}", "cat-file", "-e", sha], capture_output=True, check=False)
    return sha if ok.returncode == 0 else None


def git_ranges(git_dir: Path, a: str, b: str) -> tuple[list[list[int]], int, int] | None:
    """The before and after ranges `git diff -U0 a b` gives (from its first hunk's first line to its
    last hunk's last: one code.edit spans every line a call changed), its number of hunks, and the
    lines it names taken out and put in."""
    out = subprocess.run(["git", f"--git-dir={git_dir}", "diff", "-U0", a, b], capture_output=True, text=True,
                         check=False).stdout
    hunks = [_sides(h) for h in HUNK.findall(out)]
    if not hunks:
        return None
    size = sum(max(0, b - a + 1) for h in hunks for a, b in h)
    return [[hunks[0][0][0], hunks[-1][0][1]], [hunks[0][1][0], hunks[-1][1][1]]], len(hunks), size


def _sides(hunk: tuple[str, ...]) -> list[list[int]]:
    """A hunk's old and new ranges; git numbers an empty side by the line before it, engram by the
    line after it ([k+1, k])."""
    s1, n1, s2, n2 = (int(x) if x else 1 for x in hunk)
    s1, s2 = int(hunk[0]), int(hunk[2])
    return [[s1, s1 + n1 - 1] if n1 else [s1 + 1, s1], [s2, s2 + n2 - 1] if n2 else [s2 + 1, s2]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("exports", type=Path, nargs="+")
    ap.add_argument("--git-dir", type=Path, required=True, help="the repository (a mirror or .git)")
    ap.add_argument("--map", required=True, help="the folder the sessions ran in, as they recorded it")
    args = ap.parse_args()
    from engram.capture.discovery import jobs_from_paths
    from engram.capture.pipeline import parse_job
    from engram.capture.stats import IngestStats
    from harness_roo_export import is_same_change

    repo = Path(tempfile.mkdtemp(prefix="engram-qwen-export-"))
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    cols = ["Edit/WriteFile ok", "failed", "code.edits", "with ranges", "committed as shown", "last of file",
            "last committed", "both sides committed", "git's ranges", "same change at tied lines", "git splits"]
    total: Counter[str] = Counter()
    rows = []
    checks: list[tuple[str, str, list[str], list[int]]] = []
    for f in args.exports:
        seen = own_count(f.read_text("utf-8"))
        cap = parse_job(jobs_from_paths([f], IngestStats())[0], repo, [(args.map, str(repo))], 64 << 20)
        edits = [e for e in cap.events if e["kind"] == "code.edit"]
        row: Counter[str] = Counter({"Edit/WriteFile ok": seen["ok"], "failed": seen["failed"],
                                     "code.edits": len(edits),
                                     "with ranges": sum(e.get("after_range") is not None for e in edits)})
        files: dict[str, str | None] = {}  # this script's replay of the session's texts per file
        last: dict[str, bool] = {}
        ends: dict[str, tuple[str | None, dict[str, Any]]] = {}
        for e in edits:
            after = _after(cap, e)
            before = files.get(e["file"]) or _undone(cap, e, after)
            files[e["file"]] = after
            blob_after = has_blob(args.git_dir, after) if after is not None else None
            row["committed as shown"] += blob_after is not None
            last[e["file"]] = blob_after is not None
            ends[e["file"]] = (after if blob_after else None, e)
            blob_before = has_blob(args.git_dir, before) if before is not None else None
            if blob_after and blob_before and e.get("before_range") is not None:
                row["both sides committed"] += 1
                got = git_ranges(args.git_dir, blob_before, blob_after)
                if got is not None:
                    at_git = got[0] == [e["before_range"], e["after_range"]]
                    row["git's ranges"] += at_git
                    row["same change at tied lines"] += not at_git and is_same_change(
                        before.splitlines(), after.splitlines(), e, got[2])
                    row["git splits"] += got[1] > 1
        checks += [(cap.session_id, rel, text.splitlines(), e["after_range"]) for rel, (text, e) in ends.items()
                   if text is not None and e.get("after_range")]
        row["last of file"] = len(last)
        row["last committed"] = sum(last.values())
        total.update(row)
        rows.append((f.name, row))
    print("| export | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for name, row in [*rows, (f"all ({len(rows)})", total)]:
        print(f"| {name} | " + " | ".join(str(row[c]) for c in cols) + " |")
    from harness_copilot import writer_recall

    work = Path(tempfile.mkdtemp(prefix="engram-qwen-recall-"))
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    misses: list[tuple[str, int, str, str | None]] = []
    rec = writer_recall(list(args.exports), [(args.map, str(work))], work, checks, misses)
    n = rec["spans"] or 1
    print(f"\nwriter r@1 on {rec['spans']} windows of {len(checks)} committed last edits: {rec['writer'] / n:.3f} "
          f"(grep r@1, reference: {rec['grep'] / n:.3f})")
    for rel, start, writer, top in misses:
        print(f"  missed: {rel}:{start} written by {writer}, explain names {top}")
    return 0


def _undone(cap: Any, edit: dict[str, Any], after: str | None) -> str | None:
    """The file before an Edit the session had not touched yet: its new string put back."""
    call = next((e for e in cap.events if e["kind"] == "tool.call" and e.get("call_id") == edit.get("call_id")), None)
    args = call.get("input") if call else None
    old, new = (args.get("old_string"), args.get("new_string")) if isinstance(args, dict) else (None, None)
    if after is None or not isinstance(old, str) or not isinstance(new, str) or not new or after.count(new) != 1:
        return None
    return after.replace(new, old)


def _after(cap: Any, edit: dict[str, Any]) -> str | None:
    """The whole file after `edit`, as the export shows it (the tool result's fenced text)."""
    result = next((e for e in cap.events if e["kind"] == "tool.result" and e.get("call_id") == edit.get("call_id")), None)
    if result is None:
        return None
    m = re.match(r"\A\s*(?:\*Diff for `[^`\n]*`:\*\n)?(`{3,})[\w+-]*\n(.*)\n\1\s*\Z", result["stdout"] + "\n",
                 re.DOTALL)
    return m.group(2) if m else None


if __name__ == "__main__":
    raise SystemExit(main())
