"""Capture: find session files, run the right adapter, write the new part of each as a tape.

A session maps onto immutable tapes as a chain of segments. The first ingest writes one tape
covering every complete line of every source file. When a source grew (a live session), the
next ingest re-reads the session (adapters need its earlier records for state), keeps only the
events of lines past the previously captured end of each source, and writes them as a new tape
whose meta names the previous one in `prev`. Re-running with nothing new writes nothing. A source
whose captured prefix no longer matches (the file was rewritten) is captured again from byte 0.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import sys
import time
from collections import Counter
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterable, Iterator

import apsw
import orjson

from engram.adapters.base import (
    Capture,
    PathMapper,
    SourceSpan,
    apply_maps,
    is_windows_path,
    posix_path,
)
from engram.errors import BadInput, CorruptTape, EngramError
from engram.fsutil import names_in, remove_stale_temps
from engram.index.db import immediate, open_db
from engram.redact import Redactor
from engram.store import Store, git_toplevel, git_worktrees
from engram.tape import events as E
from engram.tape.reader import TapeReader
from engram.tape.writer import TAPE_SUFFIX, WrittenTape, write_tape

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


@dataclass
class IngestStats:
    sessions: int = 0
    tapes: int = 0
    events: int = 0
    edits: int = 0
    reads: int = 0
    raw_bytes: int = 0
    tape_bytes: int = 0
    unchanged: int = 0
    as_text: int = 0  # sessions with no record a harness adapter reads (adapters/raw.py)
    skipped: Counter[str] = field(default_factory=Counter)
    ignored: Counter[str] = field(default_factory=Counter)
    redactions: Counter[str] = field(default_factory=Counter)
    written: list[str] = field(default_factory=list)
    out_of_order: int = 0  # new tapes older than tapes indexed before them (see Indexer.out_of_order)
    older_text: str | None = None  # the note when the index reads events an older way (build.older_text_note)

    def merge(self, other: "IngestStats") -> None:
        for name in ("sessions", "tapes", "events", "edits", "reads", "raw_bytes", "tape_bytes", "unchanged", "as_text"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.skipped.update(other.skipped)
        self.ignored.update(other.ignored)
        self.redactions.update(other.redactions)
        self.written.extend(other.written)

    def summary(self) -> str:
        skipped = sum(self.skipped.values())
        parts = [
            f"{self.sessions} sessions",
            f"{self.tapes} new tapes",
            f"{self.events} events",
            f"{self.edits} edits",
            f"{self.reads} reads",
            f"{sum(self.redactions.values())} secrets redacted",
            f"{skipped} skipped",
        ]
        line = "ingest: " + ", ".join(parts)
        if self.unchanged:
            line += f" ({self.unchanged} sessions unchanged)"
        if self.as_text:
            files = "1 file holds" if self.as_text == 1 else f"{self.as_text} files hold"
            line += (f"\n  note: {files} no Claude Code or Codex records: read as plain text (JSON as the strings "
                     "it holds), so their sessions have no edits, reads or times and are named raw-…")
        if self.out_of_order:
            from engram.index.build import out_of_order_note  # noqa: PLC0415

            line += "\n  " + out_of_order_note(self.out_of_order)
        if self.older_text:
            line += "\n  " + self.older_text
        if skipped:
            line += "\n  skipped: " + "; ".join(f"{n} × {reason}" for reason, n in self.skipped.most_common())
        return line


# ---------------------------------------------------------------- discovery


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
    start), none if unreadable."""
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
    at = _adapter_started(job.harness, _head_records(job.main))  # read lazily: it stops at the deciding record
    if at:
        return at
    # Without a stated start, a tape starts at its earliest event (`build_tape_events`).
    times = [ts for rec in _head_records(job.main) if isinstance(ts := _time_of(rec), str)]
    return min(times, default="")


def _time_of(rec: dict[str, Any]) -> Any:
    return rec.get("timestamp") or rec.get("ts")


