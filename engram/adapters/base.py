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
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Final, Iterator

import orjson

from engram.tape.events import Event
from engram.words import whole_text

log = logging.getLogger(__name__)


@dataclass
class SourceSpan:
    """One source file of a session and the byte range a capture covers."""

    name: str  # stable role within the session: "main" or "subagents/agent-x.jsonl"
    path: Path
    start: int = 0
    end: int = 0  # set by the reader: the end of the last complete line
    # A source that is part of a larger file (a session of OpenCode's SQLite store): what its
    # content hashes to, standing for the hash of the file's first `end` bytes (never computed).
    digest: str | None = None
    # (end, sha256 of the file's first `end` bytes) as `read_source` read them (None: not read so).
    read_sha: tuple[int, str] | None = None

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
    dropped: Counter[str] = field(default_factory=Counter)  # edits the session made that no code.edit holds, by reason
    dropped_at: list[tuple[tuple[int, int], str]] = field(default_factory=list)  # (source line, reason) of each
    copied: Counter[str] = field(default_factory=Counter)  # records of other sessions the file repeats, by session
    positions: list[tuple[int, int]] = field(default_factory=list)  # (source index, line offset) per event
    cursor: tuple[int, int] = (0, 0)  # the line being read

    def add(self, event: Event) -> None:
        self.events.append(event)
        self.positions.append(self.cursor)

    def drop(self, reason: str, n: int = 1, at: tuple[int, int] | None = None) -> None:
        """Count `n` edits the transcript shows and no code.edit will hold, and why (the ingest
        summary lists them: `IngestStats.edits_note`); `at`: the source line (default: the one
        being read), so a later segment of a growing session does not count them again."""
        self.dropped[reason] += n
        self.dropped_at += [(at or self.cursor, reason)] * n


@dataclass(slots=True)
class Line:
    offset: int
    end: int  # offset just past the newline
    record: Any | None  # parsed JSON, or None when skipped
    reason: str | None = None


#: Recognises, from a file's bytes and a line's [start, stop), a line its adapter drops anyway: the reason, or None.
SkipLine = Callable[[bytes, int, int], "str | None"]
_SPACE_BYTES: Final = frozenset(b" \t\n\r\x0b\x0c")  # what `bytes.isspace` calls space


def read_source(src: SourceSpan, *, max_line_bytes: int, skipped: Counter[str], skip: SkipLine | None = None,
                ignored: Counter[str] | None = None) -> list[Line]:
    """`_lines_of` the source file's bytes, setting the source's `end` and the sha256 of the bytes
    up to there (`read_sha`, what its tape's meta and the next capture's prefix check hold).

    Why here: hashed from the bytes just read, the file is not read a second time to hash it
    (6% of capture's CPU was the sources' sha256, its read included), and the hash is of
    exactly the bytes parsed."""
    with src.path.open("rb") as f:
        data = f.read()
    lines, src.end = _lines_of(data, max_line_bytes=max_line_bytes, skipped=skipped, skip=skip, ignored=ignored)
    src.read_sha = (src.end, sha256_hex(memoryview(data)[:src.end]))
    return lines


def sha256_hex(data: bytes | memoryview) -> str:
    import hashlib  # noqa: PLC0415 - OpenSSL's start-up (~3.5 ms) only where hashes are taken

    return hashlib.sha256(data).hexdigest()


