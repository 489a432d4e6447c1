"""Finding agent sessions: where each harness keeps them, which belong to this repository, and
which format a given file is in (Claude Code, Codex, Gemini CLI, Qwen Code, OpenCode, Aider,
SpecStory, Cline / Roo Code, Engram events, or plain text)."""

from __future__ import annotations

import errno
import fnmatch
import logging
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterable, Iterator

import orjson

from engram.adapters.base import SourceSpan, folds_case, is_windows_path, posix_path, relative_to
from engram.capture.stats import IngestStats
from engram.errors import BadInput
from engram.fsutil import is_utf8, looks_binary
from engram.store.location import STORE_DIR
from engram.store.repo import git_toplevel, git_worktrees
from engram.tape import events as E
from engram.words import plural

log = logging.getLogger(__name__)

CLAUDE = "claude-code"
CODEX = "codex"
RAW = "raw"
EVENTS = "events"
AIDER = "aider"
SPECSTORY = "specstory"
CLINE = "cline"
ROO = "roo-code"
CLINE_TASK_FILE = "api_conversation_history.json"
GEMINI = "gemini-cli"
QWEN = "qwen-code"
OPENCODE = "opencode"
COPILOT = "copilot-cli"
# Formats whose sessions are one JSON document (or a markdown export), not JSONL: a directory
# given to `engram ingest` is searched for them too, keeping only files these formats claim.
WHOLE_FILE_FORMATS = (GEMINI, OPENCODE, ROO, QWEN)  # ROO, QWEN: markdown exports (roo_task_*.md, qwen-code-export-*.md)


@dataclass
class Job:
    """One session to capture: its harness and source files."""

    harness: str
    sources: list[SourceSpan]
    part: str | None = None  # the session within a file holding several (an aider run: its start)

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
    found = _format_of_document(head)
    if found is not None:
        return found
    if looks_binary(head):  # binary junk, but for a task export that showed a UTF-16 file (its NUL bytes)
        from engram.adapters import roo_export  # noqa: PLC0415

        return ROO if roo_export.is_export(head) else None
    from engram.adapters.aider import is_history  # noqa: PLC0415

    if is_history(head):
        return AIDER
    from engram.adapters.specstory import is_export  # noqa: PLC0415

    if is_export(head):
        return SPECSTORY
    from engram.adapters import qwen_export, roo_export  # noqa: PLC0415

    if roo_export.is_export(head):
        return ROO
    if qwen_export.is_export(head):
        return QWEN
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # a cut multi-byte character at the end is fine
            return None
    return RAW


def _format_of_document(head: bytes) -> str | None:
    """The harness of a file that is one JSON document or a markdown export (Gemini CLI's session
    and `/chat share` files, OpenCode's export and session files), judged from its start."""
    from engram.adapters import gemini, opencode  # noqa: PLC0415

    if gemini.sniff(head):
        return GEMINI
    if opencode.sniff(head):
        return OPENCODE
    return None


def _format_of_lines(lines: list[bytes]) -> str | None:
    """The harness of the first of these lines that is a record one of them writes."""
    from engram.adapters.sniff import looks_like_claude, looks_like_copilot, looks_like_qwen  # noqa: PLC0415

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
        if "sessionId" in rec and "projectHash" in rec and "uuid" not in rec:
            return GEMINI  # the chat recording's metadata line (or a whole legacy record on one line)
        if looks_like_qwen(rec):
            return QWEN  # before Claude Code: the same envelope around a Gemini Content
        if looks_like_copilot(rec):
            return COPILOT
        if looks_like_claude(rec):
            return CLAUDE
    return None


def jobs_for_file(path: Path, fmt: str) -> list[Job]:
    """The sessions a file holds: one, except an aider history (one per run of aider)."""
    if fmt == AIDER:
        from engram.adapters.aider import runs  # noqa: PLC0415

        return [Job(AIDER, [SourceSpan("main", path)], started) for _, started in runs(path)]
    return [job_for_file(path, fmt)]


def job_for_file(path: Path, fmt: str) -> Job:
    if fmt == CLAUDE:
        from engram.adapters.claude import session_sources  # noqa: PLC0415

        return Job(CLAUDE, session_sources(path))
    return Job(fmt, [SourceSpan("main", path)])