def _adapter_started(fmt: str, records: Iterable[dict[str, Any]]) -> str | None:
    if fmt == CLAUDE:
        from engram.adapters.claude import started  # noqa: PLC0415
    elif fmt == CODEX:
        from engram.adapters.codex import started  # noqa: PLC0415
    elif fmt == EVENTS:
        from engram.adapters.events import started  # noqa: PLC0415
    else:
        return None
    return started(records)


def discover(repo_root: Path, claude_dir: Path | None, codex_dir: Path | None, stats: IngestStats) -> list[Job]:
    """This repository's sessions where the harnesses keep them (cwd inside a work tree of ours)."""
    trees = [str(t) for t in _trees(repo_root)]

    def ours(cwd: str | None) -> bool:
        return cwd is not None and any(cwd == t or cwd.startswith(t.rstrip("/") + "/") for t in trees)

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


# ---------------------------------------------------------------- capture


def _trees(repo_root: Path) -> tuple[PurePosixPath, ...]:
    """This repository's work trees (git's list is cached per process)."""
    trees = git_worktrees(repo_root) if (repo_root / ".git").exists() else [repo_root]
    return tuple(PurePosixPath(str(t)) for t in trees)


def session_root_for(repo_root: Path, cwd: str | None) -> PurePosixPath | None:
    """The tree the session's paths are relative to: the innermost work tree of ours holding its cwd
    (a worktree may be nested in the checkout), its git root, or its cwd."""
    if not cwd:
        return None
    p = PurePosixPath(posix_path(cwd))
    holding = [t for t in _trees(repo_root) if p == t or t in p.parents]
    if holding:
        return max(holding, key=lambda t: len(t.parts))
    if is_windows_path(p):
        return p  # recorded on Windows: not a directory here
    top = git_toplevel(Path(cwd)) if Path(cwd).is_dir() else None
    return PurePosixPath(str(top)) if top else p


def parse_job(job: Job, repo_root: Path, maps: list[tuple[str, str]], max_line_bytes: int) -> Capture:
    roots: dict[str | None, PurePosixPath | None] = {}

    def mapper_for(cwd: str | None) -> PathMapper:
        if cwd not in roots:  # a session recorded elsewhere has its tree found where `--map` puts it
            roots[cwd] = session_root_for(repo_root, apply_maps(posix_path(cwd), maps) if cwd else None)
        return PathMapper(repo_root, roots[cwd], PurePosixPath(posix_path(cwd)) if cwd else None, maps,
                          _trees(repo_root))

    if job.harness == CLAUDE:
        from engram.adapters.claude import parse_session  # noqa: PLC0415

        return parse_session(job.sources, mapper_for, max_line_bytes=max_line_bytes)
    if job.harness == CODEX:
        from engram.adapters.codex import parse_rollout  # noqa: PLC0415

        return parse_rollout(job.sources, mapper_for, max_line_bytes=max_line_bytes, repo_root=repo_root)
    if job.harness == EVENTS:
        from engram.adapters.events import parse_events  # noqa: PLC0415

        return parse_events(job.sources, mapper_for, max_line_bytes=max_line_bytes)
    from engram.adapters.raw import parse_raw  # noqa: PLC0415

    return parse_raw(job.sources)


def _prefix_sha(path: Path, end: int) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        left = end
        while left > 0:
            chunk = f.read(min(left, 1 << 20))
            if not chunk:
                break
            h.update(chunk)
            left -= len(chunk)
    return h.hexdigest()


def _previous(db: apsw.Connection, harness: str, session_id: str, src: SourceSpan) -> tuple[int, str] | None:
    """(end, tape) of the longest earlier capture of this source whose bytes are still a prefix."""
    rows = db.execute(
        "SELECT end, tape, prefix_sha256 FROM captures WHERE harness=? AND session_id=? AND source=? "
        "ORDER BY end DESC",
        (harness, session_id, src.name),
    ).fetchall()
    for end, tape, sha in rows:
        if end <= src.end and _prefix_sha(src.path, end) == sha:
            return end, tape
    return None


