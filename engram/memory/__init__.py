"""Memories: notes about the code, anchored to spans that follow it, found by hybrid recall.

`model` says what a memory is (`vocabulary`: the words its fields take); `events` is the append-only log every change is written to (the
source of truth); `projection` replays it into index.sqlite; `memories` holds the operations
(remember, edit, link, re-anchor, forget, list, graph) and `recall` the search; `dedup` judges a
new memory against the ones held; `places` resolves anchors against the working tree (the
anchors themselves: `anchors`); `vectors` holds the embeddings (the model: `embed`) and
`fusion` the scoring recipe; `consolidate` merges and archives; `interchange` imports and exports.

May import the store, the index, tapes, anchors, errors, fsutil and arrays, and the queries
(`anchors` names the session behind a change with explain's matching); never the command line or
the protocol servers.

`remember(store, text, ...)` and `recall(store, query, ...)` are the entry points for programs
(bench/locomo.py among them); importing this package loads nothing else (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engram.memory.memories import Memories, Remembered
    from engram.store.repo import Store

__all__ = ["has_log", "open_memories", "recall", "remember"]

#: The memory log's folder under `.engram/events/` (`engram.memory.events` writes it).
LOG_SUBDIR = "memories"


def has_log(store: Store) -> bool:
    """Whether `store` has a memory log. Without one, what follows an ingest (vectors to make,
    remember calls to link) has nothing to do, and a command checks this first so that it does not
    load the memory modules (a third of a 1 MB append's imports, bench/cli_start.py)."""
    from engram.fsutil import names_in  # noqa: PLC0415

    return bool(names_in(store.events_dir / LOG_SUBDIR))


def open_memories(store: Store) -> Memories:
    """This process's open memories of `store` (kept open: a warm connection and matrix)."""
    from engram.memory.memories import open_memories as _open  # noqa: PLC0415

    return _open(store)


def remember(store: Store, content: str, **options: Any) -> Remembered:
    """Write a memory (see `Memories.remember` for the options: kind, tags, importance, pinned,
    at, evidence, source, created, dedup)."""
    return open_memories(store).remember(content, **options)


def recall(store: Store, query: str, **options: Any) -> dict[str, Any]:
    """The memories that answer `query`, as `engram recall --json` gives them (see
    `engram.memory.recall.recall` for the options: at, kind, tags, limit, hidden, debug, now,
    reinforce)."""
    from engram.memory.recall import recall as _recall  # noqa: PLC0415

    return _recall(open_memories(store), query, **options)
