#!/usr/bin/env python3
"""Measures provenance accuracy: does `engram explain` find the session that wrote a span? Against
`git blame` (plain, and `-w -M -C`) and a fixed-string line grep of the transcripts, scored in the
same run on the very same mutated spans.

    python bench/provenance.py [--spans-per-size 60] [--seed 1] [--k 5 --w 4] [--sweep]
                               [--set WEAK_EVIDENCE=0.4] [--distractors DIR] [--sessions DIR]
                               [--history GIT_DIR] [--map FROM=TO]
    python bench/provenance.py --multi --sessions DIR [--history GIT_DIR] [--map FROM=TO] [--root PATH]

Ground truth comes from the real Claude Code sessions shipped in tests/fixtures/claude/
(spotter 258c7280-… and 4d5611e5-… wrote code; subagent.jsonl, tool_heavy.jsonl and short.jsonl
are distractors; every session is ingested), or, with --sessions DIR, from every session under
DIR that wrote a file (the figures on sessions the settings were not tuned on). Codex rollouts
under DIR are writers too: their `patch_apply_end` changes are replayed (load_codex_session);
an update of a file the session did not create needs that file's original, which --history
finds in the project's git history (checked hunk by hunk). The run:

1. decompresses the fixtures into a temporary directory and replays every successful Write/Edit
   of the two writing sessions (Write `content`, Edit `originalFile` + `structuredPatch`), keeping
   per line of each file whether this session wrote it: `+` lines of a patch and the lines of a
   created file are written; context lines keep their flag; lines that changed between the
   session's last known version and the next `originalFile` (a formatter, the user, git) are not
   the session's. Paths are made repository-relative by stripping each session's `cwd`; the
   replayed final files must equal engram.cli.demo.final_files (checked);
2. builds ONE git repository with the final files of both sessions: one commit per session in
   time order (author = session id), so when both wrote a path the later session's version is
   kept and spans there are attributed to it (the earlier session is a real distractor);
3. samples (seeded) spans of 3, 10 and 30 lines made only of lines the session wrote, with at
   least 60% substantive lines;
4. applies each mutation to a copy of the file (transcripts unchanged), writes it to the working
   tree, reads the span back with engram.query.spans.read_span and asks engram, in process, what
   `engram explain FILE:START-END --brief` answers: `resolve(store, db, span, Options(brief=True),
   file_lines=...)` and `to_json` (with the file's lines, a span can take in its neighbours);
5. scores engram (recall@1, recall@3 of the writing session, precision of the returned sessions)
   next to two references on the same mutated spans: `git blame` (plain, and `-w -M -C`) over a
   commit by "human" holding the mutation, and a fixed-string line grep of the transcripts; also
   scores engram's other session order (`--rank evidence`) on the very same explain evidence;
6. with `--sweep`, indexes the same tapes for every k x w of --sweep-k/--sweep-w (default
   {3..7} x {2,3,4,6,8}, in parallel processes) and prints engram's scores and the index size
   (postings) per setting.

With --multi (and --sessions DIR [--history GIT_DIR] [--map FROM=TO] [--root PATH]), every session
under DIR is ingested into one store and the truth is all of them replayed together in time order
(Claude Code Write/Edit/MultiEdit results, main transcript and subagents; Codex patch_apply_end
changes, moves included), by the script's own hunk placement: a line's *writer* is the session
that last changed it; a later session whose edit covered the line unchanged (a patch or Edit
hunk's context line, the context its apply_patch input sent, an unchanged line of a whole-file
Write) is a *carrier*. 5-line spans of one writer are sampled (seeded), --spans-per-size of them
with no carrier (*regular*) and as many with one (*carried*), mutated plain / shift / reindent /
ren20 (edit20-spread: 20% of tokens renamed, one per line at least). Scores per class and by the
writer's harness, with git blame over a history of one commit per run of one session's edits;
the misses at rank 1 are named by what came first (a carrier, a reader, an id engram gave another
session's transcript...), and a census of engram's tapes counts mislabelled transcripts, code.edit
events without a line range, and edits filed under paths no session changed in the project.
`--extract-entire` and `--extract-history` prepare such directories (bench/README.md).

explain's run() calls direct_hits() without k/w, so the script replaces
engram.query.explain.direct_hits for the duration of a run by a wrapper passing this run's k and
w, and indexes with Indexer(store, k, w); engram/ itself is not modified.

Definitions (also in bench/README.md):

* a line is *substantive* when it has a word that is not a bare block keyword (`end`, `do`,
  `else`...): blank lines, `end)`, `%{`, `});` are not;
* a session *touched* a span when it is the writer, or when one of its code.read / code.edit
  facts for the same repository path (Read result content; the new side of an Edit/Write, main
  transcript and subagents; what a Bash or Codex shell command showed of the file: `path:N:` hits
  of rg/grep by their path, a diff's lines by its header, other output by the files the command
  names) holds one of the span's substantive lines of 6+ characters verbatim,
  stripped: content rather than line numbers, because reads and edits refer to other versions of
  the file. A path in a git worktree nested in the checkout is its project path (`project_path`).
  Precision = share of the returned sessions that touched the span, averaged over the
  queries that returned any session;
* grep: every stripped non-empty line of the mutated span is searched as a fixed string in each
  fixture session's transcripts (every JSON string value, decoded: what `grep -F` would find if
  it understood JSON escaping), sessions ranked by lines found; a tie at the top counts
  1/(number tied);
* blame: found when more than half of the mutated span's lines blame to the writer's commit.
"""

from __future__ import annotations

import argparse
import bisect
import difflib
import functools
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import orjson
import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import checkout_state, json_strings, written  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "claude"
WRITERS = ("258c7280-ae70-4798-800f-63464d01a85d", "4d5611e5-241a-462a-8d15-5122611a9569")
SIZES = (3, 10, 30)
SWEEP_K = (3, 4, 5, 6, 7)
SWEEP_W = (2, 3, 4, 6, 8)
TARGETS = {"shift/move/format R@1": 0.95, "edit20-spread R@1": 0.90, "edit30-spread R@1": 0.75, "precision": 0.90}

# --------------------------------------------------------------------------- transcripts

_WORDS = re.compile(r"[A-Za-z0-9_]+")
_TRIVIAL_WORDS = {"end", "do", "else", "fi", "done", "then", "try", "after", "rescue"}


def substantive(line: str) -> bool:
    """Has a word that is not a bare block keyword: `end)`, `%{`, `});`, blank lines are not."""
    return any(w not in _TRIVIAL_WORDS for w in _WORDS.findall(line))


def split_lines(text: str) -> list[str]:
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


@dataclass
class Session:
    sid: str
    files: list[Path]  # main transcript, then subagent transcripts
    cwd: str
    start: str
    final: dict[str, str] = field(default_factory=dict)  # rel path -> final text
    flags: dict[str, list[bool]] = field(default_factory=dict)  # rel path -> written-by-this-session per line
    touched: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # rel -> stripped lines
    text: str = ""  # every JSON string value of the transcripts, decoded, one per line: what grep searches
    lines: set[str] = field(default_factory=set)  # the stripped lines of `text` (a fast path for grep)
    harness: str = "claude"


def _records(path: Path) -> list[dict[str, Any]]:
    out = []
    for raw in path.read_bytes().splitlines():
        try:
            rec = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


# A git worktree nested in the checkout (Claude Code's `.claude/worktrees/<name>`, the common
# `.worktrees/<name>` and `worktrees/<name>`) holds the repository's own files on another branch.
# A plan written in `.worktrees/x/docs/plan.md` and read, once merged, as `docs/plan.md` is one
# file of the project, `docs/plan.md`, and engram files both there (a worktree git lists, or one
# removed since: adapters.base.removed_worktree); the test repository does too
# (dougnukem/orpheus has such sessions).
_NESTED_WORKTREE = re.compile(r"^(?:\.claude/worktrees|\.?worktrees)/[^/]+/")


def project_path(rel: str) -> str:
    """`rel` as the project's file, outside any nested worktree."""
    return _NESTED_WORKTREE.sub("", rel, count=1)


def _rel(cwd: str, path: str) -> str | None:
    """`path` from the session's cwd, as the project's file (`project_path`: out of a nested worktree)."""
    base = _posix(cwd).rstrip("/") + "/"
    path = _posix(path)
    return project_path(path[len(base):]) if path.startswith(base) else None


def _posix(path: str) -> str:
    """A session recorded on Windows names `D:\\repo\\src\\x.go`: `/D:/repo/src/x.go` (the bench's own
    reading, kept apart from engram's, which is what it measures)."""
    if len(path) > 2 and path[0].isalpha() and path[1] == ":" and path[2] in "\\/":
        return f"/{path[0].upper()}:/" + path[3:].replace("\\", "/")
    return path


def _realign(lines: list[str], flags: list[bool], target: list[str]) -> list[bool]:
    """Flags for `target` given a known (lines, flags): equal lines keep theirs, others are not ours."""
    if lines == target:
        return list(flags)
    out = [False] * len(target)
    sm = difflib.SequenceMatcher(None, lines, target, autojunk=False)
    for tag, a0, a1, b0, b1 in sm.get_opcodes():
        if tag == "equal":
            out[b0:b1] = flags[a0:a1]
    return out


def _apply_flagged(original: list[str], oflags: list[bool], hunks: list[dict[str, Any]]
                   ) -> tuple[list[str], list[bool]] | None:
    """engram.adapters.unified.apply_hunks, carrying a written-by-us flag per line (`+` lines are ours)."""
    from engram.adapters.unified import trace_hunks

    traced = trace_hunks(original, hunks)
    if traced is None:
        return None
    lines, origin = traced
    return lines, [True if i < 0 else oflags[i] for i in origin]


_CAT_N = re.compile(r"^ *[0-9]+(?:\u2192|\t)")


def _result_text(block: dict[str, Any]) -> str | None:
    """A tool_result's text (a string, or text parts)."""
    text = block.get("content")
    if isinstance(text, list):
        text = "\n".join(x.get("text", "") for x in text if isinstance(x, dict))
    return text if isinstance(text, str) else None


