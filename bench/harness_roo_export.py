#!/usr/bin/env python3
"""Roo Code's markdown exports (`roo_task_*.md`; Kilo Code's `kilo_code_task_*.md`, IBM Bob's
`bob_task_*.md`) on real tasks: are the edits captured at the right lines, are the files the
replay ends with the ones the repository committed, and does `engram explain` name the task that
wrote a span?

    python bench/harness_roo_export.py [--repo GIT_DIR --base COMMIT] [--after COMMIT] [--map FROM] EXPORT...
    python bench/harness_roo_export.py --sets FILE     # one line a set: NAME GIT_DIR BASE AFTER EXPORT...

The same measures as harness_roo.py, from the exports instead of diagnostics files, each read by
this script (not the adapter): its `**User:**` / `**Assistant:**` messages, each tool use (`[Tool
Use: NAME]` with its `Path:` and `Diff:` / `Content:` parameters, or, in older Roo Code and IBM
Bob, the XML `<apply_diff><path>…</path><diff>…</diff></apply_diff>` in the assistant's text),
paired in order with the results of the next user message (`[Tool]`, or `[apply_diff for 'path']
Result:`). The files the edits start from are those of BASE in GIT_DIR when given, else the
task's own first read of each file that showed it whole (`File: path` or `<file><path>` and
numbered lines from 1 without a truncation notice): exports of a repository that cannot be
cloned, or of a task that ran before the first commit, still have a base.

*state checks*: lines of a file Roo showed after the task's edits (a `search_files` result: `#
path` then `N | text` lines), against the replayed file at that moment; a mismatch means the
replay (the truth) is wrong there. *final files equal*: each file the tasks edited, as the replay
ends it, against AFTER's blob (the first commit after the tasks; files changed again before it
differ for that reason). The engram side ingests each export as `engram ingest FILE` does.

In `--sets FILE`, `-` stands for a missing GIT_DIR, BASE or AFTER; the sets are measured apart
(a store and a replay each) and summed in a last row.
"""

from __future__ import annotations

import argparse
import difflib
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import load
from harness_gemini import sample_spans
from harness_roo import (EDIT_TOOLS, captured_ranges, committed_files, edit_uses, range_counts, replay,
                         replayed_repo, writer_hits)

MESSAGE = re.compile(r"(?:\A\s*[^\n*]{0,8}|\n---\n\n)\*\*(User|Assistant):\*\*\n\n")  # stray typing before the first
NOW = re.compile(r"Current time in ISO 8601 UTC format: (\S+)")
WHOLE_READ = re.compile(r"\A\[Tool\]\nFile: (\S[^\n]*)\n((?:\s*\d+ \|[^\n]*\n)+)")
XML_READ = re.compile(r"<file><path>([^<\n]+)</path>\n<content lines=\"1-\d+\">\n(.*?)</content>(.*?)</file>", re.DOTALL)
SHOWN = re.compile(r"^# (\S+)\n((?:\s*\d+ \| [^\n]*\n(?:----\n)?)+)", re.MULTILINE)
NUMBERED = re.compile(r"^\s*\d+ \|(?: |$)")
REPLACE_PARAMS = ("path", "search", "replace", "use_regex", "ignore_case", "start_line", "end_line")
EDIT_PARAMS = {"apply_diff": ("Path", "Diff"), "write_to_file": ("Path", "Content"), "insert_content": ("Path", "Content")}
# Roo Code's tools (XML protocol: a use is `<name>` … `</name>` on lines of their own in the reply)
XML_TOOLS = ("apply_diff", "write_to_file", "insert_content", "search_and_replace", "read_file", "list_files",
             "search_files", "list_code_definition_names", "execute_command", "ask_followup_question",
             "attempt_completion", "switch_mode", "new_task", "update_todo_list", "use_mcp_tool",
             "access_mcp_resource", "codebase_search", "fetch_instructions", "browser_action", "edit_file",
             "apply_patch", "generate_image", "run_slash_command")
