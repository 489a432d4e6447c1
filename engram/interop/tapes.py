"""Attributions as tapes: one tape per (source record, session), holding a `code.edit` for each
line range whose text is known and a `span.link` for each whose text is not.

An attribution says "this session wrote these lines"; Engram's evidence is text, fingerprinted.
So a range becomes a `code.edit` (op `update`, `after_range`, `after_text`: lines the session
wrote, no `before_text`) only with text read from git or the working tree, and its `attested`
field says who said so and where the text came from. A range without text is a `span.link`
with the lines in `lines` (not `range`: explain matches a `span.link` by its place, and a line
number from another revision says nothing of today's lines) and a `note` saying what is missing.

The events are built from the record alone (its times, never the clock), so importing the same
record twice writes the same tape, which the store already holds: nothing changes."""

from __future__ import annotations

from typing import Any

from engram.store.repo import Store
from engram.tape import events as E

Event = dict[str, Any]


def meta(harness: str, session_id: str, *, model: str | None, started: str | None, agent: str | None,
         origin: dict[str, Any], git_head: str | None = None) -> Event:
    """The meta event of an attribution tape: `harness` names the format it came from
    (agent-trace, git-ai), `agent` the tool the record names, `origin` where the record is."""
    return {"kind": E.META, "v": E.TAPE_FORMAT, "harness": harness, "harness_version": None, "model": model,
            "session_id": session_id, "cwd": None, "git_head": git_head, "git_branch": None, "started": started,
            "ended": started, "sources": [], "prev": None, "agent": agent, "origin": origin}


def written_lines(file: str, first: int, last: int, text: str, ts: str | None, attested: dict[str, Any]) -> Event:
    """Lines `first`-`last` of `file` (their `text`), written by the tape's session."""
    return {"kind": E.CODE_EDIT, "ts": ts, "file": file, "op": "update", "before_range": None,
            "after_range": [first, last], "before_text": None, "after_text": text, "attested": attested}


def unread_lines(file: str, first: int, last: int, ts: str | None, note: str, attested: dict[str, Any]) -> Event:
    """Lines the tape's session wrote, by the record, whose text is not to be had (`note`: why)."""
    return {"kind": E.SPAN_LINK, "ts": ts, "file": file, "lines": [first, last], "note": note,
            "attested": attested}


def store(store: Store, tapes: list[list[Event]]) -> tuple[int, int, int]:
    """Write, catalogue and index `tapes`; (tapes new, tapes the store already held, tapes left
    out: their session was taken back with `engram tapes rm`, which an import respects as an
    ingest does)."""
    if not tapes:
        return 0, 0, 0
    from engram.capture.pipeline import store_many  # noqa: PLC0415
    from engram.capture.removal import removed_sessions  # noqa: PLC0415
    from engram.index.build import Indexer  # noqa: PLC0415

    removed = removed_sessions(store)
    kept = [t for t in tapes if (t[0].get("harness"), t[0].get("session_id")) not in removed]
    written = store_many(store, kept, Indexer(store)) if kept else []
    new = sum(w.created for w in written)
    return new, len(written) - new, len(tapes) - len(kept)


def line_slice(text: str, first: int, last: int) -> str | None:
    """Lines `first`-`last` (1-based, inclusive) of `text`, each with its newline; None when the
    text has fewer lines."""
    lines = text.splitlines(keepends=True)
    if first < 1 or last < first or last > len(lines):
        return None
    return "".join(lines[first - 1:last])
