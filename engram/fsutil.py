"""Durable file writes: temp file, fsync, rename, fsync the directory.

A write that returns has reached the disk; a crash leaves the old file or the new one, never a mix.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write `data` to `path` so that readers see all of it or none of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(path.parent)


def remove_stale_temps(directory: Path) -> int:
    """Delete temp files an interrupted writer left behind; they were never visible."""
    removed = 0
    if directory.is_dir():
        for p in directory.glob(".tmp-*"):
            try:
                p.unlink()
                removed += 1
            except FileNotFoundError:
                pass
    return removed
