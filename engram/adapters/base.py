"""What every adapter shares: the capture it returns, JSONL line reading, path mapping.

An adapter reads a session's source files whole (so its state — seen record ids, pending tool
calls — is the same however often the session was captured before) and tags every event with
the source line it came from (`Capture.positions`). Ingest keeps the events of lines at or after
each source's previously captured end. That is how a growing session maps onto immutable tapes:
each ingest writes one more segment tape covering only the new bytes, and the segments' events
concatenated per source are exactly the events of one full ingest.
"""

from __future__ import annotations

import logging
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Final, Iterator

import orjson

from engram.tape.events import Event

log = logging.getLogger(__name__)


@dataclass
class SourceSpan:
    """One source file of a session and the byte range a capture covers."""

    name: str  # stable role within the session: "main" or "subagents/agent-x.jsonl"
    path: Path
    start: int = 0
    end: int = 0  # set by the reader: the end of the last complete line

    def as_meta(self) -> dict[str, Any]:
        return {"name": self.name, "path": str(self.path), "start": self.start, "end": self.end}


@dataclass
class Capture:
    """A session's events for one capture (one tape), plus what was skipped and why."""

    harness: str
    session_id: str
    sources: list[SourceSpan]
    meta: dict[str, Any] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)  # malformed input, by reason
    ignored: Counter[str] = field(default_factory=Counter)  # well-formed records not worth a tape event
    copied: Counter[str] = field(default_factory=Counter)  # records of other sessions the file repeats, by session
    positions: list[tuple[int, int]] = field(default_factory=list)  # (source index, line offset) per event
    cursor: tuple[int, int] = (0, 0)  # the line being read

    def add(self, event: Event) -> None:
        self.events.append(event)
        self.positions.append(self.cursor)


@dataclass
class Line:
    offset: int
    end: int  # offset just past the newline
    record: Any | None  # parsed JSON, or None when skipped
    reason: str | None = None


def read_jsonl(path: Path, *, max_line_bytes: int, skipped: Counter[str],
               skip: Callable[[bytes], str | None] | None = None,
               ignored: Counter[str] | None = None) -> tuple[list[Line], int]:
    """Every complete line of a JSONL file, parsed, and the byte offset where complete lines end.

    A last line without a newline that does not parse is a live session's half-written record:
    it is left out (and the returned end stops before it) so the next ingest picks it up whole.
    `skip` may recognise, from its bytes, a complete line the adapter would drop anyway (it
    returns the reason, counted in `ignored`): such lines are never parsed.
    """
    with path.open("rb") as f:
        data = f.read()
    lines: list[Line] = []
    pos = 0
    n = len(data)
    end_complete = 0
    while pos < n:
        nl = data.find(b"\n", pos)
        last = nl < 0
        stop = n if last else nl
        raw = data[pos:stop]
        nxt = n if last else nl + 1
        if not raw.strip():
            pos = nxt
            end_complete = nxt if not last else end_complete
            continue
        if skip is not None and not last:
            reason = skip(raw)
            if reason is not None:
                if ignored is not None:
                    ignored[reason] += 1
                end_complete = nxt
                pos = nxt
                continue
        if len(raw) > max_line_bytes:
            skipped[f"line longer than {max_line_bytes} bytes"] += 1
            lines.append(Line(pos, nxt, None, "too long"))
            end_complete = nxt if not last else n
            pos = nxt
            continue
        try:
            rec = orjson.loads(raw)
        except orjson.JSONDecodeError:
            glued = _split_glued(raw)
            if glued is not None:
                lines += [Line(pos + at, pos + until, part) for at, until, part in glued]
                lines[-1].end = nxt
                end_complete = nxt
                pos = nxt
                continue
            rec = _parse_lossy(raw)
            if rec is None:
                if last:
                    skipped["truncated last line (left for the next ingest)"] += 1
                    break
                skipped["malformed JSON line"] += 1
                lines.append(Line(pos, nxt, None, "malformed"))
                end_complete = nxt
                pos = nxt
                continue
            skipped["non-UTF-8 bytes replaced"] += 1
        if not isinstance(rec, dict):
            skipped["line is not a JSON object"] += 1
            lines.append(Line(pos, nxt, None, "not an object"))
        else:
            lines.append(Line(pos, nxt, rec))
        end_complete = nxt
        pos = nxt
    return lines, end_complete


_JSON_SPACE: Final = " \t\r\n"


def _split_glued(raw: bytes) -> list[tuple[int, int, dict[str, Any]]] | None:
    """The records of a line holding two or more JSON objects one after another, each with its
    byte range in the line; None for any other line.

    Claude Code sometimes appends a record to a file whose last record lacks its newline (seen
    in entireio/cli's sessions: a `summary` or `file-history-snapshot` written straight after an
    assistant message, 7 lines in 290 sessions); read whole, the line is invalid and the message
    before it was lost."""
    import json  # noqa: PLC0415 - orjson has no incremental decode; this path is rare

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    decoder = json.JSONDecoder()
    out: list[tuple[int, int, dict[str, Any]]] = []
    at = _past_space(text, 0)
    while at < len(text):
        try:
            rec, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            return None
        if not isinstance(rec, dict):
            return None
        out.append((len(text[:at].encode("utf-8")), len(text[:end].encode("utf-8")), rec))
        at = _past_space(text, end)
    return out if len(out) > 1 else None


def _past_space(text: str, at: int) -> int:
    """The index of the first character at or after `at` that is not JSON whitespace."""
    return len(text) - len(text[at:].lstrip(_JSON_SPACE))