def _lines_of(data: bytes, *, max_line_bytes: int, skipped: Counter[str], skip: SkipLine | None,
              ignored: Counter[str] | None) -> tuple[list[Line], int]:
    """Every complete line of a JSONL file's bytes, parsed, and the byte offset where complete lines end.

    A last line without a newline that does not parse is a live session's half-written record:
    it is left out (and the returned end stops before it) so the next ingest picks it up whole.
    `skip` may recognise, from the file's bytes and a line's range, a complete line the adapter
    would drop anyway (it returns the reason, counted in `ignored`): such lines are never parsed.

    No line is copied out of the file's bytes: orjson parses a view of it, and `skip` looks at
    the range itself (copies of every line were ~15% of reading a Claude Code session, whose
    progress records, two thirds of its lines, are only looked at; bench/capture.py --phases).
    """
    view = memoryview(data)
    lines: list[Line] = []
    pos = 0
    n = len(data)
    end_complete = 0
    while pos < n:
        nl = data.find(b"\n", pos)
        last = nl < 0
        stop = n if last else nl
        nxt = n if last else nl + 1
        if stop == pos or (data[pos] in _SPACE_BYTES and data[pos:stop].isspace()):  # (not `strip()`: a copy)
            pos = nxt
            end_complete = nxt if not last else end_complete
            continue
        if skip is not None and not last:
            reason = skip(data, pos, stop)
            if reason is not None:
                if ignored is not None:
                    ignored[reason] += 1
                end_complete = nxt
                pos = nxt
                continue
        if stop - pos > max_line_bytes:
            skipped[f"line longer than {max_line_bytes} bytes"] += 1
            lines.append(Line(pos, nxt, None, "too long"))
            end_complete = nxt if not last else n
            pos = nxt
            continue
        try:
            rec = orjson.loads(view[pos:stop])
        except orjson.JSONDecodeError as exc:
            if nested_too_deep(exc):  # (no reader takes it, whole or not: never left for a later ingest)
                skipped[TOO_DEEP_LINE] += 1
                lines.append(Line(pos, nxt, None, "too deep"))
                end_complete = nxt if not last else n
                pos = nxt
                continue
            raw = data[pos:stop]
            glued = _split_glued(raw)
            if glued is not None:
                lines += [Line(pos + at, pos + until, part) for at, until, part in glued]
                lines[-1].end = nxt
                end_complete = nxt
                pos = nxt
                continue
            rec, replaced = _parse_lossy(raw)
            if rec is None:
                if last:
                    skipped["truncated last line (left for the next ingest)"] += 1
                    break
                skipped["malformed JSON line"] += 1
                lines.append(Line(pos, nxt, None, "malformed"))
                end_complete = nxt
                pos = nxt
                continue
            if replaced:
                skipped[replaced] += 1
        if not isinstance(rec, dict):
            skipped["line is not a JSON object"] += 1
            lines.append(Line(pos, nxt, None, "not an object"))
        else:
            lines.append(Line(pos, nxt, rec))
        end_complete = nxt
        pos = nxt
    return lines, end_complete


#: The depth of arrays and objects past which orjson refuses a document, complete or not.
JSON_DEPTH: Final = 1024
TOO_DEEP_LINE: Final = f"line nested deeper than {JSON_DEPTH} levels"


def nested_too_deep(exc: orjson.JSONDecodeError) -> bool:
    """Whether orjson refused a document for its depth: it stays unreadable however much of it
    is there, so it is a skip, never a truncated document waiting for its end."""
    message = str(exc)
    return "depth limit exceeded" in message or "ecursion limit" in message  # (orjson's wording, newer and older)


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
        except (json.JSONDecodeError, RecursionError):  # (nested deeper than Python's stack: a bad line)
            return None
        if not isinstance(rec, dict):
            return None
        rec = whole_text(rec)  # (stdlib json keeps a lone surrogate, which no tape can hold)
        out.append((len(text[:at].encode("utf-8")), len(text[:end].encode("utf-8")), rec))
        at = _past_space(text, end)
    return out if len(out) > 1 else None


def _past_space(text: str, at: int) -> int:
    """The index of the first character at or after `at` that is not JSON whitespace."""
    return len(text) - len(text[at:].lstrip(_JSON_SPACE))


def _parse_lossy(raw: bytes) -> tuple[Any | None, str | None]:
    """Parse a line that is valid JSON apart from invalid UTF-8 (replaced with U+FFFD, and said:
    the second item) or a lone surrogate escaped in a string (`"\\ud83d"`, half a character:
    orjson refuses it; replaced with U+FFFD, the harness having lost that half already)."""
    try:
        text, replaced = raw.decode("utf-8"), None
    except UnicodeDecodeError:
        text, replaced = raw.decode("utf-8", "replace"), "non-UTF-8 bytes replaced"
        try:
            return orjson.loads(text), replaced
        except orjson.JSONDecodeError:
            pass
    if not _SURROGATE_ESCAPE.search(text):
        return None, None
    import json  # noqa: PLC0415 - a rare path

    try:
        rec = whole_text(json.loads(text))
        orjson.dumps(rec)  # (what stdlib json reads and a tape cannot hold: an integer past 64 bits)
    except (ValueError, TypeError, RecursionError, orjson.JSONEncodeError):
        return None, None
    return rec, replaced


_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")


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


#: Why `PathMapper.to_repo` gave no repository path (`PathMapper.drop_reason`).
OUTSIDE: Final = "outside the repository"
GIT_DIR: Final = "a file under .git/ (git's own, not code)"

# Where a session may be started that is no repository: the file system's root, a home directory
# (`/Users/x`, `/home/x`, `/root`, `C:\\Users\\x`) and the temporary directory.
_NO_REPOSITORY_RE: Final = re.compile(
    r"^(?:/|/root|/var/root|/(?:Users|home)(?:/[^/]+)?|/(?:private/)?tmp|/[A-Za-z]:(?:/Users(?:/[^/]+)?)?)/?$")


