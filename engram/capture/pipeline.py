"""Capture: find session files, run the right adapter, write the new part of each as a tape.

A session maps onto immutable tapes as a chain of segments. The first ingest writes one tape
covering every complete line of every source file. When a source grew (a live session), the
next ingest re-reads the session (adapters need its earlier records for state), keeps only the
events of lines past the previously captured end of each source, and writes them as a new tape
whose meta names the previous one in `prev`. Re-running with nothing new writes nothing. A source
whose captured prefix no longer matches (the file was rewritten) is captured again from byte 0.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import os
import sys
import threading
import time
from collections import Counter
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Final, Iterator

import apsw

from engram.adapters.base import (
    Capture,
    PathMapper,
    SourceSpan,
    apply_maps,
    folds_case,
    posix_path,
)
from engram.capture.discovery import (
    AIDER,
    CLAUDE,
    CLINE,
    CODEX,
    COPILOT,
    EVENTS,
    GEMINI,
    OPENCODE,
    QWEN,
    RAW,
    ROO,
    SPECSTORY,
    Job,
    jobs_from_paths,
    repo_trees,
    session_root_for,
    start_hint,
)
from engram.capture.redact import Redactor
from engram.capture.removal import note_captured_again, removed_sessions
from engram.capture.stats import IngestStats
from engram.errors import BadInput, EngramError
from engram.index.db import index_inode, open_db
from engram.index.sql import immediate
from engram.index.catalog import catalog_row, reconcile, register
from engram.store.lock import ingest_lock, ingest_lock_if_free, ingest_turn
from engram.store.repo import Store
from engram.words import agree, plural
from engram.tape import events as E
from engram.tape.writer import WrittenTape, publish_tape, publish_tapes, write_tape

log = logging.getLogger(__name__)



def parse_job(job: Job, repo_root: Path, maps: list[tuple[str, str]], max_line_bytes: int) -> Capture:
    roots: dict[str | None, PurePosixPath | None] = {}

    def mapper_for(cwd: str | None) -> PathMapper:
        recorded = PurePosixPath(posix_path(cwd)) if cwd else None
        if cwd not in roots:  # a session recorded elsewhere has its tree found where `--map` puts it
            mapped = apply_maps(posix_path(cwd), maps, folds_case(recorded)) if cwd else None
            roots[cwd] = session_root_for(repo_root, mapped)
        return PathMapper(repo_root, roots[cwd], recorded, maps, repo_trees(repo_root))

    if job.harness == CLAUDE:
        from engram.adapters.claude import parse_session  # noqa: PLC0415

        return parse_session(job.sources, mapper_for, max_line_bytes=max_line_bytes)
    if job.harness == CODEX:
        from engram.adapters.codex import parse_rollout  # noqa: PLC0415

        return parse_rollout(job.sources, mapper_for, max_line_bytes=max_line_bytes, repo_root=repo_root)
    if job.harness == AIDER:
        from engram.adapters.aider import parse_history  # noqa: PLC0415

        return parse_history(job.sources, mapper_for, max_line_bytes=max_line_bytes, repo_root=repo_root, run=job.part)
    if job.harness in (CLINE, ROO):
        from engram.adapters.cline import parse_task  # noqa: PLC0415

        return parse_task(job.sources, mapper_for, max_line_bytes=max_line_bytes)
    if job.harness == SPECSTORY:
        from engram.adapters.specstory import parse_export  # noqa: PLC0415

        return parse_export(job.sources, mapper_for, max_line_bytes=max_line_bytes, repo_root=repo_root)
    if job.harness in (GEMINI, QWEN, OPENCODE):
        from engram.adapters.gemini import parse_gemini  # noqa: PLC0415
        from engram.adapters.opencode import parse_opencode  # noqa: PLC0415
        from engram.adapters.qwen import parse_qwen  # noqa: PLC0415

        parse = {GEMINI: parse_gemini, QWEN: parse_qwen, OPENCODE: parse_opencode}[job.harness]
        return parse(job.sources, mapper_for, max_line_bytes=max_line_bytes)
    if job.harness == COPILOT:
        from engram.adapters.copilot import parse_copilot  # noqa: PLC0415

        return parse_copilot(job.sources, mapper_for, max_line_bytes=max_line_bytes, repo_root=repo_root)
    if job.harness == EVENTS:
        from engram.adapters.events import parse_events  # noqa: PLC0415

        return parse_events(job.sources, mapper_for, max_line_bytes=max_line_bytes)
    from engram.adapters.raw import parse_raw  # noqa: PLC0415

    return parse_raw(job.sources, max_line_bytes)


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


def _source_sha(src: SourceSpan, end: int) -> str:
    """What the first `end` bytes of a source hash to; for a source that stands for part of a
    larger file (`SourceSpan.digest`), its digest, and only at its own end. At the end the
    adapter read to, the hash taken as it read (`SourceSpan.read_sha`)."""
    if src.digest is not None:
        return src.digest if end == src.end else ""
    if src.read_sha is not None and src.read_sha[0] == end:
        return src.read_sha[1]
    return _prefix_sha(src.path, end)


def _previous(db: apsw.Connection, harness: str, session_id: str, src: SourceSpan) -> tuple[int, str] | None:
    """(end, tape) of the longest earlier capture of this source whose bytes are still a prefix."""
    rows = db.execute(
        "SELECT end, tape, prefix_sha256 FROM captures WHERE harness=? AND session_id=? AND source=? "
        "ORDER BY end DESC",
        (harness, session_id, src.name),
    ).fetchall()
    for end, tape, sha in rows:
        if end <= src.end and _source_sha(src, end) == sha:
            return end, tape
    return None


# Formats whose session file is rewritten whole as the session goes on (OpenCode's stored session,
# Gemini CLI's older .json recording, the exports): no earlier capture is a prefix of it.
REWRITTEN_WHOLE = frozenset({GEMINI, OPENCODE})


def _rewritten(db: apsw.Connection, store: Store, cap: Capture,
               events: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """A rewritten session file captured before: (the latest earlier tape, the meta and only the
    events no earlier tape of the session holds). Why: its captured prefix never matches again, so
    each change captured it whole once more, a second tape of every event."""
    from engram.index.catalog import tape_file  # noqa: PLC0415
    from engram.tape.reader import TapeReader  # noqa: PLC0415

    rows = db.execute("SELECT DISTINCT tape FROM captures WHERE harness=? AND session_id=?",
                      (cap.harness, cap.session_id)).fetchall()
    if not rows:
        return None, events
    held: Counter[bytes] = Counter()
    for (tape,) in rows:
        try:
            with TapeReader(tape_file(store, tape), store.objects_dir) as r:
                held.update(E.dumps(ev) for ev in r.events() if ev.get("kind") != E.META)
        except (OSError, EngramError):
            continue
    body = []
    for ev in events[1:]:
        key = E.dumps(ev)
        if held[key] > 0:
            held[key] -= 1
        else:
            body.append(ev)
    prev = _latest(db, [t for (t,) in rows])
    return prev, [{**events[0], "prev": prev}, *body]


def build_tape_events(cap: Capture, starts: list[int], prev: str | None) -> list[dict[str, Any]]:
    """Meta plus the capture's events from lines at or after each source's start."""
    if any(starts):
        body = [ev for ev, (si, off) in zip(cap.events, cap.positions) if off >= starts[si]]
    else:  # (a session's first capture: every event; no test per event)
        body = list(cap.events)
    sources = []
    for src, start in zip(cap.sources, starts):
        sources.append({**src.as_meta(), "start": start, "prefix_sha256": _source_sha(src, src.end)})
    times = [ts for ev in body if (ts := ev.get("ts"))]
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


@dataclass
class Captured:
    """What capturing one job produced, before the catalog knows of it."""

    stats: IngestStats
    written: WrittenTape | None = None
    row: dict[str, Any] | None = None
    sources: list[dict[str, Any]] = field(default_factory=list)
    prepared: Any = None  # engram.index.build.Prepared, when fingerprinted in a worker


REMOVED_SKIP = "removed by `engram tapes rm` (`engram ingest --again PATH` captures it again)"


_GC_LOCK = threading.Lock()
_gc_pauses = 0  # captures running in this process with the cyclic collector paused
_gc_was_on = False


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a session is parsed, redacted and written.

    Why: a capture allocates hundreds of thousands of dicts and lists (the parsed records, the
    events), each counted towards a collection that scans every live container, the session's
    parsed records included, and finds nothing: JSON trees hold no cycles and are freed by
    reference counting. Measured on bench/data/c100m: 8% of capture's CPU. Nested and threaded
    captures share one pause; the collector is back on (if it was) when the last one ends."""
    global _gc_pauses, _gc_was_on  # one process-wide pause, like gc's own switch
    with _GC_LOCK:
        if _gc_pauses == 0:
            _gc_was_on = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_on:
                gc.enable()


