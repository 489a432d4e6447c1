"""A file's earlier paths, from git's rename history: the span's file under the names it had.

A repository that moved a file after the sessions that wrote it (`client/src/x.js` → `src/x.js`,
by hand or by a tool no session recorded) holds their edits under the old path. Matched by their
text, those edits were edits of another file, so the session that wrote the span never counted
as its writer and a later session that carried the lines under the old path came first (issue
52, Ahmad-A0/Inversity-SnapSwap: writer recall@1 0.900). The paths git follows the file back
through (`git log --follow`), when no file of the working tree is at them now, are the file's
own: `explain.run` reads them only when the answer holds a code fragment of a path gone from the
tree, once per file and HEAD in a process (again after STALE_S).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Final

from engram.gitread import git_output
from engram.query.spans import in_tree

log = logging.getLogger(__name__)

# git log --follow walks the whole history of the file; past this, the answer goes without it.
TIMEOUT_S: Final = 5.0
_CACHE_MAX: Final = 256
# A file's history read this long ago is read again (a language server runs for days; in a
# worktree nothing cheap says that HEAD moved).
STALE_S: Final = 60.0

_cache: dict[tuple[str, str, int], tuple[float, frozenset[str]]] = {}


def _head_stamp(root: Path) -> int:
    """Something that changes when HEAD or the index moves (their mtimes in `.git`); 0 in a
    worktree (its `.git` is a file naming a folder elsewhere, not read: `STALE_S` bounds it)."""
    stamp = 0
    for name in ("HEAD", "index"):
        try:
            stamp ^= os.stat(os.path.join(os.fspath(root), ".git", name)).st_mtime_ns
        except OSError:
            pass
    return stamp


def _followed(root: Path, file: str) -> frozenset[str]:
    """Every path `git log --follow` names for `file`'s history, `file` left out."""
    out = git_output(root, "log", "--follow", "-M", "--name-status", "-z", "--format=", "--", file, timeout=TIMEOUT_S)
    if out is None:
        return frozenset()
    paths: set[str] = set()
    fields = [f.strip("\n") for f in out.decode("utf-8", "surrogateescape").split("\0")]
    fields = [f for f in fields if f]
    i = 0
    while i < len(fields):  # STATUS PATH, or R/C SCORE OLD NEW, NUL-separated (names as they are)
        named = 2 if fields[i][:1] in {"R", "C"} else 1
        paths.update(fields[i + 1:i + 1 + named])
        i += 1 + named
    paths.discard(file)
    return frozenset(p for p in paths if p and not os.path.isabs(p) and ".." not in p.split("/"))


def earlier_paths(root: Path, file: str) -> frozenset[str]:
    """The paths `file` had before git renames brought it to where it is, that no file of the
    working tree holds now (a path in use is another file's, whatever its history)."""
    key = (os.fspath(root), file, _head_stamp(root))
    now = time.monotonic()
    read, paths = _cache.get(key, (0.0, None))
    if paths is None or now - read > STALE_S:
        if len(_cache) >= _CACHE_MAX:
            _cache.clear()
        paths = _followed(root, file)
        _cache[key] = (now, paths)
    return frozenset(p for p in paths if not in_tree(root, p))


def gone(root: Path, file: str, paths: set[str]) -> set[str]:
    """Of `paths` (files an answer's code fragments name), those with `file`'s name in another
    folder that no file of the working tree is at: the ones worth asking git about. None when
    `file` itself is not in the tree (a text span, a deleted file): it has no history to follow.

    Only a move to another folder under the same name (the usual refactor) is followed: a
    fragment of any deleted file would otherwise make every explain near it pay for a `git log
    --follow` (0.2-0.5 s on a 6,000-commit repository, seconds on a large one); a file renamed
    as well as moved keeps its edits under the old name, as before."""
    name = file.rsplit("/", 1)[-1]
    candidates = {p for p in paths if p != file and p.rsplit("/", 1)[-1] == name}
    if not candidates or not in_tree(root, file):
        return set()
    return {p for p in candidates if not in_tree(root, p)}
