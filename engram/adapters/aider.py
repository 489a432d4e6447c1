"""Aider chat histories: `.aider.chat.history.md`, which aider appends to in the root of the
repository it runs in (`--chat-history-file`, `AIDER_CHAT_HISTORY_FILE`) and which many
projects commit.

The file is markdown, one run of aider after another, each opened by `# aider chat started at
YYYY-MM-DD HH:MM:SS` (local time, no zone): one session per run. Within a run, `#### ` lines are
the user's words, `> ` lines aider's own output (a multi-line message, such as a failed edit's
report, carries `> ` on its first line only and ends at the first line ending in two spaces),
and everything else the model's replies, whose edits are text: SEARCH/REPLACE blocks (`diff`,
`diff-fenced`, `editor-diff`), whole files in a fence under their name (`whole`,
`editor-whole`) or fenced unified diffs (`udiff`).

What aider did with a reply follows it in its output: `Applied edit to F` for each file it wrote,
a report naming every SEARCH block that failed to match (the reply's other blocks were written),
and `Commit <hash> <message>` for the commit it made of them (a commit after `Committing F before
applying edits.` holds the user's changes, not the reply's). Only blocks aider applied become
code.edits. Blocks carry no line numbers: each is placed by its text in the file as it was, which
is the file in the parent of the reply's commit when this repository has it, else this
session's own copy after its earlier edits, else the newest commit before the session started
(`placed`: git history) or the working tree (`placed`: working tree). A block that none of these
holds is recorded without line ranges, never placed by guess. The history keeps no time per
message and not the text of the files added to the chat: edits take their commit's time when
the repository has the commit, and the meta's `unkept` says what is missing.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from engram.adapters.base import Capture, PathMapper, SourceSpan
from engram.adapters.unified import (
    Change,
    context_fields,
    edit_ranges,
    join_lines,
    split_lines,
)
from engram.gitread import git_output
from engram.tape import events as E
from engram.words import plural

log = logging.getLogger(__name__)

HARNESS: Final = "aider"
HISTORY_NAME: Final = ".aider.chat.history.md"
HEADER_RE: Final = re.compile(r"^# aider chat started at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s*$")
# What the history never keeps (shown by `engram show` and the ingest summary).
UNKEPT: Final = ("message times (a run's start only; edits take their commit's time)",
                 "the text of files added to the chat (no reads)")

_SEARCH = re.compile(r"^<{5,9} SEARCH>?\s*$")
_DIVIDER = re.compile(r"^={5,9}\s*$")
_REPLACE = re.compile(r"^>{5,9} REPLACE\s*$")
# aider fences a file with backquotes, or, when its text holds them, with one of these tags
_FENCE = re.compile(r"^(`{3,}|~{3,}|<(?:source|code|pre|codeblock|sourcecode)>)")
_APPLIED = re.compile(r"^Applied edit to (.+?)\s*$")
_COMMIT = re.compile(r"^Commit ([0-9a-f]{7,40}) (.*)$")
_DIRTY = re.compile(r"^Committing .* before applying edits\.?\s*$")
_FAILED_IN = re.compile(r"^## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in (.+?)\s*$")
_MODEL = re.compile(r"^(?:Main )?[Mm]odel: (\S+) with ([\w-]+) edit format")
_VERSION = re.compile(r"^Aider v(\S+)")
_UNDONE = re.compile(r"^Removed: ([0-9a-f]{7,40}) ")
_REASONING = re.compile(r"<(thinking-content-[0-9a-f]+|think)>.*?</\1>", re.DOTALL)
_REASONING_END = re.compile(r"</(?:thinking-content-[0-9a-f]+|think)>")
_UDIFF_FAIL = re.compile(r"^# \d+ hunks? failed|UnifiedDiffNo(?:Match|tUnique)")

# Where a block was placed when the file it changed is not known exactly (a code.edit's `placed`).
HISTORY: Final = "git history"
TREE: Final = "working tree"
AFTER_UNPLACED: Final = "after an edit that could not be placed"


def is_history(head: bytes) -> bool:
    """Whether a file starts as an aider chat history does (its first non-empty line)."""
    for raw in head.split(b"\n", 8)[:8]:
        if raw.strip():
            return HEADER_RE.match(raw.decode("utf-8", "replace").strip()) is not None
    return False


def runs(path: Path) -> list[tuple[int, str]]:
    """(byte offset, start time) of every run in the history that holds a message: one session
    each. Runs that were started and left without a word are not sessions."""
    data = path.read_bytes()
    out: list[tuple[int, str]] = []
    spoke: list[bool] = []
    offset = 0
    for raw in data.splitlines(keepends=True):
        m = HEADER_RE.match(raw.decode("utf-8", "replace").rstrip("\n"))
        if m:
            out.append((offset, m.group(1)))
            spoke.append(False)
        elif out and raw.startswith(b"#### ") and raw.rstrip(b"\r\n").endswith(b"  "):
            spoke[-1] = True
        offset += len(raw)
    return [run for run, said in zip(out, spoke) if said]


@dataclass
class Segment:
    """A stretch of one run: the user's words ("user"), a reply ("reply") or aider's output ("tool")."""

    kind: str
    offset: int  # byte offset of its first line in the file
    lines: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.lines).strip("\n")


def segments(lines: list[tuple[int, str]]) -> list[Segment]:
    """A run's lines (offset, text without newline) as user, reply and tool segments."""
    out: list[Segment] = []
    open_tool = False  # inside a multi-line message of aider's (only its first line has `> `)
    fenced = False  # inside a fence the reply opened: a `>` line there is code (JSX, a quote)
    for offset, line in lines:
        if open_tool:
            out[-1].lines.append(line)
            open_tool = not line.endswith("  ")
            continue
        fenced = fenced and out[-1].kind == "reply"
        if fenced and line.startswith(">") and not line.endswith("  ") and out[-1].lines[-1].strip():
            out[-1].lines.append(line)  # (aider's own lines end in a line break, `  `, after a blank line)
            continue
        if line.startswith("#### ") and line.endswith("  "):  # (a reply's own `#### ` heading has no line break)
            kind, body = "user", line[5:].rstrip()
        elif line.startswith("> ") or line == ">":
            kind, body = "tool", line[2:]
            open_tool = bool(body.strip()) and not body.endswith("  ")
            body = body.rstrip()
        elif not line.strip() and (not out or out[-1].kind != "reply"):
            if out and out[-1].kind != "gap":
                out.append(Segment("gap", offset))  # a blank line ends a message: the next is another
            continue
        else:
            kind, body = "reply", line
            fenced = fenced != bool(_FENCE.match(line))
        if out and out[-1].kind == kind:
            out[-1].lines.append(body)
        else:
            out.append(Segment(kind, offset, [body]))
    return [s for s in out if s.text.strip()]


