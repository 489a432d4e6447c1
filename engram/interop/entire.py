"""Entire checkpoint branches (`entire/checkpoints/v1`, entireio/cli): agent sessions' transcripts
committed to git, read as sessions to capture.

The branch's tree holds a folder per checkpoint, `<id[:2]>/<id[2:]>/` (a 12-hex-digit id that a
commit of the project names in its `Entire-Checkpoint:` trailer), with the checkpoint's
`metadata.json` (`files_touched`, and `sessions`: the paths of each session's files) and a
numbered folder per session: `metadata.json` (`session_id`, `created_at`, `agent`,
`files_touched`), `full.jsonl` (the harness's own transcript, Claude Code's JSONL for most),
`prompt.txt`, `context.md`, `content_hash.txt`. A session that spans checkpoints has its whole
transcript so far in each, or only its part since the previous one: its pieces are merged into one
transcript (`merge_pieces`), captured through the same adapters as a session file found on disk
(`engram.capture.discovery.detect_format`), so an ingest captures a grown session's new part only
and a re-ingest captures nothing."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from engram.interop import git

log = logging.getLogger(__name__)

BRANCH: Final = "entire/checkpoints/v1"
REF_PATTERNS: Final = (f"refs/heads/{BRANCH}", f"refs/remotes/*/{BRANCH}")
_SESSION_META = re.compile(r"^([0-9a-f]{2})/([0-9a-f]{6,})/([0-9]+)/metadata\.json$")
_DATED = re.compile(r"^\d{4}-\d{2}-\d{2}-(.+)$")


@dataclass
class EntireSession:
    """One session's entry in one checkpoint."""

    session_id: str
    checkpoint: str
    folder: str  # `ab/cdef012345/0`
    transcript: str | None  # its path in the branch
    blob: str | None
    size: int
    created_at: str
    agent: str | None
    files_touched: list[str] = field(default_factory=list)

    @property
    def harness_session(self) -> str:
        """The id the harness gave the session (early Entire prefixed it with the date)."""
        m = _DATED.match(self.session_id)
        return m.group(1) if m else self.session_id


def find_branch(repo: Path) -> tuple[str, str] | None:
    """(ref, commit) of the checkpoint branch: the local branch, else a remote's; None when the
    repository has none. A ref that points at something not a commit is a BadInput."""
    found = git.refs(repo, *REF_PATTERNS)
    if not found:
        return None
    ref = f"refs/heads/{BRANCH}" if f"refs/heads/{BRANCH}" in found else min(found)
    return ref, git.commit_of(repo, ref, found[ref])


def sessions(repo: Path, commit: str) -> list[EntireSession]:
    """Every session entry of every checkpoint in the branch at `commit`."""
    files = git.tree_files(repo, commit)
    metas = [p for p in files if _SESSION_META.match(p)]
    blobs = git.read_blobs(repo, [files[p] for p in metas])
    sizes = _sizes(repo, [files[p] for p in files if p.endswith(".jsonl")])
    out = []
    for p in metas:
        data = blobs.get(files[p])
        meta = _json(data)
        sid = meta.get("session_id") if meta else None
        if not isinstance(sid, str) or not sid:
            log.info("%s: no session_id; skipped", p)
            continue
        m = _SESSION_META.match(p)
        assert m is not None
        folder = f"{m.group(1)}/{m.group(2)}/{m.group(3)}"
        transcript = _transcript_of(folder, files)
        blob = files.get(transcript) if transcript else None
        touched = meta.get("files_touched") if isinstance(meta.get("files_touched"), list) else []
        out.append(EntireSession(sid, m.group(1) + m.group(2), folder, transcript, blob, sizes.get(blob or "", 0),
                                 str(meta.get("created_at") or ""), _str(meta.get("agent")),
                                 [f for f in touched if isinstance(f, str)]))
    return out


