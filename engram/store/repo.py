"""The `.engram/` store of one repository: where things live and how it is created.

Everything under `.engram/` hangs off `Store`; nothing else builds these paths.
"""

from __future__ import annotations

import functools
import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engram.errors import ReadOnlyStore, StoreNotFound
from engram.gitread import git_output
from engram.store.config import load_config
from engram.store.location import RUN_DIR, STORE_DIR, endpoint_file, find_store_root

log = logging.getLogger(__name__)


def index_damage(index_path: Path) -> str | None:
    """Why index.sqlite (or its -wal, -shm) cannot be opened as engram's own file, or None: a
    symbolic link (SQLite would follow it and write, even delete, files outside the repository)
    or a directory. Three lstat calls, before every open."""
    for suffix in ("", "-wal", "-shm"):
        path = f"{index_path}{suffix}"
        try:
            mode = os.lstat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            continue
        if stat.S_ISLNK(mode):
            return f"{path} is a symbolic link: engram does not follow it out of the store"
        if stat.S_ISDIR(mode):
            return f"{path} is a directory, not engram's file"
    return None


def _linked_entries(directory: Path) -> list[Path]:
    """The entries of `directory` that are symbolic links (none when it is not a directory)."""
    try:
        with os.scandir(directory) as it:
            return [directory / e.name for e in it if e.is_symlink()]
    except (FileNotFoundError, NotADirectoryError):
        return []


def find_repo_root(start: Path) -> Path | None:
    """The nearest directory at or above `start` holding `.engram/` or `.git`."""
    start = start.resolve()
    for d in [start, *start.parents]:
        if (d / STORE_DIR).is_dir() or (d / ".git").exists():
            return d
    return None


def git_toplevel(path: Path) -> Path | None:
    """The git work tree containing `path`, or None (also when git is missing)."""
    probe = path if path.is_dir() else path.parent
    if not probe.is_dir():
        return None
    out = git_output(probe, "rev-parse", "--show-toplevel", timeout=10)
    top = out.decode("utf-8", "surrogateescape").strip() if out is not None else ""
    return Path(top).resolve() if top else None


@functools.lru_cache(maxsize=64)
def git_worktrees(root: Path) -> list[Path]:
    """All work trees of the repository at `root` (itself included); cached for the process."""
    out = git_output(root, "worktree", "list", "--porcelain", timeout=10)
    if out is None:
        return [root]
    trees = [Path(line[len("worktree "):]).resolve()
             for line in out.decode("utf-8", "surrogateescape").splitlines() if line.startswith("worktree ")]
    return trees or [root]