# ---------------------------------------------------------------- the edits a reply holds


@dataclass
class Block:
    """One edit of a reply: a SEARCH/REPLACE pair, a unified diff hunk, or a whole file."""

    path: str
    search: list[str] | None  # None: the whole file (`after` is its text)
    after: list[str]
    kind: str  # "search/replace", "udiff" or "whole"


def _strip_name(line: str) -> str:
    """A file name as aider reads it from the line before a block (`**src/x.py**:`, `# x.py`)."""
    name = line.strip()
    m = _FENCE.match(name)
    if m:
        rest = name[len(m.group(1)):].strip()
        return rest if ("." in rest or "/" in rest) and " " not in rest else ""
    return name.rstrip(":").lstrip("#").strip().strip("`").strip("*").strip()


def search_replace_blocks(text: str) -> list[Block]:
    """The SEARCH/REPLACE blocks of a reply, each with the file named before it (up to three
    lines back, through fence lines; else the previous block's file), as aider finds them."""
    lines = text.split("\n")
    out: list[Block] = []
    current = ""
    i = 0
    while i < len(lines):
        if not _SEARCH.match(lines[i].strip()):
            i += 1
            continue
        name = ""
        for back in reversed(lines[max(0, i - 3):i]):
            candidate = _strip_name(back)
            if candidate and candidate != "..." and not _REPLACE.match(back.strip()):
                name = candidate
                break
            if not _FENCE.match(back.strip()):
                break
        current = name or current
        j = i + 1
        while j < len(lines) and not _DIVIDER.match(lines[j].strip()):
            j += 1
        k = j + 1
        while k < len(lines) and not _REPLACE.match(lines[k].strip()):
            k += 1
        if k >= len(lines) or not current:
            break  # a block left open: aider rejects the reply's edits
        out.append(Block(current, lines[i + 1:j], lines[j + 1:k], "search/replace"))
        i = k + 1
    return out