def _tool_touches(recs: list[dict[str, Any]], cwd: str, touched: dict[str, set[str]]) -> None:
    """What tool results show of files outside `toolUseResult`: a Bash command's output
    (`_shell_reads`), and, in records without `toolUseResult` (subagent transcripts have none),
    the Read's `cat -n` text from its tool_result and the new side from the Edit/Write input."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    for rec in recs:
        content = (rec.get("message") or {}).get("content") if isinstance(rec.get("message"), dict) else None
        if not isinstance(content, list):
            continue
        for b in content:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "tool_use" and isinstance(b.get("input"), dict):
                calls[str(b.get("id"))] = (str(b.get("name")), b["input"])
                continue
            if b.get("type") != "tool_result":
                continue
            name, inp = calls.get(str(b.get("tool_use_id")), ("", {}))
            if name == "Bash":
                text = _result_text(b)
                if text is not None:
                    _shell_reads(str(inp.get("command") or ""), "", cwd, text, touched)
                continue
            if "toolUseResult" in rec or b.get("is_error"):
                continue
            rel = _rel(cwd, str(inp.get("file_path") or ""))
            if rel is None:
                continue
            if name == "Read":
                text = _result_text(b)
                if text is not None:
                    touched[rel].update(_CAT_N.sub("", x).strip() for x in text.splitlines())
            elif name in ("Edit", "Write", "MultiEdit"):
                edits = inp.get("edits") if name == "MultiEdit" else [inp]
                for e in edits if isinstance(edits, list) else []:
                    new = e.get("new_string", e.get("content")) if isinstance(e, dict) else None
                    if isinstance(new, str):
                        touched[rel].update(x.strip() for x in new.splitlines())


def _progress_only_agents(recs: list[dict[str, Any]], agent_files: list[Path]) -> list[dict[str, Any]]:
    """The records of subagents whose file is missing, as the parent's agent_progress repeats
    them (engram reads them then; what they read touches the span as much as a file's reads)."""
    have = {f.stem.removeprefix("agent-") for f in agent_files}
    out = []
    for rec in recs:
        data = rec.get("data") if rec.get("type") == "progress" else None
        if isinstance(data, dict) and data.get("type") == "agent_progress" and data.get("agentId") not in have \
                and isinstance(data.get("message"), dict):
            out.append(data["message"])
    return out


def _transcript_text(s: Session, recs: Iterable[dict[str, Any]]) -> None:
    """Every JSON string value of the records, one per line: what the grep reference searches."""
    strings: list[str] = []
    for rec in recs:
        json_strings(rec, strings)
    s.text = "\n".join(strings)
    s.lines = {x.strip() for x in s.text.split("\n")}


def resumed_copies(mains: list[Path]) -> dict[Path, set[str]]:
    """For each Claude Code transcript, the record uuids it holds only as a copy: `claude --resume`
    starts a new session file, under a new id, with every record of the session it resumes. A
    record in several files belongs to the session that ended first (the one resumed)."""
    holders: dict[str, list[tuple[str, str, Path]]] = defaultdict(list)
    for main in mains:
        recs = _records(main)
        last = max((r["timestamp"] for r in recs if isinstance(r.get("timestamp"), str)), default="")
        for r in recs:
            if isinstance(r.get("uuid"), str) and r.get("type") != "progress":
                holders[r["uuid"]].append((last, main.name, main))
    copies: dict[Path, set[str]] = defaultdict(set)
    for uuid, hs in holders.items():
        for _, _, main in sorted(hs)[1:]:
            copies[main].add(uuid)
    return copies


def codex_call_ids(mains: list[Path]) -> dict[str, set[str]]:
    """Each Codex rollout's session id → the call ids in it (a forked thread's copied history
    is told by its parent's call ids, `load_codex_session`)."""
    out: dict[str, set[str]] = {}
    for main in mains:
        recs = _records(main)
        meta = next((r["payload"] for r in recs[:5] if r.get("type") == "session_meta"
                     and isinstance(r.get("payload"), dict)), None)
        if meta is not None and isinstance(meta.get("id"), str) and not meta.get("forked_from_id"):
            out[meta["id"]] = {str(r["payload"]["call_id"]) for r in recs
                               if isinstance(r.get("payload"), dict) and r["payload"].get("call_id")}
    return out


def load_session(main: Path, history: History | None = None, copied: set[str] | None = None,
                 parents: dict[str, set[str]] | None = None) -> Session:
    """A session's ground truth; `copied`: uuids of records it holds only as a copy of a session it
    resumed (`resumed_copies`): they replay into its files but are neither its writes nor touches."""
    copied = copied or set()
    sub = main.with_suffix("") / "subagents"
    files = [main] + (sorted(sub.glob("*.jsonl")) if sub.is_dir() else [])
    per_file = [_records(f) for f in files]  # parsed once: grep text, touches and writes read them
    recs = per_file[0]
    if any(r.get("type") == "session_meta" for r in recs[:5]):
        return load_codex_session(main, recs, history or History(None), parents)
    cwd = next((r["cwd"] for r in recs if isinstance(r.get("cwd"), str)), "/")
    sid = next((r["sessionId"] for r in recs if isinstance(r.get("sessionId"), str)), main.stem)
    start = next((r["timestamp"] for r in recs if isinstance(r.get("timestamp"), str) and r.get("uuid") not in copied),
                 "")
    s = Session(sid, files, cwd, start)
    _transcript_text(s, (rec for file_recs in per_file for rec in file_recs))
    _tool_touches(_progress_only_agents(recs, files[1:]), cwd, s.touched)
    state: dict[str, tuple[list[str], list[bool]]] = {}
    own: set[str] = set()  # files this session itself wrote
    for fi, file_recs in enumerate(per_file):
        _tool_touches([r for r in file_recs if r.get("uuid") not in copied], cwd, s.touched)
        for rec in file_recs:
            tur = rec.get("toolUseResult")
            if not isinstance(tur, dict):
                continue
            if rec.get("uuid") in copied:
                _replay_copy(tur, cwd, state)
                continue
            if tur.get("type") == "text" and isinstance(tur.get("file"), dict):  # Read
                fobj = tur["file"]
                rel = _rel(cwd, str(fobj.get("filePath") or ""))
                if rel and isinstance(fobj.get("content"), str):
                    s.touched[rel].update(x.strip() for x in fobj["content"].splitlines())
                continue
            path = tur.get("filePath")
            rel = _rel(cwd, path) if isinstance(path, str) else None
            if rel is None or not isinstance(tur.get("structuredPatch"), list):
                continue
            new_side = [ln[1:] for h in tur["structuredPatch"] for ln in (h.get("lines") or [])
                        if isinstance(ln, str) and ln[:1] in (" ", "+")]
            s.touched[rel].update(x.strip() for x in new_side)
            if fi != 0:
                continue  # subagents of these sessions do not write; keep writes to the main file
            own.add(rel)
            orig = tur.get("originalFile")
            if tur.get("type") == "create" or (tur.get("type") == "update" and not isinstance(orig, str)):
                content = tur.get("content")
                if isinstance(content, str):
                    s.touched[rel].update(x.strip() for x in content.splitlines())
                    new = split_lines(content)
                    old = state.get(rel) or (split_lines(orig) if isinstance(orig, str) else [], None)
                    ol, of = old if old[1] is not None else (old[0], [False] * len(old[0]))
                    fl = [True] * len(new)
                    sm = difflib.SequenceMatcher(None, ol, new, autojunk=False)
                    for tag, a0, a1, b0, b1 in sm.get_opcodes():
                        if tag == "equal":
                            fl[b0:b1] = of[a0:a1]
                    state[rel] = (new, fl)
                continue
            if not isinstance(orig, str):
                continue
            olines = split_lines(orig)
            if rel in state:
                oflags = _realign(*state[rel], olines)
            else:
                oflags = [False] * len(olines)
            if tur.get("type") == "update" and isinstance(tur.get("content"), str):
                new = split_lines(tur["content"])
                fl = [True] * len(new)
                sm = difflib.SequenceMatcher(None, olines, new, autojunk=False)
                for tag, a0, a1, b0, b1 in sm.get_opcodes():
                    if tag == "equal":
                        fl[b0:b1] = oflags[a0:a1]
                state[rel] = (new, fl)
                s.touched[rel].update(x.strip() for x in new)
                continue
            got = _apply_flagged(olines, oflags, tur["structuredPatch"])
            if got is not None:
                state[rel] = got
    for rel, (lines, fl) in state.items():
        if rel in own:
            s.final[rel] = "\n".join(lines) + "\n" if lines else ""  # an empty Write, as engram.cli.demo.final_files
            s.flags[rel] = fl
    return s


def _replay_copy(tur: dict[str, Any], cwd: str, state: dict[str, tuple[list[str], list[bool]]]) -> None:
    """A copied write: the file takes its text, none of whose lines are this session's."""
    path = tur.get("filePath")
    rel = _rel(cwd, path) if isinstance(path, str) else None
    if rel is None or not isinstance(tur.get("structuredPatch"), list):
        return
    content = tur.get("content") if tur.get("type") == "create" else None
    if isinstance(content, str):
        new = split_lines(content)
    elif isinstance(tur.get("originalFile"), str):
        old = split_lines(tur["originalFile"])
        got = _apply_flagged(old, [False] * len(old), tur["structuredPatch"])
        if got is None:
            return
        new = got[0]
    else:
        return
    state[rel] = (new, [False] * len(new))


# --------------------------------------------------------------------------- Codex rollouts

_GREP_HIT = re.compile(r"^([^\s:]+):(\d+)[:-](.*)$")
_NUMBERED = re.compile(r"^ *[0-9]+(?:\t|  |: )")


class History:
    """The project's git history (`--history`): where a Codex session's first update of a file it
    did not create finds that file's original. The version taken is the one nearest before the
    patch (then after it) on which every hunk applies at its stated line, checked line by line, so
    a wrong guess is refused rather than trusted."""

    def __init__(self, git_dir: Path | None) -> None:
        self.git_dir = git_dir
        self._versions: dict[str, list[tuple[int, str]]] = {}

    def _git(self, *args: str) -> str | None:
        assert self.git_dir is not None
        r = subprocess.run(["git", f"--git-dir={self.git_dir}", *args], capture_output=True,
                           env={**os.environ, **GIT_ENV})
        return r.stdout.decode("utf-8", "replace") if r.returncode == 0 else None

    def original(self, rel: str, when: float, hunks: list[dict[str, Any]]) -> list[str] | None:
        if self.git_dir is None:
            return None
        if rel not in self._versions:
            out = self._git("log", "--all", "--format=%H %ct", "--", rel) or ""
            self._versions[rel] = [(int(t), c) for c, t in (x.split() for x in out.splitlines() if x.strip())]
        versions = self._versions[rel]
        before = sorted((v for v in versions if v[0] <= when), reverse=True)
        after = sorted(v for v in versions if v[0] > when)
        for _, commit in (before + after)[:40]:
            text = self._git("show", f"{commit}:{rel}")
            if text is None:
                continue
            lines = split_lines(text)
            if self.fits(lines, hunks):
                return lines
        return None

    def fits(self, lines: list[str], hunks: list[dict[str, Any]]) -> bool:
        """Whether `hunks` apply to this version of the file."""
        return _apply_flagged(lines, [False] * len(lines), hunks) is not None


def _codex_rel(cwd: str, path: str) -> str | None:
    """`_rel`, also for a linked worktree beside the checkout (`<cwd>.worktrees/<name>/`, where these
    sessions kept theirs): the same repository on another branch."""
    rel = _rel(cwd, path)
    if rel is None and path.startswith(cwd.rstrip("/") + ".worktrees/"):
        rel = path[len(cwd.rstrip("/") + ".worktrees/"):].partition("/")[2] or None
    return rel


def _when(ts: str) -> float:
    from datetime import datetime

    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _path_words(cmd: str) -> list[str]:
    return [w.strip("'\"") for w in re.split(r"[\s;|&()<>]+", cmd) if ("/" in w or "." in w) and w[:1] != "-"]


def _shell_reads(cmd: str, workdir: str, cwd: str, output: str, touched: dict[str, set[str]]) -> None:
    """Lines a shell command showed of repository files: `path:N:text` hits (rg, grep -n) go to
    their path, a diff's lines (git diff, git show) to the file its header names, any other output
    to each file the command names (sed -n, cat, nl, head)."""
    if "\nOutput:\n" in output:
        output = output.split("\nOutput:\n", 1)[1]

    def rel_of(word: str, base: str) -> str | None:
        full = word if word.startswith("/") else os.path.normpath(os.path.join(base, word))
        return _codex_rel(cwd, full)

    rest = []
    diff_rel: str | None = None
    for x in output.splitlines():
        if x.startswith(("diff --git ", "+++ ")):
            path = x.rsplit(" b/", 1)[-1] if x.startswith("diff") else x[4:].removeprefix("b/")
            diff_rel = rel_of(path, cwd)  # diff paths are from the repository's root
            continue
        if diff_rel is not None and x[:1] in ("+", "-", " ") and not x.startswith("--- "):
            touched[diff_rel].add(x[1:].strip())
            continue
        m = _GREP_HIT.match(x)
        rel = rel_of(m[1], workdir or cwd) if m else None
        if m and rel:
            touched[rel].add(m[3].strip())
        else:
            rest.append(_NUMBERED.sub("", x).strip())
    for w in _path_words(cmd):
        rel = rel_of(w, workdir or cwd)
        if rel and "." in rel.rsplit("/", 1)[-1]:
            touched[rel].update(rest)


def load_codex_session(main: Path, recs: list[dict[str, Any]], history: History,
                       parents: dict[str, set[str]] | None = None) -> Session:
    """A Codex rollout's ground truth from its `patch_apply_end` events (recent Codex versions): an added
    file's lines are the session's; an update's `unified_diff` is applied to the file as the
    session left it, or, the first time, to the original found in `history` (no original, no
    ground truth for that file); `+` lines are the session's. Deletes drop a file, moves rename
    it. Touched lines: the new side of every change and what shell commands showed of a file."""
    from engram.adapters.unified import hunks_from_diff

    meta = next((r["payload"] for r in recs if r.get("type") == "session_meta" and isinstance(r.get("payload"), dict)),
                {})
    cwd = str(meta.get("cwd") or "/")
    if isinstance(meta.get("forked_from_id"), str) and parents is not None:
        # A forked thread (a Codex subagent) starts with its parent's history, restamped with the
        # fork's time: those records are neither its writes nor its touches. Their call ids are
        # the parent's.
        theirs = parents.get(meta["forked_from_id"], set())
        recs = [r for r in recs if not (isinstance(r.get("payload"), dict) and r["payload"].get("call_id") in theirs)]
    s = Session(str(meta.get("id") or main.stem), [main], cwd, str(meta.get("timestamp") or ""), harness="codex")
    _transcript_text(s, recs)
    state: dict[str, tuple[list[str], list[bool]]] = {}
    calls: dict[str, tuple[str, str]] = {}
    for rec in recs:
        p = rec.get("payload")
        if not isinstance(p, dict):
            continue
        if rec.get("type") == "turn_context" and isinstance(p.get("cwd"), str):
            s.cwd = cwd = p["cwd"]
        kind = p.get("type")
        if kind == "function_call" and p.get("name") in ("exec_command", "shell", "shell_command"):
            try:
                args = orjson.loads(p.get("arguments") or "{}")
            except orjson.JSONDecodeError:
                continue
            cmd = args.get("cmd") if isinstance(args, dict) else None
            if isinstance(args, dict) and isinstance(args.get("command"), list):
                cmd = " ".join(str(x) for x in args["command"])
            elif isinstance(args, dict) and isinstance(args.get("command"), str):  # shell_command
                cmd = args["command"]
            if isinstance(cmd, str):
                calls[str(p.get("call_id"))] = (cmd, str(args.get("workdir") or ""))
        elif kind == "function_call_output" and str(p.get("call_id")) in calls:
            out = p.get("output")
            if isinstance(out, str):
                _shell_reads(*calls.pop(str(p.get("call_id"))), cwd, out, s.touched)
        elif kind == "patch_apply_end" and p.get("success") and isinstance(p.get("changes"), dict):
            for path, ch in p["changes"].items():
                rel = _codex_rel(cwd, str(path))
                if rel is None or not isinstance(ch, dict):
                    continue
                if ch.get("type") == "add" and isinstance(ch.get("content"), str):
                    new = split_lines(ch["content"])
                    state[rel] = (new, [True] * len(new))
                    s.touched[rel].update(x.strip() for x in new)
                elif ch.get("type") == "delete":
                    state.pop(rel, None)
                elif ch.get("type") == "update" and isinstance(ch.get("unified_diff"), str):
                    hunks = hunks_from_diff(ch["unified_diff"])
                    s.touched[rel].update(x[1:].strip() for h in hunks for x in h["lines"] if x[:1] in (" ", "+"))
                    if rel not in state:
                        orig = history.original(rel, _when(str(rec.get("timestamp") or "")), hunks)
                        if orig is None:
                            continue
                        state[rel] = (orig, [False] * len(orig))
                    got = _apply_flagged(*state[rel], hunks)
                    if got is None:
                        del state[rel]  # the file changed under the session: its lines are unknown from here
                        continue
                    moved = _codex_rel(cwd, str(ch.get("move_path"))) if ch.get("move_path") else None
                    if moved:
                        del state[rel]
                    state[moved or rel] = got
    for rel, (lines, fl) in state.items():
        if any(fl):
            s.final[rel] = "\n".join(lines) + "\n"
            s.flags[rel] = fl
    return s


def prepare_transcripts(dest: Path, source: Path | None = None) -> list[Path]:
    """Put every session (with subagents) under `dest`: the shipped fixtures, decompressed, or a copy
    of the `.jsonl` files under `source`. Returns the main transcripts (files not under subagents/)."""
    dest.mkdir(parents=True, exist_ok=True)
    if source is not None:
        for f in sorted(source.rglob("*.jsonl")):
            out = dest / f.relative_to(source)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, out)
        return sorted(p for p in dest.rglob("*.jsonl") if "subagents" not in p.relative_to(dest).parts)
    dz = zstandard.ZstdDecompressor()
    mains = []
    for z in sorted((FIXTURES / "spotter").rglob("*.jsonl.zst")):
        rel = z.relative_to(FIXTURES / "spotter")
        out = dest / str(rel)[: -len(".zst")]
        out.parent.mkdir(parents=True, exist_ok=True)
        with z.open("rb") as fin, out.open("wb") as fout:
            dz.copy_stream(fin, fout)
        if "subagents" not in rel.parts:
            mains.append(out)
    shutil.copy(FIXTURES / "short.jsonl", dest / "short.jsonl")
    mains.append(dest / "short.jsonl")
    return sorted(mains)


