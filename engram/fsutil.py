"""Durable file writes (temp file, fsync, rename, fsync the directory), and paths kept inside
the repository.

A write that returns has reached the disk; a crash leaves the old file or the new one, never a mix.
A path a user gives is taken relative to the repository, and refused when it resolves outside
(`repo_relative`): nothing outside the repository is read by following a path or a symbolic link.
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path

from engram.errors import BadInput

log = logging.getLogger(__name__)


#: How much of a file is looked at for a NUL byte, git's way of telling a binary file.
BINARY_PROBE = 8192


def looks_binary(data: bytes) -> bool:
    """Whether `data` is a binary file's: what is shown of it would be its bytes, not lines of text
    (git's test: a NUL among the first bytes)."""
    return b"\0" in data[:BINARY_PROBE]


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write `data` to `path` so that readers see all of it or none of it."""
    tmp = _temp_beside(path, data, mode, sync=True)
    try:
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise
    fsync_dir(path.parent)


def write_unpublished(path: Path, data: bytes, mode: int = 0o644) -> Path:
    """`data` in a temp file beside `path`, not yet synced nor renamed: the first half of
    `atomic_write`, for a worker process whose parent `publish`es the file.

    Why: a tape's fsyncs (the file's and its directory's, 1.5-9 ms on the benchmark machine) kept
    a capture worker's core idle; the parent, which waits for results anyway, waits for the disk
    instead, while the workers parse the next sessions."""
    return Path(_temp_beside(path, data, mode, sync=False))


def _temp_beside(path: Path, data: bytes, mode: int, *, sync: bool) -> str:
    """A new temp file in `path`'s directory (made if missing) holding `data` with `mode`, synced
    when `sync`; removed again when writing it fails."""
    path.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # noqa: PLC0415 - (and shutil, random: not for what only reads)

    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), mode)
            if sync:
                f.flush()
                os.fsync(f.fileno())
    except BaseException:
        _remove(tmp)
        raise
    return tmp


def _remove(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass


def publish(tmp: Path, path: Path) -> None:
    """The second half of `atomic_write` for a file `write_unpublished` left at `tmp`: synced,
    renamed to `path`, the directory synced. Readers see all of it or none of it, as with
    `atomic_write`; a temp file never published is removed by `remove_stale_temps`."""
    put_in_place(tmp, path)
    fsync_dir(path.parent)


def put_in_place(tmp: Path, path: Path) -> None:
    """`publish` but for its directory's sync: several files published together share one
    (`fsync_dir` of their directory once they are all in place)."""
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def append_durably(path: Path, lines: list[bytes]) -> None:
    """Append whole lines to a log and fsync it (and its directory) before returning."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, b"".join(line + b"\n" for line in lines))
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)


def json_lines(path: Path) -> list[dict]:
    """The JSON objects of a log appended by `append_durably`; none when it does not exist. A line
    a crash cut short, or anything not an object, is left out: its change had not begun."""
    import orjson  # noqa: PLC0415

    try:
        raw = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for line in raw.splitlines():
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def names_in(directory: Path) -> list[str]:
    """The entries of a directory under `.engram/`, none when it does not exist; symbolic links
    are left out, and a directory that is itself a link lists nothing (with a warning).

    Every walk of the store lists through here (gc, reindex, reconcile, doctor, the memory log):
    a link planted under `.engram/objects/` once made `engram gc` delete the files it pointed at.
    os.scandir, not Path.glob: every ingest lists the tapes directory (`ingest.reconcile`), and
    over 10,000 tapes glob took ~40 ms against ~11 for a listing matched by name; scandir's
    entries know whether they are links without another system call."""
    if os.path.islink(directory):
        log.warning("%s is a symbolic link: engram does not follow it out of the store; replace it with "
                    "a directory", directory)
        return []
    try:
        with os.scandir(directory) as it:
            return [e.name for e in it if not e.is_symlink()]
    except (FileNotFoundError, NotADirectoryError):
        return []


def read_in_store(path: Path) -> bytes:
    """The bytes of a file under `.engram/`, refused (OSError) when it is a symbolic link."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


def subdirs_in(directory: Path) -> list[str]:
    """`names_in`, directories only (none of them a link)."""
    return [n for n in names_in(directory) if (directory / n).is_dir()]


def remove_stale_temps(directory: Path, names: list[str] | None = None) -> int:
    """Delete temp files an interrupted writer left behind; they were never visible. `names`:
    the directory's entries, when the caller has listed them already."""
    removed = 0
    for name in names_in(directory) if names is None else names:
        if name.startswith(".tmp-"):
            try:
                (directory / name).unlink()
                removed += 1
            except FileNotFoundError:
                pass
    return removed


def repo_relative(root: Path, path: str, cwd: Path | None = None) -> str:
    """The repository-relative form of `path`; refuses anything that resolves outside.

    Symlinks are resolved on both sides, so a link inside the tree that points out of it is
    refused too. os.path on strings: this runs on every explain, and pathlib costs ~0.2 ms."""
    if "\0" in path:  # (only JSON can carry one: an MCP or editor request; os.path raises ValueError)
        raise BadInput(f"{path!r}: a path cannot hold a NUL character")
    if not path.isascii():
        utf8_name(path)
    p = path if os.path.isabs(path) else os.path.join(os.fspath(cwd or os.getcwd()), path)
    real = os.path.realpath(p)
    root_real = _real_root(os.fspath(root))
    if real == root_real:
        return "."
    if not real.startswith(root_real.rstrip(os.sep) + os.sep):
        if _lexically_inside(os.path.normpath(p), os.fspath(root), root_real):  # (`ls` shows it in the tree)
            raise BadInput(f"{path}: a symbolic link that leads outside the repository {root}; nothing outside it is read")
        raise BadInput(f"{path}: outside the repository {root}")
    return Path(real[len(root_real.rstrip(os.sep)) + 1:]).as_posix()


def is_utf8(text: str) -> bool:
    """Whether `text` can be written as UTF-8: not when it holds lone surrogates (a name's bytes
    kept by surrogateescape, half a character from JSON's escapes), which no tape, index or JSON
    answer can hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def utf8_name(path: str) -> None:
    """Refuse a name that is not UTF-8 (an argument's bytes decoded with surrogateescape, a Latin-1
    file name of an old repository): the index, notes and JSON keep paths as UTF-8 text, and such a
    name was a traceback from explain, recall and remember."""
    if not is_utf8(path):
        raise BadInput(f"{shown_bytes(path)}: the file's name is not UTF-8; engram keeps paths as UTF-8 text: rename it "
                       "(convmv -f latin1 -t utf8 FILE)")


def shown_bytes(text: str) -> str:
    """`text` that may hold bytes kept as lone surrogates (surrogateescape) as a person reads it:
    each byte that is not UTF-8 as U+FFFD."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # (a surrogate no byte gives: from JSON's escapes)
        return text.encode("utf-8", "replace").decode("utf-8")


def _lexically_inside(path: str, root: str, root_real: str) -> bool:
    """Whether `path`, links not followed, names an entry under the repository's root."""
    return any(path.startswith(r.rstrip(os.sep) + os.sep) for r in (os.path.normpath(os.path.abspath(root)), root_real))


@functools.lru_cache(maxsize=64)
def _real_root(root: str) -> str:
    return os.path.realpath(root)