def _parse_lossy(raw: bytes) -> Any | None:
    """Parse a line that is valid JSON apart from invalid UTF-8 (replaced with U+FFFD)."""
    try:
        raw.decode("utf-8")
        return None  # valid UTF-8, so the JSON itself is broken
    except UnicodeDecodeError:
        pass
    try:
        return orjson.loads(raw.decode("utf-8", "replace"))
    except orjson.JSONDecodeError:
        return None


_WINDOWS_ABSOLUTE = re.compile(r"([A-Za-z]):[\\/]|\\\\(?=[^\\])")


def posix_path(path: str, windows: bool = False) -> str:
    """`path` in POSIX form: a Windows path (`D:\\repo\\src\\x.go`, `D:/repo/x.go`, `\\\\host\\share\\x`)
    becomes `/D:/repo/src/x.go` (`//host/share/x`), so that it nests under its session's cwd like
    any other; `windows` (the session's cwd was such a path) also turns a relative path's
    backslashes into slashes. Sessions recorded on Windows reach this machine in shared checkpoint
    branches and colleagues' transcripts; without this their paths were joined onto the cwd as text
    (`D:\\repo/D:\\repo\\src\\x.go`). A POSIX path is returned as it is: a backslash is a legal
    character in its names."""
    m = _WINDOWS_ABSOLUTE.match(path)
    if m is None:
        return path.replace("\\", "/") if windows and "\\" in path else path
    rest = path[m.end():].replace("\\", "/")
    return f"/{m.group(1).upper()}:/{rest}" if m.group(1) else f"//{rest}"


def is_windows_path(path: PurePosixPath | None) -> bool:
    """Whether `path` came from `posix_path` of a Windows path."""
    s = str(path) if path is not None else ""
    return (len(s) >= 3 and s[0] == "/" and s[1].isalpha() and s[2] == ":") or s.startswith("//")


@dataclass
class PathMapper:
    """Maps a session's file paths onto this repository.

    A path inside the session's tree (its git root when known, else its recorded cwd), this
    repository's root or another work tree of this repository is taken relative to the innermost
    of them that holds it, so a session started in one worktree that edits a file in another, or
    in a worktree nested in the checkout (`.claude/worktrees/x`), lands on the repository path.
    `--map FROM=TO` pairs are applied first. Paths outside all of them map to None: the event stays
    a tool event. A session recorded on Windows has its paths read in POSIX form (`posix_path`);
    their case is kept as recorded, so a file named in two cases is two files.
    """

    repo_root: Path
    session_root: PurePosixPath | None
    cwd: PurePosixPath | None
    maps: list[tuple[str, str]] = field(default_factory=list)
    trees: tuple[PurePosixPath, ...] = ()  # every work tree of this repository

    def to_repo(self, path: str, base: str | None = None) -> str | None:
        """Repository-relative POSIX path for `path` (absolute, or relative to `base`/cwd)."""
        if not path:
            return None
        cache = self.__dict__.setdefault("_cache", {})
        key = (path, base)
        if key not in cache:
            cache[key] = self._to_repo(path, base)
        return cache[key]

    def _to_repo(self, path: str, base: str | None) -> str | None:
        windows = is_windows_path(self.cwd)
        p = PurePosixPath(apply_maps(posix_path(path, windows), self.maps))
        if not p.is_absolute():
            anchor = PurePosixPath(posix_path(base, windows)) if base else self.cwd
            if anchor is None:
                return _clean_relative(p)
            if not anchor.is_absolute() and self.cwd is not None:
                anchor = self.cwd / anchor
            p = PurePosixPath(apply_maps(str(anchor / p), self.maps))  # the session root is the mapped cwd's
        p = PurePosixPath(os.path.normpath(str(p)))
        best: PurePosixPath | None = None
        best_root: PurePosixPath | None = None
        for root in (PurePosixPath(str(self.repo_root)), self.session_root, *self.trees):
            if root is None:
                continue
            try:
                rel = p.relative_to(root)
            except ValueError:
                continue
            if best is None or len(rel.parts) < len(best.parts):
                best, best_root = rel, root
        if best is None or best_root is None:
            return None
        gone = removed_worktree(best_root, p)
        return _clean_relative(p.relative_to(gone) if gone is not None else best)


# Where worktrees are made inside a checkout, by convention: the common `.worktrees/<name>` and
# `worktrees/<name>`, and Claude Code's `.claude/worktrees/<name>` (a session that entered one says
# so, see adapters.claude; a session started in one does not).
_NESTED_WORKTREE_DIRS: Final = (".worktrees", "worktrees", ".claude/worktrees")


def removed_worktree(tree: PurePosixPath, path: PurePosixPath) -> PurePosixPath | None:
    """The worktree `path` is in, when that sits in one of `tree`'s worktree folders and is gone.

    git lists a worktree only while it exists, and one is usually removed once merged: its
    session's files would be named from the checkout (`.worktrees/x/docs/plan.md`) instead of as
    the repository's own (`docs/plan.md`; dougnukem/orpheus's sessions)."""
    rel = path.relative_to(tree).parts
    for folder in _NESTED_WORKTREE_DIRS:
        parts = tuple(folder.split("/"))
        if len(rel) > len(parts) and rel[:len(parts)] == parts:
            root = tree.joinpath(*rel[:len(parts) + 1])
            return None if Path(str(root)).exists() else root
    return None


def apply_maps(path: str, maps: list[tuple[str, str]]) -> str:
    """`path` (POSIX form) with the first `--map FROM=TO` pair that holds it applied."""
    for src, dst in maps:
        src = posix_path(src).rstrip("/")
        if path == src or path.startswith(src + "/"):
            return dst.rstrip("/") + path[len(src):]
    return path


def _clean_relative(p: PurePosixPath) -> str | None:
    s = os.path.normpath(str(p))
    if s == "." or s.startswith("..") or s.startswith("/"):
        return None
    return s


def iter_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from iter_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from iter_strings(v)
