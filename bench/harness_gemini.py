#!/usr/bin/env python3
"""Capture fidelity of the Gemini CLI, Qwen Code, OpenCode and Copilot CLI adapters on real sessions, and
whether `engram explain` names the session that wrote a span.

    python bench/harness_gemini.py --entire GIT_DIR [--entire GIT_DIR ...] [--spans 100] [--seed 1]
    python bench/harness_gemini.py --sessions gemini-cli=DIR --sessions opencode=DIR [...]

Sessions come from the Entire CLI's checkpoint branch of public repositories (`--entire`, a bare
clone: every checkpoint whose metadata names the agent "Gemini CLI", "OpenCode", "Qwen Code" or
"Copilot CLI";
per session id the largest `full.jsonl` kept, which is the whole session as the agent saved it),
or from folders of session files (`--sessions HARNESS=DIR`). For each harness the run:

1. counts the edits each transcript shows with a parser of its own (not engram's adapters):
   Gemini CLI / Qwen Code tool calls whose display is a file diff (`resultDisplay.fileDiff`, with
   the whole file before and after), OpenCode `edit` / `write` / `multiedit` / `apply_patch` parts
   (one per file an apply_patch changed), Copilot CLI `edit` / `create` / `apply_patch` calls (one
   per file of the git diff its result keeps); successful ones are the edits, the others (error,
   cancelled) are counted apart. The expected line range on the new side is the span from the
   first to the last line a line diff (difflib) of the file before and after marks as changed
   (read off the diff's hunks when the transcript keeps only the diff);
2. ingests every session into one store (`--map` of each session's project directory onto the
   test repository), reads the tapes back, and counts the code.edit events whose call and file
   match a transcript edit and whose `after_range` equals the expected one (the *captured with
   correct ranges* column), and those of failed calls (should be none);
3. replays every successful edit of the set in time order, keeping for each line of each file the
   session that last changed it (its *writer*; a line an edit kept unchanged keeps its writer),
   and commits the files after each session (author: the session id), so the final tree holds
   every session's last version; samples (seeded) 5-line spans of one writer with at least 3
   substantive lines (a word of 3+ characters) and asks engram, in process, what
   `engram explain FILE:A-B --brief` answers: recall@1 is the share of spans whose first session
   is the writer. Reference in the same run: `git blame` of the span (found when more than half
   of its lines blame to the writer's commit).
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

AGENTS = {"Gemini CLI": "gemini-cli", "OpenCode": "opencode", "Qwen Code": "qwen-code", "Copilot CLI": "copilot-cli"}
COPILOT_EDITS = {"edit", "create", "apply_patch"}
OPENCODE_EDITS = {"edit", "write", "multiedit", "apply_patch", "patch"}
SPAN = 5
WORD = re.compile(r"[A-Za-z_]{3,}")


@dataclass
class Edit:
    """One edit a transcript shows, as this script reads it."""

    session: str
    ts: str
    call_id: str
    path: str  # absolute, as recorded
    before: str | None
    after: str | None
    ok: bool
    patch: str | None = None  # newer OpenCode keeps only the unified diff (`filediff.patch`, `files[].patch`)


@dataclass
class Session:
    harness: str
    file: Path
    session_id: str
    cwd: str | None
    start: str
    edits: list[Edit] = field(default_factory=list)


# --------------------------------------------------------------------------- transcripts, read independently


def read_gemini(path: Path) -> Session | None:
    """A Gemini CLI recording (one JSON document, or JSONL whose later lines replace messages)."""
    text = path.read_text("utf-8", "replace")
    try:
        docs = [json.loads(text)]
    except ValueError:
        docs = [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]
    meta: dict[str, Any] = {}
    messages: dict[str, dict[str, Any]] = {}
    for d in docs:
        if not isinstance(d, dict):
            continue
        if "projectHash" in d:
            meta.update(d)
        for m in d.get("messages") or ([d] if "type" in d and "id" in d else []):
            messages[m["id"]] = m
    if not meta:
        return None
    s = Session("gemini-cli", path, meta["sessionId"], None, meta.get("startTime") or "")
    for m in messages.values():
        for tc in m.get("toolCalls") or []:
            rd = tc.get("resultDisplay")
            if not isinstance(rd, dict) or "fileDiff" not in rd:
                continue
            before = None if rd.get("isNewFile") else rd.get("originalContent")
            s.edits.append(Edit(s.session_id, tc.get("timestamp") or m["timestamp"], tc["id"], rd.get("filePath") or "",
                                before, rd.get("newContent"), tc.get("status") == "success"))
            rel = (tc.get("args") or {}).get("file_path") or ""
            if s.cwd is None and rel and not rel.startswith("/") and s.edits[-1].path.endswith("/" + rel):
                s.cwd = s.edits[-1].path[: -len(rel) - 1]
    return s


def read_opencode(path: Path) -> Session | None:
    doc = json.loads(path.read_text("utf-8"))
    info = doc.get("info") or {}
    sid = next((x for x in [info.get("id"), *((m.get("info") or {}).get("sessionID") for m in doc["messages"][:3])]
                if isinstance(x, str) and x.startswith("ses_")), None)
    sid = sid or f"opencode-{info.get('slug') or 'session'}-{(info.get('time') or {}).get('created')}"
    s = Session("opencode", path, sid, info.get("directory"), _iso((info.get("time") or {}).get("created")))
    known: dict[str, str] = {}  # each file's text after this session's last edit that kept it whole
    for m in doc["messages"]:
        for p in m.get("parts") or []:
            if p.get("type") == "tool" and p.get("tool") == "read":
                _whole_read(p.get("state") or {}, known)
            if p.get("type") != "tool" or p.get("tool") not in OPENCODE_EDITS:
                continue
            st = p.get("state") or {}
            if st.get("status") not in ("completed", "error"):
                continue
            ok = st["status"] == "completed"
            ts = _iso((st.get("time") or {}).get("start"))
            md = st.get("metadata") or {}
            for f in md.get("files") or []:
                after = None if f.get("type") == "delete" else f.get("after")
                before = None if f.get("type") == "add" else f.get("before")
                s.edits.append(Edit(sid, ts, p["callID"], f.get("movePath") or f["filePath"], before, after, ok,
                                    None if "after" in f else f.get("patch") or f.get("diff")))
            if not md.get("files"):
                inp = st.get("input") or {}
                fd = md.get("filediff") or {}
                after = fd.get("after") if "after" in fd else inp.get("content")
                path_ = inp.get("filePath") or fd.get("file") or ""
                before = fd.get("before")
                if before is None and p.get("tool") == "write" and md.get("exists"):
                    before = known.get(path_)  # (1.16 keeps no filediff: the text this session last wrote)
                s.edits.append(Edit(sid, ts, p["callID"], path_, before, after, ok,
                                    None if after is not None else fd.get("patch") or md.get("diff")))
                if ok and isinstance(after, str):
                    known[path_] = after
                elif ok:
                    known.pop(path_, None)
    return s


def _whole_read(st: dict[str, Any], known: dict[str, str]) -> None:
    """A completed OpenCode `read` (1.16: `N: text` lines in `<content>`, ending `(End of file -
    total N lines)`) that showed a file whole, from line 1: its text, as this session saw it."""
    out, inp = str(st.get("output") or ""), st.get("input") or {}
    m = re.search(r"<content>\n(.*)\n\n\(End of file - total (\d+) lines\)\n</content>", out, re.DOTALL)
    if st.get("status") != "completed" or m is None or inp.get("offset") or (st.get("metadata") or {}).get("truncated"):
        return
    lines = m.group(1).split("\n")
    nums = [re.match(r"(\d+): ?", line) for line in lines]
    if len(lines) != int(m.group(2)) or any(n is None or int(n.group(1)) != i for i, n in enumerate(nums, 1)):
        return
    known[str(inp.get("filePath") or "")] = "".join(line[n.end():] + "\n" for line, n in zip(lines, nums) if n)


def _iso(ms: Any) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds") if ms else ""


def read_copilot(path: Path) -> Session | None:
    """A Copilot CLI session log: each successful `edit` / `create` / `apply_patch` is one edit per
    file its git diff (`result.detailedContent`) names; a `create` keeps the file written whole."""
    events = [json.loads(line) for line in path.read_text("utf-8", "replace").splitlines() if line.startswith("{")]
    start = next((e["data"] for e in events if e.get("type") == "session.start"), None)
    if start is None:
        return None
    s = Session("copilot-cli", path, start["sessionId"], (start.get("context") or {}).get("cwd"),
                start.get("startTime") or "")
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    for e in events:
        d = e.get("data") or {}
        if e.get("type") == "tool.execution_start" and d.get("toolName") in COPILOT_EDITS:
            calls[d["toolCallId"]] = (d["toolName"], d.get("arguments") or {})
        elif e.get("type") == "tool.execution_complete" and d.get("toolCallId") in calls:
            name, args = calls.pop(d["toolCallId"])
            ok = d.get("success") is True
            diff = (d.get("result") or {}).get("detailedContent") or ""
            files = re.split(r"^diff --git a/.*? b/", diff, flags=re.MULTILINE)[1:] if ok else []
            for body in files or [""]:
                path_ = "/" + body.split("\n", 1)[0] if body else str(args.get("path") or "")
                if len(files) == 1 and args.get("path"):
                    path_ = args["path"]
                after = args.get("file_text") if name == "create" else None
                s.edits.append(Edit(s.session_id, e["timestamp"], d["toolCallId"], path_, None, after, ok,
                                    None if after is not None else body))
    return s


READERS = {"gemini-cli": read_gemini, "opencode": read_opencode, "copilot-cli": read_copilot}


HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def patch_runs(patch: str) -> list[tuple[int, list[str], int]]:
    """Each run of changed lines of a unified diff: (its first line on the new side, its added
    lines, how many lines it removed)."""
    runs: list[tuple[int, list[str], int]] = []
    n, cur = 0, None
    for line in patch.split("\n"):
        m = HUNK.match(line)
        if m:
            n, cur = int(m.group(1)) or 1, None
            continue
        if not n or line.startswith(("---", "+++")) and cur is None and not runs:
            continue
        tag = line[:1]
        if tag in "+-" and line:
            if cur is None:
                cur = (n, [], 0)
                runs.append(cur)
            if tag == "+":
                cur[1].append(line[1:])
                n += 1
            else:
                runs[-1] = cur = (cur[0], cur[1], cur[2] + 1)
        elif tag == " " or line == "":
            cur = None
            n += 1
    return runs


def expected_range(before: str | None, after: str | None, patch: str | None = None) -> list[int] | None:
    """The new-side line range engram should record: first to last changed line (difflib), or the
    same read off the diff when the transcript keeps only that."""
    if after is None and patch:
        runs = patch_runs(patch)
        if not runs:
            return None
        last = runs[-1]
        return [runs[0][0], last[0] + len(last[1]) - 1 if last[1] else last[0] - 1]
    if after is None:
        return [1, 0]
    new = after.splitlines()
    if before is None:
        return [1, len(new)]
    ops = [o for o in difflib.SequenceMatcher(None, before.splitlines(), new, autojunk=False).get_opcodes()
           if o[0] != "equal"]
    if not ops:
        return None
    last = ops[-1]
    return [ops[0][3] + 1, last[4] if last[4] > last[3] else last[3]]


# --------------------------------------------------------------------------- sets


def from_entire(git_dir: Path, out: Path) -> list[Path]:
    """Each Gemini CLI / OpenCode / Qwen Code session of an Entire checkpoint branch, the largest
    saved copy per session id, written under out/<harness>/."""
    def git(*a: str) -> bytes:
        return subprocess.run(["git", "-C", str(git_dir), *a], capture_output=True, check=False).stdout

    refs = [r for r in git("for-each-ref", "--format=%(refname)").decode().split() if "entire/checkpoints" in r]
    best: dict[tuple[str, str], tuple[str, str, int]] = {}
    for ref in refs:
        for name in git("ls-tree", "-r", "--name-only", ref).decode().split("\n"):
            if not name.endswith("/metadata.json") or name.count("/") != 3:
                continue
            try:
                md = json.loads(git("show", f"{ref}:{name}"))
            except ValueError:
                continue
            harness = AGENTS.get(md.get("agent"))
            if harness is None:
                continue
            full = name.rsplit("/", 1)[0] + "/full.jsonl"
            size = int(git("cat-file", "-s", f"{ref}:{full}") or 0)
            key = (harness, md.get("session_id") or full)
            if size and (key not in best or size > best[key][2]):
                best[key] = (ref, full, size)
    written = []
    for (harness, sid), (ref, full, _) in sorted(best.items()):
        d = out / harness
        d.mkdir(parents=True, exist_ok=True)
        f = d / (re.sub(r"[^\w.-]", "_", sid) + ".json")
        f.write_bytes(git("show", f"{ref}:{full}"))
        written.append(f)
    return written


def load_set(harness: str, files: list[Path]) -> tuple[list[Session], Counter[str]]:
    sessions, notes = [], Counter()
    for f in files:
        try:
            s = READERS[harness](f)
        except (ValueError, KeyError, TypeError):
            notes["unreadable (cut short, or another agent's transcript under this label)"] += 1
            continue
        if s is None:
            notes["not this harness's format"] += 1
            continue
        sessions.append(s)
    cwds = [s.cwd for s in sessions if s.cwd]
    for s in sessions:  # one project per set: a session that names no directory has the set's
        if s.cwd is None and cwds:
            s.cwd = Counter(cwds).most_common(1)[0][0]
    return sessions, notes


TREES: list[str] = []  # other work trees of the sessions' repository (`--tree`), mapped as their cwd is


def rel_path(s: Session, path: str) -> str | None:
    """`path` relative to the session's directory or a `--tree` (a Windows path's back slashes
    read as slashes)."""
    path = path.replace("\\", "/")
    for root in [s.cwd or "", *TREES]:
        root = root.replace("\\", "/").rstrip("/")
        if root and path.startswith(root + "/"):
            rel = path[len(root) + 1:]
            return None if rel.startswith(".git/") else rel
    return None


# --------------------------------------------------------------------------- capture


def captured(store: Any) -> dict[tuple[str, str, str], list[Any]]:
    """(session, call id, repository path) -> after_range of every code.edit in the store's tapes."""
    from engram.tape.reader import TapeReader

    out: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
    for path in sorted(store.tapes_dir.rglob("*")):
        if not path.is_file():
            continue
        with TapeReader(path, store.objects_dir) as r:
            evs = list(r.events())
        sid = evs[0].get("session_id") if evs else None
        for ev in evs:
            if ev.get("kind") == "code.edit":
                out[(sid, str(ev.get("call_id")), ev.get("file"))].append(ev.get("after_range"))
    return out


