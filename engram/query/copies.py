"""Fragments a session holds only as a copy of another session's history.

`claude --resume` (and a fork) starts a new session file under a new id that begins with every
record of the session it resumes, timestamps and all. Its tape then holds the earlier session's
reads and edits a second time, and an answer counted them twice: both sessions with the same
touches, the copy (more recent) first. JanDeDobbeleer/oh-my-posh's published sessions have seven
such groups among 48 (bench/README.md, "Four more").

An event with the same harness, kind, timestamp, file and lines in two sessions is one event.
It stays with the session that ended first, the one that was resumed; a chain of resumes leaves
each record with the session that wrote it. Fragments do not keep the record's own id, so the
timestamp stands for it: two sessions do not log the same kind of event on the same file and
lines in the same millisecond.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any, NamedTuple

import apsw


class Event(NamedTuple):
    """What identifies one transcript event across the sessions holding it."""

    fragment: int
    session_id: str
    harness: str
    kind: int
    ts: str | None
    file: Any
    line0: int | None
    line1: int | None


def copies(db: apsw.Connection, events: Iterable[Event]) -> set[int]:
    """The fragments among `events` that are another session's events held as a copy."""
    keyed: dict[tuple[Any, ...], list[Event]] = defaultdict(list)
    for e in events:
        if e.ts:
            keyed[(e.harness, e.kind, e.ts, e.file, e.line0, e.line1)].append(e)
    shared = [group for group in keyed.values() if len({e.session_id for e in group}) > 1]
    if not shared:
        return set()
    sids = sorted({e.session_id for group in shared for e in group})
    ended = {(h, sid): end or "" for h, sid, end in db.execute(
        f"SELECT harness, session_id, max(ended) FROM tapes WHERE session_id IN ({','.join('?' * len(sids))})"
        " GROUP BY harness, session_id", sids)}
    out: set[int] = set()
    for group in shared:
        owner = min(group, key=lambda e: (ended.get((e.harness, e.session_id), ""), e.session_id)).session_id
        out.update(e.fragment for e in group if e.session_id != owner)
    return out