# --------------------------------------------------------------------------- git

GIT_ENV = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str, inp: bytes | None = None, env: dict[str, str] | None = None) -> str:
    r = subprocess.run(["git", *args], cwd=repo, input=inp, capture_output=True, check=True,
                       env={**os.environ, **GIT_ENV, **(env or {})})
    return r.stdout.decode("utf-8", "replace")


def _who(name: str) -> dict[str, str]:
    return {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": f"{name}@bench.invalid", "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": f"{name}@bench.invalid", "GIT_AUTHOR_DATE": "2026-02-13T00:00:00Z",
            "GIT_COMMITTER_DATE": "2026-02-13T00:00:00Z"}


def build_repo(repo: Path, writers: list[Session]) -> tuple[str, dict[str, tuple[str, list[bool]]]]:
    """One commit per writing session in time order; returns (HEAD, rel -> (writer sid, flags))."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    owner: dict[str, tuple[str, list[bool]]] = {}
    for s in sorted(writers, key=lambda x: x.start):
        for rel, text in sorted(s.final.items()):
            p = repo / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
            owner[rel] = (s.sid, s.flags[rel])
        git(repo, "add", "-A")
        # (--allow-empty: a session may leave its files as an earlier one had them)
        git(repo, "commit", "-q", "--allow-empty", "-m", f"session {s.sid}", env=_who(s.sid))
    return git(repo, "rev-parse", "HEAD").strip(), owner


# --------------------------------------------------------------------------- spans and mutations

TOKEN = re.compile(r"[A-Za-z_\u0080-\U0010ffff][A-Za-z0-9_\u0080-\U0010ffff]*|[0-9][0-9A-Za-z_.\u0080-\U0010ffff]*|\S")
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9][0-9A-Za-z_.]*")
KEYWORDS = set("""def defp defmodule do end fn if else case cond with when true false nil and or not in for while
return const let var function this import export from new async await class self use alias require true false
null undefined try catch rescue after raise throw else elif is none import as of type public private static""".split())


@dataclass
class SpanRef:
    file: str
    start: int  # 1-based inclusive, in the committed file
    end: int
    writer: str


@dataclass
class Query:
    span: SpanRef
    size: int
    mutation: str
    files: dict[str, str]  # rel path -> new content (only changed/new files)
    path: str  # where to explain after the mutation
    start: int
    end: int
    edit_share: float = 0.0  # share of the span's tokens the mutation replaced
    blame: bool = False
    blame_wmc: bool = False
    grep_r1: float = 0.0
    text: str = ""


def eligible_spans(owner: dict[str, tuple[str, list[bool]]], repo: Path, n: int) -> list[SpanRef]:
    out = []
    for rel, (sid, fl) in sorted(owner.items()):
        lines = (repo / rel).read_text(encoding="utf-8").splitlines()
        assert len(lines) == len(fl), rel
        for i in range(0, len(lines) - n + 1):
            if not all(fl[i:i + n]):
                continue
            block = lines[i:i + n]
            if sum(substantive(x) for x in block) < math.ceil(0.6 * n):
                continue
            out.append(SpanRef(rel, i + 1, i + n, sid))
    return out


def sample_spans(cands: list[SpanRef], count: int, rng: random.Random) -> list[SpanRef]:
    """Seeded sample: no two picks overlapping in the same file; when that runs out (long spans),
    picks may overlap by up to half their length."""
    order = list(range(len(cands)))
    rng.shuffle(order)
    taken: dict[str, list[tuple[int, int]]] = defaultdict(list)
    out: list[SpanRef] = []
    for slack in (0.0, 0.5):
        for i in order:
            if len(out) == count:
                return out
            c = cands[i]
            n = c.end - c.start + 1
            if any(min(c.end, b) - max(c.start, a) + 1 > slack * n for a, b in taken[c.file]):
                continue
            taken[c.file].append((c.start, c.end))
            out.append(c)
    return out


def _new_ident(rng: random.Random) -> str:
    return "zq" + "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(6))


def _word_spans(line: str) -> list[tuple[int, int]]:
    return [m.span() for m in WORD.finditer(line)]


def _replace(lines: list[str], picks: dict[int, set[int]], rng: random.Random) -> list[str]:
    out = []
    for li, line in enumerate(lines):
        spans = _word_spans(line)
        chosen = sorted(picks.get(li, ()), reverse=True)
        for wi in chosen:
            a, b = spans[wi]
            line = line[:a] + _new_ident(rng) + line[b:]
        out.append(line)
    return out


def edit_tokens(lines: list[str], share: float, spread: bool, rng: random.Random) -> tuple[list[str], float]:
    """Replace identifiers/numbers, `share` of all tokens; with `spread`, at least one on every line."""
    ntok = sum(len(TOKEN.findall(x)) for x in lines)
    cands = [(li, wi) for li, x in enumerate(lines) for wi in range(len(_word_spans(x)))]
    budget = max(1, round(share * ntok))
    picks: dict[int, set[int]] = defaultdict(set)
    chosen: set[tuple[int, int]] = set()
    if spread:
        for li, x in enumerate(lines):
            n = len(_word_spans(x))
            if n:
                wi = rng.randrange(n)
                picks[li].add(wi)
                chosen.add((li, wi))
    rest = [c for c in cands if c not in chosen]
    rng.shuffle(rest)
    for li, wi in rest[: max(0, budget - len(chosen))]:
        picks[li].add(wi)
        chosen.add((li, wi))
    return _replace(lines, picks, rng), len(chosen) / max(1, ntok)


def rename_one(lines: list[str], rng: random.Random) -> tuple[list[str], float]:
    words = Counter(m.group() for x in lines for m in WORD.finditer(x)
                    if not m.group()[0].isdigit() and m.group() not in KEYWORDS and len(m.group()) >= 3)
    if not words:
        words = Counter(m.group() for x in lines for m in WORD.finditer(x) if not m.group()[0].isdigit())
    if not words:
        return lines, 0.0
    top = max(words.values())
    name = rng.choice(sorted(w for w, c in words.items() if c == top))
    new = _new_ident(rng)
    pat = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])")
    ntok = sum(len(TOKEN.findall(x)) for x in lines)
    return [pat.sub(new, x) for x in lines], top / max(1, ntok)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def new_code(indent: str, n: int, rng: random.Random) -> list[str]:
    return [f"{indent}{_new_ident(rng)} = {_new_ident(rng)}({_new_ident(rng)}, {rng.randrange(2, 999)})"
            for _ in range(n)]


def reindent(lines: list[str], rng: random.Random) -> list[str]:
    can_remove = all(x.startswith("    ") or not x.strip() for x in lines)
    if can_remove and rng.random() < 0.5:
        return [x[4:] if x.strip() else x for x in lines]
    return ["    " + x if x.strip() else x for x in lines]


def _outside_strings(line: str) -> list[bool]:
    """Per character: outside a '...' or "..." literal (a rough, line-local scan)."""
    out, q, esc = [], None, False
    for ch in line:
        if q is None:
            out.append(ch not in "\"'")
            if ch in "\"'":
                q = ch
        else:
            out.append(False)
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == q:
                q = None
    return out


def reformat_line(line: str) -> str:
    """Change the spacing inside a line without changing its tokens (a formatter's kind of rewrite)."""
    ind = _indent(line)
    body = line[len(ind):]
    if not body:
        return line
    ok = _outside_strings(body)
    out: list[str] = []
    i, n = 0, len(body)
    while i < n:
        ch = body[i]
        if not ok[i]:
            out.append(ch)
            i += 1
            continue
        if ch == ",":
            j = i + 1
            while j < n and body[j] == " ":
                j += 1
            out.append("," if j > i + 1 else ", ")
            i = j
            continue
        if ch == "(" and i + 1 < n and body[i + 1] not in " )":
            out.append("( ")
            i += 1
            continue
        if ch == ")" and out and out[-1][-1:] not in (" ", "("):
            out.append(" )")
            i += 1
            continue
        if ch in "=+*<>|" and out and out[-1][-1:] == " " and i + 1 < n and body[i + 1] == " ":
            # " = " -> "=": the operator stays between its operands, so no two words merge
            prev = "".join(out).rstrip(" ")
            if prev:
                out = [prev, ch]
                i += 2
                continue
        out.append(ch)
        i += 1
    new = ind + "".join(out).rstrip(" ")
    if TOKEN.findall(new) != TOKEN.findall(line):
        new = line  # safety: never change tokens
    if new == line:  # nothing to toggle: widen the first space between tokens
        k = body.find(" ")
        if k > 0:
            return ind + body[:k] + "  " + body[k:].lstrip(" ")
    return new


def rewrap(lines: list[str]) -> list[str]:
    """Join short neighbours and split long lines at a space (tokens unchanged)."""
    out: list[str] = []
    i, changed = 0, False
    while i < len(lines):
        x = lines[i]
        body = x.strip()
        if len(body) > 50:
            ok = _outside_strings(x)
            cuts = [j for j, ch in enumerate(x) if ch == " " and ok[j] and j > len(_indent(x)) + 10]
            cuts = [j for j in cuts if x[j - 1] == ","] or cuts
            if cuts:
                mid = min(cuts, key=lambda j: abs(j - len(x) // 2))
                out += [x[:mid].rstrip(), _indent(x) + "  " + x[mid:].strip()]
                changed = True
                i += 1
                continue
        if i + 1 < len(lines) and body and lines[i + 1].strip() and len(body) + len(lines[i + 1].strip()) < 80:
            out.append(x.rstrip() + " " + lines[i + 1].strip())
            changed = True
            i += 2
            continue
        out.append(x)
        i += 1
    if not changed and len(lines) > 1:
        out = [lines[0].rstrip() + " " + lines[1].strip()] + lines[2:]
    return out


MUTATIONS = ("none", "shift", "edit10", "edit20-spread", "edit30-spread", "edit20-random", "edit30-random",
             "rename", "move-in-file", "move-to-file", "reindent", "rewrap", "reformat")
TOKEN_PRESERVING = ("none", "shift", "move-in-file", "move-to-file", "reindent", "rewrap", "reformat")


def mutate(span: SpanRef, size: int, name: str, repo: Path, rng: random.Random, idx: int) -> Query:
    text = (repo / span.file).read_text(encoding="utf-8")
    lines = text.splitlines()
    s0, e0 = span.start - 1, span.end
    block = lines[s0:e0]
    share = 0.0
    q = Query(span, size, name, {}, span.file, span.start, span.end)

    def put(new_block: list[str], at: int | None = None, rest: list[str] | None = None) -> None:
        base = rest if rest is not None else lines[:s0] + lines[e0:]
        pos = s0 if at is None else at
        new = base[:pos] + new_block + base[pos:]
        q.files[span.file] = "\n".join(new) + "\n"
        q.start, q.end = pos + 1, pos + len(new_block)

    if name == "none":
        put(block)
    elif name == "shift":
        extra = new_code(_indent(block[0]), 7, rng)
        new = lines[:s0] + extra + lines[s0:]
        q.files[span.file] = "\n".join(new) + "\n"
        q.start, q.end = span.start + 7, span.end + 7
    elif name.startswith("edit"):
        pct = int(name[4:6]) / 100
        new_block, share = edit_tokens(block, pct, spread=name.endswith("spread"), rng=rng)
        put(new_block)
    elif name == "rename":
        new_block, share = rename_one(block, rng)
        put(new_block)
    elif name == "move-in-file":
        rest = lines[:s0] + lines[e0:]
        far = [p for p in range(len(rest) + 1) if abs(p - s0) >= max(10, size)]
        at = rng.choice(far) if far else (len(rest) if s0 < len(rest) // 2 else 0)
        put(block, at=at, rest=rest)
    elif name == "move-to-file":
        rest = lines[:s0] + lines[e0:]
        q.files[span.file] = "\n".join(rest) + "\n"
        p = Path(span.file)
        newf = str(p.parent / f"{p.stem}_moved{idx}{p.suffix}")
        header = new_code("", 2, rng)
        q.files[newf] = "\n".join(header + block) + "\n"
        q.path, q.start, q.end = newf, 3, 2 + len(block)
    elif name == "reindent":
        put(reindent(block, rng))
    elif name == "rewrap":
        put(rewrap(block))
    elif name == "reformat":
        put([reformat_line(x) for x in block])
    else:
        raise ValueError(name)
    q.edit_share = share
    new_lines = (q.files.get(q.path) or text).splitlines()
    q.text = "\n".join(new_lines[q.start - 1:q.end]) + "\n"
    if name in TOKEN_PRESERVING:
        assert TOKEN.findall(q.text) == TOKEN.findall("\n".join(block)), (name, span)
    return q


# --------------------------------------------------------------------------- references


def run_blame(repo: Path, base: str, queries: list[Query]) -> None:
    """One commit by "human" per mutation (parent: the last session commit), all via fast-import."""
    chunks: list[bytes] = []
    for i, q in enumerate(queries):
        chunks.append(f"commit refs/bench/q{i}\nmark :{i + 1}\n"
                      f"author human <human@bench.invalid> 1770940800 +0000\n"
                      f"committer human <human@bench.invalid> 1770940800 +0000\n"
                      f"data 8\nmutation\nfrom {base}\n".encode())
        for path, content in q.files.items():
            data = content.encode("utf-8")
            chunks.append(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")
        chunks.append(b"\n")
    marks = repo / ".git" / "bench-marks"
    git(repo, "fast-import", "--quiet", f"--export-marks={marks}", inp=b"".join(chunks))
    commit = {int(m[1:]): sha for m, sha in (ln.split() for ln in marks.read_text().splitlines())}

    def one(i: int, flags: tuple[str, ...]) -> bool:
        q = queries[i]
        out = git(repo, "blame", "--line-porcelain", *flags, "-L", f"{q.start},{q.end}", commit[i + 1], "--", q.path)
        authors = [ln[7:] for ln in out.splitlines() if ln.startswith("author ")]
        return sum(a == q.span.writer for a in authors) * 2 > len(authors)

    with ThreadPoolExecutor(max(2, min(16, os.cpu_count() or 2))) as pool:
        plain = list(pool.map(lambda i: one(i, ()), range(len(queries))))
        wmc = list(pool.map(lambda i: one(i, ("-w", "-M", "-C")), range(len(queries))))
    for q, a, b in zip(queries, plain, wmc):
        q.blame, q.blame_wmc = a, b


def run_grep(sessions: list[Session], queries: list[Query]) -> None:
    fresh = re.compile(r"zq[bcdfghjklmnpqrstvwxz]{6}")  # the mutations' new identifiers
    seen = {m for s in sessions for m in fresh.findall(s.text)}

    @functools.cache
    def where(x: str) -> frozenset[str]:
        if any(m not in seen for m in fresh.findall(x)):
            return frozenset()  # holds an identifier no transcript has: no need to scan
        return frozenset(s.sid for s in sessions if x in s.lines or x in s.text)

    for q in queries:
        needles = {x.strip() for x in q.text.splitlines() if x.strip()}
        counts = {s.sid: sum(s.sid in where(x) for x in needles) for s in sessions}
        top = max(counts.values())
        tied = [sid for sid, c in counts.items() if c == top]
        q.grep_r1 = 1.0 / len(tied) if top > 0 and q.span.writer in tied else 0.0


def touched_sessions(sessions: list[Session], span: SpanRef, repo_lines: list[str]) -> set[str]:
    needles = [x.strip() for x in repo_lines[span.start - 1:span.end] if substantive(x) and len(x.strip()) >= 6]
    out = {span.writer}
    for s in sessions:
        seen = s.touched.get(span.file)
        if seen and any(x in seen for x in needles):
            out.add(s.sid)
    return out


# --------------------------------------------------------------------------- engram


def engram_env(repo: Path, transcripts: list[Path], maps: list[tuple[str, str]] | None = None) -> Any:
    from engram.capture.discovery import jobs_from_paths
    from engram.capture.pipeline import ingest
    from engram.capture.stats import IngestStats
    from engram.store.repo import init_store

    store, _ = init_store(repo)
    stats = IngestStats()
    ingest(store, jobs_from_paths(transcripts, stats), maps=maps, stats=stats)
    print(f"ingested: {stats.sessions} sessions, {stats.tapes} tapes, {stats.edits} edits, {stats.reads} reads")
    return store


def build_index(store: Any, k: int, w: int) -> tuple[Any, int, float]:
    """A fresh index of every tape with (k, w): `engram reindex` with these parameters."""
    from engram.index.db import open_db
    from engram.index.reindex import reindex

    t0 = time.perf_counter()
    reindex(store, k, w)
    elapsed = time.perf_counter() - t0
    db = open_db(store)
    n = int(db.execute("SELECT coalesce(sum(postings), 0) FROM segments").fetchall()[0][0])
    return db, n, elapsed


@dataclass
class Outcome:
    r1: float
    r3: float
    prec: float | None
    returned: int
    edit: float | None = None  # the writer returned: is one of its code.edit fragments shown?


def _outcome(sids: list[str], writer: str, true_set: set[str], writer_edits: int = 0) -> Outcome:
    prec = sum(s in true_set for s in sids) / len(sids) if sids else None
    return Outcome(float(sids[:1] == [writer]), float(writer in sids[:3]), prec, len(sids),
                   float(writer_edits > 0) if writer in sids else None)


def _writer_edits(res: Any, writer: str) -> int:
    """How many of the code.edit fragments explain found are the writer's: a user asking why the
    code exists wants to see it written, not only read back."""
    from engram.index.kinds import KIND_NO

    edit = KIND_NO["code.edit"]
    return sum(1 for f in res.hits if (fr := res.frags.get(f)) is not None and fr.session_id == writer
               and fr.kind == edit)


def dump_misses(path: Path, store: Any, db: Any, spans: list[tuple[Any, list[str]]], run: Any,
                outs: list[Outcome], k: int, w: int) -> None:
    """`--dump-misses`: each missed query answered again with `--debug`, one JSON line each (what
    to read before changing a rule: which session came first, on which fragments)."""
    import json

    import engram.query.explain as X

    orig = X.direct_hits

    def direct_hits(db_: Any, text: str, *_a: Any, **_kw: Any) -> dict[int, float]:
        return orig(db_, text, k, w, **_kw)

    X.direct_hits = direct_hits
    try:
        with path.open("w") as out:
            for q, o, (span, lines), mi in zip(run.queries, outs, spans, run.info):
                if o.r1:
                    continue
                res = X.resolve(store, db, span, X.Options(brief=True, debug=True), file_lines=lines)
                sessions = X.sessions_of(res, "writer", res.trace)
                out.write(json.dumps({
                    "span": f"{q.span.file}:{q.span.start}-{q.span.end}", "asked": f"{span.file}:{span.start}-{span.end}",
                    "mutation": q.mutation, "class": mi.cls, "writer": q.span.writer, "carriers": sorted(mi.carriers),
                    "sessions": [{"id": s["session_id"], "wrote": s.get("wrote"), "touches": s["touches"],
                                  "frags": [[fr.kind, fr.offset, fr.file, fr.line0, fr.line1, h.confidence, h.via]
                                            for h, fr in s["_items"]]} for s in sessions],
                    "ranking": res.trace.fired if res.trace else [], "text": span.text}) + "\n")
    finally:
        X.direct_hits = orig


def read_spans(repo: Path, queries: list[Query]) -> list[tuple[Any, list[str]]]:
    """Each mutated span as `engram explain FILE:START-END` reads it, with its file's lines (which
    the command passes on, so that a span can take in its neighbours): the mutation is written to
    the working tree, read back as engram.query.requests.explain_request reads it, and the
    file restored."""
    from engram.query.spans import read_span

    out = []
    for q in queries:
        with written(repo, q.files):
            span = read_span(repo, q.path, q.start, q.end, cwd=repo)
            out.append((span, (repo / span.file).read_text(encoding="utf-8", errors="replace").splitlines()))
    return out


def run_engram(store: Any, db: Any, spans: list[tuple[Any, list[str]]], queries: list[Query],
               truth: list[set[str]], k: int, w: int, sids: list[list[str]] | None = None
               ) -> tuple[list[Outcome], list[Outcome]]:
    """engram explain as shipped (brief, with the file's lines as the command passes them), and
    the same evidence in `--rank evidence` order (`resolve` then `to_json` is what explain() does).

    That order was simulated here (`proposed_order`) until engram had it; the figures in
    bench/README.md labelled "proposed ranking (sim.)" came from the simulation."""
    import engram.query.explain as X

    orig = X.direct_hits

    def direct_hits(db_: Any, text: str, *_a: Any, **_kw: Any) -> dict[int, float]:
        return orig(db_, text, k, w, **_kw)  # run() does not pass k/w through: force this run's setting

    X.direct_hits = direct_hits
    outs, evid = [], []
    opts = X.Options(brief=True)
    try:
        for q, (span, lines), true_set in zip(queries, spans, truth):
            res = X.resolve(store, db, span, opts, file_lines=lines)
            doc = X.to_json(store, res, opts)
            edits = _writer_edits(res, q.span.writer)
            returned = [s["session_id"] for s in doc["sessions"]]
            if sids is not None:  # the multi-session mode says what came first when the writer did not
                sids.append(returned)
            outs.append(_outcome(returned, q.span.writer, true_set, edits))
            evid.append(_outcome([s["session_id"] for s in X.sessions_of(res, "evidence")], q.span.writer, true_set,
                                 edits))
    finally:
        X.direct_hits = orig
    return outs, evid


_SWEEP: dict[str, Any] = {}  # what forked sweep workers inherit (queries hold whole files: not pickled)


def _sweep_one(kw: tuple[int, int]) -> tuple[int, int, int, float, dict[str, float], dict[str, float]]:
    """Index a private copy of the store with (k, w) and score engram on every query."""
    from engram.store.repo import Store

    k, w = kw
    root = _SWEEP["work"] / f"sweep-k{k}-w{w}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    src = _SWEEP["store"].dir
    shutil.copytree(src, root / src.name, ignore=shutil.ignore_patterns("index.sqlite*", "run"))
    store = Store(root)
    db, npost, secs = build_index(store, k, w)
    try:
        o, p = run_engram(store, db, _SWEEP["spans"], _SWEEP["queries"], _SWEEP["truth"], k, w)
    finally:
        db.close()
        shutil.rmtree(root, ignore_errors=True)
    return k, w, npost, secs, summary(_SWEEP["queries"], o), summary(_SWEEP["queries"], p)


def sweep(work: Path, store: Any, spans: list[Any], queries: list[Query], truth: list[set[str]],
          ks: list[int], ws: list[int], jobs: int) -> None:
    import multiprocessing as mp

    _SWEEP.update(work=work, store=store, spans=spans, queries=queries, truth=truth)
    print("\nsweep over (k, w), same queries; shipped = engram explain as is, evidence = --rank evidence")
    head = (f"{'k':>2} {'w':>2} {'postings':>9} {'idx s':>5} | shipped: {'pres':>5} {'e20s':>5} {'e30s':>5} "
            f"{'ren':>5} {'all':>5} {'R@3':>5} {'prec':>5} {'empty':>5} | evidence: {'pres':>5} {'e20s':>5} "
            f"{'e30s':>5} {'all':>5} {'prec':>5} {'ret':>4}")
    print(head + "\n" + "-" * len(head), flush=True)
    grid = [(k, w) for k in ks for w in ws]
    ctx = mp.get_context("fork")
    with ctx.Pool(max(1, jobs)) as pool:
        for k, w, npost, secs, a, b in pool.imap(_sweep_one, grid):
            print(f"{k:2} {w:2} {npost:9} {secs:5.1f} |          " +
                  " ".join(f"{a[c]:5.3f}" for c in ("pres", "e20s", "e30s", "ren", "all", "R@3", "prec", "empty"))
                  + " |           " + " ".join(f"{b[c]:5.3f}" for c in ("pres", "e20s", "e30s", "all", "prec"))
                  + f" {b['ret']:4.2f}", flush=True)


# --------------------------------------------------------------------------- reporting


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def _f(x: float) -> str:
    return " n/a" if x != x else f"{x:4.2f}"


def table(queries: list[Query], outs: list[Outcome]) -> str:
    cols = ["R@1", "R@3", "prec", "blame", "b-wMC", "grep"]
    head1 = f"{'mutation':15}" + "".join(f"| {f'{n} lines':^{6 * len(cols) - 1}}" for n in SIZES) + \
        f"| {'all sizes':^{6 * len(cols) - 1}}| edit%"
    head2 = f"{'':15}" + ("| " + " ".join(f"{c:>5}" for c in cols)) * (len(SIZES) + 1) + "|"
    lines = [head1, head2, "-" * len(head2)]
    for m in MUTATIONS:
        row = f"{m:15}"
        for size in (*SIZES, None):
            sel = [i for i, q in enumerate(queries) if q.mutation == m and (size is None or q.size == size)]
            o = [outs[i] for i in sel]
            vals = [_mean([x.r1 for x in o]), _mean([x.r3 for x in o]),
                    _mean([x.prec for x in o if x.prec is not None]),
                    _mean([float(queries[i].blame) for i in sel]), _mean([float(queries[i].blame_wmc) for i in sel]),
                    _mean([queries[i].grep_r1 for i in sel])]
            row += "| " + " ".join(f"{_f(v):>5}" for v in vals)
        es = [queries[i].edit_share for i, q in enumerate(queries) if q.mutation == m]
        row += f"| {100 * _mean(es):4.1f}"
        lines.append(row)
    return "\n".join(lines)


def summary(queries: list[Query], outs: list[Outcome]) -> dict[str, float]:
    def r1(ms: tuple[str, ...]) -> float:
        return _mean([o.r1 for q, o in zip(queries, outs) if q.mutation in ms])

    return {"pres": r1(TOKEN_PRESERVING), "e20s": r1(("edit20-spread",)), "e30s": r1(("edit30-spread",)),
            "ren": r1(("rename",)), "all": r1(MUTATIONS), "R@3": _mean([o.r3 for o in outs]),
            "prec": _mean([o.prec for o in outs if o.prec is not None]),
            "empty": _mean([float(o.returned == 0) for o in outs]), "ret": _mean([o.returned for o in outs]),
            "edit": _mean([o.edit for o in outs if o.edit is not None])}


SUMMARY_HELP = ("pres = R@1 over the token-preserving mutations (none, shift, moves, reindent, rewrap, reformat); "
                "e20s/e30s = R@1 with 20%/30% of tokens edited on every line; ren = R@1 after a rename; "
                "all = R@1 over every mutation; R@3 over every mutation; prec = precision; empty = share of "
                "queries with no session; ret = sessions returned per query; edit = share of the queries "
                "returning the writer that show one of its code.edit fragments (not only a read of the code)")


def verdict(sm: dict[str, float]) -> str:
    checks = [("pres", 0.95), ("e20s", 0.90), ("e30s", 0.75), ("prec", 0.90)]
    return "  ".join(f"{k}>={t}:{'ok' if sm[k] >= t else 'MISS'}" for k, t in checks)


def fmt_summary(sm: dict[str, float]) -> str:
    return "  ".join(f"{k}={v:.3f}" if k != "ret" else f"{k}={v:.2f}" for k, v in sm.items())


def compact_table(queries: list[Query], outs: list[Outcome]) -> str:
    head = f"{'mutation':15}| " + " ".join(f"R@1/{n:<2}" for n in SIZES) + " |   R@1   R@3  prec"
    lines = [head, "-" * len(head)]
    for m in MUTATIONS:
        sel = [o for q, o in zip(queries, outs) if q.mutation == m]
        per = [_mean([o.r1 for q, o in zip(queries, outs) if q.mutation == m and q.size == n]) for n in SIZES]
        lines.append(f"{m:15}| " + " ".join(f"{_f(x):>6}" for x in per) +
                     f" | {_f(_mean([o.r1 for o in sel])):>5} {_f(_mean([o.r3 for o in sel])):>5} "
                     f"{_f(_mean([o.prec for o in sel if o.prec is not None])):>5}")
    return "\n".join(lines)


def by_writer(queries: list[Query], outs: list[Outcome]) -> str:
    """The summary per writing session: whether a figure holds for every session, not on average."""
    cols = ("pres", "e20s", "e30s", "all", "R@3", "prec")
    head = f"{'writer':9}{'shipped':>8} {'spans':>5} | " + " ".join(f"{c:>5}" for c in cols)
    lines = [head, "-" * len(head)]
    for sid in sorted({q.span.writer for q in queries}):
        sel = [i for i, q in enumerate(queries) if q.span.writer == sid]
        sm = summary([queries[i] for i in sel], [outs[i] for i in sel])
        spans = len({(q.span.file, q.span.start, q.size) for q in (queries[i] for i in sel)})
        lines.append(f"{sid[:8]:9}{'yes' if sid in WRITERS else 'no':>8} {spans:5} | " +
                     " ".join(f"{_f(sm[c]):>5}" for c in cols))
    return "\n".join(lines)


def failures(queries: list[Query], outs: list[Outcome], limit: int = 14) -> str:
    c: Counter[tuple[str, int, str]] = Counter()
    for q, o in zip(queries, outs):
        if not o.r1:
            why = "no session" if o.returned == 0 else ("writer lower" if o.r3 or o.returned > 3 else "writer absent")
            c[(q.mutation, q.size, why)] += 1
    return "\n".join(f"  {m:15} {n:2} lines  {why:13} x{k}" for (m, n, why), k in c.most_common(limit))


# --------------------------------------------------------------------------- multi-session mode
#
# `--multi`: every session under --sessions ingested into one store, and the truth taken from all
# of them replayed together in time order. A line's *writer* is the session that last changed it
# (added it, or replaced what was there); a later session whose edit covered the line without
# changing it (a patch's context line, an unchanged line of a whole-file Write) *carried* it. The
# replay is the script's own (hunks placed and applied here, paths read here), so that what
# engram/ does with the same transcripts is what is measured, never what the truth is.

MULTI_SIZE = 5
MULTI_MUTATIONS = ("none", "shift", "reindent", "edit20-spread")
MULTI_LABELS = {"none": "plain", "shift": "shift", "reindent": "reindent", "edit20-spread": "ren20"}
HARNESS_NAMES = {"claude": "claude-code", "codex": "codex"}
_UNIFIED_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class FileEdit:
    """One successful change of one file by one session, as its transcript recorded it."""
    when: float
    seq: int  # order within the session's transcripts (ties of `when`)
    sid: str
    harness: str
    path: str  # absolute, as recorded (--map applied)
    cwd: str
    op: str  # "patch" | "write" | "delete"
    hunks: list[dict[str, Any]] | None = None
    content: list[str] | None = None  # a write's whole new file
    original: list[str] | None = None  # the file just before, when the transcript says (Claude's originalFile)
    dest: str | None = None  # a Codex `*** Move to:` destination (absolute)
    strings: tuple[str, str, bool] | None = None  # a Claude Edit's old_string, new_string, replace_all
    context: frozenset[str] = frozenset()  # a Codex patch's context and `@@` anchor lines for this file, as sent


@dataclass
class LineState:
    """A file as the replay has it: per line, its writer (None: not known to be any session's) and
    the later sessions that carried it since it was last changed."""
    lines: list[str]
    writer: list[str | None]
    carriers: list[frozenset[str]]

    @classmethod
    def unknown(cls, lines: list[str]) -> "LineState":
        return cls(list(lines), [None] * len(lines), [frozenset()] * len(lines))


def _apply_maps(path: str, maps: list[tuple[str, str]]) -> str:
    """`--map FROM=TO` on a recorded path (the first pair that holds it); a macOS or Windows FROM
    matches without case, as those file systems do (`/Users/x/documents/...` is `Documents`)."""
    for src, dst in maps:
        src = _posix(src).rstrip("/")
        if path == src or path.startswith(src + "/") or (_case_blind(src) and (
                path.lower() == src.lower() or path.lower().startswith(src.lower() + "/"))):
            return dst.rstrip("/") + path[len(src):]
    return path


def _case_blind(path: str) -> bool:
    """A path on a file system that ignores case by default (macOS home, Windows drive)."""
    return path.startswith("/Users/") or (len(path) > 3 and path[0] == "/" and path[2] == ":")


def _hunks_of_diff(diff: str) -> list[dict[str, Any]]:
    """A unified diff's hunks in structuredPatch's shape (the bench's own reading)."""
    hunks: list[dict[str, Any]] = []
    for line in diff.split("\n"):
        m = _UNIFIED_HEADER.match(line)
        if m:
            hunks.append({"oldStart": int(m[1]), "oldLines": int(m[2] if m[2] is not None else 1),
                          "newStart": int(m[3]), "newLines": int(m[4] if m[4] is not None else 1), "lines": []})
        elif hunks and line[:1] in (" ", "+", "-", "\\"):
            hunks[-1]["lines"].append(line)
    return hunks


def _hunk_body(h: dict[str, Any]) -> list[tuple[str, str]] | None:
    """(tag, text) per line of a hunk; None when a line has no tag (redacted whole)."""
    out = []
    for ln in h.get("lines") or []:
        if not isinstance(ln, str) or ln.startswith("\\"):
            continue
        if ln == "":
            out.append((" ", ""))
        elif ln[0] in " -+":
            out.append((ln[0], ln[1:]))
        else:
            return None
    return out


def place_hunks(original: list[str], hunks: list[dict[str, Any]]
                ) -> tuple[list[str], list[int], set[int]] | None:
    """Apply hunks: (new lines, each new line's index in `original` or -1 when the hunk added it,
    the new indices of the hunks' context lines). A hunk goes where its header says, one line
    either side, or else at the nearest place after the previous hunk where its old side is found
    (as a patch tool places a hunk whose file moved on); None when it fits nowhere."""
    result: list[str] = []
    origin: list[int] = []
    covered: set[int] = set()
    pos = 0
    for h in hunks:
        body = _hunk_body(h)
        if body is None:
            return None
        expect = [t for tag, t in body if tag != "+"]
        n = len(expect)
        try:
            stated = int(h.get("oldStart") or 0) - (1 if int(h.get("oldLines") or 0) else 0)
        except (TypeError, ValueError):
            return None
        stated = min(max(stated, pos), len(original))
        start = next((s for s in (stated, stated + 1, stated - 1)
                      if pos <= s <= len(original) - n and original[s:s + n] == expect), None)
        if start is None:
            fits = [s for s in range(pos, len(original) - n + 1) if original[s:s + n] == expect]
            if not fits:
                return None
            start = min(fits, key=lambda s: abs(s - stated))
        result.extend(original[pos:start])
        origin.extend(range(pos, start))
        pos = start
        for tag, text in body:
            if tag == "+":
                result.append(text)
                origin.append(-1)
            elif tag == "-":
                pos += 1
            else:
                covered.add(len(result))
                result.append(text)
                origin.append(pos)
                pos += 1
    result.extend(original[pos:])
    origin.extend(range(pos, len(original)))
    return result, origin, covered


def _diff_origin(old: list[str], new: list[str]) -> list[int]:
    """Each line of `new`: its index in `old` when diffing keeps it, else -1."""
    out = [-1] * len(new)
    if old == new:
        return list(range(len(new)))
    sm = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, a0, a1, b0, b1 in sm.get_opcodes():
        if tag == "equal":
            out[b0:b1] = range(a0, a1)
    return out


def _sent_context(lines: list[str], origin: list[int], context: frozenset[str], reach: int = 8) -> set[int]:
    """Unchanged lines near a change (within `reach`) whose text the patch sent as context."""
    marks = [i for i, o in enumerate(origin) if o < 0 or (i and origin[i - 1] >= 0 and o > origin[i - 1] + 1)]
    if not marks:
        return set()
    out = set()
    for i, (text, o) in enumerate(zip(lines, origin)):
        if o >= 0 and text.strip() in context:
            k = bisect.bisect_left(marks, i)
            near = min(abs(marks[j] - i) for j in (k - 1, k) if 0 <= j < len(marks))
            if near <= reach:
                out.add(i)
    return out


class MultiHistory(History):
    """History whose check that hunks fit a version is the bench's own `place_hunks`."""

    def paths(self) -> set[str]:
        """Every path the history ever held (any branch)."""
        if self.git_dir is None:
            return set()
        out = self._git("log", "--all", "--name-only", "--format=") or ""
        return {x for x in out.splitlines() if x}

    def fits(self, lines: list[str], hunks: list[dict[str, Any]]) -> bool:
        return place_hunks(lines, hunks) is not None


def claude_identity(recs: list[dict[str, Any]], copied: set[str], fallback: str) -> str:
    """The session a Claude Code transcript is: the sessionId most of its own records carry (a
    plan-implementation session may start with a line copied from the planning session; a resumed
    one with the records of the session it resumes)."""
    c = Counter(r["sessionId"] for r in recs if isinstance(r.get("sessionId"), str) and r.get("uuid") not in copied)
    return c.most_common(1)[0][0] if c else fallback


def claude_edits(per_file: list[list[dict[str, Any]]], sid: str, copied: set[str],
                 maps: list[tuple[str, str]]) -> list[FileEdit]:
    """Every successful Write/Edit/MultiEdit of a Claude Code session, main transcript and
    subagents (a subagent's edits are its session's), records copied from a resumed session left out."""
    out: list[FileEdit] = []
    # The session's first cwd is where paths are read from (a later `cd assets` does not make the
    # checkout a folder holding another: see MultiReplay.learn_checkouts); the paths are absolute.
    cwd = next((r["cwd"] for recs in per_file for r in recs if isinstance(r.get("cwd"), str)), "/")
    for recs in per_file:
        for rec in recs:
            tur = rec.get("toolUseResult")
            if rec.get("uuid") in copied or not isinstance(tur, dict) or not isinstance(tur.get("structuredPatch"), list):
                continue
            path = tur.get("filePath")
            if not isinstance(path, str) or not path:
                continue
            when = _when(str(rec.get("timestamp") or ""))
            orig = tur.get("originalFile", tur.get("originalFileContents"))
            e = FileEdit(when, len(out), sid, "claude", _apply_maps(_posix(path), maps), _apply_maps(_posix(cwd), maps),
                         "patch", original=split_lines(orig) if isinstance(orig, str) else None)
            content = tur.get("content")
            if tur.get("type") in ("create", "update") and isinstance(content, str):
                e.op, e.content = "write", split_lines(content)
                if tur.get("type") == "create":
                    e.original = []
            else:
                e.hunks = tur["structuredPatch"]
                if isinstance(tur.get("oldString"), str) and isinstance(tur.get("newString"), str):
                    e.strings = (tur["oldString"], tur["newString"], bool(tur.get("replaceAll")))
            out.append(e)
    return out


def _patch_context(patch: str, cwd: str) -> dict[str, frozenset[str]]:
    """Per file of an `apply_patch` input (absolute path), its context lines and `@@` anchors: the
    lines the session sent back unchanged. Codex records the applied change with one line of
    context (`patch_apply_end`); the patch itself usually carries three."""
    out: dict[str, set[str]] = {}
    cur: set[str] | None = None
    for line in patch.split("\n"):
        if line.startswith("*** Update File: "):
            path = _posix(line[len("*** Update File: "):].strip())
            full = path if path.startswith("/") else os.path.normpath(os.path.join(_posix(cwd), path))
            cur = out.setdefault(full, set())
        elif line.startswith("*** "):
            cur = None if not line.startswith("*** Move to: ") else cur
        elif cur is not None and line.startswith("@@") and line[2:].strip():
            cur.add(line[2:].strip())
        elif cur is not None and line.startswith(" "):
            cur.add(line[1:].strip())
    return {k: frozenset(x for x in v if x) for k, v in out.items()}


def codex_edits(recs: list[dict[str, Any]], sid: str, maps: list[tuple[str, str]],
                parents: dict[str, set[str]]) -> list[FileEdit]:
    """Every change of a successful Codex `patch_apply_end`: add (a write), delete, update (its
    unified diff's hunks; `move_path` its destination). A forked thread's copy of its parent's
    history is left out (its call ids are the parent's)."""
    meta = next((r["payload"] for r in recs if r.get("type") == "session_meta" and isinstance(r.get("payload"), dict)),
                {})
    theirs = parents.get(meta.get("forked_from_id") or "", set()) if isinstance(meta.get("forked_from_id"), str) else set()
    cwd = str(meta.get("cwd") or "/")  # where relative paths are from (turn_context may move it)
    home = meta.get("cwd") if isinstance(meta.get("cwd"), str) else None  # the session's cwd (learn_checkouts)
    out: list[FileEdit] = []
    sent: dict[str, dict[str, frozenset[str]]] = {}  # call id -> its apply_patch input's context per file
    for rec in recs:
        p = rec.get("payload")
        if not isinstance(p, dict) or p.get("call_id") in theirs:
            continue
        if rec.get("type") == "turn_context" and isinstance(p.get("cwd"), str):
            cwd = p["cwd"]
            home = home or cwd
        if p.get("type") in ("custom_tool_call", "function_call") and p.get("name") == "apply_patch":
            text = p.get("input")
            if not isinstance(text, str):
                try:
                    text = (orjson.loads(p.get("arguments") or "{}") or {}).get("input")
                except (orjson.JSONDecodeError, AttributeError):
                    text = None
            if isinstance(text, str):
                sent[str(p.get("call_id"))] = _patch_context(text, cwd)
            continue
        if p.get("type") != "patch_apply_end" or not p.get("success") or not isinstance(p.get("changes"), dict):
            continue
        context = sent.get(str(p.get("call_id")), {})
        when = _when(str(rec.get("timestamp") or ""))
        for path, ch in p["changes"].items():
            if not isinstance(ch, dict):
                continue
            full = _posix(str(path))
            if not full.startswith("/"):
                full = os.path.normpath(os.path.join(_posix(cwd), full))
            e = FileEdit(when, len(out), sid, "codex", _apply_maps(full, maps), _apply_maps(_posix(home or cwd), maps),
                         "patch", context=context.get(full, frozenset()))
            kind = ch.get("type")
            if kind == "add" and isinstance(ch.get("content"), str):
                e.op, e.content = "write", split_lines(ch["content"])
            elif kind == "delete":
                e.op = "delete"
            elif kind == "update" and isinstance(ch.get("unified_diff"), str):
                e.hunks = _hunks_of_diff(ch["unified_diff"])
                if ch.get("move_path"):
                    mp = _posix(str(ch["move_path"]))
                    e.dest = _apply_maps(mp if mp.startswith("/") else os.path.normpath(os.path.join(_posix(cwd), mp)),
                                         maps)
            else:
                continue
            out.append(e)
    return out


def _under(path: str, root: str) -> str | None:
    """`path` relative to `root`, or None; a macOS or Windows path compares without case."""
    root = root.rstrip("/")
    fold = _case_blind(root)
    p, r = (path.lower(), root.lower()) if fold else (path, root)
    if p.startswith(r + "/"):
        return path[len(root) + 1:]
    return None


class MultiReplay:
    """All sessions' edits applied in time order to one set of files (see the section comment)."""

    def __init__(self, history: MultiHistory, root: str) -> None:
        self.history = history
        self.root = root.rstrip("/")
        self.files: dict[str, LineState] = {}
        self.skipped: Counter[str] = Counter()  # edits not replayed, by reason
        self.outside: Counter[str] = Counter()  # sid -> edits of files outside the project
        self.applied: Counter[str] = Counter()  # harness -> edits replayed
        self.rebased = 0  # edits before which the file differed from the replay (a person, a formatter, git)
        self.moved: set[str] = set()  # files a Codex move put where they are
        self.edited: set[str] = set()  # every project path any session changed
        self.commits: list[tuple[str, float, dict[str, str | None]]] = []
        self.checkouts: set[str] = set()  # other cwds that are checkouts of the project (learn_checkouts)
        self._dirty: dict[str, None] = {}
        self._who: str | None = None
        self._when = 0.0

    def learn_checkouts(self, edits: list[FileEdit], history_paths: set[str], sources: list[str]) -> None:
        """Which other cwds are checkouts of the project (another machine, a worktree outside the
        root), so that paths are read from them; not a folder above the root. With the project's
        history: a cwd at least half of whose edited paths, read from it, are paths the history
        ever held (a home directory's `.ssh/config`, `.config/...` are not; a checkout's files
        are, even when it holds its own `.worktrees/`). Without: a cwd that holds no other
        session's cwd and no --map source (a home directory holds the project)."""
        cwds = {e.cwd.rstrip("/") for e in edits}
        anchors = cwds | {_posix(x).rstrip("/") for x in sources} | {self.root}
        by_cwd: dict[str, set[str]] = defaultdict(set)
        for e in edits:
            cwd = e.cwd.rstrip("/")
            if cwd and cwd != self.root and _under(cwd, self.root) is None and _under(self.root, cwd) is None:
                r = _under(e.path, cwd)
                by_cwd[cwd].add(project_path(r) if r else "")
        self.checkouts = set()
        for c, rels in by_cwd.items():
            rels.discard("")
            if history_paths:  # a checkout's edits are mostly of files the project's history holds
                if rels and 2 * len(rels & history_paths) >= len(rels):
                    self.checkouts.add(c)
            elif not any(a != c and _under(a, c) is not None for a in anchors):
                self.checkouts.add(c)

    def rel(self, path: str, cwd: str) -> str | None:
        """The project path of a recorded path: from the project root, or from the session's own
        cwd when that is another checkout of the project (`learn_checkouts`); the innermost holding
        it wins, out of a nested worktree. None: outside the project."""
        cwd = cwd.rstrip("/")
        roots = [self.root]
        if cwd in self.checkouts:
            roots.append(cwd)
            roots.append(cwd + ".worktrees/*")
        roots.append(self.root + ".worktrees/*")
        best: str | None = None
        for r in roots:
            if r.endswith("/*"):
                rel = _under(path, r[:-2])
                rel = rel.partition("/")[2] if rel else None
            else:
                rel = _under(path, r)
            if rel and (best is None or rel.count("/") < best.count("/")):
                best = rel
        if best is None or best == ".git" or best.startswith(".git/"):
            return None
        return project_path(best)

    def apply(self, e: FileEdit) -> None:
        rel = self.rel(e.path, e.cwd)
        if rel is None:
            self.outside[e.sid] += 1
            return
        self.edited.add(rel)  # a project file some session changed, whether or not the replay could follow it
        if self._who is not None and self._who != e.sid:
            self._commit()
        self._who, self._when = e.sid, max(self._when, e.when)
        st = self.files.get(rel)
        if e.original is not None:
            st = self._rebase(st, e.original)
        if e.op == "delete":
            if self.files.pop(rel, None) is not None:
                self._dirty[rel] = None
            self.applied[e.harness] += 1
            return
        if e.op == "write":
            st = st or LineState.unknown([])
            new = self._changed(st, _diff_origin(st.lines, e.content or []), e.content or [], e.sid, cover_all=True)
        else:
            new = self._patch(st, rel, e)
            if new is None:
                return
        self.applied[e.harness] += 1
        dest = self.rel(e.dest, e.cwd) if e.dest else None
        if e.dest and dest is None:
            self.outside[e.sid] += 1
        if dest and dest != rel:
            self.files.pop(rel, None)
            self._dirty[rel] = None
            self.moved.add(dest)
            self.edited.add(dest)
            rel = dest
        self.files[rel] = new
        self._dirty[rel] = None

    def _patch(self, st: LineState | None, rel: str, e: FileEdit) -> LineState | None:
        hunks = e.hunks or []
        if st is None:
            orig = self.history.original(rel, e.when, hunks)
            if orig is None:
                self.skipped[f"{HARNESS_NAMES[e.harness]}: update of a file whose original is unknown"] += 1
                return None
            st = LineState.unknown(orig)
        got = place_hunks(st.lines, hunks)
        if got is None and e.strings is not None:  # hunks redacted or unplaceable: the Edit's own strings
            old, new, every = e.strings
            text = "\n".join(st.lines) + "\n"
            if old and old in text:
                after = split_lines(text.replace(old, new) if every else text.replace(old, new, 1))
                return self._changed(st, _diff_origin(st.lines, after), after, e.sid, cover_all=False)
        if got is None:
            orig = self.history.original(rel, e.when, hunks)
            if orig is not None:
                st = self._rebase(st, orig)
                got = place_hunks(st.lines, hunks)
        if got is None:
            self.skipped[f"{HARNESS_NAMES[e.harness]}: patch does not apply to the replayed file"] += 1
            self.files.pop(rel, None)  # its lines are unknown from here
            self._dirty[rel] = None
            return None
        lines, origin, covered = got
        if e.context:
            covered = covered | _sent_context(lines, origin, e.context)
        return self._changed(st, origin, lines, e.sid, cover_all=False, covered=covered)

    @staticmethod
    def _changed(st: LineState, origin: list[int], lines: list[str], sid: str, *, cover_all: bool,
                 covered: set[int] | None = None) -> LineState:
        writer: list[str | None] = []
        carriers: list[frozenset[str]] = []
        for i, o in enumerate(origin):
            if o < 0:
                writer.append(sid)
                carriers.append(frozenset())
                continue
            w, c = st.writer[o], st.carriers[o]
            if (cover_all or (covered is not None and i in covered)) and w != sid:
                c = c | {sid}
            writer.append(w)
            carriers.append(c)
        return LineState(lines, writer, carriers)

    def _rebase(self, st: LineState | None, base: list[str]) -> LineState:
        """The replay's file realigned onto what a transcript says the file was: lines that
        differ (changed outside the sessions) are nobody's known writing."""
        if st is None:
            return LineState.unknown(base)
        if st.lines == base:
            return st
        self.rebased += 1
        origin = _diff_origin(st.lines, base)
        return LineState(list(base), [st.writer[o] if o >= 0 else None for o in origin],
                         [st.carriers[o] if o >= 0 else frozenset() for o in origin])

    def _commit(self) -> None:
        if self._who is not None and self._dirty:
            snap = {rel: ("\n".join(self.files[rel].lines) + "\n" if self.files[rel].lines else "")
                    if rel in self.files else None for rel in self._dirty}
            self.commits.append((self._who, self._when, snap))
        self._dirty = {}

    def finish(self) -> None:
        self._commit()
        self._who = None


def multi_root(edits: list[FileEdit]) -> str:
    """The project's root: the cwd most edits were made from."""
    c = Counter(e.cwd.rstrip("/") for e in edits)
    return c.most_common(1)[0][0] if c else "/"


def build_multi_repo(repo: Path, replay: MultiReplay) -> str:
    """The replay as a git history: one commit per run of one session's edits (author = its id),
    so that `git blame` sees each change where the session made it; the working tree is the end."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    chunks: list[bytes] = []
    for i, (sid, when, snap) in enumerate(replay.commits):
        t = int(when) if when > 0 else 1_700_000_000 + i
        chunks.append(f"commit refs/heads/main\nauthor {sid} <{sid}@bench.invalid> {t} +0000\n"
                      f"committer {sid} <{sid}@bench.invalid> {t} +0000\ndata 8\nsessions\n".encode())
        for rel, text in snap.items():
            if text is None:
                chunks.append(f"D {rel}\n".encode())
            else:
                data = text.encode("utf-8")
                chunks.append(f"M 100644 inline {rel}\ndata {len(data)}\n".encode() + data + b"\n")
        chunks.append(b"\n")
    git(repo, "fast-import", "--quiet", inp=b"".join(chunks))
    git(repo, "checkout", "-q", "-f", "main")
    return git(repo, "rev-parse", "HEAD").strip()


@dataclass
class MultiSpan:
    """A sampled span's truth beyond SpanRef: the later sessions that carried it, the writer's harness."""
    carriers: frozenset[str]
    harness: str

    @property
    def cls(self) -> str:
        return "carried" if self.carriers else "regular"


def _one_per_session(sessions: list[Session], replay: MultiReplay, maps: list[tuple[str, str]]) -> list[Session]:
    """One Session per session id (an old-style `agent-*.jsonl` beside its session is that session
    too), touches keyed by project path; the grep reference then sees every transcript of a session."""
    by: dict[str, Session] = {}
    for s in sessions:
        touched = _project_touches(s, replay, maps)
        if s.sid not in by:
            s.touched = touched
            by[s.sid] = s
            continue
        first = by[s.sid]
        first.files += s.files
        first.text += "\n" + s.text
        first.lines |= s.lines
        for rel, lines in touched.items():
            first.touched.setdefault(rel, set()).update(lines)
    return list(by.values())


def _project_touches(s: Session, replay: MultiReplay, maps: list[tuple[str, str]]) -> dict[str, set[str]]:
    """A session's touched lines (load_session: keyed by the path from its own cwd) keyed by the
    replay's project path instead: a home-directory session's `M-Claude/x.py` is the project's `x.py`."""
    out: dict[str, set[str]] = defaultdict(set)
    cwd = _apply_maps(_posix(s.cwd), maps)
    for rel, lines in s.touched.items():
        full = _apply_maps(_posix(s.cwd).rstrip("/") + "/" + rel, maps)
        got = replay.rel(full, cwd)
        if got is not None:
            out[got] |= lines
    return out


def multi_candidates(replay: MultiReplay, n: int) -> tuple[list[SpanRef], dict[tuple[str, int], MultiSpan], int]:
    """Every n-line window of one writer with ≥60% substantive lines, and its carriers. Files whose
    text a reader splits into other lines than the replay's (a stray \\r, U+2028) are left out
    (returned: how many)."""
    out: list[SpanRef] = []
    info: dict[tuple[str, int], MultiSpan] = {}
    odd = 0
    for rel, st in sorted(replay.files.items()):
        text = "\n".join(st.lines) + "\n" if st.lines else ""
        if text.splitlines() != st.lines:
            odd += 1
            continue
        for i in range(0, len(st.lines) - n + 1):
            w = st.writer[i]
            if w is None or any(x != w for x in st.writer[i:i + n]):
                continue
            if sum(substantive(x) for x in st.lines[i:i + n]) < math.ceil(0.6 * n):
                continue
            out.append(SpanRef(rel, i + 1, i + n, w))
            info[(rel, i + 1)] = MultiSpan(frozenset().union(*st.carriers[i:i + n]), "")
    return out, info, odd


@dataclass
class MultiRun:
    sessions: list[Session]
    harness: dict[str, str]  # sid -> claude | codex
    replay: MultiReplay
    repo: Path
    queries: list[Query]
    truth: list[set[str]]
    info: list[MultiSpan]  # per query
    sid_of: dict[str, str]  # transcript path -> session id (the truth's)
    labels: dict[str, set[str]] = field(default_factory=dict)  # truth's id -> other ids engram gave its transcripts


def prepare_multi(work: Path, spans_per_class: int, seed: int, source: Path, history: Path | None,
                  maps: list[tuple[str, str]], tree_with_reads: bool = False, root: str | None = None) -> MultiRun:
    """Transcripts, the all-sessions replay, its git history, the sampled 5-line spans (regular and
    carried apart) and their mutated queries with the references' answers."""
    mains = prepare_transcripts(work / "transcripts", source)
    hist = MultiHistory(history)
    copies = resumed_copies(mains)
    calls = codex_call_ids(mains)
    sessions: list[Session] = []
    edits: list[FileEdit] = []
    harness: dict[str, str] = {}
    unread: Counter[str] = Counter()
    extra = 0  # transcripts of a session already read (old-style agent-*.jsonl beside it, a copy)
    sid_of: dict[str, str] = {}  # transcript path -> the session it is (the truth's identity)
    for p in mains:
        s = load_session(p, hist, copies.get(p), calls)
        recs = _records(p)
        if s.harness == "codex":
            sid = s.sid
            edits += codex_edits(recs, sid, maps, calls)
        else:
            if not any(isinstance(r.get("sessionId"), str) for r in recs):
                unread["neither a Claude Code transcript nor a Codex rollout"] += 1
            sid = s.sid = claude_identity(recs, copies.get(p) or set(), p.stem)
            sub = p.with_suffix("") / "subagents"
            per_file = [recs] + [_records(f) for f in (sorted(sub.glob("*.jsonl")) if sub.is_dir() else [])]
            edits += claude_edits(per_file, sid, copies.get(p) or set(), maps)
        if sid in harness:
            extra += 1
        harness[sid] = s.harness
        for f in s.files:
            sid_of[str(f)] = sid
        sessions.append(s)
    root = _posix(root).rstrip("/") if root else multi_root(edits)
    replay = MultiReplay(hist, root)
    replay.learn_checkouts(edits, hist.paths(), [src for src, _ in maps])
    if replay.checkouts:
        print(f"  other checkouts of the project (paths read from them): {', '.join(sorted(replay.checkouts)[:6])}"
              f"{' ...' if len(replay.checkouts) > 6 else ''}")
    sessions = _one_per_session(sessions, replay, maps)
    for e in sorted(edits, key=lambda e: (e.when, e.sid, e.seq)):
        replay.apply(e)
    replay.finish()
    by_h = Counter(harness.values())
    writers = {w for st in replay.files.values() for w in st.writer if w}
    attributed = sum(w is not None for st in replay.files.values() for w in st.writer)
    total = sum(len(st.lines) for st in replay.files.values())
    carried = sum(bool(c) for st in replay.files.values() for w, c in zip(st.writer, st.carriers) if w)
    print(f"{len(harness)} sessions ({by_h.get('claude', 0)} claude-code, {by_h.get('codex', 0)} codex) in "
          f"{len(mains)} transcripts ({extra} more of a session already read: replayed as that session); "
          f"project root {root}; {len(writers)} sessions wrote lines still present")
    print(f"replay: {sum(replay.applied.values())} edits applied ({dict(replay.applied)}); {len(edits)} recorded; "
          f"{replay.rebased} found the file changed outside the sessions; {len(replay.files)} files, {total} lines, "
          f"{attributed} with a writer, {carried} of them carried")
    for reason, k in sorted({**replay.skipped, **unread}.items()):
        print(f"  not replayed: {k} x {reason}")
    if replay.outside:
        print(f"  edits of files outside the project: {sum(replay.outside.values())} "
              f"(by {len(replay.outside)} sessions: " + ", ".join(f"{s[:8]} {k}" for s, k in replay.outside.most_common(5))
              + ")")
    if replay.moved:
        print(f"  files put in place by a Codex move: {len(replay.moved)}")
    repo = work / "repo"
    build_multi_repo(repo, replay)
    cands, info, odd = multi_candidates(replay, MULTI_SIZE)
    if odd:
        print(f"  {odd} files left out of sampling (a line separator other than \\n in them)")
    for c in cands:
        info[(c.file, c.start)].harness = harness.get(c.writer, "claude")
    rng = random.Random(seed)
    regular = [c for c in cands if not info[(c.file, c.start)].carriers]
    carried_c = [c for c in cands if info[(c.file, c.start)].carriers]
    picked = sample_spans(regular, spans_per_class, rng) + sample_spans(carried_c, spans_per_class, rng)
    if not picked:
        raise SystemExit(f"{source}: no {MULTI_SIZE}-line span with one writer in the replayed files")
    for name, pool in (("regular", regular), ("carried", carried_c)):
        got = [c for c in picked if bool(info[(c.file, c.start)].carriers) == (name == "carried")]
        print(f"{MULTI_SIZE}-line spans, {name}: {len(pool)} eligible windows, sampled {len(got)} "
              f"({dict(Counter(HARNESS_NAMES[info[(c.file, c.start)].harness] for c in got))}; "
              f"{len({c.writer for c in got})} writers)")
    queries: list[Query] = []
    truth: list[set[str]] = []
    per_query: list[MultiSpan] = []
    for si, sp in enumerate(picked):
        repo_lines = (repo / sp.file).read_text(encoding="utf-8").splitlines()
        mi = info[(sp.file, sp.start)]
        t = touched_sessions(sessions, sp, repo_lines) | mi.carriers
        for m in MULTI_MUTATIONS:
            qrng = random.Random(f"{seed}/multi/{si}/{m}")
            queries.append(mutate(sp, MULTI_SIZE, m, repo, qrng, len(queries)))
            truth.append(t)
            per_query.append(mi)
    t0 = time.perf_counter()
    run_blame(repo, git(repo, "rev-parse", "HEAD").strip(), queries)
    run_grep(sessions, queries)
    print(f"{len(queries)} queries ({len(MULTI_MUTATIONS)} mutations); git blame and grep references in "
          f"{time.perf_counter() - t0:.1f}s")
    if tree_with_reads:
        print(f"working tree: {add_read_files(repo, sessions)} files the sessions only read added (untracked)")
    return MultiRun(sessions, harness, replay, repo, queries, truth, per_query, sid_of)


def _store_census(store: Any, run: MultiRun) -> list[str]:
    """What engram's tapes hold against the truth: sessions it names that the truth does not (or
    lost), code.edit events without a line range, edits filed under paths no session changed in the
    project (outside paths, `.git/`), moves."""
    from engram.tape.reader import TapeReader

    known = set(run.harness)
    seen: set[str] = set()
    edits: Counter[str] = Counter()
    no_range: Counter[str] = Counter()
    foreign: Counter[str] = Counter()
    gitdir = 0
    for path in sorted(store.tapes_dir.rglob("*")):
        if not path.is_file():
            continue
        try:
            with TapeReader(path, store.objects_dir) as r:
                evs = list(r.events())
        except Exception:  # noqa: BLE001 - a census, not a check: an unreadable tape is counted
            foreign["(unreadable tape)"] += 1
            continue
        meta = evs[0] if evs else {}
        sid = str(meta.get("session_id") or "")
        for src in meta.get("sources") or []:
            mine = run.sid_of.get(str((src or {}).get("path")))
            if mine is not None and mine != sid:
                run.labels.setdefault(mine, set()).add(sid)
        h = str(meta.get("harness") or "?")
        seen.add(sid)
        for ev in evs:
            if ev.get("kind") != "code.edit":
                continue
            edits[h] += 1
            if ev.get("after_range") is None and ev.get("op") != "delete":
                no_range[h] += 1
            f = str(ev.get("file") or "")
            if f.startswith(".git/"):
                gitdir += 1
            elif f and f not in run.replay.edited and f not in run.replay.files:
                foreign[f.split("/")[0]] += 1
    out = [f"engram's tapes: {len(seen)} session ids; transcripts filed under another session's id: "
           f"{sum(len(v) for v in run.labels.values())} ("
           + ", ".join(f"{a[:8]} as {'/'.join(x[:8] for x in sorted(b))}" for a, b in sorted(run.labels.items())[:6])
           + f"); ids not in the truth: {len(seen - known)} "
           f"({', '.join(sorted(s[:8] for s in seen - known)[:6])}); truth's sessions without a tape: "
           f"{len(known - seen)} ({', '.join(sorted(s[:8] for s in known - seen)[:6])})",
           f"code.edit events: {dict(edits)}; without a line range: {dict(no_range)}; under .git/: {gitdir}; "
           f"under paths no session changed in the project: {sum(foreign.values())} "
           f"(top folders: {', '.join(f'{k} {v}' for k, v in foreign.most_common(5))})"]
    return out


def _miss_cause(q: Query, sids: list[str], mi: MultiSpan, true_set: set[str], known: set[str],
                labels: dict[str, set[str]]) -> str:
    """Why the writer is not first: what came first instead."""
    if not sids:
        return "no session"
    top = sids[0]
    where = "writer lower" if q.span.writer in sids else "writer absent"
    if top in labels.get(q.span.writer, ()):
        return f"the writer's transcript under another id first, {where}"
    if top in mi.carriers:
        return f"a carrier first, {where}"
    if top not in known:
        return f"an id no transcript has first, {where}"
    if top in true_set:
        return f"a reader first, {where}"
    if any(top in v for v in labels.values()):
        return f"an id engram also gave other sessions' transcripts first, {where}"
    return f"a session that never touched the span first, {where}"


def multi_tables(run: MultiRun, outs: list[Outcome]) -> str:
    """Per harness of the writer (and all): per mutation, regular and carried spans apart, R@1,
    R@3, precision of engram next to git blame, git blame -w -M -C and the line grep."""
    cols = ["R@1", "R@3", "prec", "blame", "b-wMC", "grep"]
    lines: list[str] = []
    for h in ("claude", "codex", None):
        sel_h = [i for i, mi in enumerate(run.info) if h is None or mi.harness == h]
        if not sel_h:
            continue
        n = {c: len({(run.queries[i].span.file, run.queries[i].span.start) for i in sel_h if run.info[i].cls == c})
             for c in ("regular", "carried")}
        lines.append(f"\nwriter's harness: {HARNESS_NAMES[h] if h else 'all'} "
                     f"({n['regular']} regular spans, {n['carried']} carried)")
        head1 = f"{'mutation':10}" + "".join(f"| {c + ' spans':^{6 * len(cols) - 1}}" for c in ("regular", "carried"))
        head2 = f"{'':10}" + ("| " + " ".join(f"{c:>5}" for c in cols)) * 2
        lines += [head1, head2, "-" * len(head2)]
        for m in (*MULTI_MUTATIONS, None):
            row = f"{MULTI_LABELS[m] if m else 'all':10}"
            for c in ("regular", "carried"):
                sel = [i for i in sel_h if run.info[i].cls == c and (m is None or run.queries[i].mutation == m)]
                o = [outs[i] for i in sel]
                vals = [_mean([x.r1 for x in o]), _mean([x.r3 for x in o]),
                        _mean([x.prec for x in o if x.prec is not None]),
                        _mean([float(run.queries[i].blame) for i in sel]),
                        _mean([float(run.queries[i].blame_wmc) for i in sel]),
                        _mean([run.queries[i].grep_r1 for i in sel])]
                row += "| " + " ".join(f"{_f(v):>5}" for v in vals)
            lines.append(row)
    return "\n".join(lines)


def multi_summary(run: MultiRun, outs: list[Outcome]) -> dict[str, Any]:
    def r1(cls: str, ms: tuple[str, ...] = MULTI_MUTATIONS, h: str | None = None) -> float:
        return _mean([o.r1 for q, o, mi in zip(run.queries, outs, run.info)
                      if mi.cls == cls and q.mutation in ms and (h is None or mi.harness == h)])

    def ref(attr: str, cls: str) -> float:
        return _mean([float(getattr(q, attr)) for q, mi in zip(run.queries, run.info)
                      if mi.cls == cls and q.mutation == "none"])

    spans = {c: len({(q.span.file, q.span.start) for q, mi in zip(run.queries, run.info) if mi.cls == c})
             for c in ("regular", "carried")}
    writers = {w for st in run.replay.files.values() for w in st.writer if w}
    sm: dict[str, Any] = {"sessions": len(run.sessions), "writers": len(writers),
                          "regular": spans["regular"], "carried": spans["carried"]}
    for m in MULTI_MUTATIONS:
        sm[f"reg_{MULTI_LABELS[m]}"] = r1("regular", (m,))
    sm["reg_all"] = r1("regular")
    sm["car_all"] = r1("carried")
    for m in MULTI_MUTATIONS:
        sm[f"car_{MULTI_LABELS[m]}"] = r1("carried", (m,))
    sm["R@3"] = _mean([o.r3 for o in outs])
    sm["prec"] = _mean([o.prec for o in outs if o.prec is not None])
    for h in ("claude", "codex"):
        sm[f"reg_{h}"] = r1("regular", h=h)
        sm[f"car_{h}"] = r1("carried", h=h)
    for c in ("regular", "carried"):
        sm[f"blame_{c}"] = ref("blame", c)
        sm[f"bwmc_{c}"] = ref("blame_wmc", c)
        sm[f"grep_{c}"] = _mean([q.grep_r1 for q, mi in zip(run.queries, run.info) if mi.cls == c and q.mutation == "none"])
    return sm


def multi_verdict(sm: dict[str, Any]) -> str:
    checks = [(f"reg_{MULTI_LABELS[m]}", 0.95) for m in MULTI_MUTATIONS] + [("car_all", 0.90), ("prec", 0.90)]
    return "  ".join(f"{k}>={t}:{'ok' if sm[k] >= t else ('n/a' if sm[k] != sm[k] else 'MISS')}" for k, t in checks)


def fmt_multi_summary(name: str, sm: dict[str, Any]) -> str:
    """The one line run_multi.sh greps for."""
    def f(x: float) -> str:
        return "n/a" if x != x else f"{x:.3f}"

    return (f"MULTI {name}: sessions={sm['sessions']} writers={sm['writers']} spans={sm['regular']}/{sm['carried']} "
            f"R@1reg plain/shift/reindent/ren20={'/'.join(f(sm[f'reg_{MULTI_LABELS[m]}']) for m in MULTI_MUTATIONS)} "
            f"R@1car={f(sm['car_all'])} R@3={f(sm['R@3'])} prec={f(sm['prec'])} "
            f"cc/codex reg={f(sm['reg_claude'])}/{f(sm['reg_codex'])} car={f(sm['car_claude'])}/{f(sm['car_codex'])} "
            f"blame reg/car={f(sm['blame_regular'])}/{f(sm['blame_carried'])} "
            f"b-wMC={f(sm['bwmc_regular'])}/{f(sm['bwmc_carried'])} grep={f(sm['grep_regular'])}/{f(sm['grep_carried'])}")


def run_multi(args: argparse.Namespace, work: Path) -> None:
    """`--multi`: prepare, ingest every session into one store, explain every query, report."""
    if args.sessions is None:
        raise SystemExit("--multi needs --sessions DIR")
    here = str((work / "repo").resolve())  # `{repo}` in --map and --root: the test repository
    maps = [(a.replace("{repo}", here), b.replace("{repo}", here)) for a, b in args.maps]
    run = prepare_multi(work, args.spans_per_size, args.seed, args.sessions, args.history, maps,
                        args.tree_with_reads, args.root.replace("{repo}", here) if args.root else None)
    store = engram_env(run.repo, [work / "transcripts", *args.distractors], maps)
    db, npost, secs = build_index(store, args.k, args.w)
    spans = read_spans(run.repo, run.queries)
    sids: list[list[str]] = []
    t0 = time.perf_counter()
    outs, evid = run_engram(store, db, spans, run.queries, run.truth, args.k, args.w, sids)
    qs = (time.perf_counter() - t0) / len(run.queries)
    if args.dump_misses:
        dump_misses(args.dump_misses, store, db, spans, run, outs, args.k, args.w)
    db.close()
    print(f"\nk={args.k} w={args.w}: index {npost} postings ({secs:.1f}s), explain + run {1000 * qs:.1f} ms/query")
    for line in _store_census(store, run):
        print(line)
    print(f"\nengram explain FILE:A-B --brief (default order) vs git blame, git blame -w -M -C and a line grep; "
          f"{MULTI_SIZE}-line spans of one writer; regular = no later session carried a line of it, carried = one did:")
    print(multi_tables(run, outs))
    sm, se = multi_summary(run, outs), multi_summary(run, evid)
    print(f"\nengram explain         : {multi_verdict(sm)}")
    print(f"engram --rank evidence : {multi_verdict(se)}  (R@1 regular {se['reg_all']:.3f}, carried "
          f"{se['car_all']:.3f}, prec {se['prec']:.3f})")
    known = set(run.harness)
    causes: Counter[tuple[str, str]] = Counter()
    for q, o, s, mi, t in zip(run.queries, outs, sids, run.info, run.truth):
        if not o.r1:
            causes[(mi.cls, _miss_cause(q, s, mi, t, known, run.labels))] += 1
    print("\nengram misses at rank 1 (span class, what came first):")
    for (c, why), k in sorted(causes.items(), key=lambda x: (x[0][0] != "regular", -x[1])):
        print(f"  {c:8} {why:72} x{k}")
    shown = 0
    for q, o, s, mi, t in zip(run.queries, outs, sids, run.info, run.truth):
        if not o.r1 and q.mutation == "none" and shown < args.examples:
            shown += 1
            rank = s.index(q.span.writer) + 1 if q.span.writer in s else None
            print(f"    e.g. {q.span.file}:{q.span.start}-{q.span.end} ({mi.cls}) writer {q.span.writer[:8]} "
                  f"{f'at rank {rank}' if rank else 'absent'}; first {s[0][:8] if s else '-'}"
                  f"{' (a carrier)' if s and s[0] in mi.carriers else ''}; returned {len(s)}")
    moved = [o for q, o in zip(run.queries, outs) if q.span.file in run.replay.moved]
    if moved:
        print(f"  spans in files a Codex move put in place: {len(moved)} queries, R@1 {_mean([o.r1 for o in moved]):.3f}")
    name = args.name or args.sessions.resolve().parent.name
    print("\n" + fmt_multi_summary(name, sm))


# --------------------------------------------------------------------------- main


def prepare(work: Path, spans_per_size: int, seed: int, source: Path | None = None, history: Path | None = None,
            tree_with_reads: bool = False) -> tuple[list[Session], Path, list[Query], list[set[str]]]:
    """Transcripts, ground truth, the test repository, the mutated queries and their references.

    With `source`, every session there that wrote a file is a writer; otherwise the two shipped
    spotter writers are. `tree_with_reads`: see `add_read_files`."""
    mains = prepare_transcripts(work / "transcripts", source)
    hist = History(history)
    copies = resumed_copies(mains)
    calls = codex_call_ids(mains)
    sessions = [load_session(p, hist, copies.get(p), calls) for p in mains]
    if source is None:
        writers = [s for s in sessions if s.sid in WRITERS]
        assert len(writers) == 2, [s.sid for s in sessions]
    else:
        writers = [s for s in sessions if s.final]
        if not writers:
            raise SystemExit(f"{source}: no session there wrote a file (Write/Edit results) to take spans from")
    print(f"{len(sessions)} sessions, {len(writers)} wrote code: " +
          ", ".join(f"{s.sid[:8]} ({len(s.final)} files)" for s in writers))
    from engram.cli.demo import final_files
    for s in writers:  # the replay of Claude Code sessions must agree with engram.cli.demo.final_files
        if s.harness != "claude":
            continue  # engram.cli.demo replays Claude Code sessions only
        # (the replay ends every file with a newline; a Write may not: entireio/skills' waiting.html)
        ff = {r: t if t.endswith("\n") or not t else t + "\n"
              for p, t in final_files(s.files[0]).items() if (r := _rel(s.cwd, p))}
        if copies.get(s.files[0]):  # a resumed session: only the files it wrote itself are its own
            ff = {r: t for r, t in ff.items() if r in s.final}
        assert ff == s.final, (s.sid, set(ff) ^ set(s.final),
                               [r for r in ff if ff[r] != s.final.get(r)])
    repo = work / "repo"
    base, owner = build_repo(repo, writers)
    rng = random.Random(seed)
    spans: dict[int, list[SpanRef]] = {}
    for n in SIZES:
        cands = eligible_spans(owner, repo, n)
        spans[n] = sample_spans(cands, spans_per_size, rng)
        by = Counter(s.writer[:8] for s in spans[n])
        print(f"{n:2}-line spans: {len(cands)} eligible windows, sampled {len(spans[n])} ({dict(by)})")
    if not any(spans.values()):  # computermode/test-repo: one session that wrote a two-line file
        raise SystemExit(f"{source or 'the shipped sessions'}: no {min(SIZES)}-line span of agent-written "
                         "code in the final files to query")
    queries: list[Query] = []
    truth: list[set[str]] = []
    for n in SIZES:
        for si, sp in enumerate(spans[n]):
            repo_lines = (repo / sp.file).read_text(encoding="utf-8").splitlines()
            t = touched_sessions(sessions, sp, repo_lines)
            for m in MUTATIONS:
                qrng = random.Random(f"{seed}/{n}/{si}/{m}")
                queries.append(mutate(sp, n, m, repo, qrng, len(queries)))
                truth.append(t)
    t0 = time.perf_counter()
    run_blame(repo, base, queries)
    run_grep(sessions, queries)
    print(f"{len(queries)} queries ({len(MUTATIONS)} mutations); git blame and grep references in "
          f"{time.perf_counter() - t0:.1f}s")
    multi = Counter(len(t) for t in truth[:: len(MUTATIONS)])
    print(f"sessions that touched a span (writer included): {dict(sorted(multi.items()))}")
    if tree_with_reads:
        print(f"working tree: {add_read_files(repo, sessions)} files the sessions only read added (untracked)")
    return sessions, repo, queries, truth


def add_read_files(repo: Path, sessions: list[Session]) -> int:
    """Put each file the sessions read but none wrote into the working tree, untracked, holding
    the lines the transcripts showed of it (unordered; no span is taken from it). The test
    repository otherwise holds only written files, while the project's tree holds the files its
    sessions read too, and explain weighs a match in another file by whether that file is still
    in the tree (`own_file_first`). Added after the references ran, so git blame never sees them."""
    added = 0
    for s in sessions:
        for rel, lines in s.touched.items():
            parts = Path(rel).parts
            if not rel or Path(rel).is_absolute() or ".." in parts or parts[0] == ".git":
                continue
            p = repo / rel
            if p.exists() or p.is_symlink():
                continue
            try:
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text("\n".join(sorted(x for x in lines if x)) + "\n", encoding="utf-8")
            except OSError:  # a path that is a directory here, or a name this file system refuses
                continue
            added += 1
    return added


def _pair(text: str) -> tuple[str, str]:
    src, sep, dst = text.partition("=")
    if not sep or not src or not dst:
        raise argparse.ArgumentTypeError(f"expected FROM=TO, got {text!r}")
    return src, dst


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    from engram.anchor import DEFAULT_K, DEFAULT_W

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spans-per-size", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--k", type=int, default=DEFAULT_K, help=f"tokens per k-gram (default {DEFAULT_K})")
    ap.add_argument("--w", type=int, default=DEFAULT_W, help=f"winnowing window (default {DEFAULT_W})")
    ap.add_argument("--sweep", action="store_true", help="also score every (k, w) of --sweep-k x --sweep-w")
    ap.add_argument("--sweep-k", type=_ints, default=list(SWEEP_K), metavar="K,K,..", help="default: %(default)s")
    ap.add_argument("--sweep-w", type=_ints, default=list(SWEEP_W), metavar="W,W,..", help="default: %(default)s")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="sweep settings run in parallel")
    ap.add_argument("--distractors", type=Path, action="append", default=[], metavar="DIR",
                    help="more transcripts to ingest as distractors (e.g. bench/data/c100m from gen_sessions.py); "
                         "not searched by the grep reference")
    ap.add_argument("--sessions", type=Path, metavar="DIR",
                    help="take the ground truth from the Claude Code sessions and Codex rollouts under DIR instead of the shipped "
                         "fixtures: every session there that wrote a file is a writer, the rest are distractors")
    ap.add_argument("--history", type=Path, metavar="GIT_DIR",
                    help="the project's git repository (or bare git directory): gives a Codex session's first "
                         "update of a file it did not create its original, so those files count as written too")
    ap.add_argument("--map", action="append", default=[], metavar="FROM=TO", dest="maps", type=_pair,
                    help="as `engram ingest --map`: session paths under FROM are read as under TO (e.g. a worktree "
                         "the sessions used that no longer exists, as on the user's machine after it was removed)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", dest="overrides",
                    help="override a constant of engram.query.ranking (the rules explain applies) for this run, "
                         "e.g. WEAK_EVIDENCE=0.4 (what-if runs without editing engram/; a constant another module "
                         "imported by name keeps its value there)")
    ap.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (default: a temporary directory)")
    ap.add_argument("--tree-with-reads", action="store_true",
                    help="also put the files the sessions only read into the test working tree (as in the "
                         "project's own tree; by default it holds the written files only)")
    ap.add_argument("--multi", action="store_true",
                    help="multi-session mode: every session under --sessions replayed together in time order; "
                         "writer = the session that last changed a line, carriers = later sessions whose edit covered "
                         "it unchanged; 5-line spans of one writer, regular and carried reported apart, by harness "
                         "(--spans-per-size is then the number of spans per class)")
    ap.add_argument("--root", metavar="PATH",
                    help="--multi: the project's root as the sessions recorded it (after --map; default: the cwd "
                         "most edits were made from); `{repo}` in --root and in --map's TO is the test repository, "
                         "so sessions from several machines or a home-directory cwd can be mapped onto it")
    ap.add_argument("--examples", type=int, default=8, metavar="N",
                    help="--multi: list N unmutated spans whose writer is not first (default %(default)s)")
    ap.add_argument("--dump-misses", type=Path, metavar="FILE",
                    help="--multi: write each query whose writer is not first as a JSON line (span, mutation, "
                         "writer, carriers, the sessions returned with their fragments, the --debug ranking notes)")
    ap.add_argument("--name", help="the set's name on --multi's summary line (default: the folder holding --sessions)")
    ap.add_argument("--extract-entire", nargs=2, type=Path, metavar=("GIT_DIR", "OUT"),
                    help="write the Claude Code sessions and Codex rollouts an Entire CLI checkpoint history holds "
                         "(entire/checkpoints/v1, or refs/entire/checkpoints/*) to OUT/<session id>.jsonl, and stop")
    ap.add_argument("--extract-history", nargs="+", metavar=("GIT_DIR OUT", "PREFIX"),
                    help="write the newest version of every .jsonl ever committed under each PREFIX (any branch) "
                         "to OUT, and stop (sessions a repository keeps beside its code)")
    args = ap.parse_args(argv)
    if args.extract_history:
        from common import history_jsonl

        if len(args.extract_history) < 3:
            ap.error("--extract-history GIT_DIR OUT PREFIX [PREFIX ...]")
        git_dir, out, *prefixes = args.extract_history
        n, gone = history_jsonl(Path(git_dir), Path(out), prefixes)
        print(f"{out}: {n} .jsonl files written; {gone} absent from the clone")
        return 0
    if args.extract_entire:
        from common import entire_sessions

        res = entire_sessions(*args.extract_entire)
        print(f"{args.extract_entire[1]}: {len(res.sessions)} sessions ({dict(Counter(res.sessions.values()))}) "
              f"from {res.pieces} full.jsonl versions; left out: {res.skipped or 'none'}")
        return 0
    import engram.query.ranking as rules

    for item in args.overrides:
        name, _, value = item.partition("=")
        if not hasattr(rules, name):
            ap.error(f"--set {item}: engram.query.ranking has no {name}")
        setattr(rules, name, type(getattr(rules, name))(value))
        print(f"override: engram.query.ranking.{name} = {getattr(rules, name)!r}")
    t_start = time.perf_counter()
    try:
        import engram  # the engram measured is the one imported (PYTHONPATH), not necessarily this script's checkout

        print(f"engram at {checkout_state(Path(engram.__file__).resolve().parent)} ({Path(engram.__file__).parent})")
    except OSError:
        pass
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="engram-provenance-"))
    if args.keep and work.exists():
        shutil.rmtree(work)
    try:
        if args.multi:
            run_multi(args, work)
            print(f"\ntotal {time.perf_counter() - t_start:.0f}s")
            return 0
        sessions, repo, queries, truth = prepare(work, args.spans_per_size, args.seed, args.sessions, args.history,
                                                  args.tree_with_reads)
        store = engram_env(repo, [work / "transcripts", *args.distractors], args.maps)
        db, npost, secs = build_index(store, args.k, args.w)
        spans = read_spans(repo, queries)
        t0 = time.perf_counter()
        outs, evid = run_engram(store, db, spans, queries, truth, args.k, args.w)
        qs = (time.perf_counter() - t0) / len(queries)
        few = _mean([float(len(TOKEN.findall(q.text)) < args.k + args.w - 1) for q in queries if q.mutation == "none"])
        print(f"\nk={args.k} w={args.w}: index {npost} postings ({secs:.1f}s), explain + run {1000 * qs:.1f} ms/query; "
              f"{few:.1%} of spans have fewer than k+w-1={args.k + args.w - 1} tokens\n")
        print("engram explain (as shipped) vs git blame, git blame -w -M -C and a line grep of the transcripts:")
        print(table(queries, outs))
        print(f"\n{SUMMARY_HELP}")
        sm, se = summary(queries, outs), summary(queries, evid)
        print(f"engram explain         : {fmt_summary(sm)}\n                         {verdict(sm)}")
        print(f"engram --rank evidence : {fmt_summary(se)}\n                         {verdict(se)}")
        print("\nper writing session (shipped = one of the two sessions in tests/fixtures, which k, w and the "
              "rules were tuned on):\n" + by_writer(queries, outs))
        print("\nengram misses at rank 1 (mutation, span size, cause):\n" + failures(queries, outs))
        print("\nengram --rank evidence, on the same explain evidence:")
        print(compact_table(queries, evid))
        db.close()
        if args.sweep:
            sweep(work, store, spans, queries, truth, args.sweep_k, args.sweep_w, args.jobs)
        print(f"\ntotal {time.perf_counter() - t_start:.0f}s")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