def _is_specstory_file(path: Path) -> bool:
    """A SpecStory export where SpecStory saves them: `.specstory/history/*.md`."""
    return path.parent.name == "history" and path.parent.parent.name == ".specstory"


def _is_subagent_file(path: Path) -> bool:
    return path.parent.name == "subagents" and (path.parent.parent.with_suffix(".jsonl")).is_file()


#: Folders whose files are never transcripts: engram's own store (its memory log and records are
#: JSON Lines; read as plain text they became a session that "discussed" every anchored line) and git's.
NOT_TRANSCRIPTS = (STORE_DIR, ".git")


def _not_transcripts(f: Path, under: Path | None = None) -> bool:
    parts = (f.relative_to(under) if under is not None else f.resolve()).parts
    return any(d in parts[:-1] for d in NOT_TRANSCRIPTS)


def jobs_from_paths(paths: list[Path], stats: IngestStats) -> list[Job]:
    jobs: list[Job] = []
    for p in paths:
        if p.is_dir() and _not_transcripts(p / "x"):
            stats.skipped[f"engram's own store or git's folder ({p}): not transcripts"] += 1
        elif p.is_dir():
            tree = _Tree(p)
            files = sorted(f for f in tree.glob("*.jsonl") if f.is_file() and not _is_subagent_file(f))
            files += sorted(f for f in tree.named(AIDER_HISTORY) if f.is_file())
            files += sorted(f for f in tree.glob("*.md") if f.is_file() and _is_specstory_file(f))
            files += sorted(f for f in tree.named(CLINE_TASK_FILE) if f.is_file())
            files += [f for f in _whole_file_sessions(tree) if f not in files]
            files = [f for f in files if not _not_transcripts(f, p)]
            if not files:
                stats.skipped[f"no transcripts (*.jsonl, {AIDER_HISTORY}, Gemini CLI / OpenCode *.json) "
                              f"under directory {p}"] += 1
            for f in files:
                _add_file(jobs, f, stats)
        elif p.is_file() and _not_transcripts(p):
            stats.skipped[f"engram's own store or git's folder ({p}): not a transcript"] += 1
        elif p.is_file():
            _add_file(jobs, p, stats)
        elif p.exists():
            raise BadInput(f"{p}: not a regular file or a directory (a pipe or a device?); save the transcript "
                           "to a file, or pipe it to `engram record --stdin`")
        else:
            raise BadInput(f"{p}: no such file or directory")
    return jobs


