"""Entire checkpoint branches (`entire/checkpoints/v1`, entireio/cli): agent sessions' transcripts
committed to git, read as sessions to capture.

The branch's tree holds a folder per checkpoint, `<id[:2]>/<id[2:]>/` (a 12-hex-digit id that a
commit of the project names in its `Entire-Checkpoint:` trailer), with the checkpoint's
`metadata.json` (`files_touched`, and `sessions`: the paths of each session's files) and a
numbered folder per session: `metadata.json` (`session_id`, `created_at`, `agent`,
`files_touched`), `full.jsonl` (the harness's own transcript, Claude Code's JSONL for most),
`prompt.txt`, `context.md`, `content_hash.txt`. A session that spans checkpoints has its whole
transcript, grown, in each: the latest is captured (`latest_per_session`), through the same
adapters as a session file found on disk (`engram.capture.discovery.detect_format`), so an
ingest captures a grown session's new part only and a re-ingest captures nothing."""

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


def latest_per_session(entries: list[EntireSession]) -> list[EntireSession]:
    """For each session with a transcript, its entry in the latest checkpoint (the largest
    transcript among equals): the whole session so far. A transcript object missing from this
    clone (size 0: a partial clone, a damaged mirror) is taken only when no other is there."""
    best: dict[str, EntireSession] = {}
    for e in entries:
        if e.blob is None:
            continue
        have = best.get(e.session_id)  # a transcript this clone lacks (size 0) only when there is no other
        if have is None or (e.size > 0, e.created_at, e.size) > (have.size > 0, have.created_at, have.size):
            best[e.session_id] = e
    return sorted(best.values(), key=lambda e: (e.created_at, e.session_id))


def stage(repo: Path, entries: list[EntireSession], into: Path) -> list[tuple[EntireSession, Path]]:
    """Write each entry's transcript under `into`, at its path in the branch (which the tape's
    meta then records as the source), and return where."""
    data = git.read_blobs(repo, [e.blob for e in entries if e.blob])
    out = []
    for e in entries:
        content = data.get(e.blob or "")
        if content is None or e.transcript is None:
            continue
        path = into / BRANCH / e.transcript
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        out.append((e, path))
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
