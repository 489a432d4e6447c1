"""`engram record`: a command run under Engram, or a transcript piped in, becomes a tape.

A recorded command keeps its terminal (it runs on a pseudo-terminal whose output we copy to
ours), and the files it changed in the repository are diffed before/after into `code.edit`s.
"""

from __future__ import annotations

import datetime as dt
import difflib
import hashlib
import logging
import os
import pty
import shlex
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Callable

import apsw

from engram.adapters.unified import join_lines, split_lines
from engram.capture.discovery import EVENTS, RAW, Job, detect_format, job_for_file
from engram.capture.pipeline import ingest, store_events
from engram.capture.stats import IngestStats
from engram.errors import BadInput
from engram.fsutil import is_utf8, looks_binary, shown_bytes
from engram.gitread import git_output
from engram.store.repo import Store
from engram.tape import events as E
from engram.tape.writer import WrittenTape

log = logging.getLogger(__name__)

MAX_SNAPSHOT_BYTES = 2 * 1024 * 1024
FORMATS = {"claude": "claude-code", "codex": "codex", "events": EVENTS, "raw": RAW}


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _tracked_files(root: Path) -> list[str]:
    out = git_output(root, "ls-files", "-co", "--exclude-standard", "-z", timeout=60)
    if out is not None:
        return sorted(p for p in out.decode("utf-8", "surrogateescape").split("\0") if p)
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            files.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(files)


def snapshot(root: Path) -> dict[str, str]:
    """Text content of the repository's regular files (binary and huge files left out). A symbolic
    link is left out too: git keeps it as its target's name, and its target is another file of the
    tree (whose change is that file's) or outside the repository, which a tape must not copy."""
    snap: dict[str, str] = {}
    for rel in _tracked_files(root):
        if rel.startswith(".engram/"):
            continue
        if not _utf8_name(rel):
            continue
        p = root / rel
        try:
            st = p.lstat()
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SNAPSHOT_BYTES:
                continue
            data = p.read_bytes()
        except OSError:
            continue
        if looks_binary(data):
            continue
        snap[rel] = data.decode("utf-8", "replace")
    return snap


def _utf8_name(rel: str) -> bool:
    """Whether a tape can name this file (its events are UTF-8 JSON); else a warning, once per
    snapshot it is in (a Latin-1 name lost the whole recording)."""
    if is_utf8(rel):
        return True
    log.warning("%s: a file name that is not UTF-8, left out of the tape (rename it: convmv -f latin1 -t utf8)",
                shown_bytes(rel))
    return False


def diff_edits(before: dict[str, str], after: dict[str, str], ts: str) -> list[dict[str, Any]]:
    """One `code.edit` per changed file, covering the span from its first to its last change
    (with `hunks` when it changed separate regions)."""
    edits: list[dict[str, Any]] = []
    for rel in sorted(set(before) | set(after)):
        old, new = before.get(rel), after.get(rel)
        if old == new:
            continue
        ev: dict[str, Any] = {"kind": E.CODE_EDIT, "ts": ts, "file": rel, "tool": "record"}
        a, b = split_lines(old or ""), split_lines(new or "")
        if old is None:
            ev.update(op="create", before_range=[1, 0], after_range=[1, len(b)])
        elif new is None:
            ev.update(op="delete", before_range=[1, len(a)], after_range=[1, 0])
        else:
            ops = [op for op in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if op[0] != "equal"]
            i1, j1 = ops[0][1], ops[0][3]
            i2, j2 = ops[-1][2], ops[-1][4]
            ev.update(op="update", before_range=[i1 + 1, i2], after_range=[j1 + 1, j2])
            if len(ops) > 1:  # separate regions: the index takes their lines only (kinds.edit_texts)
                ev["hunks"] = [[o[1] + 1, o[2], o[3] + 1, o[4]] for o in ops]
        br, ar = ev["before_range"], ev["after_range"]
        ev.update(before_text=join_lines(a[br[0] - 1:br[1]]), after_text=join_lines(b[ar[0] - 1:ar[1]]),
                  file_before_sha=E.git_blob_sha(old) if old is not None else None,
                  file_after_sha=E.git_blob_sha(new) if new is not None else None)
        ev["before_sha"] = E.sha256_text(ev["before_text"])
        ev["after_sha"] = E.sha256_text(ev["after_text"])
        edits.append(ev)
    return edits


def _runnable(cmd: list[str]) -> None:
    """Refuse a command that cannot start, before anything runs: `pty.spawn` forks first, so a
    failed exec raised in the child, which went on as a second engram, printed its error into the
    recorded output and left a tape of a command that never ran."""
    import shutil  # noqa: PLC0415

    if shutil.which(cmd[0]) is None:
        where = "no such file, or not executable" if os.sep in cmd[0] else "no such command on PATH"
        raise BadInput(f"cannot run {cmd[0]!r}: {where}; nothing was recorded")