def whole_blocks(text: str, files: frozenset[str] = frozenset()) -> list[Block]:
    """The files a reply writes in the `whole` edit format, as aider's WholeFileCoder reads them:
    every block that starts at a fence line (a line beginning with the run's fence), named by the
    line before it (stripped of `*`, a trailing `:`, backquotes and `#`, whatever is left: even a
    sentence, which aider then writes as a file); under a blank line, the file of `files` (those
    aider wrote) last named in backquotes, else the only file it wrote. A reply that ends inside a
    block still writes it (a truncated reply). Of several blocks of one file, the first named by
    its line wins, then one named in backquotes, then the only file's: aider writes that one."""
    lines = text.split("\n")
    found: list[tuple[Block, int]] = []  # (block, rank of its name's source: 0 line, 1 backquotes, 2 only file)
    saw = ""
    only = next(iter(files)) if len(files) == 1 else ""
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            saw = next((w for w in re.findall(r"`([^`\s]+)`", lines[i]) if w in files), saw)
            i += 1
            continue
        fence = m.group(1)
        ends = (fence[:3],) if fence[0] in "`~" else (fence, "</" + fence[1:])
        j = i + 1
        while j < len(lines) and not lines[j].startswith(ends):
            j += 1
        name, rank = _whole_name(lines[i - 1] if i > 0 else "", files), 0
        if not name:
            name, rank = (saw, 1) if saw else (only, 2)
        body = lines[i + 1:j] if j < len(lines) else _trailing(lines[i + 1:])
        if name:
            found.append((Block(name, None, body, "whole"), rank))
        i = j + 1
    out: list[Block] = []
    for rank in (0, 1, 2):
        for block, r in found:
            if r == rank and all(b.path != block.path for b in out):
                out.append(block)
    return out


def _whole_name(line: str, files: frozenset[str]) -> str:
    """The file name aider takes from the line before a `whole` block (its own clean-up, in its
    order); a name with a directory that is not one of `files` but whose base name is, the base
    name (aider drops a directory the model made up)."""
    name = line.strip().strip("*").rstrip(":").strip("`").lstrip("#").strip()
    if len(name) > 250:
        return ""
    if name and name not in files and os.path.basename(name) in files:
        return os.path.basename(name)
    return name


def _trailing(lines: list[str]) -> list[str]:
    """The lines of a block the reply ends inside, without the blank lines the history adds after it."""
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def udiff_blocks(text: str) -> list[Block]:
    """The hunks of a reply's fenced unified diffs (`udiff` edit format), each as a search
    (context and removed lines) and its replacement (context and added lines)."""
    out: list[Block] = []
    in_diff = False
    path = ""
    hunk: list[str] | None = None

    def close() -> None:
        if hunk is not None and path and any(ln[:1] in "+-" for ln in hunk):
            before = [ln[1:] for ln in hunk if ln[:1] in (" ", "-") or ln == ""]
            after = [ln[1:] for ln in hunk if ln[:1] in (" ", "+") or ln == ""]
            out.append(Block(path, before, after, "udiff"))

    for line in text.split("\n"):
        if not in_diff:
            in_diff = line.strip().startswith("```diff")
            path, hunk = "", None
            continue
        if line.strip().startswith("```"):
            close()
            in_diff, hunk = False, None
        elif line.startswith("--- "):
            close()
            hunk = None
        elif line.startswith("+++ "):
            path = line[4:].strip()
            path = path.removeprefix("b/")
            hunk = []
        elif line.startswith("@@"):
            close()
            hunk = []
        elif hunk is not None:
            hunk.append(line)
    return out