NOTHING_KEPT: Final = "no message, tool call or edit read from it"


def capture_write(db: apsw.Connection, store: Store, job: Job, *, maps: list[tuple[str, str]],
                  redactor: Redactor, removed: frozenset[tuple[str, str]] = frozenset(),
                  publish_later: bool = False) -> Captured:
    """Parse a session and write its new part as a tape. Reads the catalog, never writes it.
    A session in `removed` (taken back by `engram tapes rm`) is skipped. `publish_later`: the
    tape is left for `_commit` to put in place (`write_tape`), as a worker process leaves it."""
    with _cyclic_gc_paused():
        return _capture_write(db, store, job, maps=maps, redactor=redactor, removed=removed,
                              publish_later=publish_later)


def _capture_write(db: apsw.Connection, store: Store, job: Job, *, maps: list[tuple[str, str]],
                   redactor: Redactor, removed: frozenset[tuple[str, str]], publish_later: bool) -> Captured:
    cfg = store.config["ingest"]
    stats = IngestStats()
    cap = parse_job(job, store.root, maps, int(cfg["max_line_bytes"]))
    if (cap.harness, cap.session_id) in removed:
        stats.skipped[REMOVED_SKIP] += 1
        return Captured(stats)
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
    if prev is None and cap.harness in REWRITTEN_WHOLE:
        prev, events = _rewritten(db, store, cap, events)
    if len(events) == 1 and prev is not None:
        stats.unchanged += 1  # only records we do not keep (progress, snapshots) were appended
        return Captured(stats)
    if len(events) == 1 and cap.copied:  # only another session's records yet: a session just resumed
        _note_first_capture(stats, cap)
        return Captured(stats)
    if len(events) == 1 and prev is None:  # not one record read (garbage, `--format` wrong): no tape
        stats.sessions -= 1
        stats.skipped[NOTHING_KEPT] += 1
        return Captured(stats)
    before = Counter(redactor.counts)
    written = write_tape(store.tapes_dir, store.objects_dir, events, redact_all=redactor.events,
                         rules=redactor.digest, object_threshold=int(cfg["object_threshold"]),
                         publish_later=publish_later)
    stats.redactions.update(redactor.counts - before)
    row = catalog_row(written.id, events, written.size, written.raw_bytes)
    if written.created:
        stats.tapes += 1
        stats.written.append(written.id)
        if prev is None:
            _note_first_capture(stats, cap)
    stats.events += row["events"]  # as `engram tapes` counts them: the tape's meta event #0 included
    stats.edits += row["edits"]
    stats.reads += row["reads"]
    count_edits(stats, cap, events, starts)
    stats.raw_bytes += sum(s.end - st for s, st in zip(cap.sources, starts))
    stats.tape_bytes += written.size
    return Captured(stats, written, row, events[0]["sources"])


