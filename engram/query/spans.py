"""Reading a span of the working tree safely: inside the repository, inside the file."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from engram.errors import BadInput
from engram.fsutil import looks_binary, repo_relative
from engram.words import line_range, plural

__all__ = ["Span", "SpanArg", "resolve_span_arg", "parse_span", "repo_relative", "in_tree", "read_span", "text_span", "not_a_file", "past_the_end"]


@dataclass(frozen=True)
class Span:
    file: str  # repository-relative, POSIX
    start: int  # 1-based inclusive
    end: int
    text: str


def parse_span(arg: str) -> tuple[str, int, int]:
    """`FILE:START-END` (or `FILE:LINE`) → parts; a usage error otherwise."""
    path, sep, rng = arg.rpartition(":")
    if not sep or not path:
        raise BadInput(f"{arg!r}: expected FILE:START-END, e.g. src/app.py:10-24")
    a, dash, b = rng.partition("-")
    try:
        start = int(a)
        end = int(b) if dash else start
    except ValueError as exc:
        raise BadInput(f"{arg!r}: lines must be numbers, e.g. src/app.py:10-24") from exc
    return path, start, end


@dataclass(frozen=True)
class SpanArg:
    """What `engram explain ARG` names: lines of a file, or (`start` None) the whole file; `read_as`
    says how an argument that could be read two ways was read."""

    path: str
    start: int | None = None
    end: int | None = None
    read_as: str | None = None


def resolve_span_arg(root: Path, arg: str, cwd: Path | None = None) -> SpanArg:
    """`FILE:START-END`, `FILE:LINE` or `FILE` as a user means it, the working tree deciding
    where a name holds a colon: `FILE:LINE:COL` (a compiler's, a linter's location) is the line;
    a name ending in `:3` that is a file, when the name before it is not, is that file whole;
    when both are files, the lines win (the documented form) and `read_as` names the other.
    Errors (lines not numbers, no such file) are left to `parse_span` and `read_span`."""
    head, sep, rng = arg.rpartition(":")
    if not sep or not head or not rng.replace("-", "").isdigit():
        return SpanArg(arg)
    if not _a_file(root, head, cwd):
        if _a_file(root, arg, cwd):
            return SpanArg(arg)
        file, colon, line = head.rpartition(":")
        if colon and file and line.isdigit() and rng.isdigit() and _a_file(root, file, cwd):
            return SpanArg(file, int(line), int(line), f"{arg} read as line {int(line)} of {file} (column {rng} ignored)")
    path, start, end = parse_span(arg)
    if not _a_file(root, arg, cwd):
        return SpanArg(path, start, end)
    n = len((root / repo_relative(root, arg, cwd)).read_bytes().splitlines())
    return SpanArg(path, start, end, f"{arg} read as {line_range(start, end)} of {path}; a file named {arg} is "
                                     f"there too: `engram explain {arg}:1-{max(n, 1)}` for its lines")


def _a_file(root: Path, path: str, cwd: Path | None) -> bool:
    try:
        return (root / repo_relative(root, path, cwd)).is_file()
    except (BadInput, OSError):
        return False


def in_tree(root: Path, path: str) -> bool:
    """Is the repository path `path` (as the index stores it) an entry of the working tree?

    A symlink counts as an entry and is not followed: nothing outside the repository is looked at."""
    if os.path.isabs(path) or ".." in path.split("/"):
        return False
    try:
        mode = os.lstat(os.path.join(os.fspath(root), path)).st_mode
    except OSError:
        return False
    return stat.S_ISREG(mode) or stat.S_ISLNK(mode)


def not_a_file(path: str, full: Path) -> BadInput:
    """The error for a `FILE[:A-B]` whose FILE is not a file of the working tree: a directory is
    named as one (it was "no such file", as if the name were wrong)."""
    if full.is_dir():
        return BadInput(f"{path}: a directory; name a file in it")
    return BadInput(f"{path}: no such file in the working tree")


def past_the_end(where: str, n_lines: int) -> BadInput:
    """The error for lines past a file's end (explain's span, blame's -L): an empty answer would
    read as "no session"."""
    return BadInput(f"{where}: past the end of the file ({plural(n_lines, 'line')})")


def text_of(asked: str, full: Path) -> str:
    """The text of the file `asked` names (at `full`); a binary file is refused: its bytes, escapes
    and all, were printed as lines (`remember --at` refuses one in the same words)."""
    data = full.read_bytes()
    if looks_binary(data):
        raise BadInput(f"{asked}: a binary file; blame and explain follow the lines of text files")
    return data.decode("utf-8", "replace")


def read_span(root: Path, path: str, start: int, end: int, cwd: Path | None = None) -> Span:
    rel = repo_relative(root, path, cwd)
    full = root / rel
    if not full.is_file():
        raise not_a_file(path, full)
    lines = text_of(path, full).splitlines()
    if start < 1 or end < start:
        raise BadInput(f"{path}:{start}-{end}: lines are 1-based and START must not exceed END")
    if end > len(lines):
        raise past_the_end(f"{path}:{start}-{end}", len(lines))
    return Span(rel, start, end, "\n".join(lines[start - 1:end]) + "\n")


def text_span(text: str, name: str = "-") -> Span:
    n = max(1, len(text.splitlines()))
    return Span(name, 1, n, text if text.endswith("\n") else text + "\n")