@dataclass
class Outcome:
    """What aider's output after a reply says became of its edits."""

    applied: list[str] = field(default_factory=list)  # files written, as aider names them
    failed: list[tuple[str, list[str]]] = field(default_factory=list)  # (file, SEARCH lines) that did not match
    partial: bool = False  # some blocks failed and the others were written
    nothing: bool = False  # the reply's edits were rejected whole (malformed blocks, a failed udiff)
    commit: str | None = None  # the commit aider made of the reply's edits
    created: list[str] = field(default_factory=list)


def outcome(tool: list[Segment]) -> Outcome:
    out = Outcome()
    dirty = False
    for seg in tool:
        lines = seg.lines
        for i, line in enumerate(lines):
            s = line.strip()
            if m := _APPLIED.match(s):
                out.applied.append(m.group(1))
            elif _DIRTY.match(s):
                dirty = True
            elif m := _COMMIT.match(s):
                if dirty:
                    dirty = False  # the user's changes, committed before the reply's
                elif out.commit is None:
                    out.commit = m.group(1)
            elif m := _FAILED_IN.match(s):
                out.failed.append((m.group(1), [x.rstrip() for x in _failed_search(lines[i + 1:])]))
            elif "SEARCH/REPLACE block" in s and "applied successfully" in s:
                out.partial = True
            elif _UDIFF_FAIL.search(s):
                out.nothing = True
            elif s.startswith("Create new file?") and i > 0:
                out.created.append(lines[i - 1].strip())
    return out


def _failed_search(lines: list[str]) -> list[str]:
    """The SEARCH lines of the failed block a report quotes (after its `## ...` line)."""
    if not lines or not _SEARCH.match(lines[0].strip()):
        return []
    out: list[str] = []
    for line in lines[1:]:
        if _DIVIDER.match(line.strip()):
            return out
        out.append(line)
    return []


def without_reasoning(reply: str) -> str:
    """A reply without the model's reasoning, which aider shows in the history (between
    `<thinking-content-…>` tags, or a reasoning model's own `<think>`) but takes out before it
    reads the edits: file listings the model drafted there are not written."""
    reply = _REASONING.sub("", reply)
    closing = _REASONING_END.search(reply)  # (a closing tag whose opening the reply lacks: all before it)
    return reply[closing.end():] if closing else reply


def applied_blocks(reply: str, fmt: str | None, res: Outcome) -> tuple[list[Block], int]:
    """The blocks of `reply` aider wrote, in order, and how many it reported as failed."""
    if res.nothing and not res.applied:
        return [], 0
    reply = without_reasoning(reply)
    if any(_SEARCH.match(ln.strip()) for ln in reply.split("\n")):
        blocks = search_replace_blocks(reply)
    elif "```diff" in reply and (fmt or "").endswith("udiff"):
        blocks = udiff_blocks(reply)
    else:
        named = {os.path.normpath(p) for p in res.applied}
        return [b for b in whole_blocks(reply, frozenset(res.applied)) if os.path.normpath(b.path) in named], 0
    failed = list(res.failed)
    applied = {os.path.normpath(p) for p in res.applied}
    kept: list[Block] = []
    n_failed = 0
    for b in blocks:
        search = [x.rstrip() for x in b.search or []]
        hit = next((f for f in failed if f[0] == b.path and f[1] == search), None)
        if hit is not None:
            failed.remove(hit)
            n_failed += 1
        elif os.path.normpath(b.path) in applied or res.partial:
            kept.append(b)
    return kept, n_failed


# ---------------------------------------------------------------- placing blocks in files