def count_edits(stats: IngestStats, cap: Capture, events: list[dict[str, Any]], starts: list[int]) -> None:
    """What became of the edits of the lines this tape captures (`IngestStats.edits_note`): the
    code.edits placed only by their context or without line ranges, and the edits no code.edit
    holds, by reason (those the adapter counted at lines an earlier tape captured are counted
    there)."""
    for ev in events:
        if ev.get("kind") == E.CODE_EDIT:
            stats.unplaced += ev.get("after_range") is None
            stats.by_context += bool(ev.get("placed"))
    for (si, off), reason in cap.dropped_at:
        if off >= starts[si]:
            stats.dropped[reason] += 1


def _note_first_capture(stats: IngestStats, cap: Capture) -> None:
    """What the summary says of a session captured from its start: records it repeats of other
    sessions (left to them), a working directory inferred."""
    if cap.copied:
        stats.copying += 1
        stats.copied.update(cap.copied)
    if "cwd_inferred" in cap.meta:
        stats.inferred_cwd[cap.meta["cwd_inferred"] or ""] += 1
    for lacks in cap.meta.get("unkept") or []:
        stats.unkept[f"{cap.harness}: {lacks}"] += 1


def capture_job(db: apsw.Connection, store: Store, job: Job, stats: IngestStats, *,
                maps: list[tuple[str, str]], redactor: Redactor,
                removed: frozenset[tuple[str, str]] = frozenset()) -> WrittenTape | None:
    """Capture one session and add its tape to the catalog."""
    got = capture_write(db, store, job, maps=maps, redactor=redactor, removed=removed)
    return _commit(db, got, stats)