def build_tape_events(cap: Capture, starts: list[int], prev: str | None) -> list[dict[str, Any]]:
    """Meta plus the capture's events from lines at or after each source's start."""
    body = [ev for ev, (si, off) in zip(cap.events, cap.positions) if off >= starts[si]]
    sources = []
    for src, start in zip(cap.sources, starts):
        sources.append({**src.as_meta(), "start": start, "prefix_sha256": _prefix_sha(src.path, src.end)})
    times = [ev.get("ts") for ev in body if ev.get("ts")]
    meta: dict[str, Any] = {
        "kind": E.META,
        "v": E.TAPE_FORMAT,
        "harness": cap.harness,
        "session_id": cap.session_id,
        **cap.meta,
        "sources": sources,
        "prev": prev,
        "ended": max(times) if times else None,
    }
    if times and not meta.get("started"):
        meta["started"] = min(times)
    return [meta, *body]


def catalog_row(tape_id: str, events: list[dict[str, Any]], size: int, raw_bytes: int) -> dict[str, Any]:
    meta = events[0]
    kinds = Counter(ev.get("kind") for ev in events)
    return {
        "id": tape_id, "harness": meta.get("harness") or "", "session_id": meta.get("session_id") or "",
        "model": meta.get("model"), "started": meta.get("started"), "ended": meta.get("ended"),
        "begins": begins(events),
        "events": len(events), "edits": kinds[E.CODE_EDIT], "reads": kinds[E.CODE_READ],
        "size": size, "raw_bytes": raw_bytes, "prev": meta.get("prev"),
        "subagent": meta.get("subagent"), "parent_session": meta.get("parent_session"),
    }


def begins(events: list[dict[str, Any]]) -> str | None:
    """When a tape's content begins, the key tapes are indexed by (`tapes.begins`): the session's
    start for its first tape; for a later segment, its earliest event time (else the start)."""
    meta = events[0]
    if meta.get("prev") is None:
        return meta.get("started")
    times = [ts for ev in events[1:] if isinstance(ts := ev.get("ts"), str) and ts]
    return min(times) if times else meta.get("started")


def register(db: apsw.Connection, row: dict[str, Any], sources: list[dict[str, Any]]) -> None:
    """Add a written tape to the catalog (inside the caller's transaction)."""
    db.execute(
        "INSERT OR IGNORE INTO tapes(id, harness, session_id, model, started, ended, begins, events, edits, reads,"
        " size, raw_bytes, prev) VALUES(:id, :harness, :session_id, :model, :started, :ended, :begins, :events,"
        " :edits, :reads, :size, :raw_bytes, :prev)",
        row,
    )
    if isinstance(row.get("subagent"), str):
        db.execute("INSERT OR IGNORE INTO subagents(tape, kind, parent_session) VALUES(?, ?, ?)",
                   (row["id"], row["subagent"], row.get("parent_session")))
    for s in sources:
        db.execute(
            "INSERT OR IGNORE INTO captures(tape, harness, session_id, source, path, start, end, prefix_sha256)"
            " VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
            (row["id"], row["harness"], row["session_id"], s["name"], s["path"], s["start"], s["end"],
             s["prefix_sha256"]),
        )


def register_from_file(db: apsw.Connection, store: Store, path: Path) -> str:
    """Catalog a tape from its own content (used by reconcile and reindex)."""
    with TapeReader(path, store.objects_dir) as r:
        evs = list(r.events())
        raw = sum(len(line) + 1 for line in r.raw_lines())
        row = catalog_row(r.id, evs, r.size, raw)
    register(db, row, evs[0].get("sources") or [])
    return row["id"]


def reconcile(db: apsw.Connection, store: Store) -> int:
    """Catalog tapes that reached the disk but not the catalog (a crash between the two)."""
    names = names_in(store.tapes_dir)
    remove_stale_temps(store.tapes_dir, names)
    on_disk = {n[: -len(TAPE_SUFFIX)] for n in names if n.endswith(TAPE_SUFFIX)}
    known = {r[0] for r in db.execute("SELECT id FROM tapes")}
    missing = sorted(on_disk - known)
    if missing:
        with immediate(db):
            damaged = register_intact(db, store, [store.tapes_dir / f"{tid}{TAPE_SUFFIX}" for tid in missing])
        log.info("catalogued %d tapes left by an interrupted ingest", len(missing) - len(damaged))
    return len(missing)