def score_capture(sessions: list[Session], got: dict[tuple[str, str, str], list[Any]]) -> dict[str, int]:
    row = Counter()
    for s in sessions:
        for e in s.edits:
            rel = rel_path(s, e.path)
            if rel is None:
                row["outside the project"] += 1
                continue
            want = expected_range(e.before, e.after, e.patch)
            if want is None:
                row["changed nothing"] += 1
                continue
            key = (s.session_id, e.call_id, rel)
            if not e.ok:
                row["failed"] += 1
                row["failed captured"] += bool(got.get(key))
                continue
            row["edits"] += 1
            row["captured"] += bool(got.get(key))
            row["correct"] += want in got.get(key, [])
    return row


# --------------------------------------------------------------------------- writers and spans


def replay(sessions: list[Session], repo: Path) -> dict[str, list[tuple[str, str | None]]]:
    """Every file's final lines with their writer, the repository committed once per session."""
    files: dict[str, list[tuple[str, str | None]]] = {}
    order = sorted(((e.ts, i, s, e) for s in sessions for i, e in enumerate(s.edits) if e.ok), key=lambda x: x[:2])
    last: str | None = None
    for _, _, s, e in order:
        rel = rel_path(s, e.path)
        if rel is None or expected_range(e.before, e.after, e.patch) is None:
            continue
        if last is not None and last != s.session_id:
            commit(repo, files, last)
        last = s.session_id
        cur = files.get(rel)
        if e.after is None and e.patch:
            if cur is not None:
                files[rel] = apply_runs(cur, patch_runs(e.patch), s.session_id)
            continue
        if e.after is None:
            files.pop(rel, None)
            continue
        new = e.after.splitlines()
        if e.before is None:
            files[rel] = [(line, s.session_id) for line in new]
            continue
        old = e.before.splitlines()
        owners_old = [o for _, o in cur] if cur is not None and [t for t, _ in cur] == old else [None] * len(old)
        out: list[tuple[str, str | None]] = []
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
            if tag == "equal":
                out += [(new[j1 + k], owners_old[i1 + k]) for k in range(i2 - i1)]
            else:
                out += [(line, s.session_id) for line in new[j1:j2]]
        files[rel] = out
    if last is not None:
        commit(repo, files, last)
    return files