def _commit(db: apsw.Connection, got: Captured, stats: IngestStats) -> WrittenTape | None:
    """Catalogue a captured tape, once its file is in place and on disk (a worker's is put
    there here: `publish_tape`)."""
    if got.written is not None and (got.written.pending is not None or got.written.in_place_unsynced):
        try:
            publish_tape(got.written)
        except OSError as exc:  # (the disk full at the fsync): the next run captures the session
            if got.written.pending is not None:
                got.written.pending.unlink(missing_ok=True)
            stats.skipped[f"tape not written ({exc.__class__.__name__})"] += 1
            stats.failed += 1
            log.warning("%s: %s", got.written.path, exc)
            return None
    stats.merge(got.stats)
    if got.written is None or got.row is None:
        return None
    with immediate(db):
        register(db, got.row, got.sources)
    return got.written


def store_events(store: Store, events: list[dict[str, Any]], indexer: Any = None) -> WrittenTape:
    """Write events made here (a recorded command, an editor save) as a tape, catalogue it and,
    with an indexer, index it — under the ingest lock, like any capture."""
    return store_many(store, [events], indexer)[0]


def store_many(store: Store, tapes: list[list[dict[str, Any]]], indexer: Any = None) -> list[WrittenTape]:
    """`store_events` for several tapes under one lock and one index batch (an import of many
    attributions). A tape already stored (the same events) is neither written nor indexed again."""
    redactor = Redactor(store.config["redact"].get("patterns") or [])
    out: list[WrittenTape] = []
    with ingest_lock(store):
        db = open_db(store)
        try:
            for events in tapes:
                written = write_tape(store.tapes_dir, store.objects_dir, events, redact_all=redactor.events,
                                     rules=redactor.digest,
                                     object_threshold=int(store.config["ingest"]["object_threshold"]))
                with immediate(db):
                    register(db, catalog_row(written.id, events, written.size, written.raw_bytes), [])
                if indexer is not None and (written.created or not _indexed(db, written.id)):
                    indexer(db, written)
                out.append(written)
            finish = getattr(indexer, "finish", None)
            if finish is not None and out:
                finish(db)
        finally:
            db.close()
    return out


def _indexed(db: apsw.Connection, tape: str) -> bool:
    return bool(db.execute("SELECT 1 FROM tapes WHERE id=? AND indexed=1", (tape,)).fetchall())


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
           workers: int | None = None, again: bool = False) -> IngestStats:
    """Capture every job; safe to re-run; one ingest per store at a time. Sessions removed by
    `engram tapes rm` are skipped, unless `again`: then they are captured anew.

    With several sessions and cores, sessions are parsed, written and fingerprinted in worker
    processes while this one keeps the catalog and the index (the only writer of index.sqlite);
    without an indexer (`after_tape` None) the workers capture and this process catalogues.
    """
    stats = stats or IngestStats()
    redactor = Redactor(store.config["redact"].get("patterns") or [])
    n_workers = _worker_count(len(jobs)) if workers is None else workers
    with ingest_turn(store) as turn:
        if not turn:
            log.info("an ingest started by a hook already waits for the running one: it will capture this too")
            return stats
        removed = removed_sessions(store)
        skip = frozenset() if again else removed
        db = open_db(store)
        try:
            reconcile(db, store)
            if len(jobs) > 1:
                captured = captured_ends(db)
                jobs = sorted(jobs, key=lambda job: (start_hint(job, captured.get(str(job.main), 0)), str(job.main)))
            restore = getattr(after_tape, "restore", None)
            if restore is not None:  # postings an interrupted run did not write
                restore(db)
            with _bulk_memory(after_tape, len(jobs)):
                if n_workers > 1 and (after_tape is None or hasattr(after_tape, "accept")):
                    _ingest_parallel(db, store, jobs, stats, maps or [], progress, after_tape, n_workers, skip)
                else:
                    _ingest_serial(db, store, jobs, stats, maps or [], progress, after_tape, redactor, skip)
                finish = getattr(after_tape, "finish", None)
                if finish is not None:
                    finish(db)
            if again and removed:
                back = [(h, sid) for h, sid in db.execute("SELECT DISTINCT harness, session_id FROM tapes")
                        if (h, sid) in removed]
                if back:
                    note_captured_again(store, back)
            stats.out_of_order += getattr(after_tape, "out_of_order", 0)
            stats.copied_uncaptured = _uncaptured(db, list(stats.copied))
            if hasattr(after_tape, "accept"):
                from engram.index.build import older_text_note  # noqa: PLC0415

                stats.older_text = older_text_note(db)
        finally:
            db.close()
    return stats