XML_USE = re.compile(rf"^<({'|'.join(XML_TOOLS)})>\n(.*?)^</\1>$", re.DOTALL | re.MULTILINE)
XML_RESULT = re.compile(r"^\[([a-z_]+)(?:\]| .*?\]) Result:", re.DOTALL | re.MULTILINE)


def history(text: str) -> list[dict[str, Any]]:
    """The export as harness_roo.py's conversation: messages with `ts`, tool uses with ids, the
    results paired with them in order, and each result's text."""
    text = text.replace("\r\n", "\n")
    heads = list(MESSAGE.finditer(text))
    out: list[dict[str, Any]] = []
    pending: list[str] = []
    for i, m in enumerate(heads):
        body = text[m.end(): heads[i + 1].start() if i + 1 < len(heads) else len(text)]
        now = NOW.search(body)
        ts = int(datetime.fromisoformat(now.group(1)).timestamp() * 1000) if now else 0
        blocks: list[dict[str, Any]] = []
        if m.group(1) == "Assistant":
            uses = [(u.group(1), xml_params(u.group(1), u.group(2))) for u in XML_USE.finditer(body)]
            for use in re.split(r"^\[Tool Use: ", body, flags=re.MULTILINE)[1:]:
                name, _, rest = use.partition("]\n")
                uses.append((name, params(name, rest)))
            pending = []  # a reply's results come in the next message, or never (the task ended, was cut)
            for k, (name, inp) in enumerate(uses):
                uid = f"u{i}-{k}"
                pending.append(uid)
                blocks.append({"type": "tool_use", "id": uid, "name": name, "input": inp})
        else:
            heads_r = [r.start() for r in re.finditer(r"^\[Tool(?: \(Error\))?\]\n", body, re.MULTILINE)]
            heads_r += [r.start() for r in XML_RESULT.finditer(body)]
            heads_r.sort()
            for k, at in enumerate(heads_r):
                res = body[at: heads_r[k + 1] if k + 1 < len(heads_r) else len(body)]
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
    if name == "search_and_replace":  # Path:, Search:, Replace: (a text may span lines), then flags
        keys = "|".join(k.capitalize() for k in REPLACE_PARAMS)
        return {k.lower(): v.rstrip("\n") for k, v in re.findall(rf"^({keys}): (.*?)(?=^(?:{keys}): |\Z)", rest, re.DOTALL | re.MULTILINE)}
    if name not in EDIT_PARAMS:
        return {}
    first, last = EDIT_PARAMS[name]
    path = re.search(rf"^{first}: (.*)$", rest, re.MULTILINE)
    body = re.search(rf"^{last}: ", rest, re.MULTILINE)
    value = rest[body.end():].rstrip("\n") if body else ""
    if name == "write_to_file":
        value = re.sub(r"\nLine_count: \d+$", "", value)
    line = re.search(r"^Line: (\d+)$", rest[:body.start()] if body else rest, re.MULTILINE)
    return {"path": path.group(1).strip() if path else "", last.lower(): value, **({"line": line.group(1)} if line else {})}


def xml_params(name: str, body: str) -> dict[str, str]:
    """An XML tool use's path and its diff or content (`<diff>` … `</diff>`: its whole lines)."""
    if name == "search_and_replace":
        return {k: v.removeprefix("\n").removesuffix("\n") for k, v in re.findall(r"<(\w+)>(.*?)</\1>", body, re.DOTALL)
                if k in REPLACE_PARAMS}
    if name not in EDIT_PARAMS:
        return {"raw": body}
    last = EDIT_PARAMS[name][1].lower()
    path = re.search(r"<path>(.*?)</path>", body, re.DOTALL)
    start, end = body.find(f"<{last}>"), body.rfind(f"</{last}>")
    value = body[start + len(last) + 2: end] if 0 <= start < end else ""
    value = value.removeprefix("\n").removesuffix("\n")
    line = re.search(r"<line>\s*(\d+)\s*</line>", body[:start] if start >= 0 else body)
    return {"path": path.group(1).strip() if path else "", last: value, **({"line": line.group(1)} if line else {})}