def apply_runs(cur: list[tuple[str, str | None]], runs: list[tuple[int, list[str], int]],
               session: str) -> list[tuple[str, str | None]]:
    """A known file with a diff's runs applied by their new-side line numbers (runs in order)."""
    out = list(cur)
    for start, added, removed in runs:
        out[start - 1:start - 1 + removed] = [(t, session) for t in added]
    return out


def commit(repo: Path, files: dict[str, list[tuple[str, str | None]]], session: str) -> None:
    for rel, lines in files.items():
        p = repo / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("".join(t + "\n" for t, _ in lines), "utf-8")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, capture_output=True)
    subprocess.run(["git", "-C", str(repo), "-c", f"user.name={session}", "-c", "user.email=s@bench",
                    "commit", "-q", "--allow-empty", "-m", session], check=True, capture_output=True)


def sample_spans(files: dict[str, list[tuple[str, str | None]]], n: int, rng: random.Random) -> list[tuple[str, int, str]]:
    cands = []
    for rel, lines in files.items():
        for i in range(0, len(lines) - SPAN + 1):
            window = lines[i:i + SPAN]
            w = window[0][1]
            if w and all(o == w for _, o in window) and sum(bool(WORD.search(t)) for t, _ in window) >= 3:
                cands.append((rel, i + 1, w))
    rng.shuffle(cands)
    return sorted(cands[:n])