def _uncaptured(db: apsw.Connection, sessions: list[str]) -> list[str]:
    """Those of `sessions` the store has no tape of: sessions whose records other sessions' files
    repeat, whose own file was never captured here (Claude Code deletes old ones)."""
    if not sessions:
        return []
    have = {r[0] for r in db.execute(f"SELECT DISTINCT session_id FROM tapes WHERE session_id IN "
                                     f"({','.join('?' * len(sessions))})", sessions)}
    return sorted(s for s in sessions if s not in have)


def _ingest_serial(db: apsw.Connection, store: Store, jobs: list[Job], stats: IngestStats,
                   maps: list[tuple[str, str]], progress: Callable[[int, int], None] | None,
                   after_tape: Callable[[apsw.Connection, WrittenTape], None] | None, redactor: Redactor,
                   removed: frozenset[tuple[str, str]] = frozenset()) -> None:
    for i, job in enumerate(jobs):
        try:
            written = capture_job(db, store, job, stats, maps=maps, redactor=redactor, removed=removed)
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


def captured_ends(db: apsw.Connection) -> dict[str, int]:
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
_worker_db: tuple[int, str, int, apsw.Connection] | None = None  # (pid, index path, its inode, connection)


def _index_for_worker(store: Store) -> apsw.Connection:
    """The worker's read-only connection to the index, opened for its first session and kept.

    Why: a connection opened for each session (SQLite opening the file and its WAL, then reading
    the schema again at the first query) cost ~0.5 ms of CPU a session, as much as parsing 25 KB
    of transcript. Each query reads the latest commit, as a new connection would; the index is
    not replaced while an ingest holds its lock (`engram reindex` takes it), and a connection
    inherited from another process (a fork) is never used."""
    global _worker_db  # noqa: PLW0603 - one connection per worker process
    path, inode = str(store.index_path), index_inode(store)
    if _worker_db is None or _worker_db[:3] != (os.getpid(), path, inode):
        if _worker_db is not None and _worker_db[0] == os.getpid():
            _worker_db[3].close()
        _worker_db = (os.getpid(), path, inode, open_db(store, readonly=True))
    return _worker_db[3]


def _drop_worker_index() -> None:
    """Close the worker's connection after an error, so the next session opens a new one."""
    global _worker_db  # noqa: PLW0603
    if _worker_db is not None and _worker_db[0] == os.getpid():
        _worker_db[3].close()
    _worker_db = None


def _capture_in_worker(root: str, config: dict[str, Any], job: Job, maps: list[tuple[str, str]], k: int,
                       w: int, removed: frozenset[tuple[str, str]] = frozenset()) -> Captured:
    """Worker-process side: capture one job and, when the parent indexes (`k` > 0), fingerprint
    its tape for the parent's index."""
    global _worker_redactor  # noqa: PLW0603 - one compiled redactor per worker process
    store = Store(Path(root), config)
    if _worker_redactor is None:
        _worker_redactor = Redactor(config["redact"].get("patterns") or [])
    db = _index_for_worker(store)
    try:
        got = capture_write(db, store, job, maps=maps, redactor=_worker_redactor, removed=removed, publish_later=True)
    except (OSError, EngramError) as exc:
        _drop_worker_index()
        stats = IngestStats()
        stats.skipped[f"unreadable session file ({exc.__class__.__name__})"] += 1
        return Captured(stats)
    except BaseException:
        _drop_worker_index()
        raise
    if got.written is not None and got.written.events is not None:
        if k > 0:
            from engram.index.build import prepare_tape  # noqa: PLC0415

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


WORKER_LOST = "session not captured: a worker process was killed (out of memory?)"