def unnumbered(numbered: str) -> str:
    lines = [NUMBERED.sub("", line) for line in numbered.splitlines()]
    lines = lines[:-1] if lines and not lines[-1] else lines  # Roo numbers the end after the last newline
    return "".join(line + "\n" for line in lines)


def whole_reads(tasks: dict[str, list[dict[str, Any]]]) -> list[tuple[int, str, str, str]]:
    """(time, task, file, text) of each read that showed a whole file: its numbered lines from the
    first, no truncation notice, no `<line_range>` asked for."""
    out = []
    for sid, h in tasks.items():
        uses = {b["id"]: b for m in h for b in m["content"] if b["type"] == "tool_use"}
        for m in h:
            for b in m["content"]:
                use = uses.get(b.get("tool_use_id")) if b["type"] == "tool_result" else None
                if use is None or use["name"] != "read_file":
                    continue
                ranged = set(re.findall(r"<path>([^<]*)</path>\s*<line_range>", str(use["input"].get("raw", ""))))
                found = [(w.group(1), w.group(2)) for w in [WHOLE_READ.match(b["content"])] if w]
                found += [(x.group(1), x.group(2)) for x in XML_READ.finditer(b["content"])
                          if "<notice>" not in x.group(3) and "<list_code_definition_names>" not in x.group(3)
                          and x.group(1) not in ranged]
                out += [(m["ts"], sid, rel, unnumbered(numbered)) for rel, numbered in found]
    return out


def bases(tasks: dict[str, list[dict[str, Any]]], committed: dict[str, str]) -> tuple[dict[str, str], int]:
    """The files the edits start from: the first whole read of a file made before any task
    edited it (what the file was then; tasks may overlap, a subtask's edits inside its parent's
    time), else the blob of BASE; and how many of those reads differ from BASE's blob (the work
    tree was not BASE there)."""
    first_edit: dict[str, int] = {}
    for h in tasks.values():
        for ts, _, inp, ok in edit_uses(h):
            if ok:
                rel = str(inp.get("path"))
                first_edit[rel] = min(first_edit.get(rel, ts), ts)
    base, differ, taken = dict(committed), 0, set()
    for ts, _, rel, text in sorted(whole_reads(tasks), key=lambda r: r[0]):
        if rel not in taken and ts < first_edit.get(rel, ts + 1):
            taken.add(rel)
            differ += rel in committed and committed[rel].splitlines() != text.splitlines()
            base[rel] = text
    return base, differ


def state_checks(tasks: dict[str, list[dict[str, Any]]], committed: dict[str, str], scratch: Path) -> Counter[str]:
    """Lines Roo showed (search results) after an edit, against the files replayed up to then
    (every task's edits and whole reads before that message, from BASE's blobs or the reads made
    before it: a later read is what the file became, not what it was then)."""
    out: Counter[str] = Counter()
    seen = whole_reads(tasks)
    for sid, h in tasks.items():
        for i, msg in enumerate(h):
            if msg["role"] != "user" or not any(b["type"] == "tool_result" and re.search(r"\AFound \d+ result|\n# ", b["content"][:4000])
                                                and SHOWN.search(b["content"]) for b in msg["content"]):
                continue
            shutil.rmtree(scratch, ignore_errors=True)
            subprocess.run(["git", "init", "-q", str(scratch)], check=True)
            before = {k: [m for m in v if m["ts"] < msg["ts"]] for k, v in tasks.items() if k != sid}
            then = {**before, sid: h[:i]}
            files, _ = replay(then, bases(then, committed)[0], Counter(), scratch, seen=[r for r in seen if r[0] < msg["ts"]])
            for b in msg["content"]:
                for m in SHOWN.finditer(b["content"]):
                    lines = [t for t, _ in files.get(m.group(1), [])]
                    for line in m.group(2).splitlines():
                        if (n := re.match(r"\s*(\d+) \| (.*)$", line)) and lines:
                            k = int(n.group(1))
                            out["agree" if k <= len(lines) and lines[k - 1] == n.group(2) else "disagree"] += 1
    return out


