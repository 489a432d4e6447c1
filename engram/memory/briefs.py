"""What an agent is told about the notes without asking: before an edit, the notes on the lines
about to change (and the file's notes whose code drifted); at the start of a session, the
repository's most important notes; beside an `explain`, the notes anchored to the span.

Each answer fits a token budget and says what it left out and the command that shows it: memory
tools that put every note into every session cost tens of thousands of tokens a session, and an
agent stops reading them. Tokens are counted as `engram.query.budget` counts them, TOKEN_BYTES
(4) bytes of UTF-8 each, here of the text the agent reads (plain text, for which real tokenizers
give 3.5-4.5 bytes a token on code and English). A note is clipped to NOTE_CHARS characters (its
first line always kept) so one long note does not push out the others.

The language server answers these over its local endpoint (`notes_request`, the same function the
hook calls when no server runs): parse, this module, convert.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engram.errors import BadInput
from engram.memory.model import Memory, now_iso
from engram.memory.places import Place
from engram.query.budget import TOKEN_BYTES, tokens

if TYPE_CHECKING:
    import apsw

    from engram.memory.memories import Memories
    from engram.store.repo import Store

log = logging.getLogger(__name__)

#: Defaults of the `[hooks]` settings (engram.store.config): tokens before an edit, at session
#: start, and the share of an `edited` note's code retained below which it counts as drifted
#: (the editor's `noteDriftBelow` default).
EDIT_BUDGET = 800
SESSION_BUDGET = 1500
DRIFT_BELOW = 0.8
#: A note's text is clipped to this many characters in a brief (`engram memory show ID`: all of it).
NOTE_CHARS = 400
#: At most this many notes are considered for a session brief (ranked first in SQL by pin and
#: importance, then by strength in Python): a brief of 1,500 tokens holds ~20.
BRIEF_POOL = 400
#: Share of explain's budget its notes may take; the sessions get the rest.
EXPLAIN_NOTES_SHARE = 4


@dataclass(frozen=True)
class Brief:
    """A brief for the agent: the text (empty: say nothing), the notes shown (ids), how many were
    left out, and its size in tokens."""

    text: str
    shown: list[str]
    left_out: int
    tokens: int

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "shown": self.shown, "left_out": self.left_out, "tokens": self.tokens}


# ---------------------------------------------------------------- before an edit


def edit_notes(mem: Memories, file: str, ranges: Sequence[tuple[int, int]] | None, *,
               budget: int = EDIT_BUDGET, drift_below: float = DRIFT_BELOW, quick: bool = False) -> Brief:
    """The notes on lines `ranges` of `file` (repository-relative; None: the whole file, as a
    Write replaces it), then the file's other notes whose code vanished or was edited below
    `drift_below` retained, within `budget` tokens. `quick`: anchors not fingerprinted
    (`places_of`; a hook answering without a language server). Otherwise (a language server
    answering the hook before each edit), the file's last resolution in this process is moved
    along with the edits since and only the notes they touched are resolved (`in_file`'s
    `follow`): resolving a busy file's every aged note took longer than the hook may wait."""
    if budget <= 0:
        return Brief("", [], 0, 0)
    on, drifted = [], []
    # (the agent waits: no session attribution)
    for m, places in mem.in_file(file, attribute=False, quick=quick, follow=not quick):
        if any(_overlaps(p, ranges) for p in places):
            on.append((m, places))
        elif any(_drifted(p, drift_below) for p in places):
            drifted.append((m, places))
    if not on and not drifted:
        return Brief("", [], 0, 0)
    on.sort(key=lambda mp: (-mp[0].pinned, -mp[0].importance, -mp[0].trust, min(p.start for p in mp[1])))
    where = file if ranges is None else f"{file}:{_ranges_text(ranges)}"
    sections = [(f"Engram notes on the code this edit changes ({where}); keep them true, or update them "
                 "(`engram memory edit ID`, `engram forget ID`):", on),
                (f"Notes of {file} whose code changed or vanished since they were written (check them; "
                 "`engram memory reanchor ID FILE:A-B` if the code moved):", drifted)]
    more = f"`engram memory list --at {file}` lists them, `engram memory show ID` shows one whole"
    return _fill(sections, budget, more)