def _worker_lost(stats: IngestStats, left: int) -> None:
    """A worker died (SIGKILL: what the OOM killer sends), which breaks the whole pool: every
    session it had not handed back is left for the next run. What was handed back is committed
    and indexed already (results are consumed in order), and the run ends normally so that the
    index is finished too; the user is told in one line what to do."""
    stats.skipped[WORKER_LOST] += left
    stats.failed += left
    log.warning("a worker process was killed (out of memory?): %s not captured; run `engram ingest` again to "
                "capture %s", plural(left, "session"), agree(left, "it", "them"))


def _start_method() -> str:
    """How the workers start: "fork" in a process with no other thread (the `engram ingest`
    command, on Linux), "forkserver" otherwise.

    Why: forked workers start at once with every module this process imported, while the
    forkserver first starts two interpreters (itself and multiprocessing's resource tracker) and
    imports the pipeline again: ~0.25 s before the first session reaches a worker and ~0.15 s of
    CPU per ingest, a fifth of a 100 MB capture's wall time on two cores (bench/README.md,
    `capture.py`). Forking a process with threads (a language server calling ingest, OpenBLAS's
    pool) can copy a lock another thread holds: those keep the forkserver. The threads are the
    operating system's (/proc/self/task), not only Python's."""
    if sys.platform != "linux":
        return "forkserver"
    try:
        threads = len(os.listdir("/proc/self/task"))
    except OSError:
        return "forkserver"
    return "fork" if threads == 1 else "forkserver"


def _ingest_parallel(db: apsw.Connection, store: Store, jobs: list[Job], stats: IngestStats,
                     maps: list[tuple[str, str]], progress: Callable[[int, int], None] | None,
                     indexer: Any, n_workers: int, removed: frozenset[tuple[str, str]] = frozenset()) -> None:
    """Capture `jobs` in `n_workers` processes, results committed (and indexed by `indexer`, when
    there is one) here in job order."""
    import multiprocessing  # noqa: PLC0415
    from concurrent.futures import Future, ProcessPoolExecutor  # noqa: PLC0415
    from concurrent.futures.process import BrokenProcessPool  # noqa: PLC0415

    k, w = indexer.resolve_params(db) if indexer is not None else (0, 0)
    preload = ["engram.capture.pipeline", *(["engram.index.build"] if indexer is not None else [])]
    ctx = multiprocessing.get_context(_start_method())
    if ctx.get_start_method() == "forkserver":
        ctx.set_forkserver_preload(preload)
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
            try:
                while submitted < len(jobs) and (len(pending) < 2 * n_workers or
                                                 (ahead < MAX_AHEAD_BYTES and len(pending) < MAX_AHEAD_JOBS)):
                    pending.append(pool.submit(_capture_in_worker, str(store.root), store.config, jobs[submitted],
                                               maps, k, w, removed))
                    ahead += sizes[submitted]
                    submitted += 1
                got = _result_of(pool, pending.pop(0))
            except (BrokenProcessPool, EOFError):  # (EOFError: the forkserver itself was killed)
                _worker_lost(stats, len(jobs) - i)
                return
            ahead -= sizes[i]
            _publish_ready(got, pending)
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


JAMMED_AFTER_S: Final = 1.0  # a dead worker the pool has not noticed by then has jammed it (`_result_of`)


def _result_of(pool: Any, fut: Any) -> Captured:
    """`fut.result()`, ending a pool a worker jammed by dying half-way through sending a result.

    Why: a worker killed (SIGKILL, the OOM killer) while it writes its result to the pool's pipe
    leaves part of a message there. CPython's pool (concurrent.futures, 3.11-3.13) reads it and
    waits for the rest for ever, since this process and the other workers hold the pipe's write end
    open: the ingest hung, holding the store's ingest lock, where a worker killed at any other
    moment makes the pool broken at once. Seen dead for `JAMMED_AFTER_S` with the pool not broken,
    the other workers are killed and this process's write end closed: the read ends (EOF) and the
    pool breaks as it does for any other lost worker, raising `BrokenProcessPool` here."""
    from concurrent.futures import TimeoutError as Waited  # noqa: PLC0415

    dead_since: float | None = None
    while True:
        try:
            return fut.result(timeout=0.25)
        except Waited:
            pass
        workers = list((getattr(pool, "_processes", None) or {}).values())  # (private: read only, may go)
        if not any(p.exitcode is not None for p in workers):
            continue
        now = time.monotonic()
        if dead_since is None:
            dead_since = now
        elif now - dead_since >= JAMMED_AFTER_S:
            _unjam(pool, workers)
            dead_since = float("inf")  # once


