"""The sources other tools keep in the repository itself, read by `engram ingest`: an Entire
checkpoint branch's transcripts and git-ai's authorship notes, when the repository has them.

Both are cheap to look at when nothing changed: `.engram/run/interop.json` remembers the branch
and notes commits last read, and which transcript of each Entire session and which notes were
taken. It is only a cache: without it everything is read again and nothing new is written (a
session already captured as far as Entire has it is left alone, the same note makes the same
tape). A source that cannot be read (a ref pointing at garbage, a note that is not an authorship
log) is a line of the report, never a failed ingest, and writes nothing of that source."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from engram.capture.stats import IngestStats
from engram.errors import EngramError
from engram.interop import entire, git, gitai, tapes
from engram.store.repo import Store
from engram.words import plural

log = logging.getLogger(__name__)

CACHE = "interop.json"
BATCH = 32  # Entire sessions staged and captured at a time (their transcripts can be megabytes each)
BATCH_BYTES = 256 << 20  # and at most this many bytes of them (the largest alone when larger)


@dataclass
class SourcesReport:
    entire_ref: str | None = None
    entire_found: int = 0  # sessions with a transcript on the branch
    entire_captured: int = 0  # handed to capture this run (new or grown)
    entire_held: int = 0  # already captured as far as the branch has them
    entire_missing: int = 0  # whose transcript object this clone lacks
    notes: gitai.NotesReport | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        """Whether the repository holds sessions itself (an Entire branch with one, git-ai notes):
        no session in the harnesses' homes is then no sign that anything is missing."""
        return self.entire_found > 0 or (self.notes is not None and (self.notes.unchanged or self.notes.sessions > 0))

    def as_dict(self) -> dict[str, Any]:
        return {"entire": {"ref": self.entire_ref, "sessions": self.entire_found, "captured": self.entire_captured,
                           "already_held": self.entire_held, "missing": self.entire_missing},
                "git_ai": self.notes.as_dict() if self.notes else None, "problems": self.problems}

    def lines(self) -> list[str]:
        out = []
        if self.entire_ref:
            out.append(f"Entire checkpoints ({self.entire_ref.removeprefix('refs/heads/')}): "
                       f"{plural(self.entire_found, 'session')}, {self.entire_captured} read this time"
                       + (f", {self.entire_held} already captured" if self.entire_held else ""))
        if self.notes is not None:
            out.append(self.notes.line())
        out += [f"skipped: {p}" for p in self.problems]
        return out


def ingest_repository_sources(store: Store, stats: IngestStats, indexer: Callable[[], Any], *,
                              repo: Path | None = None, limit: int | None = None) -> SourcesReport:
    """Capture the Entire sessions and git-ai notes of `repo` (default: the store's repository)
    into `store`; `limit`: at most that many Entire sessions (the latest), for a quick look."""
    repo = repo or store.root
    report = SourcesReport()
    if not git.is_repository(repo):
        return report
    cache = _load(store)
    for step in (_entire, _notes):
        try:
            step(store, repo, stats, indexer, cache, report, limit)
        except EngramError as exc:
            report.problems.append(str(exc))
    _save(store, cache)
    return report