def _overlaps(place: Place, ranges: Sequence[tuple[int, int]] | None) -> bool:
    if place.state == "vanished":
        return False
    return ranges is None or any(place.start <= b and a <= place.end for a, b in ranges)


def _drifted(place: Place, drift_below: float) -> bool:
    """Vanished, edited below `drift_below`, or not there as it was and not fingerprinted since
    (`Place.checked`: its code changed, how much is not known)."""
    return not place.checked or place.state == "vanished" or place.state == "edited" and place.retained < drift_below


def _ranges_text(ranges: Sequence[tuple[int, int]]) -> str:
    return ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in ranges) or "(none found)"


# ---------------------------------------------------------------- at session start


def session_brief(mem: Memories, *, budget: int = SESSION_BUDGET, now: str | None = None) -> Brief:
    """The repository's most important active notes within `budget` tokens: pinned first, then by
    importance times strength (recall's decay: recency, trust and recalls), a person's before an
    agent's at equal weight."""
    from engram.memory import projection  # noqa: PLC0415
    from engram.memory.recall import strength  # noqa: PLC0415

    if budget <= 0:
        return Brief("", [], 0, 0)
    mem.sync()
    total = mem.db.execute("SELECT count(*) FROM memories WHERE status = 'active'").fetchall()[0][0]
    if not total:
        return Brief("", [], 0, 0)
    rows = mem.db.execute(projection.select_sql(
        "WHERE status = 'active' ORDER BY pinned DESC, importance DESC, updated DESC LIMIT ?"), (BRIEF_POOL,))
    now = now or now_iso()
    ranked = sorted((projection.row_to_memory(mem.db, r) for r in rows),
                    key=lambda m: (-m.pinned, -(0.5 + m.importance) * strength(m, now), -m.trust, m.id))
    where = _anchored_where(mem, [m.id for m in ranked])
    header = ((f"Engram notes: the most important of this repository's {total} active notes (pinned, then "
               "importance, recency, author)" if total != 1 else "Engram notes: this repository's one active note")
              + "; the notes on code you edit come with each edit.")
    more = "`engram recall QUERY` (or the `recall` tool) finds them by meaning"
    return _fill([(header, [(m, where.get(m.id, [])) for m in ranked])], budget, more, left_beyond=total - len(ranked))


def _anchored_where(mem: Memories, ids: list[str]) -> dict[str, list[Place]]:
    """Where each memory's anchors were last resolved (the cached place, else the anchored one):
    a brief names the place without reading and fingerprinting every file."""
    import orjson  # noqa: PLC0415

    out: dict[str, list[Place]] = {}
    if not ids:
        return out
    rows = mem.db.execute(
        "SELECT m.id, a.file, a.start, a.end, a.state, a.at_file, a.at_start, a.at_end, a.retained"
        " FROM memory_anchors a JOIN memories m ON m.no = a.memory"
        " WHERE m.id IN (SELECT value FROM json_each(?)) ORDER BY a.memory, a.n", (orjson.dumps(ids).decode(),))
    for mid, file, start, end, state, at_file, at_start, at_end, retained in rows:
        place = Place({}, state, at_file, at_start, at_end, retained or 0.0) if state and at_file else \
            Place({}, "intact", file, start, end, 1.0)
        out.setdefault(mid, []).append(place)
    return out


# ---------------------------------------------------------------- beside explain


