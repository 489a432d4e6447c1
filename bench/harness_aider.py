#!/usr/bin/env python3
"""Aider on real histories: are the edits aider made captured, at the right lines, and does
`engram explain` name the run that wrote a span?

    python bench/harness_aider.py --work DIR [--spans 30] [--seed 1] --tuned GIT_DIR... --held-out GIT_DIR...

Each GIT_DIR is a clone (or bare mirror) of a public repository that commits its
`.aider.chat.history.md`. The run checks out, into DIR, the last commit holding that file (the
parent of the one that stopped tracking it, when the repository later did), so the history and
the commits aider made of its edits (`> Commit <hash>`) are both there. Per repository:

* **edits in the transcript** — counted by this script's own reader, not the adapter: in each
  reply followed by aider's report, the SEARCH/REPLACE blocks (minus those the report names as
  failed to match; none when the report says no file was written), the hunks of fenced unified
  diffs, or one whole file per `Applied edit to` line;
* **with truth** — of those, the edits of replies whose commit this history has;
* **right ranges** — the adapter's code.edits of each (commit, file) replayed on the file in the
  commit's parent (each edit's before_text must stand at its before_range; its after_text takes
  its place) give the file in the commit exactly: every edit of the group counts as right, else
  none does. Edits the adapter left without ranges count as not right;
* **writer recall@1** — spans of 5 consecutive lines that `git blame` at the checked-out commit
  gives to one aider commit (3+ lines with a word), sampled (seeded); the writer is the run
  whose output names that commit. `engram explain` (in process, brief, with the file's lines) on
  a store holding every run of the history: is the writer its first session? Reference, on the
  same spans: a fixed-string line grep of the runs' text, runs ranked by lines found (a tie at
  the top counts 1/n).

Targets (issue 52): right ranges >= 0.98 of the edits with truth; writer recall@1 >= 0.95.

With `--cline FOLDER...` (task folders), a third table for Cline / Roo Code (see `cline_counts`).

With `--specstory GIT_DIR...`, a second table for SpecStory exports (`.specstory/history/*.md` at
the repository's newest commit): the edit and read tool uses the exports show, counted by this
script's own patterns (an edit whose result says it succeeded; each `**Chunk**` of a Cursor `Edit
file`; each ```diff fence of an older export), next to what the adapter made of them: code.edits
(with line ranges or not), edits counted as not recordable by reason, and code.reads.
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import fmt_table, load

HISTORY = ".aider.chat.history.md"
HEADER = re.compile(r"^# aider chat started at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s*$", re.MULTILINE)
SPAN = 5


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, errors="replace",
                          check=False).stdout


def blob(repo: Path, rev: str) -> str | None:
    out = subprocess.run(["git", "-C", str(repo), "show", rev], capture_output=True, check=False)
    return out.stdout.decode("utf-8", "replace") if out.returncode == 0 else None


def checkout(src: Path, dest: Path) -> Path | None:
    """A work tree of `src` at the last commit holding the history file; None without one."""
    if not dest.exists() and subprocess.run(["git", "clone", "-q", str(src), str(dest)],
                                            capture_output=True, check=False).returncode != 0:
        return None
    last = git(dest, "log", "--all", "--format=%H", "-1", "--", HISTORY).strip()
    if not last:
        return None
    at = last if git(dest, "ls-tree", "--name-only", last, HISTORY).strip() else f"{last}^"
    subprocess.run(["git", "-C", str(dest), "checkout", "-q", "--detach", at], check=True, capture_output=True)
    return dest if (dest / HISTORY).is_file() else None


# ------------------------------------------------------------ the bench's own reading of the history


@dataclass
class Reply:
    run: str
    text: str
    report: str
    commit: str | None = None


def replies(history: str) -> list[Reply]:
    """Every reply of every run followed by aider's report (`> ` lines, and the raw lines of a
    multi-line message up to the line ending in two spaces)."""
    out: list[Reply] = []
    starts = list(HEADER.finditer(history))
    for i, m in enumerate(starts):
        body = history[m.end():starts[i + 1].start() if i + 1 < len(starts) else len(history)]
        text: list[str] = []
        report: list[str] = []
        in_msg = False
        for line in body.split("\n"):
            if in_msg:
                report.append(line)
                in_msg = not line.endswith("  ")
            elif line.startswith("> ") or line == ">":
                report.append(line[2:])
                in_msg = bool(line[2:].strip()) and not line.endswith("  ")
            elif line.startswith("#### ") and line.endswith("  "):
                if text or report:
                    out.append(Reply(m.group(1), "\n".join(text), "\n".join(report)))
                text, report = [], []
            elif line.strip() or text:
                if report:
                    out.append(Reply(m.group(1), "\n".join(text), "\n".join(report)))
                    text, report = [], []
                text.append(line)
        if text or report:
            out.append(Reply(m.group(1), "\n".join(text), "\n".join(report)))
    for r in out:
        dirty = False
        for line in r.report.split("\n"):
            if line.startswith("Committing ") and "before applying edits" in line:
                dirty = True
            elif line.startswith("Commit ") and r.commit is None:
                if dirty:
                    dirty = False
                else:
                    r.commit = line.split()[1]
    return out


def transcript_edits(r: Reply) -> int:
    """How many edits aider says it made of a reply."""
    applied = re.findall(r"^Applied edit to (.+?)\s*$", r.report, re.MULTILINE)
    failed = sum(int(n) for n in re.findall(r"^# (\d+) SEARCH/REPLACE blocks? failed to match", r.report, re.MULTILINE))
    partial = "were applied successfully" in r.report
    if "<<<<<<< SEARCH" in r.text:
        if not applied and not partial:
            return 0
        return max(0, len(re.findall(r"^<{5,9} SEARCH", r.text, re.MULTILINE)) - failed)
    if "```diff" in r.text and applied:  # hunks with a changed line
        return sum(bool(re.search(r"^[-+](?![-+]{2} )", h, re.MULTILINE)) for h in re.split(r"^@@.*$|^```.*$", r.text, flags=re.MULTILINE))
    return len(set(applied))


# ------------------------------------------------------------ the adapter's edits, against the commits


@dataclass
class Scores:
    edits: int = 0
    with_truth: int = 0
    right: int = 0
    captured: int = 0
    unplaced: int = 0
    spans: int = 0
    r1: float = 0.0
    grep: float = 0.0
    misses: list[str] = field(default_factory=list)


def replay(text: str, events: list[dict[str, Any]]) -> str | None:
    lines = text.splitlines()
    for ev in events:
        b, a = ev.get("before_range"), ev.get("after_range")
        if b is None or a is None:
            return None
        before = (ev.get("before_text") or "").splitlines()
        if lines[b[0] - 1:b[1]] != before:
            return None
        lines[b[0] - 1:b[1]] = (ev.get("after_text") or "").splitlines()
    return "\n".join(lines)


def captured_edits(repo: Path) -> list[dict[str, Any]]:
    from engram.capture.discovery import jobs_from_paths
    from engram.capture.pipeline import parse_job
    from engram.capture.stats import IngestStats

    out = []
    for job in jobs_from_paths([repo / HISTORY], IngestStats()):
        cap = parse_job(job, repo, [], 64 << 20)
        out += [{**ev, "session": cap.session_id} for ev in cap.events if ev["kind"] == "code.edit"]
    return out


def score_edits(repo: Path, s: Scores) -> dict[str, str]:
    """Fills the edit counts; returns commit (short, as aider named it) -> the run that made it."""
    history = (repo / HISTORY).read_text(encoding="utf-8", errors="replace")
    made: dict[str, str] = {}
    expected: dict[str, int] = defaultdict(int)  # commit -> edits the transcript shows aider made of it
    for r in replies(history):
        n = transcript_edits(r)
        s.edits += n
        full = git(repo, "rev-parse", "--verify", "--quiet", f"{r.commit}^{{commit}}").strip() if r.commit else ""
        if full:
            s.with_truth += n
            made[full] = r.run
            expected[full] += n
    events = captured_edits(repo)
    s.captured = len(events)
    s.unplaced = sum(ev.get("after_range") is None for ev in events)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for ev in events:
        if ev.get("commit") in made:
            groups[(ev["commit"], ev["file"])].append(ev)
    right: dict[str, int] = defaultdict(int)
    for (commit, rel), evs in groups.items():
        before = blob(repo, f"{commit}^:{rel}") or ""
        after = blob(repo, f"{commit}:{rel}") or ""
        got = replay(before, evs)
        if got is not None and got.splitlines() == after.splitlines():
            right[commit] += len(evs)
        else:
            s.misses.append(f"{commit[:7]} {rel} ({len(evs)} edits)")
    s.right = sum(min(n, right[c]) for c, n in expected.items())  # (an edit counts once, however it was split)
    return made


# ------------------------------------------------------------ writer recall


def substantive(line: str) -> bool:
    return re.search(r"[A-Za-z_]{2,}", line) is not None


def blamed_spans(repo: Path, made: dict[str, str]) -> list[tuple[str, int, str]]:
    """(file, first line, writing run) of every SPAN-line window git blame gives to one aider commit."""
    files = {f for f in git(repo, "ls-files").split("\n") if f and not f.startswith(".aider")}
    out = []
    for rel in sorted(files):
        if not (repo / rel).is_file():
            continue
        owners: list[str | None] = []
        lines: list[str] = []
        for line in git(repo, "blame", "--line-porcelain", "HEAD", "--", rel).split("\n"):
            if re.match(r"^[0-9a-f]{40} ", line):
                owners.append(line.split()[0])
            elif line.startswith("\t"):
                lines.append(line[1:])
        for i in range(0, len(owners) - SPAN + 1, SPAN):
            window = set(owners[i:i + SPAN])
            if len(window) == 1 and (c := owners[i]) in made and sum(map(substantive, lines[i:i + SPAN])) >= 3:
                out.append((rel, i + 1, made[c]))
    return out


def grep_rank(runs: dict[str, str], span: list[str], writer: str) -> float:
    counts = {run: sum(1 for ln in span if ln.strip() and ln.strip() in text) for run, text in runs.items()}
    top = max(counts.values(), default=0)
    tied = [r for r, n in counts.items() if n == top and n > 0]
    return 1 / len(tied) if writer in tied else 0.0


def score_recall(repo: Path, made: dict[str, str], n: int, rng: random.Random, s: Scores) -> None:
    from engram.adapters.aider import session_id
    from engram.capture.pipeline import ingest_paths
    from engram.index.db import open_db
    from engram.query import explain as X
    from engram.query.spans import read_span
    from engram.store.repo import init_store

    shutil.rmtree(repo / ".engram", ignore_errors=True)  # (a store an earlier run left in this checkout)
    store, _ = init_store(repo)
    ingest_paths(store, [repo / HISTORY])
    db = open_db(store)
    cands = blamed_spans(repo, made)
    picks = rng.sample(cands, min(n, len(cands)))
    history = (repo / HISTORY).read_text(encoding="utf-8", errors="replace")
    starts = list(HEADER.finditer(history))
    runs = {m.group(1): history[m.end():starts[i + 1].start() if i + 1 < len(starts) else len(history)]
            for i, m in enumerate(starts)}
    name = (repo / HISTORY)
    opts = X.Options(brief=True)
    for rel, first, run in picks:
        span = read_span(repo, rel, first, first + SPAN - 1, cwd=repo)
        lines = (repo / rel).read_text(encoding="utf-8", errors="replace").splitlines()
        doc = X.to_json(store, X.resolve(store, db, span, opts, file_lines=lines), opts)
        got = [x["session_id"] for x in doc["sessions"]]
        writer = session_id(run, name)
        s.spans += 1
        s.r1 += got[:1] == [writer]
        if got[:1] != [writer]:
            s.misses.append(f"span {rel}:{first} writer {run}, first {got[:1]}")
        s.grep += grep_rank(runs, lines[first - 1:first - 1 + SPAN], run)
    db.close()


def run_one(src: Path, work: Path, spans: int, seed: int) -> tuple[str, Scores] | None:
    name = src.parent.name if src.name == "repo" else src.name
    repo = checkout(src, work / name)
    if repo is None:
        print(f"{name}: no {HISTORY} in its history", file=sys.stderr)
        return None
    s = Scores()
    made = score_edits(repo, s)
    score_recall(repo, made, spans, random.Random(seed), s)
    return name, s


def specstory_counts(repo: Path) -> list[str]:
    """One row of the SpecStory table (see the module docstring)."""
    from collections import Counter

    from engram.capture.discovery import jobs_from_paths
    from engram.capture.pipeline import parse_job
    from engram.capture.stats import IngestStats

    seen: Counter[str] = Counter()
    files = sorted((repo / ".specstory" / "history").glob("*.md"))
    for f in files:
        text = f.read_text(encoding="utf-8", errors="replace")
        for block in re.findall(r'<tool-use data-tool-type="write".*?</tool-use>', text, re.DOTALL):
            seen["edit uses ok"] += bool(re.search(r"updated successfully|created successfully", block))
        seen["chunks"] += len(re.findall(r"^\*\*Chunk \d+\*\*", text, re.MULTILINE))
        seen["old diffs"] += len(re.findall(r"^```diff", text, re.MULTILINE)) - len(re.findall(r"^\*\*Chunk \d+\*\*", text, re.MULTILINE))
        seen["reads"] += len(re.findall(r'data-tool-type="read"', text))
    got: Counter[str] = Counter()
    for job in jobs_from_paths(files, IngestStats()):
        cap = parse_job(job, repo, [], 64 << 20)
        got["sessions"] += 1
        edits = [e for e in cap.events if e["kind"] == "code.edit"]
        expected = header_lines(job.main.read_text(encoding="utf-8", errors="replace"))
        if len(expected) == len(edits):  # one code.edit per chunk, in order
            for want, ev in zip(expected, edits):
                if want is not None:
                    got["checkable"] += 1
                    got["right"] += agrees(want, ev)
        got["edits"] += len(edits)
        got["ranged"] += sum(e.get("after_range") is not None for e in edits)
        got["dropped"] += sum(cap.dropped.values())
        got["reads"] += sum(e["kind"] == "code.read" for e in cap.events)
    right = f"{got['right']}/{got['checkable']}" if got["checkable"] else "-"
    spans, r1, grep = edit_recall(repo, files, 30, random.Random(1))
    recall = [str(spans), f"{r1:.3f}" if spans else "-", f"{grep:.3f}" if spans else "-"]
    return [repo.name, str(got["sessions"]), str(seen["edit uses ok"]), str(seen["chunks"]), str(max(0, seen["old diffs"])),
            str(got["edits"]), str(got["ranged"]), right, str(got["dropped"]), str(seen["reads"]), str(got["reads"]), *recall]


Hunk = tuple[int, list[str], int, list[str]]


def agrees(hunk: Hunk, ev: dict[str, Any]) -> bool:
    """Whether a code.edit's ranges and texts are those of Cursor's hunk, numbered as its header
    numbers them: its before_text stands at its before_range among the hunk's old lines, its
    after_text at its after_range among the new ones."""
    a, old, c, new = hunk
    b, f = ev.get("before_range"), ev.get("after_range")
    if b is None or f is None:
        return False
    before, after = (ev.get("before_text") or "").splitlines(), (ev.get("after_text") or "").splitlines()
    if ev.get("hunks"):  # several changes: their texts one after another
        olds = [x for os_, oe, _, _ in ev["hunks"] for x in old[os_ - a:oe - a + 1]]
        news = [x for _, _, ns, ne in ev["hunks"] for x in new[ns - c:ne - c + 1]]
        return olds == before and news == after and min(h[0] for h in ev["hunks"]) >= a
    return (old[b[0] - a:b[0] - a + len(before)] == before and new[f[0] - c:f[0] - c + len(after)] == after
            and 0 <= b[0] - a <= len(old) and 0 <= f[0] - c <= len(new) and bool(before or after))


def header_lines(text: str) -> list[Hunk | None]:
    """Per Cursor chunk of an export, in order: its hunk (old start, old lines, new start, new
    lines) when the chunk shows all of it, as its `@@ -a,b +c,d @@` header counts them (SpecStory
    may leave context out); None otherwise."""
    out: list[Hunk | None] = []
    for block in re.findall(r"<details><summary>Edit file:.*?</details>", text, re.DOTALL):
        for m in re.finditer(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@\n(.*?)(?=^@@|^```)", block, re.DOTALL | re.MULTILINE):
            shown = m.group(5).split("\n")[:-1]
            old = [ln[2:] for ln in shown if not ln.startswith("+")]
            new = [ln[2:] for ln in shown if not ln.startswith("-")]
            full = len(old) == int(m.group(2) or 1) and len(new) == int(m.group(4) or 1)
            out.append((int(m.group(1)), old, int(m.group(3)), new) if full else None)
    return out


def cline_counts(folder: Path, maps: list[tuple[str, str]] = []) -> list[str]:  # noqa: B006 - read only
    """One row of the Cline table: the task's edit and read tool uses, counted from its
    conversation by this script (an edit succeeded when its result holds the saved file), next
    to the adapter's code.edits and code.reads; *right*: tool uses whose last code.edit's
    after_text stands at its after_range in the file Cline saved (`<final_file_content>`)."""
    import json

    from engram.capture.discovery import jobs_from_paths
    from engram.capture.pipeline import parse_job
    from engram.capture.stats import IngestStats

    task = folder / "api_conversation_history.json"
    seen = {"edits ok": 0, "edits failed": 0, "reads": 0}
    for msg in json.loads(task.read_text(encoding="utf-8")):
        for b in msg.get("content") if isinstance(msg.get("content"), list) else []:
            text = b.get("text") or ""
            m = re.match(r"\[(replace_in_file|write_to_file|read_file) for '.*?'\] Result:", text)
            if m and m.group(1) == "read_file":
                seen["reads"] += 1
            elif m:
                seen["edits ok" if "<final_file_content" in text else "edits failed"] += 1
    job = jobs_from_paths([task], IngestStats())[0]
    cap = parse_job(job, folder, maps, 64 << 20)
    edits = [e for e in cap.events if e["kind"] == "code.edit"]
    right = checked = 0
    final: list[str] | None = None
    last: dict[str, Any] | None = None
    for ev in [*cap.events, {"kind": "end"}]:
        if ev["kind"] in ("tool.result", "end") and last is not None and final is not None:
            checked += 1
            a = last.get("after_range")
            right += a is not None and final[a[0] - 1:a[1]] == (last.get("after_text") or "").splitlines()
            last = None
        if ev["kind"] == "tool.result":
            m = re.search(r'<final_file_content path="[^"]*">\n?(.*?)\n?</final_file_content>', ev.get("stdout") or "", re.DOTALL)
            final = m.group(1).splitlines() if m else None
        elif ev["kind"] == "code.edit":
            last = ev
    reads = sum(e["kind"] == "code.read" for e in cap.events)
    return [folder.name, str(seen["edits ok"]), str(seen["edits failed"]), str(len(edits)),
            str(sum(e.get("after_range") is None for e in edits)), f"{right}/{checked}", str(seen["reads"]), str(reads)]


def edit_recall(repo: Path, inputs: list[Path], n: int, rng: random.Random,
                maps: list[tuple[str, str]] = []) -> tuple[int, float, float]:  # noqa: B006 - read only
    """Writer recall@1 where no commit names the writer (SpecStory, Cline): 5-line windows of
    what a session's code.edits wrote (3+ lines with a word) that stand verbatim in the file as it
    is in `repo`; the writer is the last session (by its edits' order of time) whose edit wrote
    that window. (spans, engram r@1, grep r@1 on the sessions' edit texts)."""
    from engram.capture.discovery import jobs_from_paths
    from engram.capture.pipeline import ingest_paths, parse_job
    from engram.capture.stats import IngestStats
    from engram.index.db import open_db
    from engram.query import explain as X
    from engram.query.spans import read_span
    from engram.store.repo import init_store

    writer: dict[tuple[str, tuple[str, ...]], tuple[str, str]] = {}  # (file, window) -> (time, session)
    texts: dict[str, str] = {}
    for job in jobs_from_paths(inputs, IngestStats()):
        cap = parse_job(job, repo, maps, 64 << 20)
        texts[cap.session_id] = "\n".join(str(e.get("text") or e.get("after_text") or e.get("stdout") or "")
                                          for e in cap.events)
        for ev in cap.events:
            if ev["kind"] != "code.edit" or not ev.get("after_range"):
                continue
            lines = (ev.get("after_text") or "").splitlines()
            for i in range(len(lines) - SPAN + 1):
                win = tuple(lines[i:i + SPAN])
                when = str(ev.get("ts") or cap.meta.get("started") or "")
                if sum(map(substantive, win)) >= 3 and when >= writer.get((ev["file"], win), ("", ""))[0]:
                    writer[(ev["file"], win)] = (when, cap.session_id)
    cands = []
    for (rel, win), (_, sid) in writer.items():
        path = repo / rel
        if not path.is_file():
            continue
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        at = next((i for i in range(len(lines) - SPAN + 1) if tuple(lines[i:i + SPAN]) == win), None)
        if at is not None:
            cands.append((rel, at + 1, sid))
    picks = rng.sample(sorted(cands), min(n, len(cands)))
    if not picks:
        return 0, 0.0, 0.0
    shutil.rmtree(repo / ".engram", ignore_errors=True)
    store, _ = init_store(repo)
    ingest_paths(store, inputs, maps)
    db = open_db(store)
    opts = X.Options(brief=True)
    r1 = grep = 0.0
    for rel, first, sid in picks:
        span = read_span(repo, rel, first, first + SPAN - 1, cwd=repo)
        lines = (repo / rel).read_text(encoding="utf-8", errors="replace").splitlines()
        doc = X.to_json(store, X.resolve(store, db, span, opts, file_lines=lines), opts)
        r1 += [x["session_id"] for x in doc["sessions"]][:1] == [sid]
        grep += grep_rank(texts, lines[first - 1:first - 1 + SPAN], sid)
    db.close()
    return len(picks), r1 / len(picks), grep / len(picks)


def rows(results: list[tuple[str, Scores]], label: str) -> list[list[str]]:
    def ratio(a: float, b: float) -> str:
        return f"{a / b:.3f}" if b else "-"

    out = []
    tot = Scores()
    for name, s in results:
        out.append([label, name, str(s.edits), str(s.with_truth), str(s.captured), str(s.unplaced),
                    ratio(s.right, s.with_truth), str(s.spans), ratio(s.r1, s.spans), ratio(s.grep, s.spans)])
        for f in ("edits", "with_truth", "right", "captured", "unplaced", "spans", "r1", "grep"):
            setattr(tot, f, getattr(tot, f) + getattr(s, f))
    out.append([label, "ALL", str(tot.edits), str(tot.with_truth), str(tot.captured), str(tot.unplaced),
                ratio(tot.right, tot.with_truth), str(tot.spans), ratio(tot.r1, tot.spans), ratio(tot.grep, tot.spans)])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", type=Path, default=None, help="where the checkouts go (default: a temporary directory)")
    ap.add_argument("--tuned", type=Path, nargs="*", default=[], help="repositories the adapter was tuned on")
    ap.add_argument("--held-out", type=Path, nargs="*", default=[], help="repositories it was not")
    ap.add_argument("--spans", type=int, default=30, help="spans sampled per repository")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--misses", action="store_true", help="list the groups and spans that missed")
    ap.add_argument("--specstory", type=Path, nargs="*", default=[], help="repositories committing SpecStory exports")
    ap.add_argument("--cline", type=Path, nargs="*", default=[], help="Cline / Roo Code task folders")
    ap.add_argument("--cline-map", nargs="*", default=[], help="folders a task recorded its files under (a moved "
                    "work tree): read as the task's repository, as `engram ingest --map FROM=REPO` does")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="engram-aider-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"load {load()}; checkouts in {work}")
    table: list[list[str]] = []
    for label, srcs in (("tuned", args.tuned), ("held out", args.held_out)):
        results = [r for src in srcs if (r := run_one(src.resolve(), work, args.spans, args.seed)) is not None]
        if args.misses:
            for name, s in results:
                for m in s.misses:
                    print(f"  {name}: {m}")
        table += rows(results, label) if results else []
    if table:
        print(fmt_table(["set", "repository", "edits in transcript", "with truth", "captured", "no ranges",
                         "right ranges", "spans", "writer r@1", "grep r@1 (ref)"], table))
    spec = []
    for src in args.specstory:
        name = src.parent.name if src.name == "repo" else src.name
        dest = work / name
        if not dest.exists() and subprocess.run(["git", "clone", "-q", str(src.resolve()), str(dest)],
                                                capture_output=True, check=False).returncode != 0:
            continue
        spec.append(specstory_counts(dest))
    if spec:
        print(fmt_table(["repository", "sessions", "edit uses (ok)", "Cursor chunks", "pathless diffs", "code.edits",
                         "with ranges", "agree with Cursor's hunk", "counted, not recorded", "read uses", "code.reads", "spans",
                         "writer r@1", "grep r@1 (ref)"], spec))
    def cline_maps(repo: Path) -> list[tuple[str, str]]:
        return [(frm, str(repo)) for frm in args.cline_map]

    cline = [cline_counts(folder.resolve(), cline_maps(folder.resolve())) for folder in args.cline]
    if cline:
        print(fmt_table(["task", "edit uses (ok)", "edit uses (failed)", "code.edits", "no ranges",
                         "right (last edit of a use)", "read uses", "code.reads"], cline))
        by_repo: dict[Path, list[Path]] = defaultdict(list)
        for folder in args.cline:
            top = git(folder.resolve(), "rev-parse", "--show-toplevel").strip()
            by_repo[Path(top) if top else folder.resolve()].append(folder.resolve() / "api_conversation_history.json")
        rec = []
        for repo, tasks in by_repo.items():
            spans, r1, grep = edit_recall(repo, tasks, args.spans, random.Random(args.seed), cline_maps(repo))
            rec.append([repo.name, str(len(tasks)), str(spans), f"{r1:.3f}" if spans else "-",
                        f"{grep:.3f}" if spans else "-"])
        print(fmt_table(["repository", "tasks", "spans", "writer r@1", "grep r@1 (ref)"], rec))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
