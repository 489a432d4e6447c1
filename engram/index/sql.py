"""SQLite helpers every index module uses: one array parameter for many ids, the two kinds of
transaction (a writer's, taken up front; a query's consistent view), and finding a row by a
prefix of its id (tapes, memories). They sit below the index's other modules, which import them
without importing the schema or each other."""

from __future__ import annotations

from array import array
from contextlib import contextmanager
from typing import Iterable, Iterator

import apsw


def int_array(values: Iterable[int]) -> apsw.carray:
    """Integers bound as one array parameter, for `IN carray(?)`.

    One statement text whatever their number: a `?` list per length missed SQLite's statement
    cache ~0.6 times per warm explain (each a fresh prepare, and an eviction of another query's
    statement), and parsing a list of thousands of `?` cost more than the query. Callers skip
    the query for no values: carray refuses an empty array. A numpy array is bound in place
    (this module does not import numpy: commands that only open the store stay fast)."""
    if hasattr(values, "astype"):
        return apsw.carray(values.astype("int64", order="C", copy=False))
    return apsw.carray(array("q", values))


@contextmanager
def immediate(db: apsw.Connection) -> Iterator[apsw.Connection]:
    """A write transaction that takes the lock up front (no deadlock on upgrade)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


@contextmanager
def reading(db: apsw.Connection) -> Iterator[apsw.Connection]:
    """One view of the index for a query's several statements.

    A query reads the segment list, then each segment's posting rows, then fragments and edges.
    Outside a transaction each statement sees the latest commit, so an append that merges
    segments between two of them moves postings out of segments the query has yet to read (or
    into one it already read): the answer loses or doubles a session. In WAL mode a read
    transaction keeps the snapshot of its first read and never blocks the writer. Inside a
    caller's transaction (a writer's own reads) that transaction's view already holds."""
    if db.in_transaction:
        yield db
        return
    db.execute("BEGIN")
    try:
        yield db
    finally:
        if db.in_transaction:
            db.execute("COMMIT")


def by_prefix(db: apsw.Connection, table: str, column: str, ref: str, limit: int = 6) -> list[str]:
    """The values of `column` (an indexed text column) that start with `ref`, in order, at most
    `limit`: how a short id people quote finds its row. A range scan on the index, not LIKE
    (which would read the table)."""
    return [r[0] for r in db.execute(f"SELECT {column} FROM {table} WHERE {column} >= ? AND {column} < ? "
                                     f"ORDER BY {column} LIMIT ?", (ref, ref + "\uffff", limit))]


def ambiguity(ref: str, matches: list[str], what: str, shown: int = 12, verb: str = "matches") -> str:
    """The message for a prefix that names more than one row (`matches` as `by_prefix` gave them)."""
    more = "more than 5" if len(matches) > 5 else str(len(matches))
    listed = ", ".join(m[:shown] for m in matches[:5]) + ("…" if len(matches) > 5 else "")
    return f"{ref!r} {verb} {more} {what} ({listed}); give more characters"
