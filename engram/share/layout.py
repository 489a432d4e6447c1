"""How a store travels in git: the refs, the trees and the files in them (docs/sharing.md).

Two kinds of ref, all under `refs/engram/` (no branch, no tag: a plain `git clone` or `git fetch`
never fetches them):

- `refs/engram/tapes/<clone>/<YYYY-MM>`: a *shard*, the tape files one clone pushed for the
  sessions of one month, with the objects they refer to: `<tape id>.jsonl.zst` and
  `objects/<ab>/<rest>`, byte for byte as in `.engram/`. Only that clone writes it, so its pushes
  never race; `pull --since` fetches only the months it wants.
- `refs/engram/index`: the shared catalogue, small: `format.json`, `sessions/<tape id>.json`
  (where the tape is, its git blob, its objects, its session's harness, times and commit),
  `tombstones/<tape id>.json` (purged tapes) and `memories/<log file>` (the team's memory log).

Every file name is a content address or a single writer's, so two clones' trees union without
conflict: a rejected push fetches the new tip, unions its tree with what it adds, and pushes a
commit whose parent is that tip (a fast-forward, never forced). A tombstone wins over the tape it
names on every union.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from engram.errors import ShareError
from engram.share.git import Git, TreeEntry

NAMESPACE = "refs/engram/"
INDEX_REF = "refs/engram/index"
SHARD_PREFIX = "refs/engram/tapes/"
TRACKING_PREFIX = "refs/engram-remotes/"  # this clone's copies of remotes' refs (tracking_ref)
FORMAT = 1
FORMAT_FILE = "format.json"
SESSIONS = "sessions/"
TOMBSTONES = "tombstones/"
MEMORIES = "memories/"
TAPE_SUFFIX = ".jsonl.zst"
UNDATED = "undated"

_ADDRESS = re.compile(r"^[0-9a-f]{64}$")
_LOG_NAME = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}\.[0-9A-Za-z_-]{1,64}\.jsonl$")


def is_address(name: str) -> bool:
    return bool(_ADDRESS.match(name))


def is_log_name(name: str) -> bool:
    return bool(_LOG_NAME.match(name))


def month_of(started: str | None) -> str:
    """The shard month of a session that began at `started` (ISO time), or UNDATED."""
    if isinstance(started, str) and re.match(r"^[0-9]{4}-[0-9]{2}", started):
        return started[:7]
    return UNDATED


def shard_ref(clone: str, month: str) -> str:
    return f"{SHARD_PREFIX}{clone}/{month}"


def tracking_ref(remote: str, ref: str) -> str:
    """Where this repository keeps its copy of `ref` of `remote` (outside `refs/engram/`, which
    is pushed, and outside `refs/remotes/`, which branch tools list)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", remote).strip("._") or "remote"
    return f"{TRACKING_PREFIX}{safe}/{ref[len(NAMESPACE):]}"


def format_blob() -> bytes:
    return orjson.dumps({"format": FORMAT, "what": "engram store (docs/sharing.md)"}) + b"\n"


@dataclass
class RemoteIndex:
    """What `refs/engram/index` holds, as read from its tree."""

    commit: str | None = None
    files: dict[str, str] = field(default_factory=dict)  # path -> blob sha, every file of the tree
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)  # tape id -> its entry
    tombstones: dict[str, dict[str, Any]] = field(default_factory=dict)  # tape id -> its record
    memories: dict[str, str] = field(default_factory=dict)  # log file name -> blob sha


def read_index(git: Git, commit: str | None, remote: str) -> RemoteIndex:
    """The index at `commit` (None: an empty one). Raises ShareError when the ref points at
    something that is not an Engram index (another tool's ref, a blob, a later format)."""
    out = RemoteIndex(commit)
    if commit is None:
        return out
    kind = git.object_type(commit)
    if kind != "commit":
        raise ShareError(f"{INDEX_REF} on {remote!r} points at {'a ' + kind if kind else 'a missing object'} "
                         f"({commit[:12]}), not an Engram index commit: leave it to whoever wrote it, or delete "
                         f"that ref on the remote (`git push {remote} :{INDEX_REF}`) and push again")
    tree = git.tree(commit)
    fmt = tree.get(FORMAT_FILE)
    doc = _json_blob(git, fmt) if fmt is not None else None
    if not isinstance(doc, dict) or not isinstance(doc.get("format"), int):
        raise ShareError(f"{INDEX_REF} on {remote!r} ({commit[:12]}) holds no {FORMAT_FILE}: it was not written "
                         "by engram; delete that ref on the remote if it is garbage, then push again")
    if doc["format"] > FORMAT:
        raise ShareError(f"{INDEX_REF} on {remote!r} is in format {doc['format']}, newer than this engram reads "
                         f"({FORMAT}): upgrade engram")
    out.files = {p: e.sha for p, e in tree.items()}
    docs = _json_blobs(git, [e for p, e in tree.items() if p.startswith((SESSIONS, TOMBSTONES))])
    for path, entry in tree.items():
        name = path.rsplit("/", 1)[-1]
        if path.startswith(SESSIONS) and name.endswith(".json") and is_address(name[:-5]):
            got = docs.get(entry.sha)
            if isinstance(got, dict):
                out.sessions[name[:-5]] = got
        elif path.startswith(TOMBSTONES) and name.endswith(".json") and is_address(name[:-5]):
            got = docs.get(entry.sha)
            out.tombstones[name[:-5]] = got if isinstance(got, dict) else {}
        elif path.startswith(MEMORIES) and is_log_name(name):
            out.memories[name] = entry.sha
    return out


def _json_blob(git: Git, entry: TreeEntry) -> Any:
    return _json_blobs(git, [entry]).get(entry.sha)


def _json_blobs(git: Git, entries: list[TreeEntry]) -> dict[str, Any]:
    """Parsed JSON of each blob, by sha (unparsable ones left out)."""
    out: dict[str, Any] = {}
    for sha, data in git.blobs(sorted({e.sha for e in entries})):
        if data is None:
            continue
        try:
            out[sha] = orjson.loads(data)
        except orjson.JSONDecodeError:
            continue
    return out


def session_doc(entry: dict[str, Any]) -> bytes:
    return orjson.dumps(entry, option=orjson.OPT_SORT_KEYS) + b"\n"