def _entire(store: Store, repo: Path, stats: IngestStats, indexer: Callable[[], Any], cache: dict[str, Any],
            report: SourcesReport, limit: int | None) -> None:
    found = entire.find_branch(repo)
    if found is None:
        return
    ref, commit = found
    report.entire_ref = ref
    seen = cache.setdefault("entire", {}).setdefault(ref, {"commit": None, "sessions": {}})
    if seen.get("commit") == commit and limit is None and not seen.get("missing"):
        report.entire_found = int(seen.get("found") or 0)  # the branch did not move: nothing to read
        return
    chosen = entire.by_session(entire.sessions(repo, commit))
    report.entire_found = seen["found"] = len(chosen)
    if limit is not None:
        chosen = chosen[-limit:]
    todo = [s for s in chosen if seen["sessions"].get(s.session_id) != s.key]
    held = _captured_ends(store, [s.latest.harness_session for s in todo])
    fresh = [s for s in todo if held.get(s.latest.harness_session, -1) < s.size]
    report.entire_held = len(todo) - len(fresh)
    for s in todo:
        if s not in fresh:
            seen["sessions"][s.session_id] = s.key
    from engram.capture.discovery import detect_format, job_for_file  # noqa: PLC0415
    from engram.capture.pipeline import ingest  # noqa: PLC0415

    for batch in _batches(fresh):
        with tempfile.TemporaryDirectory(prefix="engram-entire-") as tmp:
            os.chmod(tmp, 0o700)  # transcripts are read before redaction: nobody else may
            jobs, staged = [], entire.stage(repo, batch, Path(tmp))
            for _, path in staged:
                fmt = detect_format(path)
                if fmt is None:
                    stats.skipped["Entire transcript that is no transcript (binary or undecodable)"] += 1
                    continue
                jobs.append(job_for_file(path, fmt))
            ingest(store, jobs, stats=stats, after_tape=indexer(), workers=1)
        for s, _ in staged:
            seen["sessions"][s.session_id] = s.key
        report.entire_captured += len(staged)
        report.entire_missing += len(batch) - len(staged)
    if report.entire_missing:
        report.problems.append(f"{plural(report.entire_missing, 'Entire session')}' transcripts not in this clone "
                               f"(missing git objects): `git fetch origin {entire.BRANCH}` fetches them")
    seen["commit"], seen["missing"] = commit, report.entire_missing


def _batches(sessions: list[entire.SessionPieces]) -> list[list[entire.SessionPieces]]:
    """Sessions in groups of at most BATCH, or of BATCH_BYTES of transcripts (staged on disk together)."""
    out: list[list[entire.SessionPieces]] = []
    size = 0
    for s in sessions:
        if not out or len(out[-1]) >= BATCH or size + s.size > BATCH_BYTES:
            out.append([])
            size = 0
        out[-1].append(s)
        size += s.size
    return out


def _captured_ends(store: Store, sessions: list[str]) -> dict[str, int]:
    """How far (bytes of its main file) the store captured each of `sessions`, from anywhere."""
    if not sessions:
        return {}
    from engram.index.db import open_db  # noqa: PLC0415

    db = open_db(store)
    try:
        rows = db.execute("SELECT session_id, max(end) FROM captures WHERE source='main' AND session_id IN "
                          f"({','.join('?' * len(sessions))}) GROUP BY session_id", sessions).fetchall()
    finally:
        db.close()
    return {sid: int(end) for sid, end in rows}


def _notes(store: Store, repo: Path, stats: IngestStats, indexer: Callable[[], Any], cache: dict[str, Any],
           report: SourcesReport, limit: int | None) -> None:
    found = git.refs(repo, gitai.NOTES_REF)
    if not found:
        return
    tip = git.commit_of(repo, gitai.NOTES_REF, found[gitai.NOTES_REF])
    report.notes = gitai.NotesReport()
    if cache.get("git_ai_commit") == tip:
        report.notes.unchanged = True  # no note added or changed since the last ingest
        return
    done = set(cache.get("git_ai_notes") or [])
    pairs = [(blob, commit) for blob, commit in git.notes(repo, "ai") if f"{blob} {commit}" not in done]
    made = gitai.note_tapes(repo, pairs, report.notes)
    report.notes.tapes_new, report.notes.tapes_known, _ = tapes.store(store, made)
    report.problems += report.notes.problems
    cache["git_ai_notes"] = sorted(done | {f"{b} {c}" for b, c in pairs})
    cache["git_ai_commit"] = tip


def _load(store: Store) -> dict[str, Any]:
    try:
        value = orjson.loads((store.run_dir / CACHE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def _save(store: Store, cache: dict[str, Any]) -> None:
    from engram.fsutil import atomic_write  # noqa: PLC0415

    try:
        store.run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(store.run_dir / CACHE, orjson.dumps(cache), mode=0o600)
    except OSError as exc:
        log.warning("could not keep %s (%s): the next ingest reads the sources again", CACHE, exc)