def _transcript_of(folder: str, files: dict[str, str]) -> str | None:
    """The session's transcript: `full.jsonl`, else its one other `.jsonl`/`.json` file."""
    if f"{folder}/full.jsonl" in files:
        return f"{folder}/full.jsonl"
    others = sorted(p for p in files if p.startswith(folder + "/") and p.endswith((".jsonl", ".json"))
                    and not p.endswith("metadata.json"))
    return others[0] if len(others) == 1 else None


@dataclass
class SessionPieces:
    """A session's transcripts on the branch, one per checkpoint it spans, oldest first."""

    session_id: str
    pieces: list[EntireSession]

    @property
    def latest(self) -> EntireSession:
        return self.pieces[-1]

    @property
    def key(self) -> str:
        """What changes when the session gains a piece (the cache's record of what was read)."""
        return ",".join(p.blob or "" for p in self.pieces)

    @property
    def size(self) -> int:
        return max(p.size for p in self.pieces)


def by_session(entries: list[EntireSession]) -> list[SessionPieces]:
    """Each session's entries that have a transcript, in the order they were made (the largest
    last among equals). A transcript object missing from this clone (size 0: a partial clone, a
    damaged mirror) is left out; a session with none left is kept, with its pieces all missing."""
    groups: dict[str, list[EntireSession]] = {}
    for e in entries:
        if e.blob is not None:
            groups.setdefault(e.session_id, []).append(e)
    out = []
    for sid, group in groups.items():
        present = [e for e in group if e.size > 0] or group
        out.append(SessionPieces(sid, sorted(present, key=lambda e: (e.created_at, e.size, e.folder))))
    return sorted(out, key=lambda s: (s.latest.created_at, s.session_id))


def merge_pieces(pieces: list[bytes]) -> bytes:
    """One transcript from a session's pieces, oldest first. A checkpoint's transcript is most
    often the whole session so far (it then replaces what came before: a prefix of it) and
    sometimes only its part since the previous checkpoint: then each line not already had is
    appended (a Claude Code record is had when its uuid and type are; any other line, when its
    bytes are). Lines are kept verbatim."""
    merged: list[bytes] = []
    keys: set[bytes] = set()
    for data in pieces:
        lines = [x for x in data.split(b"\n") if x.strip()]
        if lines[:len(merged)] == merged:
            merged, keys = lines, {_line_key(x) for x in lines}
            continue
        for raw in lines:
            k = _line_key(raw)
            if k not in keys:
                keys.add(k)
                merged.append(raw)
    return b"\n".join(merged) + b"\n" if merged else b""


def _line_key(raw: bytes) -> bytes:
    try:
        rec = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw
    if isinstance(rec, dict) and isinstance(rec.get("uuid"), str):
        return f"{rec['uuid']}/{rec.get('type')}".encode()
    return raw


def stage(repo: Path, sessions: list[SessionPieces], into: Path) -> list[tuple[SessionPieces, Path]]:
    """Write each session's transcript (its pieces merged) under `into`, at the path of its latest
    piece in the branch (which the tape's meta then records as the source), and return where. A
    session none of whose pieces this clone holds is left out."""
    out = []
    for s in sessions:  # one session's pieces in memory at a time
        data = git.read_blobs(repo, [p.blob for p in s.pieces if p.blob])
        pieces = [c for p in s.pieces if (c := data.get(p.blob or "")) is not None]
        content = merge_pieces(pieces) if len(pieces) > 1 else (pieces[0] if pieces else b"")
        if not content or s.latest.transcript is None:
            continue
        path = into / BRANCH / s.latest.transcript
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        out.append((s, path))
    return out


def _sizes(repo: Path, blobs: list[str]) -> dict[str, int]:
    if not blobs:
        return {}
    out = git.git(repo, "cat-file", "--batch-check", stdin="".join(f"{b}\n" for b in blobs).encode())
    sizes = {}
    for line in out.decode().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].isdigit():
            sizes[parts[0]] = int(parts[2])
    return sizes


def _json(data: bytes | None) -> dict[str, Any] | None:
    if data is None:
        return None
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
