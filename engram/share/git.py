"""The few git plumbing commands sharing needs, run in the repository and never on its branches.

Only object-database and ref commands are used (`hash-object`, `mktree`, `commit-tree`,
`cat-file`, `ls-tree`, `ls-remote`, `fetch` and `push` of explicit refspecs under `refs/engram/`,
`update-ref`): nothing here reads or writes the index, the working tree or a branch. Every failure
becomes a `ShareError` naming the command and git's own last line, which is what a user acts on.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from engram.errors import ShareError

log = logging.getLogger(__name__)

ZERO = "0" * 40
# git must never stop to ask (a password prompt would hang `engram sync` in a hook or CI).
# How git says that someone else moved a ref first: the push is unioned and tried again.
_RACES = ("non-fast-forward", "fetch first", "stale info", "cannot lock ref", "already exists",
          "failed to update ref", "incorrect old value", "[rejected]")
# Tapes and objects are zstd already: zlib over them again, and delta search between them, cost
# CPU and gain nothing (bench/sharing.py: push CPU 4.4 s -> 1.3 s for 20 MB). Files above the
# threshold are streamed into a pack by `hash-object`, never deflated. Over a network the
# server's own settings decide how it packs what it sends.
_OPTIONS = ("-c", "core.bigFileThreshold=256k", "-c", "core.compression=0", "-c", "pack.compression=0",
            "-c", "pack.window=0")
_ENV = {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"}
# A fetch never starts git's automatic maintenance (`gc --auto`, which repacks past 50 packs): a
# pull runs fetches side by side and reads the packs they keep (pack.py), and a repack of the whole
# repository is not a pull's to start. The user's own git commands still run it.
_FETCH_OPTIONS = ("-c", "gc.auto=0", "-c", "maintenance.auto=false")


@dataclass(frozen=True)
class TreeEntry:
    mode: str
    kind: str  # blob | tree | commit
    sha: str
    path: str


class Fetching:
    """A `git fetch` under way (`Git.fetch_started`)."""

    def __init__(self, proc: subprocess.Popen[bytes] | None) -> None:
        self.proc = proc  # None: nothing to fetch

    def wait(self) -> None:
        """Until it has finished: its objects are here and its refs moved; ShareError if it failed."""
        if self.proc is None:
            return
        _, err = self.proc.communicate()
        if self.proc.returncode != 0:
            raise ShareError(f"git fetch failed: {last_line(err)}")

    def stop(self) -> None:
        """Ends it, when the caller gives up (git leaves no ref moved, at most a temp pack it removes later)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