def register_intact(db: apsw.Connection, store: Store, paths: list[Path]) -> list[str]:
    """`register_from_file` for each tape that reads, in order; a damaged one is left out with a
    warning, so that one bad file does not stop every later ingest or rebuild (its session is
    captured again when its transcript is next ingested: the damaged file is then rewritten).
    Returns the ids of the tapes left out."""
    damaged = []
    for path in paths:
        try:
            register_from_file(db, store, path)
        except CorruptTape as exc:
            log.warning("left out a damaged tape: %s", exc)
            damaged.append(path.name[: -len(TAPE_SUFFIX)])
    return damaged


@contextmanager
def ingest_lock(store: Store) -> Iterator[None]:
    """One ingest per store at a time: two would capture the same new bytes twice."""
    with _locked(store, wait=True):
        yield


@contextmanager
def ingest_lock_if_free(store: Store) -> Iterator[bool]:
    """The ingest lock if no ingest holds it (True), else nothing (False): a query should not
    wait for a running ingest, which indexes what it captured itself."""
    with _locked(store, wait=False) as got:
        yield got


@contextmanager
def _locked(store: Store, wait: bool) -> Iterator[bool]:
    store.run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(store.run_dir / "ingest.lock", os.O_RDWR | os.O_CREAT, 0o600)
    got = False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            got = True
        except BlockingIOError:
            pass
        yield got
    finally:
        if got:
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


@dataclass
class Captured:
    """What capturing one job produced, before the catalog knows of it."""

    stats: IngestStats
    written: WrittenTape | None = None
    row: dict[str, Any] | None = None
    sources: list[dict[str, Any]] = field(default_factory=list)
    prepared: Any = None  # engram.index.build.Prepared, when fingerprinted in a worker


def capture_write(db: apsw.Connection, store: Store, job: Job, *, maps: list[tuple[str, str]],
                  redactor: Redactor) -> Captured:
    """Parse a session and write its new part as a tape. Reads the catalog, never writes it."""
    cfg = store.config["ingest"]
    stats = IngestStats()
    cap = parse_job(job, store.root, maps, int(cfg["max_line_bytes"]))
    stats.skipped.update(cap.skipped)
    stats.ignored.update(cap.ignored)
    stats.sessions += 1
    stats.as_text += cap.harness == RAW
    starts: list[int] = []
    prev_tapes: list[str] = []
    for src in cap.sources:
        found = _previous(db, cap.harness, cap.session_id, src)
        starts.append(found[0] if found else 0)
        if found:
            prev_tapes.append(found[1])
    if all(start >= src.end for start, src in zip(starts, cap.sources)):
        stats.unchanged += 1
        return Captured(stats)
    prev = _latest(db, prev_tapes)
    events = build_tape_events(cap, starts, prev)
    if len(events) == 1 and prev is not None:
        stats.unchanged += 1  # only records we do not keep (progress, snapshots) were appended
        return Captured(stats)
    before = Counter(redactor.counts)
    written = write_tape(store.tapes_dir, store.objects_dir, events, redact=redactor.event,
                         object_threshold=int(cfg["object_threshold"]))
    stats.redactions.update(redactor.counts - before)
    row = catalog_row(written.id, events, written.size, written.raw_bytes)
    if written.created:
        stats.tapes += 1
        stats.written.append(written.id)
    stats.events += row["events"]  # as `engram tapes` counts them: the tape's meta event #0 included
    stats.edits += row["edits"]
    stats.reads += row["reads"]
    stats.raw_bytes += sum(s.end - st for s, st in zip(cap.sources, starts))
    stats.tape_bytes += written.size
    return Captured(stats, written, row, events[0]["sources"])


def capture_job(db: apsw.Connection, store: Store, job: Job, stats: IngestStats, *,
                maps: list[tuple[str, str]], redactor: Redactor) -> WrittenTape | None:
    """Capture one session and add its tape to the catalog."""
    got = capture_write(db, store, job, maps=maps, redactor=redactor)
    return _commit(db, got, stats)