def blame_found(repo: Path, rel: str, start: int, writer: str) -> bool:
    out = subprocess.run(["git", "-C", str(repo), "blame", "--line-porcelain", "-L", f"{start},{start + SPAN - 1}",
                          "HEAD", "--", rel], capture_output=True, text=True).stdout
    authors = [line[7:] for line in out.splitlines() if line.startswith("author ")]
    return sum(a == writer for a in authors) * 2 > len(authors)


def explain_top(store: Any, db: Any, repo: Path, rel: str, start: int) -> str | None:
    import engram.query.explain as X
    from engram.query.spans import read_span

    span = read_span(repo, rel, start, start + SPAN - 1, cwd=repo)
    lines = (repo / span.file).read_text("utf-8", "replace").splitlines()
    opts = X.Options(brief=True)
    doc = X.to_json(store, X.resolve(store, db, span, opts, file_lines=lines), opts)
    return doc["sessions"][0]["session_id"] if doc["sessions"] else None


# --------------------------------------------------------------------------- run


def run_set(harness: str, files: list[Path], work: Path, n_spans: int, seed: int) -> dict[str, Any]:
    from engram.capture.pipeline import ingest_paths
    from engram.index.db import open_db
    from engram.store.repo import init_store

    sessions, notes = load_set(harness, files)
    repo = work / harness / "repo"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    final = replay(sessions, repo)
    store, _ = init_store(repo)
    maps = sorted({(s.cwd, str(repo)) for s in sessions if s.cwd} | {(t, str(repo)) for t in TREES})
    stats = ingest_paths(store, [s.file for s in sessions], maps=maps)
    row = score_capture(sessions, captured(store))
    spans = sample_spans(final, n_spans, random.Random(seed))
    db = open_db(store)
    hit = blamed = 0
    for rel, start, writer in spans:
        hit += explain_top(store, db, repo, rel, start) == writer
        blamed += blame_found(repo, rel, start, writer)
    writers = len({w for _, _, w in spans})
    return {"harness": harness, "sessions": len(sessions), "edit sessions": sum(bool(s.edits) for s in sessions),
            "notes": dict(notes), **row, "spans": len(spans), "writers": writers, "recall1": hit, "blame": blamed,
            "ingest": stats.summary().splitlines()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entire", type=Path, action="append", default=[], metavar="GIT_DIR")
    ap.add_argument("--sessions", action="append", default=[], metavar="HARNESS=DIR")
    ap.add_argument("--spans", type=int, default=100, help="spans sampled per harness (default 100)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it")
    ap.add_argument("--tree", action="append", default=[], metavar="DIR",
                    help="another work tree of the sessions' repository, as they name it: its edits count too")
    args = ap.parse_args()
    TREES.extend(args.tree)
    work = args.keep or Path(tempfile.mkdtemp(prefix="engram-harness-"))
    work.mkdir(parents=True, exist_ok=True)
    sets: dict[str, list[Path]] = defaultdict(list)
    for g in args.entire:
        for f in from_entire(g, work / "sessions" / g.parent.name):
            if f not in sets[f.parent.name]:
                sets[f.parent.name].append(f)
    for pair in args.sessions:
        harness, _, d = pair.partition("=")
        sets[harness] += sorted(p for p in Path(d).rglob("*") if p.is_file() and p.stat().st_size)
    rows = [run_set(h, fs, work, args.spans, args.seed) for h, fs in sorted(sets.items()) if h in READERS]
    print(f"{'harness':<11} {'sessions':>8} {'w/ edits':>8} {'edits':>6} {'captured':>8} {'ranges ok':>9} {'ratio':>6} "
          f"{'failed':>6} {'f.capt':>6} {'spans':>5} {'writers':>7} {'recall@1':>8} {'blame':>6}")
    for r in rows:
        ratio = r.get("correct", 0) / r["edits"] if r.get("edits") else float("nan")
        rec = r["recall1"] / r["spans"] if r["spans"] else float("nan")
        bl = r["blame"] / r["spans"] if r["spans"] else float("nan")
        print(f"{r['harness']:<11} {r['sessions']:>8} {r['edit sessions']:>8} {r.get('edits', 0):>6} "
              f"{r.get('captured', 0):>8} {r.get('correct', 0):>9} {ratio:>6.3f} {r.get('failed', 0):>6} "
              f"{r.get('failed captured', 0):>6} {r['spans']:>5} {r['writers']:>7} {rec:>8.3f} {bl:>6.3f}")
    for r in rows:
        extra = {k: r[k] for k in ("outside the project", "changed nothing") if r.get(k)}
        print(f"  {r['harness']}: {r['ingest']}; transcript edits not scored: {extra or 'none'}; "
              f"sessions not read: {r['notes'] or 'none'}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
