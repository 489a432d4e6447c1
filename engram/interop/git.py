"""Reading a repository with git, never writing it: refs, trees, blobs and notes.

Every failure that is the repository's (a ref pointing at something that is not a commit, a
missing object) is a `BadInput` naming the ref or object, so `engram ingest` can say which source
it skipped and why; git missing altogether is one too."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Iterable
from datetime import UTC
from pathlib import Path

from engram.errors import BadInput

log = logging.getLogger(__name__)

TIMEOUT = 120


def git(repo: Path, *args: str, stdin: bytes | None = None, check: bool = True) -> bytes:
    """The standard output of `git -C repo ARGS...`; a BadInput with git's own message on failure."""
    try:
        out = subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, timeout=TIMEOUT,
                             check=False)
    except FileNotFoundError:
        raise BadInput("git is not installed (it is needed to read git notes and checkpoint branches)") from None
    except subprocess.TimeoutExpired:
        raise BadInput(f"git {' '.join(args[:2])} took more than {TIMEOUT} s in {repo}") from None
    if check and out.returncode != 0:
        msg = out.stderr.decode("utf-8", "replace").strip().splitlines()
        raise BadInput(f"git {' '.join(args[:3])}: {msg[-1] if msg else f'exit status {out.returncode}'}")
    return out.stdout


def is_repository(repo: Path) -> bool:
    return git(repo, "rev-parse", "--git-dir", check=False) != b""


def refs(repo: Path, *patterns: str) -> dict[str, str]:
    """Ref name → the object it points at, for the refs matching `patterns` (for-each-ref's)."""
    out = git(repo, "for-each-ref", "--format=%(refname) %(objectname)", *patterns, check=False)
    found = {}
    for line in out.decode("utf-8", "replace").splitlines():
        name, _, obj = line.partition(" ")
        found[name] = obj
    return found


def object_type(repo: Path, obj: str) -> str | None:
    out = git(repo, "cat-file", "-t", obj, check=False).strip()
    return out.decode() if out else None


def commit_of(repo: Path, ref: str, obj: str) -> str:
    """`obj`, which `ref` points at, when it is a commit; else a BadInput saying what it is."""
    kind = object_type(repo, obj)
    if kind != "commit":
        what = f"a {kind}" if kind else "a missing object"
        raise BadInput(f"{ref} points at {what} ({obj[:12]}), not a commit: the ref is damaged; "
                       f"fetch it again (`git fetch origin {ref.removeprefix('refs/heads/')}`) or delete it")
    return obj


def resolve_commit(repo: Path, rev: str) -> str | None:
    """The commit `rev` names, or None."""
    out = git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}", check=False)
    return out.decode().strip() or None


def tree_files(repo: Path, commit: str) -> dict[str, str]:
    """Path → blob id of every file in `commit`'s tree."""
    out = git(repo, "ls-tree", "-r", "-z", "--full-tree", commit)
    files = {}
    for entry in out.split(b"\0"):
        if not entry:
            continue
        head, _, path = entry.partition(b"\t")
        parts = head.split()
        if len(parts) == 3 and parts[1] == b"blob":
            files[path.decode("utf-8", "surrogateescape")] = parts[2].decode()
    return files


def read_blobs(repo: Path, objects: Iterable[str]) -> dict[str, bytes | None]:
    """The content of each object (a blob id or `REV:path`), None for one git does not have; read
    through one `git cat-file --batch`."""
    names = list(dict.fromkeys(objects))
    if not names:
        return {}
    out = git(repo, "cat-file", "--batch", stdin="".join(f"{n}\n" for n in names).encode("utf-8", "surrogateescape"))
    found: dict[str, bytes | None] = {}
    at = 0
    for name in names:
        nl = out.index(b"\n", at)
        header = out[at:nl].split()
        at = nl + 1
        if len(header) != 3:  # "<name> missing" or "ambiguous"
            found[name] = None
            continue
        size = int(header[2])
        found[name] = out[at:at + size] if header[1] == b"blob" else None
        at += size + 1
    return found


def commit_time(repo: Path, commit: str) -> str | None:
    """The commit's committer date, ISO 8601 in UTC."""
    out = git(repo, "show", "-s", "--format=%cI", commit, check=False).decode().strip()
    if not out:
        return None
    from datetime import datetime  # noqa: PLC0415

    return datetime.fromisoformat(out).astimezone(UTC).isoformat().replace("+00:00", "Z")


def notes(repo: Path, ref: str) -> list[tuple[str, str]]:
    """(note blob, annotated commit) of every note under `ref` (`git notes --ref list`)."""
    out = git(repo, "notes", f"--ref={ref}", "list")
    pairs = []
    for line in out.decode().splitlines():
        blob, _, commit = line.partition(" ")
        if blob and commit:
            pairs.append((blob, commit))
    return pairs


def added_lines(repo: Path, commit: str, path: str) -> list[tuple[int, int]] | None:
    """The line ranges (1-based, inclusive) `commit` added or changed in `path`, against its first
    parent; None for a root commit (every line is new)."""
    parent = git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^", check=False).decode().strip()
    if not parent:
        return None
    out = git(repo, "diff", "--no-color", "--no-ext-diff", "-U0", parent, commit, "--", path)
    ranges = []
    for line in out.decode("utf-8", "replace").splitlines():
        if line.startswith("@@ "):
            new = line.split()[2]  # +c,d
            start, _, count = new[1:].partition(",")
            n = int(count) if count else 1
            if n:
                ranges.append((int(start), int(start) + n - 1))
    return ranges


def changed_files(repo: Path, commit: str) -> list[str]:
    """The files `commit` added, changed or renamed into (against its first parent)."""
    out = git(repo, "diff-tree", "--root", "--no-commit-id", "-r", "-z", "-M", "--name-only", "--diff-filter=AMR",
              commit)
    return [p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p]