def _commit(db: apsw.Connection, got: Captured, stats: IngestStats) -> WrittenTape | None:
    stats.merge(got.stats)
    if got.written is None or got.row is None:
        return None
    with immediate(db):
        register(db, got.row, got.sources)
    return got.written


def store_events(store: Store, events: list[dict[str, Any]], indexer: Any = None) -> WrittenTape:
    """Write events made here (a recorded command, an editor save) as a tape, catalogue it and,
    with an indexer, index it — under the ingest lock, like any capture."""
    redactor = Redactor(store.config["redact"].get("patterns") or [])
    with ingest_lock(store):
        written = write_tape(store.tapes_dir, store.objects_dir, events, redact=redactor.event,
                             object_threshold=int(store.config["ingest"]["object_threshold"]))
        db = open_db(store)
        try:
            with immediate(db):
                register(db, catalog_row(written.id, events, written.size, written.raw_bytes), [])
            if indexer is not None:
                indexer(db, written)
                finish = getattr(indexer, "finish", None)
                if finish is not None:
                    finish(db)
        finally:
            db.close()
    return written


def _latest(db: apsw.Connection, tapes: list[str]) -> str | None:
    if not tapes:
        return None
    # The newest segment is the one no other of these tapes names as `prev`.
    rows = {t: p for t, p in db.execute(
        f"SELECT id, prev FROM tapes WHERE id IN ({','.join('?' * len(tapes))})", tapes)}
    named = set(rows.values())
    heads = sorted(t for t in rows if t not in named)
    return heads[-1] if heads else sorted(tapes)[-1]


def ingest(store: Store, jobs: list[Job], *, maps: list[tuple[str, str]] | None = None,
           stats: IngestStats | None = None, progress: Callable[[int, int], None] | None = None,
           after_tape: Callable[[apsw.Connection, WrittenTape], None] | None = None,
           workers: int | None = None) -> IngestStats:
    """Capture every job; safe to re-run; one ingest per store at a time.

    With several sessions and cores, sessions are parsed, written and fingerprinted in worker
    processes while this one keeps the catalog and the index (the only writer of index.sqlite).
    """
    stats = stats or IngestStats()
    redactor = Redactor(store.config["redact"].get("patterns") or [])
    n_workers = _worker_count(len(jobs)) if workers is None else workers
    with ingest_lock(store):
        db = open_db(store)
        try:
            reconcile(db, store)
            if len(jobs) > 1:
                captured = _captured_ends(db)
                jobs = sorted(jobs, key=lambda job: (start_hint(job, captured.get(str(job.main), 0)), str(job.main)))
            restore = getattr(after_tape, "restore", None)
            if restore is not None:  # postings an interrupted run did not write
                restore(db)
            with _bulk_memory(after_tape, len(jobs)):
                if n_workers > 1 and hasattr(after_tape, "accept"):
                    _ingest_parallel(db, store, jobs, stats, maps or [], progress, after_tape, n_workers)
                else:
                    _ingest_serial(db, store, jobs, stats, maps or [], progress, after_tape, redactor)
                finish = getattr(after_tape, "finish", None)
                if finish is not None:
                    finish(db)
            stats.out_of_order += getattr(after_tape, "out_of_order", 0)
            if hasattr(after_tape, "accept"):
                from engram.index.build import older_text_note  # noqa: PLC0415

                stats.older_text = older_text_note(db)
        finally:
            db.close()
    return stats


def _ingest_serial(db: apsw.Connection, store: Store, jobs: list[Job], stats: IngestStats,
                   maps: list[tuple[str, str]], progress: Callable[[int, int], None] | None,
                   after_tape: Callable[[apsw.Connection, WrittenTape], None] | None, redactor: Redactor) -> None:
    for i, job in enumerate(jobs):
        try:
            written = capture_job(db, store, job, stats, maps=maps, redactor=redactor)
        except (OSError, EngramError) as exc:
            stats.skipped[f"unreadable session file ({exc.__class__.__name__})"] += 1
            log.warning("%s: %s", job.main, exc)
            continue
        if written is not None and after_tape is not None:
            after_tape(db, written)
        if progress is not None:
            progress(i + 1, len(jobs))


