"""Fetched blobs onto the store's disk: durable before they are visible, at the speed of the
disk rather than of one fsync after another.

Each blob is read straight from the pack the fetch wrote when it lies there simply (pack.py:
pieces of a read-only mapping, no copy), else streamed by `git cat-file --batch` (git has checked
each one's SHA-1 as it fetched them); worker threads check each that has a `check` against the
address it is listed under (an object's; a tape's own check is made where it is first read
anyway, see engram/share/pull.py) and write it to a temp file in this process's scratch folder
(one `writev` of the pieces); a batch (`BATCH_BYTES`) is then
fsynced, file by file in the workers at once (the kernel has been writing it back meanwhile, and
concurrent fsyncs share a journal commit), renamed into place, and each directory it reached
fsynced once. A process killed anywhere leaves whole files under their final names and nothing
else: temp files are in its scratch folder, which the next landing removes. zstd and hashlib
release the GIL, so two workers use two cores.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from engram.fsutil import fsync_dir, names_in
from engram.share.git import Git
from engram.share.pack import PackReader, Pieces

log = logging.getLogger(__name__)

BATCH_BYTES = 64 << 20  # fsynced and renamed together (bounds what a kill makes the next pull redo)
WORKERS = 2  # (the machines engram runs on are laptops and CI runners: 2 cores are common)


@dataclass(frozen=True)
class Landing:
    """One blob to land: where, and how to tell that its bytes are the ones its address names."""

    sha: str  # the git blob
    final: Path
    # None when the bytes match their address, else what is wrong; no check: written as git verified them
    check: Callable[[bytes], str | None] | None
    what: str  # how a message names it ("tape 1a2b3c4d5e6f")
    mode: int = 0o644


@dataclass
class Landed:
    done: list[tuple[Landing, int]] = field(default_factory=list)  # (item, bytes), in the order given
    damaged: list[str] = field(default_factory=list)


def land(git: Git, items: list[Landing], scratch: Path, workers: int = WORKERS,
         packs: PackReader | None = None) -> Landed:
    """Check (when it has a check) and write every item's blob (see the module docstring), read
    from `packs` where it can be, else from git; an item whose blob is missing or fails its check
    is not written and is named in `damaged`."""
    out = Landed()
    if not items:
        return out
    mine = _own_folder(scratch)
    try:
        _land(git, items, mine, workers, out, packs)
    finally:
        shutil.rmtree(mine, ignore_errors=True)
    return out


def _own_folder(scratch: Path) -> Path:
    """This process's folder in `scratch` (a pull beside it has its own), after removing those a
    killed landing left (their process is gone; what is in them was never visible)."""
    scratch.mkdir(parents=True, exist_ok=True)
    for name in names_in(scratch):
        pid = name[len("land-"):]
        if name.startswith("land-") and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(scratch / name, ignore_errors=True)
    mine = scratch / f"land-{os.getpid()}"
    mine.mkdir(exist_ok=True)
    return mine


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # (another user's process)
        return True
    return True


def _land(git: Git, items: list[Landing], scratch: Path, workers: int, out: Landed,
          packs: PackReader | None) -> None:
    by_sha: dict[str, list[Landing]] = {}
    for it in items:
        by_sha.setdefault(it.sha, []).append(it)
    staged: list[tuple[Landing, Path, int]] = []
    size = 0
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="land") as pool:
        pending: deque[Future[tuple[Landing, Path | None, int, str | None]]] = deque()
        for n, (sha, data) in enumerate(_blobs(git, packs, sorted(by_sha))):
            for it in by_sha[sha]:
                pending.append(pool.submit(_stage, it, data, scratch / f"{n}.{it.final.name}"))
            while len(pending) > 2 * workers or (pending and pending[0].done()):
                size += _take(pending.popleft().result(), staged, out)
            if size >= BATCH_BYTES:
                _commit(pool, staged, out)
                staged, size = [], 0
        for fut in pending:
            _take(fut.result(), staged, out)
        _commit(pool, staged, out)


def _blobs(git: Git, packs: PackReader | None, shas: list[str]) -> Iterator[tuple[str, Pieces | bytes | None]]:
    """(sha, content) of each blob: those the packs hold simply first, then the rest from git."""
    rest = []
    for sha in shas:
        pieces = packs.blob(sha) if packs is not None else None
        if pieces is None:
            rest.append(sha)
        else:
            yield sha, pieces
    if rest and packs is not None:
        log.debug("%d of %d blobs read through git cat-file (not plain in the fetched packs)", len(rest), len(shas))
    yield from git.blobs(rest)


def _take(result: tuple[Landing, Path | None, int, str | None], staged: list[tuple[Landing, Path, int]],
          out: Landed) -> int:
    it, tmp, size, error = result
    if tmp is None:
        out.damaged.append(f"{it.what} ({error})" if error else it.what)
        return 0
    staged.append((it, tmp, size))
    return size


def _stage(it: Landing, data: Pieces | bytes | None, tmp: Path) -> tuple[Landing, Path | None, int, str | None]:
    """Worker side: check the bytes, then write them to `tmp` (not fsynced yet)."""
    if data is None:
        return it, None, 0, "not among the fetched objects"
    if isinstance(data, list) and it.check is not None:
        data = b"".join(data)  # (what is checked must be read anyway)
    error = it.check(data) if it.check is not None else None
    if error is not None:
        return it, None, 0, error
    pieces = data if isinstance(data, list) else [memoryview(data)]
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), it.mode)
    try:
        size = _write_pieces(fd, pieces)
    finally:
        os.close(fd)
    return it, tmp, size, None


_IOV = 1024  # (Linux's IOV_MAX)


def _write_pieces(fd: int, pieces: Pieces) -> int:
    """Write the pieces in order, few system calls (`writev`, short writes resumed); the bytes written."""
    views = [p for p in pieces if len(p)]
    size = sum(len(p) for p in views)
    writev = getattr(os, "writev", None)
    i = 0
    while i < len(views):
        n = writev(fd, views[i:i + _IOV]) if writev is not None else os.write(fd, views[i])
        if n <= 0:
            raise OSError(f"short write to a landing file ({n} bytes)")
        while n and i < len(views):
            if n >= len(views[i]):
                n -= len(views[i])
                i += 1
            else:
                views[i] = views[i][n:]
                n = 0
    return size


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _commit(pool: ThreadPoolExecutor, staged: list[tuple[Landing, Path, int]], out: Landed) -> None:
    """Make a batch durable, then visible: fsync every temp file, rename each into place, fsync
    each directory that changed (and the parent of each directory made here) once."""
    if not staged:
        return
    list(pool.map(_fsync_file, [tmp for _, tmp, _ in staged]))
    dirs: set[Path] = set()
    for it, tmp, size in staged:
        parent = it.final.parent
        if parent not in dirs and not parent.is_dir():
            parent.mkdir(parents=True, exist_ok=True)
            dirs.add(parent.parent)
        os.replace(tmp, it.final)
        dirs.add(parent)
        out.done.append((it, size))
    list(pool.map(fsync_dir, sorted(dirs)))