PATHS = re.compile(r"(<path>|\bfor '|^Path: |^File: )([^'<\n]+)|^(# )(\S+)(?=\n\s*\d+ \|)", re.MULTILINE)


def within(text: str, sub: str) -> str:
    """The export's paths made relative to `sub`, the folder of the workspace that is the
    repository (`sub/x` → `x`); a path outside it is marked `../` (its edits are not the repository's)."""
    def fix(m: re.Match[str]) -> str:
        head, p = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))  # a search result's `# path`
        return head + (p[len(sub) + 1:] if p.startswith(sub + "/") else "../" + p)
    return PATHS.sub(fix, text)


def outside(tasks: dict[str, list[dict[str, Any]]]) -> int:
    """Edit uses on files outside the repository (marked by `within`): renamed, so no measure counts them."""
    n = 0
    for h in tasks.values():
        for m in h:
            for b in m["content"]:
                if b["type"] == "tool_use" and str(b["input"].get("path", "")).startswith("../"):
                    n += b["name"] in EDIT_TOOLS
                    b["name"] = f"{b['name']} (outside)"
    return n


@dataclass
class Set:
    """One repository's exports, and where its files stand before and after them."""
    name: str
    exports: list[Path]
    repo: Path | None = None
    base: str | None = None
    after: str | None = None
    map: str | None = None
    sub: str | None = None  # the folder of the tasks' workspace that is the repository
    row: dict[str, Any] = field(default_factory=dict)


def files_read(history: list[dict[str, Any]]) -> int:
    """Files read_file results showed numbered lines of (a read of several files counts each):
    each should be a code.read."""
    results = {b["tool_use_id"]: b["content"] for m in history for b in m["content"] if b["type"] == "tool_result"}
    n = 0
    for m in history:
        for b in m["content"]:
            if b["type"] == "tool_use" and b["name"] == "read_file" and (res := results.get(b["id"])):
                shown = re.findall(r"<file><path>[^<]*</path>\s*<content[^>]*>\n\s*\d+ \|", res)
                n += len(shown) or bool(re.search(r"^\s*\d+ \|", res, re.MULTILINE))
    return n


def captured_edits(store: Any) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Each task's code.edit events per file, in tape order."""
    from engram.tape.reader import TapeReader

    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for tape in sorted(store.tapes_dir.rglob("*")):
        if tape.is_file():
            with TapeReader(tape, store.objects_dir) as rd:
                evs = list(rd.events())
            sid = str(evs[0].get("session_id", "")).removeprefix("roo-") if evs else ""
            for ev in evs:
                if ev.get("kind") == "code.edit":
                    out.setdefault((sid, ev["file"]), []).append(ev)
    return out


def same_change(truth: dict[tuple[str, str], list[Any]], states: dict[tuple[str, str], list[Any]],
                edits: dict[tuple[str, str], list[dict[str, Any]]]) -> tuple[int, int]:
    """(edits whose ranges differ from the replay's line diff but describe the same change, those
    of them at the lines `git diff` gives): the captured text put at the captured before-range
    turns the file before into the file after, and the edit names no more changed lines than the
    replay's diff (a run of identical lines, as `}` or a blank line, lets two diffs of equal size
    align one change a line apart; which of the identical lines was written is not in the files)."""
    n = as_git = 0
    for key, ranges in truth.items():
        for state, want, ev in zip(states.get(key, []), ranges, edits.get(key, [])):
            after = ev.get("after_range")
            if state is None or want is None or after == want:
                continue
            old, new = state
            if is_same_change(old, new, ev, diff_size(old, new)):
                n += 1
                as_git += git_range(old, new) == after
    return n, as_git