def _run_on_pty(cmd: list[str]) -> tuple[int, bytes]:
    """Run `cmd` with the terminal passed through; return its exit status and output."""
    _runnable(cmd)
    captured = bytearray()

    def read(fd: int) -> bytes:
        data = os.read(fd, 65536)
        captured.extend(data)
        return data

    stdin_read, argv, kept = _stdin_for(cmd)
    try:
        status = pty.spawn(argv, read, *([stdin_read] if stdin_read else []))
    except OSError as exc:
        raise BadInput(f"cannot run {cmd[0]!r}: {exc.strerror}") from exc
    finally:
        if kept is not None:
            os.close(kept)
    return os.waitstatus_to_exitcode(status), bytes(captured)


def _never_read(fd: int) -> bytes:
    """pty.spawn's read of our stdin when the command reads it itself: nothing taken, none passed."""
    return b""


def _stdin_for(cmd: list[str]) -> tuple[Callable[[int], bytes] | None, list[str], int | None]:
    """How the command gets our stdin: (pty.spawn's stdin reader, the argv to spawn, a descriptor to
    close after). A terminal is passed through the pty, as typed. A pipe or a file (`engram record --
    cat < in.txt`, stdin /dev/null in CI) is handed to the command itself, so that it reads the real
    input to its real end: through the pty, pty.spawn stopped at the end and the command waited for
    more for ever (an end-of-file character sent in its place raced the command's start)."""
    if os.isatty(0):
        return None, cmd, None
    try:
        kept = os.dup(0)
    except OSError:  # (no stdin at all)
        return None, cmd, None
    os.set_inheritable(kept, True)
    # the descriptor then holds the terminal, open until the command ends: a command that closes its
    # output before it exits (cat does) would otherwise end pty.spawn's copy, whose closing of the
    # terminal hung the command up (SIGHUP) before its exit
    return _never_read, ["sh", "-c", f'exec 0<&{kept} {kept}>&1; exec "$@"', "sh", *cmd], kept


def record_command(store: Store, cmd: list[str],
                   after_tape: Callable[[apsw.Connection, WrittenTape], None] | None = None) -> tuple[int, str]:

    before = snapshot(store.root)
    started = _now()
    sys.stdout.flush()
    code, output = _run_on_pty(cmd)
    ended = _now()
    after = snapshot(store.root)
    command = shlex.join(cmd)
    session_id = "record-" + hashlib.sha256(f"{started}\0{command}".encode()).hexdigest()[:16]
    text = output.decode("utf-8", "replace").replace("\r\n", "\n")
    events: list[dict[str, Any]] = [
        {"kind": E.META, "v": E.TAPE_FORMAT, "harness": "record", "harness_version": None, "model": None,
         "session_id": session_id, "cwd": str(Path.cwd()), "git_head": _git_head(store.root), "git_branch": None,
         "started": started, "ended": ended, "sources": [], "prev": None},
        {"kind": E.TOOL_CALL, "ts": started, "call_id": "cmd", "name": "shell", "input": {"command": command}},
        {"kind": E.TOOL_RESULT, "ts": ended, "call_id": "cmd", "name": "shell", "is_error": code != 0,
         "exit_code": code, "stdout": text, "stderr": ""},
        *diff_edits(before, after, ended),
    ]
    written = store_events(store, events, after_tape)
    return code, written.id


def _git_head(root: Path) -> str | None:
    out = git_output(root, "rev-parse", "HEAD", timeout=10)
    return out.decode("ascii", "replace").strip() or None if out is not None else None


def record_stdin(store: Store, fmt: str | None, stream: BinaryIO,
                 after_tape: Callable[[apsw.Connection, WrittenTape], None] | None = None) -> IngestStats:
    """A transcript on stdin, captured like a file.

    It passes through a private temporary file named by its content (so a re-run finds the same
    session and changes nothing) that is deleted afterwards: unredacted input is never kept.
    """
    data = stream.read()
    stats = IngestStats()
    if not data.strip():
        stats.skipped["empty input on stdin"] += 1
        return stats
    digest = hashlib.sha256(data).hexdigest()[:32]
    tmpdir = Path(tempfile.gettempdir()) / f"engram-stdin-{os.getuid()}"
    tmpdir.mkdir(mode=0o700, exist_ok=True)
    path = tmpdir / f"{digest}.jsonl"
    # stdin at its end is the whole transcript: a last line without its newline is complete, not
    # one still being written for a next ingest to finish (there is none for stdin)
    path.write_bytes(data if data.endswith(b"\n") else data + b"\n")
    try:
        harness = FORMATS[fmt] if fmt else detect_format(path)
        if harness is None:
            stats.skipped["not a transcript (binary or undecodable)"] += 1
            return stats
        job: Job = job_for_file(path, harness)
        ingest(store, [job], stats=stats, after_tape=after_tape)
        if fmt == "raw":  # asked for: the note that it held no agent's records, read as text, is no news
            stats.as_text = 0
        return stats
    finally:
        path.unlink(missing_ok=True)