def _bulk_memory(indexer: Any, n_jobs: int) -> AbstractContextManager[None]:
    """`engram.index.build.small_pages` for a run of several sessions that an indexer indexes
    (it holds the run's postings); nothing for an append or a capture without an index."""
    if n_jobs < 2 or not hasattr(indexer, "accept"):
        return nullcontext()
    from engram.index.build import small_pages  # noqa: PLC0415 - the indexer's module, numpy loaded

    return small_pages()


def _captured_ends(db: apsw.Connection) -> dict[str, int]:
    """Session file -> how far earlier tapes captured it (a run's later segments begin there)."""
    return {path: end for path, end in db.execute("SELECT path, max(end) FROM captures WHERE source = 'main'"
                                                  " GROUP BY path")}


MIN_PARALLEL_JOBS = 4


def _worker_count(n_jobs: int) -> int:
    env = os.environ.get("ENGRAM_WORKERS")
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            pass
    if n_jobs < MIN_PARALLEL_JOBS:
        return 1
    return max(1, min(2, os.cpu_count() or 1))


_worker_redactor: Redactor | None = None


def _capture_in_worker(root: str, config: dict[str, Any], job: Job, maps: list[tuple[str, str]], k: int,
                       w: int) -> Captured:
    """Worker-process side: capture one job and fingerprint its tape for the parent's index."""
    global _worker_redactor  # noqa: PLW0603 - one compiled redactor per worker process
    from engram.index.build import prepare_tape  # noqa: PLC0415

    store = Store(Path(root), config)
    if _worker_redactor is None:
        _worker_redactor = Redactor(config["redact"].get("patterns") or [])
    db = open_db(store, readonly=True)
    try:
        got = capture_write(db, store, job, maps=maps, redactor=_worker_redactor)
    except (OSError, EngramError) as exc:
        stats = IngestStats()
        stats.skipped[f"unreadable session file ({exc.__class__.__name__})"] += 1
        return Captured(stats)
    finally:
        db.close()
    if got.written is not None and got.written.events is not None:
        got.prepared = prepare_tape(got.written.id, got.written.events, k, w)
        got.written.events = None  # the fingerprints travel back, not the text
    return got


MAX_AHEAD_BYTES = 192 << 20  # session bytes the workers may run ahead of the index writer
MAX_AHEAD_JOBS = 256


def _exit_with(pid: int) -> None:
    """Worker start-up: end this worker when the ingest process `pid` ends.

    Killed (SIGKILL, an OOM kill), an ingest cannot stop its workers, and a worker sending a
    result then waits forever on a pipe nobody reads — it holds that pipe's read end itself —
    keeping the forkserver alive too: three idle processes per killed ingest. The process is
    watched through a pidfd where there is one (not fooled by a reused process id)."""
    import select  # noqa: PLC0415
    import threading  # noqa: PLC0415

    def watch() -> None:
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            fd = None
        if fd is not None:
            select.select([fd], [], [])  # readable when the process has ended
            os._exit(1)
        while True:
            time.sleep(1.0)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:
                pass

    threading.Thread(target=watch, name="engram-exit-with-ingest", daemon=True).start()


def _job_bytes(job: Job) -> int:
    try:
        return sum(max(0, src.path.stat().st_size - src.start) for src in job.sources)
    except OSError:
        return 0