def is_same_change(old: list[str], new: list[str], ev: dict[str, Any], size: int) -> bool:
    """Whether a code.edit is a right range of the change `old` → `new` though not the one a
    reference diff chose: its text put at its before-range gives `new`, and it names no more
    changed lines than the reference's `size`. Both are minimal descriptions of one change; they
    differ only where identical lines (`}`, a blank line) let it slide, and which of two identical
    lines was written is in neither the transcript nor the files."""
    br, text = ev.get("before_range"), ev.get("after_text")
    if not br or text is None:
        return False
    return old[:br[0] - 1] + text.splitlines() + old[br[1]:] == new and edit_size(ev) <= size


def edit_size(ev: dict[str, Any]) -> int:
    """Lines a code.edit names as taken out and put in (each hunk's, or its ranges')."""
    hunks = ev.get("hunks") or [[*ev["before_range"], *ev["after_range"]]]
    return sum(max(0, b - a + 1) + max(0, d - c + 1) for a, b, c, d in hunks)


def diff_size(old: list[str], new: list[str]) -> int:
    return sum(i2 - i1 + j2 - j1 for tag, i1, i2, j1, j2 in
               difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes() if tag != "equal")


def git_range(old: list[str], new: list[str]) -> list[int] | None:
    """The new-side range `git diff` (its default algorithm) gives the change, as the replay
    writes ranges: a second reference where identical lines make the alignment a choice."""
    with tempfile.TemporaryDirectory(prefix="engram-roo-diff-") as d:
        (Path(d) / "a").write_text("".join(x + "\n" for x in old), "utf-8")
        (Path(d) / "b").write_text("".join(x + "\n" for x in new), "utf-8")
        out = subprocess.run(["git", "diff", "--no-index", "-U0", "a", "b"], cwd=d, capture_output=True,
                             text=True, check=False).stdout
    hunks = [(int(c), 1 if e == "" else int(e)) for c, e in re.findall(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", out, re.MULTILINE)]
    if not hunks:
        return None
    (c0, e0), (c1, e1) = hunks[0], hunks[-1]
    return [c0 if e0 else c0 + 1, c1 + e1 - 1 if e1 else c1]


TRAILER = re.compile(r"\n*[ \t]*(?://|#|/\*|<!--|\*\*)[ \t]*Made with Bob\b[^\n]*\n?\Z")  # IBM Bob signs what it writes


def untruthed_in_after(truth: dict[tuple[str, str], list[Any]], edits: dict[tuple[str, str], list[dict[str, Any]]],
                       repo: Path | None, after: str | None) -> tuple[int, int]:
    """(edits the replay has no truth for, the last edit of their file, whose text stands at their
    after-range in AFTER's blob; such edits): a check of those placements by the commit after
    (it fails where the user or another tool changed the file before that commit)."""
    latest: dict[str, str] = {}
    for evs in edits.values():
        for ev in evs:
            latest[ev["file"]] = max(latest.get(ev["file"], ""), str(ev.get("ts") or ""))
    pending = []
    for (sid, rel), v in truth.items():
        evs = edits.get((sid, rel), [])
        for i, a in enumerate(v):
            if a is None and i == len(evs) - 1 and evs[i].get("after_range") and str(evs[i].get("ts") or "") == latest[rel]:
                pending.append((rel, evs[i]))
    if repo is None or after is None or not pending:
        return 0, len(pending)
    blobs = committed_files(repo, after, {rel for rel, _ in pending})
    hit = 0
    for rel, ev in pending:
        a, b = ev["after_range"]
        shown = TRAILER.sub("\n", blobs.get(rel, "")).splitlines()[a - 1:b]
        hit += within_range(shown, str(ev.get("after_text") or "").splitlines())
    return hit, len(pending)


def within_range(shown: list[str], written: list[str]) -> bool:
    """The edit's written lines stand in the range, its first and last lines at its ends (a block
    of several changed runs keeps only their lines as its text, the range spans them all)."""
    rest = iter(shown)
    return bool(shown and written) and shown[0] == written[0] and shown[-1] == written[-1] and all(
        any(x == y for y in rest) for x in written)


def final_equal(final: dict[str, Any], repo: Path | None, after: str | None, edited: set[str]) -> tuple[int, int, int]:
    """(files the replay ends as AFTER holds them, the ones more that differ only by the `Made
    with Bob` line IBM Bob appends to a file it writes (its export does not show it), files
    compared): the edited files AFTER has."""
    if repo is None or after is None:
        return 0, 0, 0
    blobs = committed_files(repo, after, edited)
    same = signed = 0
    for rel in (r for r in blobs if r in final):
        ours = [t for t, _ in final[rel]]
        same += blobs[rel].splitlines() == ours
        signed += blobs[rel].splitlines() != ours and TRAILER.sub("\n", blobs[rel]).splitlines() == ours
    return same, signed, sum(rel in final for rel in blobs)


def measure(s: Set, spans_n: int, seed: int, misses: bool = False) -> dict[str, Any]:
    """The table's row for one set: its exports replayed, ingested into a store of their own, scored."""
    from engram.capture.pipeline import ingest_paths
    from engram.store.repo import init_store

    work = Path(tempfile.mkdtemp(prefix="engram-roo-export-"))
    tasks: dict[str, list[dict[str, Any]]] = {}
    texts: dict[str, str] = {}
    for f in s.exports:
        text = f.read_text("utf-8").replace("\r\n", "\n")
        text = within(text, s.sub) if s.sub else text
        h = history(text)
        sid = str(next((m["ts"] for m in h if m["ts"]), f.stem))
        tasks[sid], texts[sid] = h, text
    out_of_repo = outside(tasks)
    edited = {str(inp.get("path")) for h in tasks.values() for _, _, inp, ok in edit_uses(h) if ok}
    committed = committed_files(s.repo, s.base, edited) if s.repo and s.base else {}
    base, differ = bases(tasks, committed)
    states: dict[tuple[str, str], list[Any]] = {}
    lost: set[str] = set()
    repo, counts, final, truth = replayed_repo(work, tasks, base, states, whole_reads(tasks), lost)
    checks = state_checks(tasks, committed, work / "scratch")
    store, _ = init_store(repo)
    # every workspace the tasks name (a set's tasks may run in copies of the repository)
    cwds = [s.map] if s.map else sorted({m.group(1) for t in texts.values()
                                          for m in [re.search(r"# Current Workspace Directory \((.+?)\)", t)] if m})
    maps = [(f"{c}/{s.sub}" if s.sub else c, str(repo)) for c in cwds]
    stats = ingest_paths(store, list(s.exports), maps=maps)
    got, code_reads = captured_ranges(store)
    edits, right, captured = range_counts(truth, got)
    events = captured_edits(store)
    same, as_git = same_change(truth, states, events)
    placed, placeable = untruthed_in_after(truth, events, s.repo, s.after)
    if misses:
        for key in sorted(k for k, v in truth.items()
                          if any(a is not None and (i >= len(got.get(k, [])) or got[k][i] != a) for i, a in enumerate(v))):
            print(f"  miss {s.name} {key}: replay {truth[key]} captured {got.get(key, [])}")
    # spans only where the replay followed every edit (a file it lost track of has writers it does not know)
    spans = sample_spans({rel: v for rel, v in final.items() if rel not in lost}, spans_n, random.Random(seed))
    hit, blamed, n = writer_hits(store, repo, spans)
    if misses:
        from engram.index.db import open_db
        from harness_gemini import blame_found, explain_top

        db = open_db(store)
        for rel, start, w in spans:
            top = explain_top(store, db, repo, rel, start)
            if top != f"roo-{w}":
                print(f"  writer miss {s.name} {rel}:{start}: wrote {w}, explain {top}, blame {blame_found(repo, rel, start, w)}")
    equal, signed, compared = final_equal(final, s.repo, s.after, edited)
    shutil.rmtree(work, ignore_errors=True)
    return {"tasks": len(tasks), "ok": sum(counts[f"{t} ok"] for t in EDIT_TOOLS),
            "failed": sum(counts[f"{t} failed"] for t in EDIT_TOOLS), "edits": edits,
            "captured": captured, "right": right, "same": same, "as_git": as_git, "all": sum(len(v) for v in got.values()),
            "agree": checks["agree"], "disagree": checks["disagree"], "equal": equal, "signed": signed, "compared": compared, "placed": placed, "placeable": placeable,
            "reads": sum(files_read(h) for h in tasks.values()), "code_reads": code_reads, "spans": n,
            "writers": len({w for _, _, w in spans}), "hit": hit, "blamed": blamed,
            "note": f"{stats.summary().splitlines()[0]}; {dict(counts)}; reads that differ from BASE: {differ}; edit uses outside the repository: {out_of_repo}"}


def print_table(sets: list[Set]) -> None:
    print("| set | tasks | edit uses ok (failed) | edits with truth | captured | right ranges | of them at tied lines (at git's) "
          "| code.edits in all | without truth, last of their file: at their lines in AFTER "
          "| state checks agree (disagree) | final files equal (+ but for Bob's line) | read uses | code.reads | spans | writers | recall@1 | blame |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = [(s.name, s.row) for s in sets]
    if len(sets) > 1:
        rows.append(("all", {k: sum(r[k] for _, r in rows) for k in rows[0][1] if k != "note"}))
    for name, r in rows:
        rate = lambda a, b: f"{a / b:.3f}" if b else "–"  # noqa: E731
        print(f"| {name} | {r['tasks']} | {r['ok']} ({r['failed']}) | {r['edits']} | {r['captured']} "
              f"| {r['right'] + r['same']} ({rate(r['right'] + r['same'], r['edits'])}) | {r['same']} ({r['as_git']}) | {r['all']} | {r['placed']} of {r['placeable']} | {r['agree']} ({r['disagree']}) "
              f"| {r['equal']} (+{r['signed']}) of {r['compared']} | {r['reads']} | {r['code_reads']} | {r['spans']} | {r['writers']} "
              f"| {rate(r['hit'], r['spans'])} | {rate(r['blamed'], r['spans'])} |")


def read_sets(path: Path) -> list[Set]:
    """`NAME GIT_DIR BASE AFTER [sub=FOLDER] EXPORT...` lines (`-`: none; `#` lines are comments;
    FOLDER: the folder of the tasks' workspace that is the repository)."""
    out = []
    for line in path.read_text("utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, repo, base, after, *exports = shlex.split(line)
            none = lambda v: None if v == "-" else v  # noqa: E731
            sub = exports.pop(0).removeprefix("sub=") if exports and exports[0].startswith("sub=") else None
            out.append(Set(name, [Path(e) for e in exports], Path(repo) if none(repo) else None, none(base), none(after),
                           sub=sub))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("exports", type=Path, nargs="*")
    ap.add_argument("--repo", type=Path, help="the repository the tasks worked in (a clone or mirror)")
    ap.add_argument("--base", help="its commit before the tasks")
    ap.add_argument("--after", help="its first commit after the tasks (final files compared with it)")
    ap.add_argument("--map", default=None, help="the directory the tasks recorded as their workspace")
    ap.add_argument("--sets", type=Path, help="a file of sets: NAME GIT_DIR BASE AFTER EXPORT... a line")
    ap.add_argument("--spans", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--misses", action="store_true", help="print each (task, file) whose ranges differ")
    args = ap.parse_args()
    sets = read_sets(args.sets) if args.sets else []
    if args.exports:
        sets.append(Set("exports", args.exports, args.repo, args.base, args.after, args.map))
    if not sets:
        ap.error("give EXPORT... or --sets FILE")
    print(f"load {load()}")
    t0, c0 = time.perf_counter(), time.process_time()
    for s in sets:
        s.row = measure(s, args.spans, args.seed, args.misses)
    print_table(sets)
    for s in sets:
        print(f"  {s.name}: {s.row['note']}")
    print(f"wall {time.perf_counter() - t0:.1f} s, CPU {time.process_time() - c0:.1f} s (this process), load {load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
