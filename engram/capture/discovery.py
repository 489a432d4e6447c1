"""Finding agent sessions: where each harness keeps them, which belong to this repository, and
which format a given file is in (Claude Code, Codex, Engram events, or plain text)."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Iterator

import orjson

from engram.adapters.base import SourceSpan, folds_case, is_windows_path, posix_path, relative_to
from engram.capture.stats import IngestStats
from engram.errors import BadInput
from engram.store.repo import git_toplevel, git_worktrees
from engram.tape import events as E

log = logging.getLogger(__name__)

CLAUDE = "claude-code"
CODEX = "codex"
RAW = "raw"
EVENTS = "events"


@dataclass
class Job:
    """One session to capture: its harness and source files."""

    harness: str
    sources: list[SourceSpan]

    @property
    def main(self) -> Path:
        return self.sources[0].path





_SNIFF_BYTES = 256 * 1024
_SNIFF_FIRST = 16 * 1024


def detect_format(path: Path) -> str | None:
    """The harness that wrote `path`, judged from its first records; None for binary junk.

    The first 16 KB usually hold a complete record that decides it; only otherwise is the full
    256 KB read (every file of a bulk ingest is sniffed before any work starts, and a record
    names its format on the first line)."""
    try:
        with path.open("rb") as f:
            first = f.read(_SNIFF_FIRST)
            if len(first) == _SNIFF_FIRST:
                complete = first[: first.rfind(b"\n") + 1]
                found = _format_of_lines(complete.split(b"\n")[:-1][:20]) if complete else None
                if found is not None:  # the same answer the full read gives: same lines, same order
                    return found
                head = first + f.read(_SNIFF_BYTES - _SNIFF_FIRST)
            else:
                head = first
    except OSError:
        return None
    if not head.strip():
        return None
    found = _format_of_lines(head.split(b"\n")[:20])
    if found is not None:
        return found
    if b"\0" in head[:8192]:
        return None
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # a cut multi-byte character at the end is fine
            return None
    return RAW


def _format_of_lines(lines: list[bytes]) -> str | None:
    """The harness of the first of these lines that is a record one of them writes."""
    from engram.adapters.claude import looks_like_claude  # noqa: PLC0415

    for raw in lines:
        raw = raw.strip()
        if not raw:
            continue
        try:
            rec = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(rec, dict):
            continue
        if rec.get("kind") == E.META:
            return EVENTS
        if "payload" in rec and rec.get("type") in ("session_meta", "response_item", "event_msg", "turn_context", "compacted"):
            return CODEX
        if "type" not in rec and {"id", "timestamp", "instructions"} <= set(rec):
            return CODEX  # a pre-envelope (<= 0.1.x) rollout starts with a bare session header
        if looks_like_claude(rec):
            return CLAUDE
    return None


def job_for_file(path: Path, fmt: str) -> Job:
    if fmt == CLAUDE:
        from engram.adapters.claude import session_sources  # noqa: PLC0415

        return Job(CLAUDE, session_sources(path))
    return Job(fmt, [SourceSpan("main", path)])


def _is_subagent_file(path: Path) -> bool:
    return path.parent.name == "subagents" and (path.parent.parent.with_suffix(".jsonl")).is_file()


def jobs_from_paths(paths: list[Path], stats: IngestStats) -> list[Job]:
    jobs: list[Job] = []
    for p in paths:
        if p.is_dir():
            files = sorted(f for f in p.rglob("*.jsonl") if f.is_file() and not _is_subagent_file(f))
            if not files:
                stats.skipped[f"no transcripts (*.jsonl) under directory {p}"] += 1
            for f in files:
                _add_file(jobs, f, stats)
        elif p.is_file():
            _add_file(jobs, p, stats)
        elif p.exists():
            raise BadInput(f"{p}: not a regular file or a directory (a pipe or a device?); save the transcript "
                           "to a file, or pipe it to `engram record --stdin`")
        else:
            raise BadInput(f"{p}: no such file or directory")
    return jobs


def _add_file(jobs: list[Job], f: Path, stats: IngestStats) -> None:
    if f.stat().st_size == 0:
        stats.skipped["empty file"] += 1
        return
    fmt = detect_format(f)
    if fmt is None:
        stats.skipped["not a transcript (binary or undecodable)"] += 1
        return
    jobs.append(job_for_file(f.resolve(), fmt))


def claude_home() -> Path:
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")


def codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


HEAD_RECORDS = 50  # records read from a session's start to find its cwd or start time


def _head_records(path: Path, offset: int = 0) -> Iterator[dict[str, Any]]:
    """The JSON objects among the first HEAD_RECORDS lines of `path` from byte `offset` (a line
    start), none if unreadable. Lazy: lines are read as they are taken."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            for _, raw in zip(range(HEAD_RECORDS), f):
                try:
                    rec = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(rec, dict):
                    yield rec
    except OSError:
        return


def _first_line_with(path: Path, needle: bytes, chunk: int = 1 << 20) -> int | None:
    """The offset of the start of the first line of `path` holding `needle`, found without
    parsing (a resumed session's copied records can be most of a large file); None if absent."""
    line_start = 0
    try:
        with path.open("rb") as f:
            at, tail = 0, b""  # `tail`: the end of the previous block, where a needle may begin
            while block := f.read(chunk):
                data, base = tail + block, at - len(tail)
                hit = data.find(needle)
                nl = data.rfind(b"\n", 0, hit if hit >= 0 else len(data))
                if nl >= 0:
                    line_start = max(line_start, base + nl + 1)
                if hit >= 0:
                    return line_start
                tail = data[len(data) - len(needle) + 1:]
                at += len(block)
    except OSError:
        return None
    return None