def _ingest_parallel(db: apsw.Connection, store: Store, jobs: list[Job], stats: IngestStats,
                     maps: list[tuple[str, str]], progress: Callable[[int, int], None] | None,
                     indexer: Any, n_workers: int) -> None:
    import multiprocessing  # noqa: PLC0415
    from concurrent.futures import Future, ProcessPoolExecutor  # noqa: PLC0415

    k, w = indexer.resolve_params(db)
    # forkserver: safe even when this process has threads (the language server calls ingest).
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["engram.ingest", "engram.index.build"])
    sizes = [_job_bytes(job) for job in jobs]
    with ProcessPoolExecutor(max_workers=n_workers, mp_context=ctx, initializer=_exit_with,
                             initargs=(os.getpid(),)) as pool:
        pending: list[Future[Captured]] = []
        submitted = 0
        ahead = 0  # bytes of session files submitted and not yet consumed
        for i in range(len(jobs)):
            # Results are consumed in job order. While this process writes a batch to the index
            # (seconds, every few hundred MB), the workers keep going on the jobs submitted
            # ahead: a window of a few jobs left them idle for most of each write.
            while submitted < len(jobs) and (len(pending) < 2 * n_workers or
                                             (ahead < MAX_AHEAD_BYTES and len(pending) < MAX_AHEAD_JOBS)):
                pending.append(pool.submit(_capture_in_worker, str(store.root), store.config, jobs[submitted],
                                           maps, k, w))
                ahead += sizes[submitted]
                submitted += 1
            got = pending.pop(0).result()
            ahead -= sizes[i]
            written = _commit(db, got, stats)
            if written is not None and got.prepared is not None:
                indexer.accept(db, got.prepared)
            if progress is not None:
                try:
                    progress(i + 1, len(jobs))
                except BaseException:
                    for f in pending:
                        f.cancel()
                    raise


def ingest_paths(store: Store, paths: list[Path], maps: list[tuple[str, str]] | None = None,
                 progress: Callable[[int, int], None] | None = None, merge_later: bool = False) -> IngestStats:
    """Capture and index the transcripts at `paths` (files, or directories searched for them):
    `engram ingest PATH...`, run here or by the language server it was handed to (which passes
    `merge_later`, see `merge_idle`)."""
    from engram.index.build import Indexer  # noqa: PLC0415 - numpy, only once there is something to index

    stats = IngestStats()
    ingest(store, jobs_from_paths(paths, stats), maps=maps, stats=stats, progress=progress,
           after_tape=Indexer(store, merge_later=merge_later))
    return stats


def merge_idle(store: Store) -> int:
    """Merge the posting segments that appends indexed with `merge_later` left beyond
    MAX_SEGMENTS: what a language server does once no ingest has come for a while, so that the
    command (an agent's hook) handing it an append never waits for a merge (40-70 ms at 1 GB on
    every second append, bench/README.md "Merging when idle"). Returns the segments merged
    away; 0 while an ingest runs, which merges as it needs."""
    from engram.index import postings  # noqa: PLC0415

    with ingest_lock_if_free(store) as got:
        if not got:
            return 0
        db = open_db(store)
        try:
            with immediate(db):
                before = int(db.execute("SELECT count(*) FROM segments").fetchall()[0][0])
                postings.merge_segments(db)
                after = int(db.execute("SELECT count(*) FROM segments").fetchall()[0][0])
        finally:
            db.close()
    return before - after


def ingest_request(store: Store, params: dict[str, Any], merge_later: bool = False) -> dict[str, Any]:
    """What a running language server does with an `engram ingest PATH...` handed to it (see
    engram.handoff): the same capture, reported as the command would print it."""
    paths, maps = params.get("paths"), params.get("maps") or []
    if not (isinstance(paths, list) and paths and all(isinstance(p, str) and os.path.isabs(p) for p in paths)):
        raise BadInput("ingest: `paths` must be a non-empty list of absolute paths")
    if not (isinstance(maps, list) and all(isinstance(m, list) and len(m) == 2 and all(isinstance(x, str) for x in m)
                                           for m in maps)):
        raise BadInput("ingest: `maps` must be a list of [FROM, TO] pairs")
    stats = ingest_paths(store, [Path(p) for p in paths], [(a, b) for a, b in maps], merge_later=merge_later)
    return {"summary": stats.summary(), "tapes": stats.tapes, "sessions": stats.sessions}


def terminal_progress(label: str) -> Callable[[int, int], None] | None:
    """A one-line progress display on a terminal (stderr), nothing otherwise."""
    if not sys.stderr.isatty():
        return None
    t0 = time.monotonic()

    def show(done: int, total: int) -> None:
        width = 30
        filled = int(width * done / max(total, 1))
        sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} "
                         f"{time.monotonic() - t0:.1f}s")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show