def holds_no_repository(cwd: PurePosixPath) -> bool:
    """Whether a recorded cwd is a directory no repository's paths are taken from: the file
    system's root, a home directory, the temporary directory.

    Why: a session's paths are taken relative to its cwd when that is not a work tree of this
    repository (a session recorded on another machine). Sessions started in the home directory
    edited `~/bin/backup.sh`, `~/.ssh/config` and `~/Applications/…`: taken relative to the home
    directory, they were indexed as the repository's `bin/backup.sh`, `.ssh/config`, …"""
    return bool(_NO_REPOSITORY_RE.match(str(cwd)))


def folds_case(cwd: PurePosixPath | None) -> bool:
    """Whether a session's paths name files case-insensitively: recorded on macOS (`/Users/…`,
    `/Volumes/…`) or Windows, whose file systems ignore case by default, or read on one.

    Why: an agent there may type `~/documents/app/x.py` for the real `~/Documents/app/x.py`, and
    both name the same file; compared as text, the edit fell outside the repository."""
    if sys.platform in ("darwin", "win32"):
        return True
    s = str(cwd) if cwd is not None else ""
    return is_windows_path(cwd) or s.startswith(("/Users/", "/Volumes/"))


def relative_to(path: PurePosixPath, root: PurePosixPath, fold: bool = False) -> PurePosixPath | None:
    """`path` relative to `root`, None when `root` does not hold it; `fold` compares names
    case-insensitively (the relative part keeps the case `path` has)."""
    if not fold:
        try:
            return path.relative_to(root)
        except ValueError:
            return None
    n = len(root.parts)
    if len(path.parts) < n or [x.casefold() for x in path.parts[:n]] != [x.casefold() for x in root.parts]:
        return None
    return PurePosixPath(*path.parts[n:]) if len(path.parts) > n else PurePosixPath(".")