def _first_cwd(path: Path, fmt: str) -> str | None:
    for rec in _head_records(path):
        if fmt == CLAUDE and isinstance(rec.get("cwd"), str):
            return rec["cwd"]
        if fmt == CODEX and isinstance(rec.get("payload"), dict) and isinstance(rec["payload"].get("cwd"), str):
            return rec["payload"]["cwd"]
    return None


def start_hint(job: Job, captured: int = 0) -> str:
    """When the tape this job writes will begin (`tapes.begins`), read from the session file's
    records; "" when they do not say. `captured`: how far earlier tapes captured the file.

    A run captures its sessions in this order, the order `engram reindex` indexes tapes in: an
    edit's lineage sources are the edits indexed before it, so sessions taken in file-name order
    (Claude Code names them by random ids) linked a January edit to a February one, and a rebuild
    found other edges (half of them on the 1 GB benchmark corpus). A session's first tape begins
    at its start, as its adapter records it; a later segment at its first record's time, which is
    the tape's earliest event unless records the adapter drops come first with earlier times. Then
    a session of the same run that begins between the two is taken in another order than a rebuild
    takes it; the tapes overlap in time, so `Indexer.out_of_order` does not report it."""
    if captured:  # records are appended in time order: the first with a time says when it begins
        first = next((ts for rec in _head_records(job.main, captured) if isinstance(ts := _time_of(rec), str)), None)
        if first:
            return first
    at = _adapter_started(job.harness, job.main)
    if at:
        return at
    # Without a stated start, a tape starts at its earliest event (`build_tape_events`).
    times = [ts for rec in _head_records(job.main) if isinstance(ts := _time_of(rec), str)]
    return min(times, default="")


def _time_of(rec: dict[str, Any]) -> Any:
    return rec.get("timestamp") or rec.get("ts")


_UUID_NAME = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)


def _adapter_started(fmt: str, path: Path) -> str | None:
    """The session's start as its adapter will record it, read lazily: the adapter stops at the
    deciding record. A Claude Code session named by its id is read up to its own first record,
    past the records of another session a resumed session repeats first (`claude.own_session`)."""
    records: Iterable[dict[str, Any]] = _head_records(path)
    if fmt == CLAUDE:
        from engram.adapters.claude import started as claude_started  # noqa: PLC0415

        at = _first_line_with(path, path.stem.encode()) if _UUID_NAME.fullmatch(path.stem) else None
        return claude_started(_head_records(path, at) if at else records, stem=path.stem)
    if fmt == CODEX:
        from engram.adapters.codex import started  # noqa: PLC0415
    elif fmt == EVENTS:
        from engram.adapters.events import started  # noqa: PLC0415
    else:
        return None
    return started(records)


def discover(repo_root: Path, claude_dir: Path | None, codex_dir: Path | None, stats: IngestStats) -> list[Job]:
    """This repository's sessions where the harnesses keep them (cwd inside a work tree of ours)."""
    trees = [str(t) for t in repo_trees(repo_root)]

    def ours(cwd: str | None) -> bool:
        if cwd is None:
            return False
        p = PurePosixPath(posix_path(cwd))
        return any(relative_to(p, PurePosixPath(t), folds_case(p)) is not None for t in trees)

    jobs: list[Job] = []
    cdir = claude_dir or claude_home() / "projects"
    if cdir.is_dir():
        for f in sorted(cdir.rglob("*.jsonl")):
            if _is_subagent_file(f) or not ours(_first_cwd(f, CLAUDE)):
                continue
            jobs.append(job_for_file(f.resolve(), CLAUDE))
    xdir = codex_dir or codex_home()
    for sub in (["sessions", "archived_sessions"] if codex_dir is None else [""]):
        d = xdir / sub if sub else xdir
        if d.is_dir():
            for f in sorted(d.rglob("*.jsonl")):
                if ours(_first_cwd(f, CODEX)):
                    jobs.append(job_for_file(f.resolve(), CODEX))
    return jobs


def repo_trees(repo_root: Path) -> tuple[PurePosixPath, ...]:
    """This repository's work trees (git's list is cached per process)."""
    trees = git_worktrees(repo_root) if (repo_root / ".git").exists() else [repo_root]
    return tuple(PurePosixPath(str(t)) for t in trees)


def session_root_for(repo_root: Path, cwd: str | None) -> PurePosixPath | None:
    """The tree the session's paths are relative to: the innermost work tree of ours holding its cwd
    (a worktree may be nested in the checkout), its git root, or its cwd."""
    if not cwd:
        return None
    p = PurePosixPath(posix_path(cwd))
    fold = folds_case(p)  # `/Users/x/documents/app` is the work tree `/Users/x/Documents/app`
    holding = [t for t in repo_trees(repo_root) if relative_to(p, t, fold) is not None]
    if holding:
        return max(holding, key=lambda t: len(t.parts))
    if is_windows_path(p):
        return p  # recorded on Windows: not a directory here
    top = git_toplevel(Path(cwd)) if Path(cwd).is_dir() else None
    return PurePosixPath(str(top)) if top else p