class _Tree:
    """What `Path.rglob` finds under a directory, from one walk of it for every pattern.

    Why: discovery searched a directory given to `engram ingest` six times (`rglob` of each kind
    of transcript file), ~25 ms of the start of a capture of 213 files, before any worker runs.
    The walk is `rglob`'s (Python 3.11): every directory but those reached through a symbolic link,
    one that cannot be listed (PermissionError) left out; names are matched as `rglob` matches
    them (a pattern with `fnmatch`, case-blind only on Windows; a plain name as a path that
    exists)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dirs: list[tuple[str, list[str]]] = []  # (directory, the names in it)
        self._walk(str(root))

    def _walk(self, d: str) -> None:
        try:
            with os.scandir(d) as it:
                entries = list(it)
        except PermissionError:
            return
        self.dirs.append((d, [e.name for e in entries]))
        for e in entries:
            try:
                into = e.is_dir() and not e.is_symlink()
            except OSError as exc:
                if exc.errno not in _IGNORED_ERRNOS:
                    raise
                into = False
            if into:
                self._walk(e.path)

    def glob(self, pattern: str) -> list[Path]:
        """`root.rglob(pattern)` for a pattern of one name (`*.jsonl`), in no particular order."""
        return [Path(d, n) for d, names in self.dirs for n in fnmatch.filter(names, pattern)]

    def named(self, name: str) -> list[Path]:
        """`root.rglob(name)` for a plain file name: where a path of that name exists."""
        fold = name.casefold()
        return [Path(d, name) for d, names in self.dirs
                if name in names or (any(n.casefold() == fold for n in names) and os.path.exists(os.path.join(d, name)))]


_IGNORED_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})  # (pathlib's `_ignore_error`)


def _whole_file_sessions(tree: _Tree) -> list[Path]:
    """The *.json and *.md files of `tree` that are Gemini CLI or OpenCode sessions or exports
    (any other JSON or markdown there is not a transcript: it is left alone)."""
    found = []
    for pattern in ("*.json", "*.md"):
        for f in sorted(tree.glob(pattern)):
            if f.is_file() and f.stat().st_size and detect_format(f) in WHOLE_FILE_FORMATS:
                found.append(f)
    return found


def _add_file(jobs: list[Job], f: Path, stats: IngestStats) -> None:
    if not is_utf8(str(f.resolve())):  # (a tape names its sources as UTF-8 text: it was a traceback)
        stats.skipped["a file name that is not UTF-8 (rename it: convmv -f latin1 -t utf8 FILE)"] += 1
        return
    if f.stat().st_size == 0:
        stats.skipped["empty file"] += 1
        return
    if f.name == CLINE_TASK_FILE:  # a Cline / Roo Code task's conversation
        jobs.append(cline_job(f.resolve()))
        return
    if _roo_report(f):  # a Roo Code diagnostics file: its task, unless its JSON was damaged
        if _roo_report_parses(f):
            jobs.append(cline_job(f.resolve()))
            return
        stats.skipped["a Roo Code diagnostics file whose JSON does not parse (changed by a formatter?): "
                      "captured as plain text instead"] += 1
    fmt = detect_format(f)
    if fmt is None and (stored := _store_jobs(f)):
        jobs.extend(stored)
        return
    if fmt is None:
        stats.skipped["not a transcript (binary or undecodable)"] += 1
        return
    found = jobs_for_file(f.resolve(), fmt)
    if not found:
        stats.skipped[f"{AIDER_HISTORY} without a message (aider started and left)"] += 1
    jobs.extend(found)


AIDER_HISTORY = ".aider.chat.history.md"


def _store_jobs(f: Path) -> list[Job]:
    """Every session of an OpenCode SQLite store given by its path (`engram ingest opencode.db`)."""
    from engram.adapters import opencode_db  # noqa: PLC0415

    try:
        with f.open("rb") as fh:
            if not opencode_db.is_store(fh.read(16)):
                return []
    except OSError:
        return []
    return [Job(OPENCODE, [opencode_db.source(f.resolve(), sid)]) for sid, _ in opencode_db.sessions(f)]


def _roo_report(f: Path) -> bool:
    from engram.adapters.sniff import is_roo_report  # noqa: PLC0415

    return is_roo_report(f)


def _roo_report_parses(f: Path) -> bool:
    from engram.adapters.cline import report_parses  # noqa: PLC0415

    return report_parses(f)


def cline_job(path: Path) -> Job:
    from engram.adapters.cline import harness_of, task_sources  # noqa: PLC0415

    return Job(harness_of(path), task_sources(path))


# VS Code and the editors built on it keep an extension's data under User/globalStorage/<extension id>.
_EDITORS = ("Code", "Code - Insiders", "Cursor", "VSCodium", "Windsurf")
_TASK_EXTENSIONS = {CLINE: "saoudrizwan.claude-dev", ROO: "rooveterinaryinc.roo-cline"}


def cline_task_dirs() -> list[tuple[str, Path]]:
    """Where Cline and Roo Code keep their task folders, per editor, on this system: (harness,
    `…/User/globalStorage/<extension>/tasks`); `VSCODE_APPDATA` (VS Code's own variable) moves the
    editors' user data, `CLINE_DIR` Cline's standalone (CLI) data (`~/.cline/data`)."""
    import sys  # noqa: PLC0415

    home = Path.home()
    if os.environ.get("VSCODE_APPDATA"):
        base = Path(os.environ["VSCODE_APPDATA"])
    elif sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    elif sys.platform == "win32":
        base = Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming")
    else:
        base = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    out = [(h, base / editor / "User" / "globalStorage" / ext / "tasks")
           for editor in _EDITORS for h, ext in _TASK_EXTENSIONS.items()]
    out.append((CLINE, Path(os.environ.get("CLINE_DIR") or home / ".cline" / "data") / "tasks"))
    return out


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


def _first_line_with(path: Path, needle: bytes, chunk: int = 1 << 20, first: int = 16 << 10) -> int | None:
    """The offset of the start of the first line of `path` holding `needle`, found without
    parsing (a resumed session's copied records can be most of a large file); None if absent.

    Blocks grow from `first` bytes to `chunk`: the needle (a session's id) is nearly always in
    the first line, and a first block of 1 MiB read most of every session file, ~9 ms for the 53
    sessions of the 100 MB benchmark corpus, before a capture's workers start."""
    line_start = 0
    size = min(first, chunk)
    try:
        with path.open("rb") as f:
            at, tail = 0, b""  # `tail`: the end of the previous block, where a needle may begin
            while block := f.read(size):
                size = min(size * 4, chunk)
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
        if fmt == COPILOT and rec.get("type") == "session.start":
            context = (rec.get("data") or {}).get("context") if isinstance(rec.get("data"), dict) else None
            return context.get("cwd") if isinstance(context, dict) and isinstance(context.get("cwd"), str) else None
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
    if job.part:  # one run of a file holding several: its header's start
        return job.part.replace(" ", "T")
    if captured:  # records are appended in time order: the first with a time says when it begins
        first = next((ts for rec in _head_records(job.main, captured) if isinstance(ts := _time_of(rec), str)), None)
        if first:
            return first
    if job.sources[0].digest is not None:  # a session of OpenCode's store: its row says
        from engram.adapters import opencode_db  # noqa: PLC0415

        sid = opencode_db.session_id_of(job.sources[0])
        return (opencode_db.started(job.main, sid) if sid else None) or ""
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
    if fmt == SPECSTORY:
        from engram.adapters.specstory import started as export_started  # noqa: PLC0415

        return export_started(path)
    if fmt in (GEMINI, OPENCODE, COPILOT):
        from engram.adapters import copilot, gemini, opencode  # noqa: PLC0415

        return {GEMINI: gemini, OPENCODE: opencode, COPILOT: copilot}[fmt].started(path)
    if fmt == CODEX:
        from engram.adapters.codex import started  # noqa: PLC0415
    elif fmt == EVENTS:
        from engram.adapters.events import started  # noqa: PLC0415
    else:
        return None
    return started(records)


def discover(repo_root: Path, claude_dir: Path | None, codex_dir: Path | None, stats: IngestStats,
             report: DiscoveryReport | None = None, maps: list[tuple[str, str]] | None = None) -> list[Job]:
    """This repository's sessions where the harnesses keep them (cwd inside a work tree of ours).
    `report`, when given, is filled with every directory looked in and what was found there.
    `maps` (`--map FROM=TO`) apply to a session's cwd before it is compared, as capture applies
    them: a session recorded in another checkout is ours when its mapped cwd is."""
    from engram.adapters.base import apply_maps  # noqa: PLC0415

    trees = [str(t) for t in repo_trees(repo_root)]
    report = report if report is not None else DiscoveryReport()
    report.trees = trees

    def ours(cwd: str | None) -> bool:
        if cwd is None:
            return False
        p = PurePosixPath(posix_path(cwd))
        if maps:
            p = PurePosixPath(apply_maps(str(p), maps, folds_case(p)))
        return any(relative_to(p, PurePosixPath(t), folds_case(p)) is not None for t in trees)

    jobs: list[Job] = []
    cdir = claude_dir or claude_home() / "projects"
    for place, files in _places(CLAUDE, cdir, by_project=True, report=report):
        for f in files:
            if not _is_subagent_file(f) and place.saw(f, _first_cwd(f, CLAUDE), ours):
                jobs.append(job_for_file(f.resolve(), CLAUDE))
    if cdir.is_dir() and not any(p.matched for p in report.places if p.harness == CLAUDE):
        for t in trees:
            expected = cdir / claude_project_name(t)
            if not expected.exists():
                why = f"no such directory, so no Claude Code session ran in {t} (its sessions would be kept here)"
                report.places.append(Place(CLAUDE, expected, problem=why))
    xdir = codex_dir or codex_home()
    for sub in (["sessions", "archived_sessions"] if codex_dir is None else [""]):
        for place, files in _places(CODEX, xdir / sub if sub else xdir, by_project=False, report=report):
            for f in files:
                if place.saw(f, _first_cwd(f, CODEX), ours):
                    jobs.append(job_for_file(f.resolve(), CODEX))
    jobs += _in_trees(trees, report)
    jobs += _cline_tasks(ours, report)
    jobs += discover_more(trees, ours, report)
    return jobs


def _cline_tasks(ours: Callable[[str | None], bool], report: DiscoveryReport) -> list[Job]:
    """The Cline / Roo Code tasks (default folders, `cline_task_dirs`) whose working directory is ours."""
    from engram.adapters.cline import first_cwd  # noqa: PLC0415

    jobs: list[Job] = []
    for harness, root in cline_task_dirs():
        if not root.is_dir():
            continue  # (one folder per editor and extension: only those that exist are reported)
        place = Place(harness, root)
        report.places.append(place)
        for f in sorted(root.glob(f"*/{CLINE_TASK_FILE}")):
            if place.saw(f, first_cwd(f), ours):
                jobs.append(cline_job(f.resolve()))
    return jobs


def aider_histories(tree: Path) -> list[Path]:
    """Where aider keeps the chat history of a run in `tree`: `.aider.chat.history.md` in its root,
    or the file `AIDER_CHAT_HISTORY_FILE` names (relative to the tree, as aider takes it)."""
    named = os.environ.get("AIDER_CHAT_HISTORY_FILE")
    out = [tree / AIDER_HISTORY]
    if named:
        out.insert(0, Path(os.path.expanduser(named)) if os.path.isabs(os.path.expanduser(named)) else tree / named)
    return list(dict.fromkeys(out))


def _in_trees(trees: list[str], report: DiscoveryReport) -> list[Job]:
    """The sessions kept inside this repository's work trees (an aider history, SpecStory's
    exports are written, and often committed, there): found wherever the tree is, whoever ran them."""
    jobs: list[Job] = []
    for t in trees:
        for f in aider_histories(Path(t)):
            if not f.is_file():
                continue
            place = Place(AIDER, f)
            report.places.append(place)
            found = jobs_for_file(f.resolve(), AIDER) if detect_format(f) == AIDER else []
            place.sessions = place.matched = len(found)
            if not found:
                place.problem = "not an aider chat history, or no run with a message"
            jobs += found
        history = Path(t) / ".specstory" / "history"
        if history.is_dir():
            place = Place(SPECSTORY, history)
            report.places.append(place)
            for f in sorted(history.glob("*.md")):
                place.sessions += 1
                if f.is_file() and detect_format(f) == SPECSTORY:
                    place.matched += 1
                    jobs.append(Job(SPECSTORY, [SourceSpan("main", f.resolve())]))
    return jobs


def gemini_home() -> Path:
    """Gemini CLI's folder: `$GEMINI_CLI_HOME/.gemini` (the variable replaces the home directory),
    else `~/.gemini`, on every system."""
    return Path(os.environ.get("GEMINI_CLI_HOME") or Path.home()) / ".gemini"


def qwen_home() -> Path:
    """Where Qwen Code keeps its sessions: `$QWEN_RUNTIME_DIR`, else `~/.qwen`."""
    return Path(os.environ.get("QWEN_RUNTIME_DIR") or Path.home() / ".qwen")


def copilot_home() -> Path:
    """GitHub Copilot CLI's folder: `$COPILOT_HOME`, else `~/.copilot`, on every system."""
    return Path(os.environ.get("COPILOT_HOME") or Path.home() / ".copilot")


def opencode_data() -> Path:
    """OpenCode's data folder: `$XDG_DATA_HOME/opencode`, else `~/.local/share/opencode` (its
    xdg-basedir default on Linux, macOS and Windows alike)."""
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "opencode"


def discover_more(trees: list[str], ours: Callable[[str | None], bool], report: DiscoveryReport) -> list[Job]:
    """This repository's Gemini CLI, Qwen Code, OpenCode and Copilot CLI sessions, where those
    tools keep them. A tool's folder that does not exist is not reported (most people use one or two)."""
    import hashlib  # noqa: PLC0415

    jobs: list[Job] = []
    hashes = {hashlib.sha256(t.encode()).hexdigest(): t for t in trees}
    for harness, tmp in ((GEMINI, gemini_home() / "tmp"), (QWEN, qwen_home() / "tmp")):
        if not tmp.is_dir():
            continue
        for project in sorted(d for d in tmp.iterdir() if d.is_dir() and (d / "chats").is_dir()):
            marker = project / ".project_root"
            cwd = _small_text(marker) if marker.is_file() else hashes.get(project.name)
            place = Place(harness, project / "chats")
            report.places.append(place)
            for f in sorted(project.glob("chats/**/session-*.json*")) + sorted(project.glob("chats/*/*.jsonl")):
                if f.is_file() and place.saw(f, cwd, ours):
                    fmt = detect_format(f)
                    if fmt in (GEMINI, QWEN):
                        jobs.append(job_for_file(f.resolve(), fmt))
    projects = qwen_home() / "projects"
    if projects.is_dir():
        for place, files in _places(QWEN, projects, by_project=True, report=report):
            for f in files:
                if f.parent.name == "chats" and place.saw(f, _first_cwd(f, CLAUDE), ours) and detect_format(f) == QWEN:
                    jobs.append(job_for_file(f.resolve(), QWEN))
    jobs += _copilot_sessions(ours, report)
    storage = opencode_data() / "storage" / "session"
    if storage.is_dir():
        place = Place(OPENCODE, storage)
        report.places.append(place)
        for f in sorted(storage.rglob("*.json")):
            if f.is_file() and place.saw(f, _opencode_directory(f), ours):
                jobs.append(job_for_file(f.resolve(), OPENCODE))
    jobs += _opencode_store(opencode_data() / "opencode.db", ours, report)
    return jobs


def _opencode_store(store: Path, ours: Callable[[str | None], bool], report: DiscoveryReport) -> list[Job]:
    """The sessions of OpenCode's SQLite store (OpenCode >= 1.2) whose directory is a work tree,
    read without writing or holding a lock on it (engram.adapters.opencode_db)."""
    from engram.adapters import opencode_db  # noqa: PLC0415

    if not store.is_file() or store.is_symlink():
        return []
    place = Place(OPENCODE, store)
    report.places.append(place)
    return [Job(OPENCODE, [opencode_db.source(store.resolve(), sid)])
            for sid, cwd in opencode_db.sessions(store) if place.saw(store, cwd, ours)]


def _copilot_sessions(ours: Callable[[str | None], bool], report: DiscoveryReport) -> list[Job]:
    """Copilot CLI's session logs: `session-state/<id>/events.jsonl` (older releases:
    `session-state/<id>.jsonl`), each this repository's when its start names a work tree."""
    state = copilot_home() / "session-state"
    if not state.is_dir():
        return []
    place = Place(COPILOT, state)
    report.places.append(place)
    jobs = []
    for f in sorted(state.glob("*/events.jsonl")) + sorted(state.glob("*.jsonl")):
        if f.is_file() and not f.is_symlink() and place.saw(f, _first_cwd(f, COPILOT), ours):
            jobs.append(job_for_file(f.resolve(), COPILOT))
    return jobs


def _small_text(path: Path) -> str | None:
    try:
        return path.read_text("utf-8").strip() or None if path.stat().st_size < 4096 else None
    except (OSError, UnicodeDecodeError):
        return None


def _opencode_directory(path: Path) -> str | None:
    """The working directory an OpenCode session file records (`directory`)."""
    try:
        with path.open("rb") as f:
            rec = orjson.loads(f.read(1 << 20))
    except (OSError, orjson.JSONDecodeError):
        return None
    return rec.get("directory") if isinstance(rec, dict) and isinstance(rec.get("directory"), str) else None


@dataclass
class Place:
    """One directory discovery looked in, and what it found there."""

    harness: str
    path: Path
    problem: str | None = None  # "no such directory", "unreadable (…)": nothing could be looked at
    sessions: int = 0
    matched: int = 0
    cwds: Counter[str] = field(default_factory=Counter)  # the working directories of sessions not ours
    no_cwd: int = 0
    unreadable: int = 0

    def saw(self, f: Path, cwd: str | None, ours: Callable[[str | None], bool]) -> bool:
        """Count a session file found here; whether it is one of this repository's."""
        self.sessions += 1
        if ours(cwd):
            self.matched += 1
            return True
        if cwd is not None:
            self.cwds[cwd] += 1
        elif os.access(f, os.R_OK):
            self.no_cwd += 1
        else:
            self.unreadable += 1
        return False

    def why_not(self) -> str:
        """Why none of this directory's sessions is one of this repository's, in a few words."""
        if self.problem:
            return self.problem
        if not self.sessions:
            return "no sessions (*.jsonl) there"
        parts = []
        if self.cwds:
            seen = ", ".join(f"{cwd} ({n})" for cwd, n in self.cwds.most_common(3))
            more = len(self.cwds) - 3
            parts.append(f"{plural(sum(self.cwds.values()), 'session')} ran elsewhere: {seen}"
                         + (f" and {plural(more, 'other directory', 'other directories')}" if more > 0 else ""))
        if self.no_cwd:
            parts.append(f"{plural(self.no_cwd, 'session')} without a recorded working directory")
        if self.unreadable:
            parts.append(f"{plural(self.unreadable, 'session file')} unreadable (permissions)")
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {"harness": self.harness, "path": str(self.path), "problem": self.problem, "sessions": self.sessions,
                "matched": self.matched, "cwds": dict(self.cwds.most_common(10)), "no_cwd": self.no_cwd,
                "unreadable": self.unreadable}


@dataclass
class DiscoveryReport:
    """Where `discover` looked and, for each directory, why its sessions did or did not match:
    what `engram ingest` shows when it finds nothing (and with --verbose), and `engram doctor`."""

    trees: list[str] = field(default_factory=list)  # this repository's work trees, which a session's cwd must be in
    places: list[Place] = field(default_factory=list)

    @property
    def found(self) -> int:
        return sum(p.matched for p in self.places)

    def lines(self, every: bool = False) -> list[str]:
        """For people: the directories with sessions of this repository, then the others and why
        not; `every`: all of them, else the most telling few (a Claude Code home holds one
        directory per project)."""
        out = [f"looked for sessions whose working directory is in {', '.join(self.trees)}:"]
        for p in self.places:
            if p.matched:
                out.append(f"  {p.path}: {plural(p.matched, 'session')} of this repository")
        misses = sorted((p for p in self.places if not p.matched), key=self._telling)
        shown = misses if every else misses[:MISSES_SHOWN]
        out += [f"  {p.path}: {p.why_not()}" for p in shown]
        if len(misses) > len(shown):
            n = len(misses) - len(shown)
            out.append(f"  and {plural(n, 'other directory', 'other directories')} without a session of this "
                       "repository (`engram ingest --verbose` lists them)")
        return out

    def _telling(self, p: Place) -> tuple[int, int, str]:
        """Missing harness homes first, then directories whose sessions ran in a directory named
        like one of ours (a moved or other checkout), then the busiest."""
        names = {PurePosixPath(t).name for t in self.trees}
        like_ours = any(PurePosixPath(posix_path(cwd)).name in names for cwd in p.cwds)
        return (0 if p.problem else 1 if like_ours else 2, -p.sessions, str(p.path))

    def as_dict(self) -> dict[str, Any]:
        return {"trees": self.trees, "found": self.found, "places": [p.as_dict() for p in self.places]}


MISSES_SHOWN = 5


def claude_project_name(cwd: str) -> str:
    """The directory Claude Code keeps the sessions run in `cwd` in, under its projects directory:
    the path with every character but a letter or a digit made a dash."""
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


def _places(harness: str, root: Path, *, by_project: bool,
            report: DiscoveryReport) -> Iterator[tuple[Place, list[Path]]]:
    """The directories to look in under `root` (with `by_project`, one per project directory, as
    Claude Code keeps them), each as a Place added to `report` and its session files."""
    if not root.is_dir():
        report.places.append(Place(harness, root, problem="no such directory"))
        return
    dirs = [root]
    if by_project:
        try:
            dirs = sorted(d for d in root.iterdir() if d.is_dir())
        except OSError as exc:
            report.places.append(Place(harness, root, problem=f"unreadable ({exc.strerror or exc})"))
            return
        if any(root.glob("*.jsonl")) or not dirs:
            dirs.insert(0, root)
    for d in dirs:
        place = Place(harness, d)
        report.places.append(place)
        if not os.access(d, os.R_OK | os.X_OK):
            place.problem = "unreadable (permission denied)"
            continue
        files = sorted(d.glob("*.jsonl")) if d == root and by_project else sorted(d.rglob("*.jsonl"))
        yield place, [f for f in files if f.is_file()]


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