@dataclass
class PathMapper:
    """Maps a session's file paths onto this repository.

    A path inside the session's tree (its git root when known, else its recorded cwd, unless that
    is a home directory or the like: `holds_no_repository`), this repository's root or another
    work tree of this repository is taken relative to the innermost of them that holds it, so a
    session started in one worktree that edits a file in another, or in a worktree nested in the
    checkout (`.claude/worktrees/x`), lands on the repository path. `--map FROM=TO` pairs are
    applied first. Paths outside all of them, and files under `.git/`, map to None (the event
    stays a tool event; `drop_reason` says why). A session recorded on Windows has its paths read
    in POSIX form (`posix_path`); one recorded on macOS or Windows has them compared without case
    (`folds_case`), and a path that names an existing file in another case takes the file's.
    """

    repo_root: Path
    session_root: PurePosixPath | None
    cwd: PurePosixPath | None
    maps: list[tuple[str, str]] = field(default_factory=list)
    trees: tuple[PurePosixPath, ...] = ()  # every work tree of this repository
    fold: bool | None = None  # compare names case-insensitively; None: `folds_case(cwd)`

    def __post_init__(self) -> None:
        if self.fold is None:
            self.fold = folds_case(self.cwd)
        if self.session_root is not None and holds_no_repository(self.session_root):
            self.session_root = None

    def to_repo(self, path: str, base: str | None = None) -> str | None:
        """Repository-relative POSIX path for `path` (absolute, or relative to `base`/cwd)."""
        return self._placed(path, base)[0]

    def drop_reason(self, path: str, base: str | None = None) -> str:
        """Why `to_repo` gives None for `path`: OUTSIDE or GIT_DIR ("" when it does not)."""
        return self._placed(path, base)[1]

    def _placed(self, path: str, base: str | None) -> tuple[str | None, str]:
        if not path:
            return None, OUTSIDE
        cache = self.__dict__.setdefault("_cache", {})
        key = (path, base)
        if key not in cache:
            rel = self._to_repo(path, base)
            if rel is None:
                cache[key] = (None, OUTSIDE)
            elif ".git" in rel.split("/"):  # (`rel` is normal: its parts, without pathlib's ~5 us a path)
                cache[key] = (None, GIT_DIR)
            else:
                cache[key] = (rel, "")
        return cache[key]

    def _to_repo(self, path: str, base: str | None) -> str | None:
        plain = self._plain(path)
        if plain is not None:
            return plain[0]
        windows = is_windows_path(self.cwd)
        fold = bool(self.fold)
        p = PurePosixPath(apply_maps(posix_path(path, windows), self.maps, fold))
        if not p.is_absolute():
            anchor = PurePosixPath(posix_path(base, windows)) if base else self.cwd
            if anchor is None:
                return _clean_relative(p)
            if not anchor.is_absolute() and self.cwd is not None:
                anchor = self.cwd / anchor
            # the session root is the mapped cwd's
            p = PurePosixPath(apply_maps(str(anchor / p), self.maps, fold))
        p = PurePosixPath(os.path.normpath(str(p)))
        best: PurePosixPath | None = None
        best_root: PurePosixPath | None = None
        for root in (PurePosixPath(str(self.repo_root)), self.session_root, *self.trees):
            if root is None:
                continue
            rel = relative_to(p, root, fold)
            if rel is None:
                continue
            if best is None or len(rel.parts) < len(best.parts):
                best, best_root = rel, root
        if best is None or best_root is None:
            return None
        gone = removed_worktree(best_root, best_root / best)
        found = _clean_relative((best_root / best).relative_to(gone) if gone is not None else best)
        return self._real_case(found) if fold and found is not None else found

    def _plain(self, path: str) -> tuple[str | None] | None:
        """`_to_repo(path)` in string operations, for what nearly every path a session names is:
        absolute and already normal, under a mapper without maps, case folding or Windows paths;
        None when the general case must decide. (pathlib made each new path cost ~50 us, ~2% of a
        Claude Code session's capture.) A nested worktree's folder, which may have been removed,
        is left to the general case."""
        roots = self.__dict__.get("_plain_roots")
        if roots is None:
            roots = self.__dict__["_plain_roots"] = self._plain_root_strings()
        if (not roots or path[:1] != "/" or "//" in path or "/./" in path or "/../" in path
                or path.endswith(("/", "/.", "/.."))):
            return None
        best: str | None = None
        depth = 0
        for root in roots:  # the root holding it with the fewest parts left, the first of equals
            if path.startswith(root) and path[len(root):len(root) + 1] == "/":
                rel = path[len(root) + 1:]
                if best is None or rel.count("/") < depth:
                    best, depth = rel, rel.count("/")
            elif path == root:
                return None
        if best is None:
            return (None,)
        if best.startswith(_NESTED_PREFIXES):
            return None
        return (None,) if best.startswith("..") else (best,)  # (`_clean_relative`'s rule)

    def _plain_root_strings(self) -> tuple[str, ...]:
        """The roots `_plain` compares paths with, or () when it cannot decide for this mapper."""
        if self.fold or self.maps or is_windows_path(self.cwd):
            return ()
        roots = tuple(str(r) for r in (PurePosixPath(str(self.repo_root)), self.session_root, *self.trees)
                      if r is not None)
        if any(not r.startswith("/") or r == "/" or r.startswith("//") for r in roots):
            return ()
        return roots

    def _real_case(self, rel: str) -> str:
        """`rel` spelled as the repository's files are, when it names one in another case."""
        here = Path(self.repo_root)
        if (here / rel).exists():
            return rel
        names = self.__dict__.setdefault("_names", {})
        out: list[str] = []
        for part in PurePosixPath(rel).parts:
            if here not in names:
                try:
                    names[here] = {n.casefold(): n for n in os.listdir(here)} if here.is_dir() else {}
                except OSError:
                    names[here] = {}
            real = names[here].get(part.casefold())
            if real is None:
                return rel  # a file the session created: its own spelling
            out.append(real)
            here = here / real
        return "/".join(out)


# Where worktrees are made inside a checkout, by convention: the common `.worktrees/<name>` and
# `worktrees/<name>`, and Claude Code's `.claude/worktrees/<name>` (a session that entered one says
# so, see adapters.claude; a session started in one does not).
_NESTED_WORKTREE_DIRS: Final = (".worktrees", "worktrees", ".claude/worktrees")
_NESTED_PREFIXES: Final = tuple(f"{d}/" for d in _NESTED_WORKTREE_DIRS)


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


def apply_maps(path: str, maps: list[tuple[str, str]], fold: bool = False) -> str:
    """`path` (POSIX form) with the first `--map FROM=TO` pair that holds it applied; `fold`
    (a session recorded on macOS or Windows, `folds_case`) compares FROM without case."""
    for src, dst in maps:
        src = posix_path(src).rstrip("/")
        head = path[:len(src)]
        if (head == src or (fold and head.casefold() == src.casefold())) and (len(path) == len(src)
                                                                              or path[len(src)] == "/"):
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