def locate(lines: list[str], search: list[str], replace: list[str]) -> tuple[int, int, list[str]] | None:
    """Where aider put a block in `lines`: (0-based start, lines replaced, the lines written).

    As aider matches: the SEARCH lines exactly, else ignoring trailing white space, else all
    shifted by one same indentation (the REPLACE lines then take that indentation too, as
    aider re-indents them), each tried again without a leading blank SEARCH line. An empty
    SEARCH appends to the file. None when nothing matches: aider reported such a block as failed,
    or matched it more loosely than this (its fuzzy matching), and it is not placed by guess."""
    if not search or not any(s.strip() for s in search):
        return len(lines), 0, replace
    tries = [search] + ([search[1:]] if len(search) > 2 and not search[0].strip() else [])
    for part in tries:
        n = len(part)
        for key in (lambda x: x, lambda x: x.rstrip()):
            want = [key(x) for x in part]
            keyed = [key(x) for x in lines]
            for i in range(len(lines) - n + 1):
                if keyed[i:i + n] == want:
                    return i, n, replace
        found = _reindented(lines, part, replace)
        if found is not None:
            return found
    return None


def _reindented(lines: list[str], part: list[str], replace: list[str]) -> tuple[int, int, list[str]] | None:
    """aider's match of a block whose lines all lack (or add) the same leading white space."""
    lead = [len(x) - len(x.lstrip()) for x in part + replace if x.strip()]
    cut = min(lead, default=0)
    part = [x[cut:] if x.strip() else x for x in part]
    replace = [x[cut:] if x.strip() else x for x in replace]
    n = len(part)
    for i in range(len(lines) - n + 1):
        window = lines[i:i + n]
        if any(w.lstrip() != p.lstrip() for w, p in zip(window, part)):
            continue
        adds = {w[:len(w) - len(p)] for w, p in zip(window, part) if w.strip()}
        if len(adds) == 1:
            add = adds.pop()
            return i, n, [add + x if x.strip() else x for x in replace]
    return None


def block_changes(start: int, old: list[str], new: list[str]) -> list[Change]:
    """The changed runs of one replacement at 0-based line `start`: lines it kept are not its writing."""
    ops = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    return [Change(start + i1 + 1, start + i2, start + j1 + 1, start + j2, tuple(old[i1:i2]), tuple(new[j1:j2]))
            for tag, i1, i2, j1, j2 in ops if tag != "equal"]