def span_notes(mem: Memories, file: str, start: int, end: int, *, budget: int | None,
               buffers: Mapping[str, str] | None = None) -> tuple[dict[str, Any], int]:
    """The notes anchored to lines start..end of `file` as explain's answer carries them (each:
    id, kind, first line, state, retained, lines), at most 1/EXPLAIN_NOTES_SHARE of explain's
    `budget` tokens (None: no bound); returns the part of the answer and the tokens it takes."""
    from engram.query.budget import json_size  # noqa: PLC0415

    found = []
    for m, places in mem.in_file(file, buffers):
        hit = next((p for p in places if p.start <= end and start <= p.end), None)
        if hit is not None:
            found.append((m, hit))
    found.sort(key=lambda mp: (mp[1].state == "vanished", -mp[0].pinned, -mp[0].importance, mp[1].start))
    cap = None if budget is None else budget * TOKEN_BYTES // EXPLAIN_NOTES_SHARE
    notes: list[dict[str, Any]] = []
    used = 0
    for m, p in found:
        item = {"id": m.id, "kind": m.kind, "summary": _clip(m.summary, NOTE_CHARS), "state": p.state,
                "retained": round(p.retained, 3), "lines": [p.start, p.end]}
        size = json_size(item) + 1
        if cap is not None and used + size > cap:
            break
        notes.append(item)
        used += size
    doc: dict[str, Any] = {"notes": notes}
    if len(notes) < len(found):
        doc["notes_left_out"] = {"count": len(found) - len(notes),
                                 "next": f"recall(query='', file='{file}'), or `engram memory list --at "
                                         f"{file}:{start}-{end}`"}
    return doc, tokens(json_size(doc))


def explain_notes(store: Store, file: str, start: int, end: int, budget: int | None,
                  live: str | None = None) -> tuple[dict[str, Any], int]:
    """`span_notes` of the store's memories for an explain answer (the command line's and the MCP
    tool's), `live` the file's unsaved text if an editor holds it; none when the memories cannot be
    read, since explain answers from the evidence index whatever state the memory log is in."""
    from engram.errors import EngramError  # noqa: PLC0415
    from engram.memory import has_log, open_memories  # noqa: PLC0415

    if not has_log(store):  # no memory was ever written: nothing to open
        return {"notes": []}, tokens(len('"notes":[],'))
    try:
        return span_notes(open_memories(store), file, start, end, budget=budget or None,
                          buffers={file: live} if live is not None else None)
    except EngramError as exc:
        log.warning("explain without notes: %s", exc)
        return {}, 0


def with_notes(doc: dict[str, Any], notes: dict[str, Any], used: int, asked: int | None) -> dict[str, Any]:
    """Explain's answer with the notes (`explain_notes`) in it, their `used` tokens counted in the
    budget that was `asked` for (the sessions got what the notes left)."""
    if used and isinstance(doc.get("budget"), dict):
        doc = {**doc, "budget": {**doc["budget"], "tokens": asked, "used": doc["budget"].get("used", 0) + used}}
    return {**doc, **notes}


def explain_with_notes(store: Store, db: apsw.Connection, params: dict[str, Any]) -> dict[str, Any]:
    """`engram explain`'s answer (`engram.query.requests.explain_request`, in the command's own
    process or a running language server's) with the notes anchored to its span, within the budget
    asked for: the sessions get what the notes leave. Nothing added for `--text` or a whole file
    (its regions are not one span), nor for a span that does not parse (explain says why)."""
    from pathlib import Path  # noqa: PLC0415

    from engram.query.requests import explain_request  # noqa: PLC0415
    from engram.query.spans import repo_relative, resolve_span_arg  # noqa: PLC0415

    span = params.get("span")
    if params.get("text") is not None or not span:
        return explain_request(store, db, params)
    cwd = Path(params["cwd"]) if params.get("cwd") else None
    try:
        arg = resolve_span_arg(store.root, str(span), cwd)
        if arg.start is None or arg.end is None:
            return explain_request(store, db, params)
        path, start, end = arg.path, arg.start, arg.end
        rel = repo_relative(store.root, path, cwd)
    except BadInput:
        return explain_request(store, db, params)
    asked = params.get("budget")
    notes, used = explain_notes(store, rel, start, end, asked)
    if used and asked:
        params = {**params, "budget": max(1, asked - used)}
    doc = explain_request(store, db, params)
    return with_notes(doc, notes, used, asked) if notes else doc


