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

A Codex `guardian` reviewer holds another session's history in a different way: the thread
that started it sends it its own transcript, tool calls and planned patch included, as one long
prompt to assess. That prompt gathers in one event what the parent holds in many, so it matched
a span better than any one of them and pushed the parent under the relative floor: on
chikachow/cyspbot, 51 of 80 rollouts are reviewers, and the writer was often answered by its
reviewer alone. While its parent's session is in the store, such a reviewer is left out of the
match (`quoting_reviews`); without it, the reviewer's copy is the only trace and is kept.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any, Final, NamedTuple

import apsw

from engram.index.sql import int_array

#: Subagent kinds sent their parent's history as their prompt. Codex's `review` subagent is not
#: one: it is told to run `git diff` itself, and its reads are its own.
QUOTING_SUBAGENTS: Final = ("guardian",)


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


def quoting_reviews(db: apsw.Connection, tapes: Iterable[int]) -> set[int]:
    """The tapes (`tapes.no`) among `tapes` of reviewers whose parent session is in the store."""
    nos = sorted(set(tapes))
    if not nos:
        return set()
    kinds = ",".join("?" * len(QUOTING_SUBAGENTS))
    return {no for (no,) in db.execute(
        "SELECT t.no FROM tapes t JOIN subagents s ON s.tape = t.id WHERE t.no IN carray(?)"
        f" AND s.kind IN ({kinds}) AND EXISTS (SELECT 1 FROM tapes p WHERE p.session_id = s.parent_session)",
        (int_array(nos), *QUOTING_SUBAGENTS))}