@dataclass
class Store:
    """Paths and configuration of one repository's store."""

    root: Path  # the repository root (the directory holding .engram/)
    _config: dict[str, Any] | None = field(default=None, repr=False)
    _loaded: tuple[tuple[int, int, int] | None, dict[str, Any]] | None = field(default=None, repr=False, compare=False)

    @property
    def dir(self) -> Path:
        return self.root / STORE_DIR

    @property
    def tapes_dir(self) -> Path:
        return self.dir / "tapes"

    @property
    def objects_dir(self) -> Path:
        return self.dir / "objects"

    @property
    def quarantine_dir(self) -> Path:
        """Tapes set aside because their content does not match their name (kept for a look)."""
        return self.dir / "quarantine"

    @property
    def removed_dir(self) -> Path:
        """Tapes taken out by `engram tapes rm` without --purge (restorable)."""
        return self.dir / "removed"

    @property
    def events_dir(self) -> Path:
        return self.dir / "events"

    @property
    def run_dir(self) -> Path:
        return self.dir / RUN_DIR

    @property
    def endpoint_file(self) -> Path:
        """Where a running language server advertises its endpoint (`engram.store.location`, which the
        command line's quick path reads it by)."""
        return Path(endpoint_file(str(self.root)))

    @property
    def index_path(self) -> Path:
        return self.dir / "index.sqlite"

    @property
    def config_path(self) -> Path:
        return self.dir / "config.toml"

    @property
    def config(self) -> dict[str, Any]:
        """config.toml as it is now: read again whenever the file changed, because a language
        server or `engram watch` holds its Store for days, and must redact with the pattern the
        user added a minute ago."""
        if self._config is not None:
            return self._config
        try:
            st = os.stat(self.config_path)
            stamp: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = None
        if self._loaded is None or self._loaded[0] != stamp:
            self._loaded = (stamp, load_config(self.config_path))
        return self._loaded[1]

    def exists(self) -> bool:
        return self.dir.is_dir()

    def unwritable(self) -> str | None:
        """Why `.engram/` cannot be written (a read-only file system, no permission), or None.
        Asked after a write failed, to tell that from a damaged or missing file, and by the language
        server when it first meets a store (its reads need writes too: the index's WAL)."""
        try:
            fd = os.open(self.dir, os.O_RDONLY)
        except OSError:
            return None
        try:
            if os.fstatvfs(fd).f_flag & os.ST_RDONLY:
                return "a read-only file system"
        finally:
            os.close(fd)
        if not os.access(self.dir, os.W_OK):
            return "no permission to write"
        return None

    def read_only_error(self, why: str) -> ReadOnlyStore:
        """The error every command gives when `unwritable` has a reason (`why`, which the caller
        asked): one line, what to do."""
        return ReadOnlyStore(f"{self.dir} cannot be written ({why}): engram writes "
                             "there to answer too (its index, locks); make it writable, or copy the repository "
                             "somewhere it is")

    def damage(self, *, index: bool = True) -> list[str]:
        """What is wrong with the store's own layout, one actionable line each (empty when
        nothing): a directory that is a file, a file that is a directory. Checked before a writer
        starts (`store.lock`; `index`: False there, reindex puts that right itself), and by `engram doctor`: a `tapes` that is a file once made reindex
        empty the catalogue and every ingest fail on each session."""
        out = []
        for d in (self.tapes_dir, self.objects_dir, self.events_dir, self.run_dir):
            if (d.exists() or d.is_symlink()) and (d.is_symlink() or not d.is_dir()):
                out.append(f"{d} is not a directory: move it out of the way, then run `engram init` (which "
                           "recreates it) and `engram reindex`")
        # Made on first use (a link here once had memories appended, or a damaged tape moved, outside
        # the repository): the memory log (engram.memory.LOG_SUBDIR), tapes set aside.
        for d in (self.events_dir / "memories", self.quarantine_dir, self.removed_dir):
            if d.is_symlink() or (d.exists() and not d.is_dir()):
                out.append(f"{d} is not a directory of the store (a file or a symbolic link): engram does not "
                           "write through it; move it out of the way (engram makes it again)")
        out += [f"{d} is a symbolic link: engram does not write objects through it out of the store; move it out "
                "of the way, then run `engram ingest` again for the sessions whose objects were there"
                for d in _linked_entries(self.objects_dir)]  # (ingest and pull wrote objects through one)
        for f in (self.config_path, self.run_dir / "ingest.lock", self.run_dir / "memories.lock", self.dir / "clone"):
            if f.is_symlink() and f != self.config_path:  # (a config kept elsewhere and linked is the user's choice)
                out.append(f"{f} is a symbolic link: engram does not write through it out of the store; remove it "
                           "(engram makes the file again)")
            elif f.is_dir():
                out.append(f"{f} is a directory, not engram's file: move it out of the way")
        if index and (why := index_damage(self.index_path)):
            out.append(f"{why}; `engram reindex` moves it aside and rebuilds the index")
        return out

    @classmethod
    def discover(cls, start: Path | None = None) -> "Store":
        """The store of the repository containing `start` (default: the cwd)."""
        root = find_store_root(str(start or Path.cwd()))  # (it resolves symbolic links)
        if root is not None:
            return cls(Path(root))
        here = (start or Path.cwd()).resolve()
        raise StoreNotFound(f"no {STORE_DIR}/ store in {here} or above; run `engram init` at the repository root")


def init_store(root: Path) -> tuple[Store, list[str]]:
    """Create `.engram/` at `root` (idempotent) and keep it out of git.

    Returns the store and warnings for the user.
    """
    root = root.resolve()
    warnings: list[str] = []
    store = Store(root)
    for d in (store.dir, store.tapes_dir, store.objects_dir, store.events_dir, store.run_dir):
        d.mkdir(parents=True, exist_ok=True)
    git = root / ".git"
    if git.is_dir():
        exclude = git / "info" / "exclude"
        exclude.parent.mkdir(parents=True, exist_ok=True)
        lines = exclude.read_text(encoding="utf-8", errors="replace").splitlines() if exclude.exists() else []
        if not any(line.strip() in (f"/{STORE_DIR}/", f"{STORE_DIR}/", f"/{STORE_DIR}", STORE_DIR) for line in lines):
            with exclude.open("a", encoding="utf-8") as f:
                if lines and lines[-1] != "":
                    f.write("\n")
                f.write(f"/{STORE_DIR}/\n")
    elif git.is_file():
        # A linked worktree: .git is a file pointing at the common dir's worktree folder.
        common = git_common_dir(root)
        if common is not None:
            exclude = common / "info" / "exclude"
            exclude.parent.mkdir(parents=True, exist_ok=True)
            text = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
            if f"/{STORE_DIR}/" not in text.split():
                with exclude.open("a", encoding="utf-8") as f:
                    f.write(("" if text.endswith("\n") or not text else "\n") + f"/{STORE_DIR}/\n")
    else:
        warnings.append(
            f"{root} is not a git repository: {STORE_DIR}/ was created but could not be excluded from version control; "
            f"after `git init`, run `engram init` again to exclude it"
        )
    return store, warnings


def git_common_dir(root: Path) -> Path | None:
    out = git_output(root, "rev-parse", "--git-common-dir", timeout=10)
    if out is None:
        return None
    p = Path(out.decode("utf-8", "surrogateescape").strip())
    return (root / p).resolve() if not p.is_absolute() else p
