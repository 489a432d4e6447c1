"""Opening `index.sqlite` (apsw): WAL, busy timeout, the schema's migrations (`schema`), and
setting a damaged file aside. The database is a projection of the tapes: `engram reindex` is
always a valid way out of a bad state."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import apsw

from engram.index.schema import migrate
from engram.store.repo import Store, index_damage

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 30_000
# SQLite's page cache per connection (KiB; filled only as pages are read). The default 2 MiB
# holds the b-tree's inner pages but not the posting rows a long-lived server (LSP, MCP)
# reads again: at 1 GB of transcripts a warm explain re-read them from the OS cache, 0.15 ms
# of its 1.1 ms (bench/scale.py). A one-shot CLI query touches ~1 MB and is unaffected.
CACHE_KIB = 65_536


def open_db(store: Store, *, readonly: bool = False) -> apsw.Connection:
    """A connection with WAL and a busy timeout, migrated to the current schema."""
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    if why := index_damage(store.index_path):
        from engram.errors import DamagedIndex  # noqa: PLC0415

        raise DamagedIndex(f"{why}: `engram reindex` moves it aside and rebuilds the index from the tapes")
    try:
        db = apsw.Connection(str(store.index_path), flags=flags)
    except apsw.CantOpenError as exc:
        from engram.errors import DamagedIndex  # noqa: PLC0415

        if store.index_path.is_dir():
            raise DamagedIndex(f"{store.index_path} is a directory, not engram's index: `engram reindex` moves it "
                               "aside and rebuilds the index from the tapes") from exc
        if why := store.unwritable():
            raise store.read_only_error(why) from exc
        raise
    try:
        db.set_busy_timeout(BUSY_TIMEOUT_MS)
        db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        # No memory map (PRAGMA mmap_size): it saves ~0.2 ms of read() calls in a warm explain at
        # 1 GB, but a cold one faults pages in with the device's whole read-around (8 MB on the
        # benchmark machine) and took 180 ms instead of 25 (bench/scale.py).
        if readonly:
            return db
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA foreign_keys=OFF")
        migrate(db)
    except apsw.CantOpenError as exc:  # (the file opens lazily: WAL's shared memory is made here)
        db.close()
        if why := store.unwritable():
            raise store.read_only_error(why) from exc
        raise
    except (apsw.NotADBError, apsw.CorruptError) as exc:
        db.close()
        from engram.errors import DamagedIndex  # noqa: PLC0415

        raise DamagedIndex(f"{store.index_path} is damaged ({exc}): `engram reindex` sets it aside and "
                           "rebuilds the index from the tapes") from exc
    return db


def index_inode(store: Store) -> int:
    """The inode of index.sqlite (-1 when there is none): a process that keeps a connection open
    opens a new one when the file was replaced (a reindex that set a damaged one aside, or
    `rm -rf .engram && engram init`)."""
    try:
        return os.stat(store.index_path).st_ino
    except FileNotFoundError:
        return -1


def set_aside(store: Store) -> Path:
    """Move a damaged index.sqlite (and its -wal and -shm) out of the way, keeping it for a look;
    everything in it is rebuilt from the tapes. Returns where it went."""
    aside = store.index_path.with_name(store.index_path.name + ".damaged")
    for suffix in ("", "-wal", "-shm"):
        src = Path(str(store.index_path) + suffix)
        if os.path.lexists(src):  # (a link is moved, never what it points to)
            src.replace(Path(str(aside) + suffix))
    log.warning("index.sqlite was damaged: kept as %s, rebuilding from the tapes", aside.name)
    return aside


def set_aside_paths(store: Store) -> list[Path]:
    """The files of an index `set_aside` left (none when there is none)."""
    aside = store.index_path.with_name(store.index_path.name + ".damaged")
    return [p for p in (Path(f"{aside}{s}") for s in ("", "-wal", "-shm"))
            if os.path.lexists(p) and not p.is_dir()]


def quick_check(db: apsw.Connection) -> str:
    """SQLite's `PRAGMA quick_check` in one line: "ok", or what it found (the first few), or the
    error it stopped on. Run when an error says the file is corrupt, and by `engram doctor`."""
    try:
        rows = [str(r[0]) for r in db.execute("PRAGMA quick_check(5)")]
    except apsw.Error as exc:
        return f"{type(exc).__name__}: {exc}"
    return "; ".join(rows) or "no answer"


def damage_message(exc: BaseException, index_path: Path | None) -> str | None:
    """The one-line message for an apsw error that says index.sqlite is damaged (None for any
    other error): a query that meets a damaged page says what to run, not a traceback."""
    if not isinstance(exc, (apsw.CorruptError, apsw.NotADBError)):
        return None
    where = index_path or "index.sqlite"
    return (f"{where} is damaged ({exc}): run `engram reindex`, which sets it aside and rebuilds the index "
            "(and the memories) from the tapes and the memory log")