class Git:
    """git commands in the repository at `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = {**os.environ, **_ENV}

    def run(self, *args: str, input: bytes | None = None, check: bool = True,
            config: tuple[str, ...] = ()) -> subprocess.CompletedProcess[bytes]:
        try:
            out = subprocess.run(["git", *_OPTIONS, *config, "-C", str(self.root), *args], input=input,
                                 capture_output=True, env=self.env, check=False)
        except FileNotFoundError as exc:
            raise ShareError("git is not installed (or not on PATH): sharing goes through git") from exc
        if check and out.returncode != 0:
            raise ShareError(f"git {args[0]} failed: {last_line(out.stderr)}")
        return out

    def text(self, *args: str, input: bytes | None = None) -> str:
        return self.run(*args, input=input).stdout.decode("utf-8", "replace").strip()

    # ------------------------------------------------------------ the repository

    def is_repository(self) -> bool:
        return self.run("rev-parse", "--git-dir", check=False).returncode == 0

    def default_remote(self) -> str:
        """The current branch's upstream remote, else `origin`."""
        branch = self.run("symbolic-ref", "-q", "--short", "HEAD", check=False).stdout.decode().strip()
        if branch:
            got = self.run("config", f"branch.{branch}.remote", check=False).stdout.decode().strip()
            if got and got != ".":
                return got
        return "origin"

    def remotes(self) -> list[str]:
        return self.run("remote", check=False).stdout.decode().split()

    def has_remote(self, name: str) -> bool:
        """`name` is a configured remote, or a path or URL git can use as one."""
        if not name or name.startswith("-"):
            return False
        if self.run("config", f"remote.{name}.url", check=False).returncode == 0:
            return True
        return "/" in name or ":" in name or Path(name).is_dir()

    def pack_folder(self) -> Path:
        """Where this repository's packs are (`objects/pack` of its git dir, or of
        GIT_OBJECT_DIRECTORY)."""
        return self.root / self.text("rev-parse", "--git-path", "objects/pack")

    def have(self, shas: Iterable[str]) -> set[str]:
        """Those of `shas` this object database holds."""
        wanted = [s for s in shas if s]
        if not wanted:
            return set()
        out = self.run("cat-file", "--batch-check=%(objectname) %(objecttype)",
                       input="".join(s + "\n" for s in wanted).encode(), check=False).stdout.decode()
        return {line.split()[0] for line in out.splitlines() if not line.endswith(" missing")}

    def object_type(self, sha: str) -> str | None:
        out = self.run("cat-file", "-t", sha, check=False)
        return out.stdout.decode().strip() if out.returncode == 0 else None

    # ------------------------------------------------------------ refs

    def ref(self, name: str) -> str | None:
        out = self.run("rev-parse", "-q", "--verify", name, check=False)
        return out.stdout.decode().strip() or None if out.returncode == 0 else None

    def refs(self, prefix: str) -> dict[str, str]:
        out = self.text("for-each-ref", "--format=%(refname) %(objectname)", prefix)
        return dict(line.split(" ", 1) for line in out.splitlines() if line)  # type: ignore[misc]

    def set_ref(self, name: str, sha: str, old: str | None = None) -> None:
        self.run("update-ref", name, sha, *([old] if old is not None else []))

    def remote_refs(self, remote: str, prefix: str) -> dict[str, str]:
        """The refs under `prefix` on `remote` (one round trip)."""
        out = self.run("ls-remote", "--refs", remote, f"{prefix}*", check=False)
        if out.returncode != 0:
            raise ShareError(f"cannot reach remote {remote!r}: {last_line(out.stderr)} "
                             "(`git remote -v` lists the remotes; name one: `engram pull REMOTE`)")
        refs = {}
        for line in out.stdout.decode().splitlines():
            sha, _, name = line.partition("\t")
            if name.startswith(prefix):
                refs[name] = sha
        return refs

    def fetch(self, remote: str, refspecs: list[str]) -> None:
        """Fetch explicit refspecs (objects first; git moves the local refs last)."""
        if refspecs:
            self.run("fetch", "--quiet", "--no-tags", "--no-write-fetch-head", remote, *refspecs,
                     config=_FETCH_OPTIONS)

    def fetch_started(self, remote: str, refspecs: list[str]) -> Fetching:
        """`fetch`, running in the background while the caller does something else. What it
        brings is kept as one pack however few its objects (`fetch.unpackLimit=1`; git's default
        writes fewer than 100 as loose files): index-pack checks it as unpack-objects would, for
        less CPU, and the landing reads a pack straight from disk (engram/share/pack.py).

        Two may run at once in one repository when their refspecs name distinct refs: each writes
        its pack under a temp name and renames it into place (its index last), moves only its own
        refs, each under its own lock, writes no FETCH_HEAD and starts no maintenance."""
        if not refspecs:
            return Fetching(None)
        try:
            proc = subprocess.Popen(["git", *_OPTIONS, *_FETCH_OPTIONS, "-c", "fetch.unpackLimit=1", "-C",
                                     str(self.root), "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
                                     remote, *refspecs], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=self.env)
        except FileNotFoundError as exc:
            raise ShareError("git is not installed (or not on PATH): sharing goes through git") from exc
        return Fetching(proc)

    def push(self, remote: str, refspecs: list[str]) -> tuple[bool, str]:
        """Push explicit `src:dst` refspecs, never forced. (True, "") or (False, git's reason):
        a rejection (someone pushed first) is for the caller to union and retry."""
        out = self.run("push", "--porcelain", remote, *refspecs, check=False)
        if out.returncode == 0:
            return True, ""
        refused = [ln for ln in out.stdout.decode("utf-8", "replace").splitlines() if ln.startswith("!")]
        reasons = " ".join(ln.split("\t")[-1] for ln in refused)
        if refused and any(word in reasons for word in _RACES):
            return False, reasons
        why = reasons or last_line(out.stderr) or last_line(out.stdout)
        raise ShareError(f"git push to {remote!r} failed: {why}")

    # ------------------------------------------------------------ objects

    def hash_files(self, paths: list[Path]) -> list[str]:
        """Write files as blobs (one git process for all of them); their ids in order."""
        if not paths:
            return []
        out = self.text("hash-object", "-w", "--no-filters", "--stdin-paths",
                        input="".join(f"{p}\n" for p in paths).encode())
        shas = out.split()
        if len(shas) != len(paths):
            raise ShareError(f"git hash-object wrote {len(shas)} blobs for {len(paths)} files")
        return shas

    def hash_bytes(self, data: bytes) -> str:
        return self.text("hash-object", "-w", "--no-filters", "--stdin", input=data)

    def hash_many(self, datas: list[bytes], scratch: Path) -> list[str]:
        """Write many small blobs with one git process (through files in `scratch`, removed after)."""
        if len(datas) <= 2:
            return [self.hash_bytes(d) for d in datas]
        import tempfile

        scratch.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="share-", dir=scratch) as tmp:
            paths = []
            for i, data in enumerate(datas):
                path = Path(tmp) / str(i)
                path.write_bytes(data)
                paths.append(path)
            return self.hash_files(paths)

    def blobs(self, shas: list[str]) -> Iterator[tuple[str, bytes | None]]:
        """(sha, content) for each blob, in order; None for a missing or non-blob object. One
        `cat-file --batch` process streams them all."""
        if not shas:
            return
        proc = subprocess.Popen(["git", *_OPTIONS, "-C", str(self.root), "cat-file", "--batch"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=self.env)
        assert proc.stdin is not None and proc.stdout is not None
        _widen(proc.stdout.fileno())
        try:
            for sha in shas:
                proc.stdin.write(sha.encode() + b"\n")
                proc.stdin.flush()
                head = proc.stdout.readline().split()
                if len(head) != 3:
                    yield sha, None
                    continue
                size = int(head[2])
                data = _read_exactly(proc.stdout, size)
                proc.stdout.read(1)  # the newline after each object
                yield sha, data if head[1] == b"blob" else None
        finally:
            proc.stdin.close()
            proc.stdout.close()
            proc.wait()

    def tree(self, commit: str) -> dict[str, TreeEntry]:
        """Every file of a commit's tree, by path (`ls-tree -r`)."""
        out = self.run("ls-tree", "-r", "-z", "--full-tree", commit, check=False)
        if out.returncode != 0:
            raise ShareError(f"{commit[:12]} is not a commit or tree git can read: {last_line(out.stderr)}")
        entries = {}
        for item in out.stdout.split(b"\0"):
            if not item:
                continue
            head, _, path = item.decode("utf-8", "surrogateescape").partition("\t")
            mode, kind, sha = head.split()
            entries[path] = TreeEntry(mode, kind, sha, path)
        return entries

    def make_tree(self, files: dict[str, str]) -> str:
        """A tree of `path -> blob sha`, its folders built deepest first, one `mktree --batch` a level."""
        if not files:
            return self.text("mktree", input=b"")  # (written: commit-tree needs the object)
        folders: dict[str, dict[str, str]] = {"": {}}
        for path, sha in files.items():
            parts = path.split("/")
            for depth in range(1, len(parts)):
                folders.setdefault("/".join(parts[:depth]), {})
            folders["/".join(parts[:-1])][parts[-1]] = f"100644 blob {sha}"
        depth_of = {f: f.count("/") + 1 if f else 0 for f in folders}
        made: dict[str, str] = {}
        for depth in sorted(set(depth_of.values()), reverse=True):
            level = sorted(f for f, d in depth_of.items() if d == depth)
            batch = b"\0".join(b"".join(f"{entry}\t{name}".encode() + b"\0"
                                         for name, entry in sorted(folders[f].items())) for f in level)
            shas = self.text("mktree", "-z", "--batch", input=batch).split()
            if len(shas) != len(level):
                raise ShareError(f"git mktree made {len(shas)} trees for {len(level)} folders")
            for f, sha in zip(level, shas):
                made[f] = sha
                if f:
                    parent, _, name = f.rpartition("/")
                    folders[parent][name] = f"040000 tree {sha}"
        return made[""]

    def commit(self, tree: str, parents: list[str], message: str) -> str:
        args = ["commit-tree", tree]
        for p in parents:
            args += ["-p", p]
        out = self.run(*args, "-m", message, check=False)
        if out.returncode != 0 and b"Please tell me who you are" in out.stderr:
            raise ShareError("git has no name and email for the commit that carries your sessions: set them with "
                             "`git config user.name \"Your Name\"` and `git config user.email you@example.com` "
                             "(add --global for every repository), then run it again")
        if out.returncode != 0:
            raise ShareError(f"git commit-tree failed: {last_line(out.stderr)}")
        return out.stdout.decode("utf-8", "replace").strip()


def _widen(fd: int) -> None:
    """A 1 MB pipe instead of 64 KB (Linux): a 2 MB tape then crosses in 2 reads, not 32 context
    switches between git and Python. Best effort: the pipe works either way."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (ImportError, OSError):
        pass


def _read_exactly(stream: object, size: int) -> bytes:
    chunks = []
    left = size
    while left:
        chunk = stream.read(left)  # type: ignore[attr-defined]
        if not chunk:
            raise ShareError("git cat-file ended early: the repository's object database may be damaged "
                             "(`git fsck` says)")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def last_line(err: bytes) -> str:
    """The line of git's stderr that says why: its first `fatal:` line when there is one (a
    remote that is not there ends with "Please make sure ... and the repository exists."), else
    the last line."""
    lines = [ln.strip() for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
    fatal = [ln for ln in lines if ln.startswith("fatal:")]
    return fatal[0] if fatal else lines[-1] if lines else ""
