"""The store's locks: one writer of new tapes at a time (the ingest lock), and one writer of the
memory event log at a time (the memory lock).

Capture, `engram gc` and `engram reindex` take the ingest lock; every memory change takes the
memory lock (the command line, the language server and `engram mcp` may write memories from three
processes at once). They live with the store, below every layer that takes them, so gc need not
import the capture pipeline."""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from typing import Iterator

from engram.errors import BadInput
from engram.store.repo import Store


@contextmanager
def ingest_lock(store: Store) -> Iterator[None]:
    """One ingest per store at a time: two would capture the same new bytes twice."""
    with _locked(store, wait=True):
        yield


# Set by `engram hook` for the ingest it starts after an agent's edit (engram.integrations.hook).
COALESCE_ENV = "ENGRAM_INGEST_COALESCE"


@contextmanager
def ingest_turn(store: Store) -> Iterator[bool]:
    """The ingest lock (True), or, for an ingest a hook started (COALESCE_ENV) while another such
    ingest already waits for the lock, nothing (False): that one reads the transcript when its turn
    comes, so it captures what this one would have. An agent edits faster than a loaded machine
    ingests: a hook per edit once queued 87 ingests of one transcript, which ran for over an hour.
    At most one runs and one waits."""
    if not os.environ.get(COALESCE_ENV):
        with _locked(store, wait=True):
            yield True
        return
    with _locked(store, wait=False, name="ingest.queue") as queued:
        if not queued:
            yield False
            return
        fd = _acquire(store, "ingest.lock", wait=True)  # waits for the running ingest, holding the queue
    try:  # the queue is free again: the next hook's ingest may wait behind this one
        yield True
    finally:
        _release(fd)  # type: ignore[arg-type] - a blocking lock is always taken


@contextmanager
def ingest_lock_if_free(store: Store) -> Iterator[bool]:
    """The ingest lock if no ingest holds it (True), else nothing (False): a query should not
    wait for a running ingest, which indexes what it captured itself."""
    with _locked(store, wait=False) as got:
        yield got


@contextmanager
def embed_lock_if_free(store: Store) -> Iterator[bool]:
    """The right to embed the memories waiting for a vector (True), or False when another process
    is at it already: it embeds what waits, and a second model run on the same memories only
    doubles the CPU (22 ingests started by hooks once embedded the same 10,000 memories at once)."""
    with _locked(store, wait=False, name="embed.lock") as got:
        yield got


@contextmanager
def memory_lock(store: Store) -> Iterator[None]:
    """One writer of the memory event log at a time: its appends, the projection catching up
    with them and a purge's rewrite are each made whole under it."""
    with _locked(store, wait=True, name="memories.lock"):
        yield


@contextmanager
def tasks_lock(store: Store) -> Iterator[None]:
    """One writer of the task log (engram.continuity.tasks) at a time: a checkpoint's version
    number is the count of those before it, read and appended under the lock."""
    with _locked(store, wait=True, name="tasks.lock"):
        yield


@contextmanager
def _locked(store: Store, wait: bool, name: str = "ingest.lock") -> Iterator[bool]:
    if damage := store.damage(index=False):  # (a dozen stats) before any writer touches a store it would misread
        raise BadInput(damage[0])
    fd = _acquire(store, name, wait)
    try:
        yield fd is not None
    finally:
        if fd is not None:
            _release(fd)


def _acquire(store: Store, name: str, wait: bool) -> int | None:
    """An exclusive lock on run/NAME as an open descriptor (`_release` gives it back), or None when
    not waiting and another process holds it."""
    try:
        store.run_dir.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW: a link planted as the lock file would have it created outside the store
        fd = os.open(store.run_dir / name, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError as exc:
        if why := store.unwritable():
            raise store.read_only_error(why) from exc
        if os.path.islink(store.run_dir / name):
            raise BadInput(f"{store.run_dir / name} is a symbolic link: engram does not follow it out of the "
                           "store; remove it (engram makes the lock file again)") from exc
        raise
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _release(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