# ---------------------------------------------------------------- the text


def _fill(sections: list[tuple[str, list[tuple[Memory, list[Place]]]]], budget: int, more: str,
          left_beyond: int = 0) -> Brief:
    """The sections' headers and notes, in order, while they fit `budget` tokens with the closing
    line that says what was left out; a note that does not fit is left out, the next may fit."""
    capacity = budget * TOKEN_BYTES
    lines: list[str] = []
    shown: list[str] = []
    left = left_beyond
    used = 0
    reserve = len(_closing(10 ** 6, budget, more).encode()) + 1
    for header, notes in sections:
        if not notes:
            continue
        head = header + "\n"
        started = False
        for m, places in notes:
            entry = _entry(m, places)
            cost = len(entry.encode()) + (0 if started else len(head.encode()))
            if used + cost + reserve > capacity:
                left += 1
                continue
            if not started:
                lines.append(head)
                started = True
            lines.append(entry)
            shown.append(m.id)
            used += cost
    if left:
        lines.append(_closing(left, budget, more))
    text = "".join(lines).rstrip("\n")
    return Brief(text, shown, left, tokens(len(text.encode())))


def _closing(left: int, budget: int, more: str) -> str:
    return f"(Engram: {left} more note{'s' if left != 1 else ''} left out to stay within {budget} tokens; {more}.)\n"


def _entry(m: Memory, places: list[Place]) -> str:
    """`- decision 3f2a9c1b7d0e, src/net.py:40-48 (edited, 62% retained), agent: first line…`"""
    where = ", ".join(_place_text(p) for p in places[:2]) + (" …" if len(places) > 2 else "")
    who = str(m.source.get("type", "person"))
    pin = ", pinned" if m.pinned else ""
    body = _clip(m.content.strip(), NOTE_CHARS).replace("\n", "\n  ")
    return f"- {m.kind} {m.id}{', ' + where if where else ''}, by {who}{pin}: {body}\n"


def _place_text(p: Place) -> str:
    lines = f"{p.file}:{p.start}-{p.end}" if p.end != p.start else f"{p.file}:{p.start}"
    if not p.checked:
        return f"{lines} (where it was last found; its code changed or vanished since)"
    if p.state == "vanished":
        return f"{lines} (vanished: the code is gone)"
    if p.state == "edited":
        return f"{lines} (edited, {round(100 * p.retained)}% retained)"
    return f"{lines} (moved)" if p.state == "moved" else lines


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + "…"


# ---------------------------------------------------------------- requests


def notes_request(mem: Memories, params: Mapping[str, Any], quick: bool = False) -> dict[str, Any]:
    """A hook's request (`{"event": "edit", "file", "ranges"}` or `{"event": "session"}`) answered
    with the repository's `[hooks]` settings: `Brief.to_json()`. The language server answers the
    same request over its endpoint; the hook itself, without one, answers it `quick`
    (`edit_notes`)."""
    cfg = mem.store.config.get("hooks", {})
    event = params.get("event")
    if event == "session":
        return session_brief(mem, budget=int(cfg.get("session_budget", SESSION_BUDGET))).to_json()
    if event != "edit" or not isinstance(params.get("file"), str):
        raise BadInput("a notes request is {\"event\": \"edit\", \"file\": ..., \"ranges\": [[A, B], ...]} "
                       "or {\"event\": \"session\"}")
    ranges = _ranges(params.get("ranges"))
    return edit_notes(mem, params["file"], ranges, budget=int(cfg.get("edit_budget", EDIT_BUDGET)),
                      drift_below=float(cfg.get("drift_below", DRIFT_BELOW)), quick=quick).to_json()


def _ranges(value: Any) -> list[tuple[int, int]] | None:
    if value is None:
        return None
    try:
        out = [(int(a), int(b)) for a, b in value]
    except (TypeError, ValueError):
        raise BadInput(f"ranges {value!r}: a list of [first, last] line pairs, or null for the whole file") from None
    return [(a, b) for a, b in out if 1 <= a <= b]
