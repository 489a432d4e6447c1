"""Codex CLI's `apply_patch` format: parse the envelope, find it in tool calls, replay it on file text.

Codex edits files with a patch language of its own (`*** Begin Patch` … `*** End Patch`) whose
hunks carry no line numbers: the tool finds each hunk by its context lines. A rollout therefore
records *what* changed but not *where*. To index an edit by line range we replay the patch on
our own copy of the file, locating hunks exactly the way Codex does (`seek_sequence`: exact
match, then ignoring trailing whitespace, then ignoring surrounding whitespace, then with
typographic punctuation folded to ASCII). When a hunk cannot be placed we say so and the
caller records an unknown range rather than a guessed one.

The patch reaches the tool through several carriers, all handled here:
- the freeform `apply_patch` tool (`custom_tool_call.input`, a raw string);
- the JSON `apply_patch` function (`function_call.arguments` → `{"input": …}` or `{"patch": …}`);
- shell calls: `{"command": ["apply_patch", "<patch>"]}`, `["bash", "-lc", "apply_patch <<'EOF' …"]`,
  and string commands (`shell_command.command`, `exec_command.cmd`) holding such a heredoc,
  optionally preceded by `cd <dir> &&`.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from engram.adapters.sniff import BEGIN_PATCH
from engram.adapters.unified import Change, changes_from_tagged
from engram.words import whole_text

log = logging.getLogger(__name__)

END_PATCH: Final = "*** End Patch"
ADD_FILE: Final = "*** Add File: "
DELETE_FILE: Final = "*** Delete File: "
UPDATE_FILE: Final = "*** Update File: "
MOVE_TO: Final = "*** Move to: "
END_OF_FILE: Final = "*** End of File"
APPLY_PATCH_COMMANDS: Final = frozenset({"apply_patch", "applypatch"})
_SHELLS: Final = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
_HEREDOC_STARTS: Final = frozenset({"<<EOF", "<<'EOF'", '<<"EOF"'})

# `[cd DIR &&] apply_patch <<'TAG'\n BODY \nTAG` — the only shell shape Codex intercepts.
_HEREDOC_RE: Final = re.compile(
    r"""\A\s*
    (?:cd\s+(?P<cd>'[^']*'|"[^"]*"|[^\s;&|]+)\s*&&\s*)?
    (?:apply_patch|applypatch)\s*<<-?\s*(?P<q>['"]?)(?P<tag>[A-Za-z_][A-Za-z0-9_]*)(?P=q)[ \t]*\r?\n
    (?P<body>.*?)\r?\n[ \t]*(?P=tag)[ \t]*(?:\r?\n|\Z)""",
    re.DOTALL | re.VERBOSE,
)

OpKind = Literal["add", "delete", "update"]


class PatchError(ValueError):
    """The text is not a well-formed apply_patch envelope (Codex would have rejected it too)."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """One `@@` section: optional anchor lines, then context/removed/added lines in order."""

    anchors: tuple[str, ...]
    lines: tuple[tuple[str, str], ...]  # (tag, text) with tag in " ", "-", "+"
    end_of_file: bool = False

    @property
    def old_lines(self) -> list[str]:
        return [t for tag, t in self.lines if tag != "+"]

    @property
    def new_lines(self) -> list[str]:
        return [t for tag, t in self.lines if tag != "-"]


@dataclass(frozen=True, slots=True)
class FileOp:
    """One file section of a patch. `content` is the new file for an Add."""

    kind: OpKind
    path: str
    move_to: str | None = None
    content: str = ""
    chunks: tuple[Chunk, ...] = ()


@dataclass(frozen=True, slots=True)
class PatchCall:
    """A patch found in a tool call, with the directory its relative paths are taken from.

    `workdir` is the call's own `workdir` argument joined with a `cd DIR &&` prefix, as written
    (possibly relative: relative to the turn's cwd); None means the turn's cwd.
    """

    text: str
    ops: tuple[FileOp, ...]
    workdir: str | None = None


@dataclass(slots=True)
class Placement:
    """Where one chunk landed: its changed runs, 1-based, in the old and the new file, and the
    chunk's lines in the new file (context and added lines) from line `new_start` on."""

    chunk: int
    changes: list[Change] = field(default_factory=list)
    new_start: int = 0
    new_lines: list[str] = field(default_factory=list)


@dataclass(slots=True)
class UpdateResult:
    """The outcome of replaying an Update on known file text.

    On success `new_text` is the file Codex wrote and `changes` every changed run in file order
    (ranges in the old file and in the new file). On failure `new_text` is None and `error` says
    which chunk could not be located.
    """

    new_text: str | None
    changes: list[Change] = field(default_factory=list)
    placements: list[Placement] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.new_text is not None


# ---------------------------------------------------------------- parsing


def _split(text: str) -> list[str]:
    """Lines as Rust's `str::lines` gives them: split on LF, a CR before it dropped."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def parse_patch(text: str) -> list[FileOp]:
    """The file operations of an apply_patch envelope; PatchError when it is malformed.

    Lenient like Codex: markers may be padded with whitespace, the final newline may be
    missing, and the envelope may still be wrapped in the `<<'EOF'` … `EOF` heredoc lines a
    model sometimes passes verbatim as an argument.
    """
    lines = _split(text.strip())
    body = _envelope(lines)
    if body is None and len(lines) >= 4 and lines[0].strip() in _HEREDOC_STARTS and lines[-1].strip().endswith("EOF"):
        body = _envelope(lines[1:-1])
    if body is None:
        raise PatchError("the patch must start with '*** Begin Patch' and end with '*** End Patch'")
    ops: list[FileOp] = []
    i = 0
    while i < len(body):
        if not body[i].strip():
            i += 1
            continue
        op, i = _parse_op(body, i)
        ops.append(op)
    return ops


def _envelope(lines: list[str]) -> list[str] | None:
    if len(lines) >= 2 and lines[0].strip() == BEGIN_PATCH and lines[-1].strip() == END_PATCH:
        return lines[1:-1]
    return None


def _parse_op(lines: list[str], i: int) -> tuple[FileOp, int]:
    head = lines[i].strip()
    if head.startswith(ADD_FILE):
        path = head[len(ADD_FILE):].strip()
        i += 1
        content: list[str] = []
        while i < len(lines) and lines[i].startswith("+"):
            content.append(lines[i][1:] + "\n")
            i += 1
        return FileOp("add", path, content="".join(content)), i
    if head.startswith(DELETE_FILE):
        return FileOp("delete", head[len(DELETE_FILE):].strip()), i + 1
    if head.startswith(UPDATE_FILE):
        return _parse_update(lines, i + 1, head[len(UPDATE_FILE):].strip())
    raise PatchError(f"line {i + 2}: {head!r} is not '*** Add File:', '*** Delete File:' or '*** Update File:'")


def _parse_update(lines: list[str], i: int, path: str) -> tuple[FileOp, int]:
    move_to = None
    if i < len(lines) and lines[i].strip().startswith(MOVE_TO):
        move_to = lines[i].strip()[len(MOVE_TO):].strip()
        i += 1
    chunks: list[Chunk] = []
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1  # blank lines between hunks
            continue
        if line.startswith("*"):
            break
        chunk, i = _parse_chunk(lines, i, first=not chunks)
        chunks.append(chunk)
    if not chunks and move_to is None:
        raise PatchError(f"update of {path!r} has no hunks")
    return FileOp("update", path, move_to=move_to, chunks=tuple(chunks)), i


def _anchor(line: str) -> str | None:
    """The header text of an `@@` line ('' for a bare `@@`), None for any other line."""
    if line.strip() == "@@":
        return ""
    if line.startswith("@@ "):
        return line[3:]
    return None


def _parse_chunk(lines: list[str], i: int, *, first: bool) -> tuple[Chunk, int]:
    anchors: list[str] = []
    marked = False
    while i < len(lines) and (a := _anchor(lines[i])) is not None:
        marked = True
        if a:
            anchors.append(a)  # `@@ header` lines may repeat to narrow the search step by step
        i += 1
    if not marked and not first:
        raise PatchError(f"expected '@@' before {lines[i]!r}")
    body: list[tuple[str, str]] = []
    eof = False
    while i < len(lines):
        line = lines[i]
        if line.strip() == END_OF_FILE:
            eof = True
            i += 1
            break
        if line == "":
            body.append((" ", ""))  # an empty line is an empty context line
        elif line[0] in " -+":
            body.append((line[0], line[1:]))
        else:
            break  # the next `@@` or `***` marker
        i += 1
    if not body:
        raise PatchError("hunk without lines")
    return Chunk(tuple(anchors), tuple(body), eof), i


def patch_text(text: str) -> str:
    """`text` with an apply_patch envelope in it rewritten as the code it carries, without the
    patch's markers: each file's path, then per hunk its old lines and its new lines (the
    old_string and new_string of a Claude Code Edit); an added file's content. Text without an
    envelope, or with one Codex would reject, comes back unchanged.

    Why: the envelope prefixes every line with `+`, `-` or a space, so each k-gram that crosses
    a line holds a marker the code never has, and the call's fingerprints mostly miss the code
    it wrote (a Claude Code Edit call holds it verbatim)."""
    start = text.find(BEGIN_PATCH)
    if start < 0:
        return text
    end = text.rfind(END_PATCH)
    if end < start:
        return text
    end += len(END_PATCH)
    try:
        ops = parse_patch(text[start:end])
    except PatchError:
        return text
    out: list[str] = []
    for op in ops:
        out.append(op.path if op.move_to is None else f"{op.path}\n{op.move_to}")
        if op.kind == "add":
            out.append(op.content)
        for chunk in op.chunks:
            out += [*chunk.anchors, *chunk.old_lines, *chunk.new_lines]
    return "\n".join([text[:start], *out, text[end:]])


# ---------------------------------------------------------------- carriers


def _load_json(text: str) -> Any:
    try:
        return whole_text(json.loads(text))
    except (ValueError, TypeError, RecursionError):
        return None


def _try_parse(text: str, workdir: str | None) -> PatchCall | None:
    if BEGIN_PATCH not in text:
        return None
    try:
        return PatchCall(text, tuple(parse_patch(text)), workdir)
    except PatchError as exc:
        log.debug("unparseable apply_patch body: %s", exc)
        return None


def _join_dir(base: str | None, sub: str | None) -> str | None:
    if not sub:
        return base
    if not base:
        return sub
    return posixpath.join(base, sub)


def heredoc_patch(script: str) -> tuple[str, str | None] | None:
    """`(patch text, cd dir)` from a shell script `[cd DIR &&] apply_patch <<'EOF' … EOF`."""
    m = _HEREDOC_RE.match(script)
    if m is None:
        return None
    cd = m.group("cd")
    if cd and cd[0] in "'\"":
        cd = cd[1:-1]
    return m.group("body"), cd


def shell_script(argv: list[Any]) -> str | None:
    """The script of `[bash|sh|zsh] -lc|-c SCRIPT` (path-qualified shells too), else None."""
    if len(argv) == 3 and all(isinstance(a, str) for a in argv):
        shell, flag, script = argv
        if posixpath.basename(shell) in _SHELLS and flag in ("-lc", "-c", "-ic"):
            return script
    return None


def patch_from_argv(argv: list[Any], workdir: str | None = None) -> PatchCall | None:
    """A patch in a command vector: `["apply_patch", PATCH]` or a shell running a heredoc."""
    if len(argv) == 2 and argv[0] in APPLY_PATCH_COMMANDS and isinstance(argv[1], str):
        return _try_parse(argv[1], workdir)
    script = shell_script(argv)
    if script is not None:
        return patch_from_script(script, workdir)
    return None


def patch_from_script(script: str, workdir: str | None = None) -> PatchCall | None:
    """A patch in a shell command string (shell_command / exec_command)."""
    found = heredoc_patch(script)
    if found is None:
        return None
    body, cd = found
    return _try_parse(body, _join_dir(workdir, cd))


def patch_from_function(name: str, args: Any) -> PatchCall | None:
    """A patch in a JSON function call's parsed arguments, whatever the tool's name."""
    if not isinstance(args, dict):
        return None
    workdir = args.get("workdir") if isinstance(args.get("workdir"), str) else None
    if name in APPLY_PATCH_COMMANDS:
        for key in ("input", "patch"):
            if isinstance(args.get(key), str):
                return _try_parse(args[key], workdir)
    cmd = args.get("command")
    if cmd is None:
        cmd = args.get("cmd")
    if isinstance(cmd, list):
        return patch_from_argv(cmd, workdir)
    if isinstance(cmd, str):
        return patch_from_script(cmd, workdir)
    return None


def patch_from_custom(name: str, raw: str) -> PatchCall | None:
    """A patch in a freeform tool's raw input (Codex's `apply_patch` custom tool)."""
    if not isinstance(raw, str):
        return None
    if name in APPLY_PATCH_COMMANDS or raw.lstrip().startswith(("*** Begin Patch", "<<")):
        return _try_parse(raw, None)
    args = _load_json(raw) if raw.lstrip().startswith("{") else None
    return patch_from_function(name, args) if isinstance(args, dict) else None


_RUNS_APPLY_PATCH: Final = re.compile(r"\A\s*(?:cd\s+\S+\s*&&\s*)?(?:apply_patch|applypatch)\b")


def patch_attempt(name: str, payload: Any) -> bool:
    """Whether a call that holds no readable patch was meant to apply one: the `apply_patch` tool
    by name, a command vector starting with it, or a shell script running it (`[cd DIR &&]
    apply_patch …`). Such a call's edits are lost when it succeeded (a transcript exported with
    its patches redacted, a patch cut short): counted, not silently dropped."""
    if name in APPLY_PATCH_COMMANDS:
        return True
    if isinstance(payload, str):
        payload = _load_json(payload) if payload.lstrip().startswith("{") else payload
        if isinstance(payload, str):
            return payload.lstrip().startswith(BEGIN_PATCH)
    if not isinstance(payload, dict):
        return False
    cmd = payload.get("command") if payload.get("command") is not None else payload.get("cmd")
    if isinstance(cmd, list) and cmd:
        script = shell_script(cmd)
        return (cmd[0] in APPLY_PATCH_COMMANDS) if script is None else bool(_RUNS_APPLY_PATCH.match(script))
    return isinstance(cmd, str) and bool(_RUNS_APPLY_PATCH.match(cmd))


# ---------------------------------------------------------------- replaying an Update


_PUNCT = str.maketrans({
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
    **dict.fromkeys("\u2018\u2019\u201a\u201b", "'"),
    **dict.fromkeys("\u201c\u201d\u201e\u201f", '"'),
    **dict.fromkeys("\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000", " "),
})

_PASSES = (
    str.rstrip,
    str.strip,
    lambda s: s.strip().translate(_PUNCT),
)


def seek_sequence(lines: list[str], pattern: list[str], start: int, eof: bool) -> int | None:
    """Where `pattern` occurs in `lines` at or after `start`, Codex's way (0-based index or None).

    Passes of decreasing strictness — exact, trailing whitespace ignored, surrounding
    whitespace ignored, typographic punctuation folded — and the first pass with any match
    wins, at its earliest position. `eof` pins the search to the end of the file, as the
    `*** End of File` marker does in Codex.
    """
    if not pattern:
        return start
    if len(pattern) > len(lines):
        return None
    first = len(lines) - len(pattern) if eof else start
    last = len(lines) - len(pattern)
    if first > last:
        return None
    found = _find(lines, pattern, first, last)
    for norm in _PASSES:
        if found is not None:
            return found
        tail = [norm(ln) for ln in lines[first:]]
        at = _find(tail, [norm(p) for p in pattern], 0, last - first)
        found = None if at is None else first + at
    return found


def _find(lines: list[str], pattern: list[str], first: int, last: int) -> int | None:
    """The first i in [first, last] where lines[i:i+len(pattern)] == pattern."""
    head, size = pattern[0], len(pattern)
    i = first
    while i <= last:
        try:
            i = lines.index(head, i, last + 1)
        except ValueError:
            return None
        if lines[i:i + size] == pattern:
            return i
        i += 1
    return None


@dataclass(slots=True)
class _Replacement:
    start: int  # 0-based index in the old lines
    old_len: int
    new: list[str]
    tagged: list[tuple[str, str]]
    chunk: int


def apply_update(text: str, chunks: tuple[Chunk, ...] | list[Chunk]) -> UpdateResult:
    """Replay an Update's chunks on `text` as Codex does, and report where each change landed."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    reps: list[_Replacement] = []
    index = 0
    for ci, chunk in enumerate(chunks):
        for anchor in chunk.anchors:
            at = seek_sequence(lines, [anchor], index, False)
            if at is None:
                return UpdateResult(None, error=f"hunk {ci + 1}: anchor {anchor!r} not found")
            index = at + 1
        rep = _locate(lines, chunk, index, ci)
        if rep is None:
            return UpdateResult(None, error=f"hunk {ci + 1}: its lines were not found")
        reps.append(rep)
        if chunk.old_lines:
            index = rep.start + rep.old_len
    reps.sort(key=lambda r: r.start)
    return _replace(lines, reps)


def _locate(lines: list[str], chunk: Chunk, index: int, ci: int) -> _Replacement | None:
    old, new, tagged = chunk.old_lines, chunk.new_lines, list(chunk.lines)
    if not old:
        # Codex appends a chunk without old lines at the end of the file, whatever its anchor.
        at = len(lines) - 1 if lines and lines[-1] == "" else len(lines)
        return _Replacement(at, 0, new, tagged, ci)
    at = seek_sequence(lines, old, index, chunk.end_of_file)
    if at is None and old[-1] == "":
        # The pattern's last empty line stood for the file's final newline: retry without it.
        trim_new = bool(new) and new[-1] == ""
        old = old[:-1]
        if trim_new:
            new = new[:-1]
        tagged = _drop_last(tagged, trim_new)
        at = seek_sequence(lines, old, index, chunk.end_of_file)
    if at is None:
        return None
    return _Replacement(at, len(old), new, tagged, ci)


def _drop_last(tagged: list[tuple[str, str]], trim_new: bool) -> list[tuple[str, str]]:
    """Tagged lines without the last old-side line (and the last new-side line when trimmed)."""
    drop: set[int] = set()
    for i in range(len(tagged) - 1, -1, -1):
        if tagged[i][0] != "+":
            drop.add(i)
            break
    if trim_new:
        for i in range(len(tagged) - 1, -1, -1):
            if tagged[i][0] != "-":
                drop.add(i)
                break
    return [t for i, t in enumerate(tagged) if i not in drop]


def _replace(lines: list[str], reps: list[_Replacement]) -> UpdateResult:
    out: list[str] = []
    pos = 0
    placements: list[Placement] = []
    for rep in reps:
        if rep.start < pos:
            return UpdateResult(None, error=f"hunk {rep.chunk + 1} overlaps an earlier hunk")
        out.extend(lines[pos:rep.start])
        segment = lines[rep.start:rep.start + rep.old_len]
        placement = Placement(rep.chunk, _runs(rep, segment, old_base=rep.start + 1, new_base=len(out) + 1),
                              len(out) + 1, list(rep.new))
        placements.append(placement)
        out.extend(rep.new)
        pos = rep.start + rep.old_len
    out.extend(lines[pos:])
    if not out or out[-1] != "":
        out.append("")
    placements.sort(key=lambda p: p.chunk)
    changes = sorted((c for p in placements for c in p.changes), key=lambda c: (c.old_start, c.new_start))
    return UpdateResult("\n".join(out), changes, placements)


def _runs(rep: _Replacement, old_segment: list[str], *, old_base: int, new_base: int) -> list[Change]:
    """Every run of removed/added lines of a placed chunk, numbered in the old and new file.

    Codex writes the patch's own text over the whole matched region, so a context line that
    matched only loosely (other whitespace or punctuation) did change: it counts as replaced.
    Removed lines are reported as they were in the file, not as the patch spelled them.
    """
    tagged: list[tuple[str, str]] = []
    k = 0
    for tag, text in rep.tagged:
        if tag == "+":
            tagged.append((tag, text))
            continue
        actual = old_segment[k] if k < len(old_segment) else text
        k += 1
        if tag == "-":
            tagged.append(("-", actual))
        elif actual == text:
            tagged.append((" ", text))
        else:
            tagged += [("-", actual), ("+", text)]
    return changes_from_tagged(tagged, old_base, new_base)


def patch_changes(chunks: tuple[Chunk, ...] | list[Chunk]) -> tuple[list[str], list[str]]:
    """The removed and the added lines of an Update, in order, without knowing where they go."""
    old: list[str] = []
    new: list[str] = []
    for chunk in chunks:
        for tag, text in chunk.lines:
            if tag == "-":
                old.append(text)
            elif tag == "+":
                new.append(text)
    return old, new
