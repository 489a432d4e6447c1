"""Per-process copies of index data that every query reads and that only grow between rebuilds.

A warm explain should cost its own postings, not a re-read of the stop-list or a 2,000-id
`IN (...)` query for fragment kinds. Each copy is keyed by the database file and its *epoch*, a
random token written when the index is first filled (again after `engram reindex`, which
starts from an empty state table), so a rebuilt index is never answered from a stale copy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import apsw

from engram.index.kinds import kinds_of

if TYPE_CHECKING:
    import numpy as np  # (imported where used: explain reads `index_state` here, and a short span needs no numpy)

_kinds: dict[tuple[str, str], np.ndarray] = {}
_used: set[tuple[object, ...]] = set()
_forgetters: list[Callable[[], None]] = []


def on_forget(drop: Callable[[], None]) -> None:
    """Have `forget` call `drop` too: the modules holding copies of their own (postings, the
    stop-list) register here, so this module, below them, never imports them."""
    _forgetters.append(drop)


def forget() -> None:
    """Drop every per-process copy, as a new process would start (benchmarks of cold queries)."""
    _kinds.clear()
    _used.clear()
    for drop in _forgetters:
        drop()


def first_use(key: tuple[object, ...]) -> bool:
    """True the first time `key` is asked about in this process.

    A copy pays off from the second query on; a one-shot CLI query reads only its own rows."""
    if key in _used:
        return False
    _used.add(key)
    return True


def new_epoch(db: apsw.Connection) -> None:
    """Mark the index as a new one (inside the write transaction that starts filling it)."""
    import secrets  # noqa: PLC0415 - hmac/hashlib imports a query does not need

    db.execute("INSERT OR REPLACE INTO state(key, value) VALUES('epoch', ?)", (secrets.token_hex(8),))


REBUILDING = "rebuilding"  # a state key `engram reindex` holds while it refills the index


def index_state(db: apsw.Connection) -> tuple[str, bool]:
    """(epoch, whether a reindex is refilling the index): a language server polls it to notice a
    rebuild another process made, and an answer read while one runs says it is partial."""
    got = dict(db.execute("SELECT key, value FROM state WHERE key IN ('epoch', ?)", (REBUILDING,)).fetchall())
    return str(got.get("epoch", "")), REBUILDING in got


def fragment_kinds(db: apsw.Connection, ids: np.ndarray, index_epoch: str) -> np.ndarray:
    """Kind number of each fragment id (0 for an id not in the index).

    Fragments are insert-only with increasing ids until the next rebuild, so the copy (made on
    the second call in a process, see first_use) is extended with the rows past its end when an
    id beyond it is asked for; never inside a write transaction, whose rows may be rolled back.
    `index_epoch`: the epoch as the caller's query read it (snapshot)."""
    import numpy as np  # noqa: PLC0415

    key = (db.filename, index_epoch)
    kinds = _kinds.get(key)
    if db.txn_state("main") == apsw.SQLITE_TXN_WRITE or (kinds is None and first_use(("kinds", *key))):
        wanted = ids.tolist()
        got = kinds_of(db, wanted)
        return np.array([got.get(i, 0) for i in wanted], dtype=np.int8)
    if kinds is None:
        _kinds.clear()
        kinds = np.zeros(0, dtype=np.int8)
    top = int(ids.max()) if len(ids) else 0
    if top >= len(kinds):
        rows = db.execute("SELECT id, kind FROM fragments WHERE id >= ? ORDER BY id", (len(kinds),)).fetchall()
        if rows:  # up to the last fragment that exists: an id not yet committed is never cached
            ext = np.zeros(rows[-1][0] + 1, dtype=np.int8)
            ext[: len(kinds)] = kinds
            got = np.array(rows, dtype=np.int64)
            ext[got[:, 0]] = got[:, 1]
            kinds = ext
        _kinds[key] = kinds
    out = np.zeros(len(ids), dtype=np.int8)
    inside = ids < len(kinds)
    out[inside] = kinds[ids[inside]]
    return out