class GitFiles:
    """Files of this repository at a commit, by `git cat-file`; commit times; the newest commit
    before a moment. None wherever git or the commit is missing."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ok = (root / ".git").exists()
        self._cache: dict[tuple[str, ...], bytes | None] = {}

    def _git(self, *args: str) -> bytes | None:
        if not self.ok:
            return None
        if args not in self._cache:
            self._cache[args] = git_output(self.root, *args)
        return self._cache[args]

    def commit(self, short: str) -> str | None:
        out = self._git("rev-parse", "--verify", "--quiet", f"{short}^{{commit}}")
        return out.decode().strip() if out else None

    def parent(self, commit: str) -> str | None:
        out = self._git("rev-parse", "--verify", "--quiet", f"{commit}^")
        return out.decode().strip() if out else None

    def time(self, commit: str) -> str | None:
        out = self._git("show", "-s", "--format=%cI", commit)
        return out.decode().strip() if out else None

    def text(self, commit: str | None, rel: str) -> str | None:
        blob = self._git("cat-file", "blob", f"{commit}:{rel}") if commit else None
        return blob.decode("utf-8", "replace") if blob is not None else None

    def before(self, when: str) -> str | None:
        out = self._git("log", "-1", "--format=%H", f"--before={when}", "HEAD")
        return out.decode().strip() or None if out else None

    def after(self, when: str, rel: str) -> str | None:
        """The first commit made after `when` that changed `rel` (None: none has)."""
        out = self._git("log", "--reverse", "--format=%H", f"--since={when}", "HEAD", "--", rel)
        first = out.decode().split() if out else []
        return first[0] if first else None


# ---------------------------------------------------------------- the session


def session_id(started: str, path: Path) -> str:
    """A run's id: its start and the history file's name (a file holds many runs)."""
    digest = hashlib.sha256(f"{path.name}\0{started}".encode()).hexdigest()[:12]
    return f"aider-{started.replace(' ', 'T').replace(':', '').replace('-', '')}-{digest}"


def parse_history(sources: list[SourceSpan], mapper_for: Callable[[str | None], PathMapper], *,
                  max_line_bytes: int, repo_root: Path, run: str | None = None) -> Capture:
    """One run of the history (`run`: its start time as the header says; None: the first) as a capture."""
    src = sources[0]
    data = src.path.read_bytes()
    src.end = data.rfind(b"\n") + 1  # a last line still being written is left for the next capture
    lines, started = _run_lines(data[:src.end], run, max_line_bytes)
    cap = Capture(HARNESS, session_id(started or "", src.path), sources)
    if started is None:
        cap.skipped["no `# aider chat started at` header: not an aider chat history"] += 1
        return cap
    cwd = str(src.path.parent)
    cap.meta = {"harness_version": None, "cwd": cwd, "git_branch": None, "git_head": None, "model": None,
                "started": started.replace(" ", "T"), "unkept": list(UNKEPT)}
    _Run(cap, mapper_for(cwd), GitFiles(repo_root)).read(segments(lines))
    return cap


def _run_lines(data: bytes, run: str | None, max_line_bytes: int) -> tuple[list[tuple[int, str]], str | None]:
    """The lines (offset, text) of the run that started at `run`, and its start."""
    out: list[tuple[int, str]] = []
    started: str | None = None
    offset = 0
    for raw in data.splitlines(keepends=True):
        text = raw.decode("utf-8", "replace").rstrip("\r\n")
        m = HEADER_RE.match(text)
        if m:
            if started is not None:
                break
            if run is None or m.group(1) == run:
                started = m.group(1)
        elif started is not None:
            out.append((offset, text if len(raw) <= max_line_bytes else text[:max_line_bytes]))
        offset += len(raw)
    return out, started


class _Run:
    """One run's segments made events; its own copy of each file it edited."""

    def __init__(self, cap: Capture, mapper: PathMapper, git: GitFiles) -> None:
        self.cap = cap
        self.mapper = mapper
        self.git = git
        self.fmt: str | None = None
        self.files: dict[str, str | None] = {}  # this session's copy of each file it edited (None: unknown)
        self.placed: dict[str, str] = {}  # files whose copy was placed, not known exactly: where it came from
        self.start_commit: str | None = None
        self.undo: dict[str, dict[str, str | None]] = {}  # commit aider made -> its files as they were before

    def add(self, offset: int, ev: dict[str, Any]) -> None:
        self.cap.cursor = (0, offset)
        self.cap.add(ev)

    def read(self, segs: list[Segment]) -> None:
        for i, seg in enumerate(segs):
            if seg.kind == "user":
                self.add(seg.offset, {"kind": E.MSG_IN, "text": seg.text})
            elif seg.kind == "tool":
                self.tool(seg)
            else:
                self.add(seg.offset, {"kind": E.MSG_OUT, "text": seg.text, "block": "text"})
                tool = list(_following_tool(segs, i + 1))
                self.edits(seg, outcome(tool))

    def tool(self, seg: Segment) -> None:
        for line in seg.lines:
            if m := _MODEL.match(line.strip()):
                self.cap.meta["model"] = self.cap.meta.get("model") or m.group(1)
                self.fmt = m.group(2)
            elif line.strip().startswith("Editor model:") and (m := re.search(r"with ([\w-]+) edit format", line)):
                self.fmt = m.group(1)
            elif (m := _VERSION.match(line.strip())) and not self.cap.meta.get("harness_version"):
                self.cap.meta["harness_version"] = m.group(1)
            elif (m := _UNDONE.match(line.strip())) and m.group(1) in self.undo:
                self.files.update(self.undo.pop(m.group(1)))  # `/undo`: the files are back as they were
        failed = "failed to match" in seg.text or "did not conform" in seg.text
        self.add(seg.offset, {"kind": E.TOOL_RESULT, "call_id": None, "name": "aider", "is_error": failed,
                              "exit_code": None, "stdout": seg.text, "stderr": ""})

    def edits(self, reply: Segment, res: Outcome) -> None:
        blocks, failed = applied_blocks(reply.text, self.fmt, res)
        if failed:
            self.cap.ignored["edit block aider reported as failed"] += failed
        commit = self.git.commit(res.commit) if res.commit else None
        ts = self.git.time(commit) if commit else None
        base = self.git.parent(commit) if commit else None
        offset = _block_offset(reply)
        touched: dict[str, str] = {}
        loose: dict[str, list[Block]] = {}  # blocks aider matched more loosely than `locate`, by file
        for block in blocks:
            if "\\" in block.path and "/" not in block.path:  # aider on Windows names files so
                block.path = block.path.replace("\\", "/")
            rel = self.mapper.to_repo(block.path)
            if rel is None:
                self.cap.cursor = (0, offset)
                self.cap.drop(self.mapper.drop_reason(block.path))
                continue
            if rel not in touched:
                touched[rel] = block.path
                self.begin(rel, commit, base, block.path in res.created)
                if res.commit:
                    self.undo.setdefault(res.commit, {})[rel] = self.files.get(rel)
            if commit and not self.placeable(rel, block):
                loose.setdefault(rel, []).append(block)
                continue
            ev = self.edit(rel, block)
            if commit:
                ev.update(ts=ts, commit=commit)
            self.add(offset, ev)
        for rel, held in loose.items():
            for ev in self.from_commit(rel, held, commit or ""):
                self.add(offset, {**ev, "ts": ts, "commit": commit})
        if commit:  # what the reply's commit holds is the file as it now is, whatever our copy says
            for rel in touched:
                text = self.git.text(commit, rel)
                if text is not None:
                    self.files[rel] = text
                    self.placed.pop(rel, None)

    def begin(self, rel: str, commit: str | None, base: str | None, created: bool) -> None:
        """Our copy of `rel` before a reply's edits: the file in the parent of the reply's commit,
        else our copy, else the file in the newest commit before the session or on disk (placed)."""
        if commit:  # (a file its parent lacks is one the reply created)
            self.files[rel] = (self.git.text(base, rel) if base else None) or ""
            self.placed.pop(rel, None)
            return
        if rel in self.files:
            return
        if created:
            self.files[rel] = ""
            return
        if self.start_commit is None:
            self.start_commit = self.git.before(str(self.cap.meta.get("started") or "")) or ""
        text = self.git.text(self.start_commit, rel) if self.start_commit else None
        where = HISTORY
        if text is None:
            text, where = _on_disk(self.mapper.repo_root / rel), TREE
        self.files[rel] = text
        if text is not None:
            self.placed[rel] = where

    def edit(self, rel: str, block: Block) -> dict[str, Any]:
        """The code.edit of one applied block, placed in our copy of the file (which it updates)."""
        ev: dict[str, Any] = {"kind": E.CODE_EDIT, "file": rel, "tool": block.kind, "call_id": None}
        old = self.files.get(rel)
        if block.search is None:
            return self.whole(ev, rel, old, block.after)
        if old is None:
            return self.unplaced(ev, rel, block)
        lines = split_lines(old)
        found = locate(lines, block.search, block.after)
        if found is None:
            log.info("%s: a %s block matches nothing in the file as it was; recorded without ranges", rel, block.kind)
            return self.unplaced(ev, rel, block)
        at, n, written = found
        new = lines[:at] + written + lines[at + n:]
        changes = block_changes(at, lines[at:at + n], written)
        new_text = join_lines(new)
        self.files[rel] = new_text
        if not changes:
            ev.update(op="update", before_range=[at + 1, at], after_range=[at + 1, at], before_text="", after_text="")
        else:
            ev.update(op="create" if not old and not at else "update", **edit_ranges(changes, lines, new))
        ev.update(context_fields([(at + 1, written)]), file_before_sha=self.sha(rel, old),
                  file_after_sha=self.sha(rel, new_text))
        return self.where(ev, rel)

    def placeable(self, rel: str, block: Block) -> bool:
        """Whether `locate` finds the block in our copy of its file (a whole file always is)."""
        old = self.files.get(rel)
        return block.search is None or (old is not None and locate(split_lines(old), block.search, block.after) is not None)

    def from_commit(self, rel: str, held: list[Block], commit: str) -> list[dict[str, Any]]:
        """The blocks of a reply that aider applied but `locate` does not place (aider's looser
        matching: a udiff hunk split around lines it lacks, a SEARCH off by indentation or line
        breaks): what they changed is what is left between our copy, with the reply's other blocks
        applied, and the file in the reply's commit. One code.edit of that difference, its ranges
        exact; without the commit's file, each block without ranges, as when there is no commit."""
        target = self.git.text(commit, rel)
        if target is None:
            return [self.unplaced({"kind": E.CODE_EDIT, "file": rel, "tool": b.kind, "call_id": None}, rel, b)
                    for b in held]
        log.info("%s: %s aider matched loosely, placed by commit %s", rel, plural(len(held), "block"), commit[:12])
        ev = {"kind": E.CODE_EDIT, "file": rel, "tool": held[0].kind, "call_id": None}
        return [self.whole(ev, rel, self.files.get(rel) or "", split_lines(target))]

    def whole(self, ev: dict[str, Any], rel: str, old: str | None, after: list[str]) -> dict[str, Any]:
        new_text = join_lines(after)
        self.files[rel] = new_text
        if old is None:
            ev.update(op="update", before_range=None, after_range=None, before_text="", after_text=new_text,
                      file_before_sha=None, file_after_sha=None)
            return _hashed(ev)
        lines = split_lines(old)
        changes = block_changes(0, lines, after)
        if not changes:
            self.cap.ignored["edit that changed nothing"] += 1
            ev.update(op="update", before_range=[1, 0], after_range=[1, 0], before_text="", after_text="")
        else:
            ev.update(op="create" if not old else "update", **edit_ranges(changes, lines, after))
        ev.update(context_fields([(1, after)]), file_before_sha=self.sha(rel, old), file_after_sha=self.sha(rel, new_text))
        return self.where(ev, rel)

    def unplaced(self, ev: dict[str, Any], rel: str, block: Block) -> dict[str, Any]:
        """A block no known state of its file holds: its texts without ranges. Our copy stays as it
        was (aider may have rejected the block, or matched it more loosely than `locate`), and the
        file's later blocks are placed in it by their text, marked as placed, not known exactly."""
        if self.files.get(rel) is not None:
            self.placed[rel] = AFTER_UNPLACED
        ev.update(op="update", before_range=None, after_range=None, before_text=join_lines(block.search or []),
                  after_text=join_lines(block.after), file_before_sha=None, file_after_sha=None)
        return _hashed(ev)

    def sha(self, rel: str, text: str | None) -> str | None:
        return E.git_blob_sha(text) if text is not None and rel not in self.placed else None

    def where(self, ev: dict[str, Any], rel: str) -> dict[str, Any]:
        if rel in self.placed:
            ev["placed"] = self.placed[rel]
        return _hashed(ev)


def _following_tool(segs: list[Segment], start: int) -> Iterator[Segment]:
    """The tool segments right after a reply: aider's report of what it did with it."""
    for seg in segs[start:]:
        if seg.kind != "tool":
            return
        yield seg


def _block_offset(reply: Segment) -> int:
    return reply.offset


def _on_disk(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", "replace") if path.is_file() else None
    except OSError:
        return None


def _hashed(ev: dict[str, Any]) -> dict[str, Any]:
    ev["before_sha"] = E.sha256_text(ev.get("before_text") or "")
    ev["after_sha"] = E.sha256_text(ev.get("after_text") or "")
    return ev