def _unjam(pool: Any, workers: list[Any]) -> None:
    """Close every write end of the pool's result pipe (`_result_of`): kill the live workers and
    close this process's end."""
    log.debug("a worker died while sending its result: ending the pool")
    for p in workers:
        if p.exitcode is None:
            p.kill()  # (not joined: the pool's own thread reaps them)
    writer = getattr(getattr(pool, "_result_queue", None), "_writer", None)
    if writer is not None:
        writer.close()


def _publish_ready(got: Captured, pending: list[Any]) -> None:
    """The tapes of `got` and of the results after it that are in already, put on disk together
    (`publish_tapes`: one directory sync); each is catalogued in its turn (`_commit`), which
    reports any that could not be."""
    ready = [got]
    for f in pending:
        if not f.done() or f.cancelled() or f.exception() is not None:
            break
        ready.append(f.result())
    tapes = [c.written for c in ready if c.written is not None and c.written.pending is not None]
    if len(tapes) > 1:
        try:
            publish_tapes(tapes)
        except OSError:
            pass  # (each tape's own `_commit` publishes it again, or says why it cannot)


def ingest_paths(store: Store, paths: list[Path], maps: list[tuple[str, str]] | None = None,
                 progress: Callable[[int, int], None] | None = None, merge_later: bool = False,
                 again: bool = False) -> IngestStats:
    """Capture and index the transcripts at `paths` (files, or directories searched for them):
    `engram ingest PATH...`, run here or by the language server it was handed to (which passes
    `merge_later`, see `merge_idle`)."""
    from engram.index.build import Indexer  # noqa: PLC0415 - numpy, only once there is something to index

    stats = IngestStats()
    ingest(store, jobs_from_paths(paths, stats), maps=maps, stats=stats, progress=progress,
           after_tape=Indexer(store, merge_later=merge_later), again=again)
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
    engram.cli.running_server): the same capture, reported as the command would print it."""
    paths, maps = params.get("paths"), params.get("maps") or []
    if not (isinstance(paths, list) and paths
            and all(isinstance(p, str) and os.path.isabs(p) and "\x00" not in p for p in paths)):
        raise BadInput("ingest: `paths` must be a non-empty list of absolute paths")
    if not (isinstance(maps, list) and all(isinstance(m, list) and len(m) == 2 and all(isinstance(x, str) for x in m)
                                           for m in maps)):
        raise BadInput("ingest: `maps` must be a list of [FROM, TO] pairs")
    for p in paths:
        _transcript_location(store, p)
    stats = ingest_paths(store, [Path(p) for p in paths], [(a, b) for a, b in maps], merge_later=merge_later)
    return stats.as_dict()


def _transcript_location(store: Store, path: str) -> None:
    """Refuse (NotAllowed) a path a running server is asked to ingest outside the places
    transcripts live: the repository, the harnesses' session folders and `ingest.transcript_dirs`.
    Anyone holding the endpoint's token could otherwise make any readable file (/etc/passwd) a
    tape; the command line, refused, ingests the path itself, as the user it runs as. The session
    folders, not the harnesses' homes: ~/.claude/history.jsonl (every prompt of every project) and
    ~/.codex/config.toml (its servers' tokens) became tapes."""
    from engram.errors import NotAllowed  # noqa: PLC0415

    from engram.capture.discovery import claude_home, codex_home  # noqa: PLC0415

    real = os.path.realpath(path)
    extra = store.config["ingest"].get("transcript_dirs") or []
    sessions = (claude_home() / "projects", codex_home() / "sessions", codex_home() / "archived_sessions")
    for root in (store.root, *sessions, *(Path(os.path.expanduser(str(d))) for d in extra)):
        top = os.path.realpath(root)
        if real == top or real.startswith(top.rstrip(os.sep) + os.sep):
            return
    raise NotAllowed(f"ingest: {path} is outside the transcript locations a running server reads (the repository, "
                     "~/.claude/projects, ~/.codex/sessions, [ingest] transcript_dirs in .engram/config.toml)")


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
