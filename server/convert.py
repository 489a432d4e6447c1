"""The only module that knows both the core's results and lsprotocol's types."""

from __future__ import annotations

import datetime as dt
from typing import Any
from urllib.parse import quote

from lsprotocol import types
from pygls.protocol import default_converter

from engram.memory.model import Memory
from engram.memory.places import Place
from engram.query.regions import RegionSession
from engram.query.render import harness_name, md_quote
from engram.words import plural

from .documents import LiveRegion


def ago(ts: str | None, now: dt.datetime | None = None) -> str:
    if not ts:
        return "at an unknown time"
    try:
        t = dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return ts[:10]
    now = now or dt.datetime.now(dt.timezone.utc)
    secs = max(0, int((now - t).total_seconds()))
    for unit, size in (("year", 365 * 86400), ("month", 30 * 86400), ("day", 86400), ("hour", 3600), ("minute", 60)):
        if secs >= size:
            n = secs // size
            return f"{n} {unit}{'s' if n > 1 else ''} ago"
    return "just now"


def lens_title(sessions: list[RegionSession] | list[dict[str, Any]], notes: int = 0) -> str:
    """`why? 3 sessions · 1 note · Claude Code · 2 days ago` from region sessions or explain
    sessions and the number of notes anchored there (`why? 1 note` for notes alone)."""
    def get(s: Any, key: str) -> Any:
        return s.get(key) if isinstance(s, dict) else getattr(s, key)

    counts = ([plural(len(sessions), "session")] if sessions else []) + ([plural(notes, "note")] if notes else [])
    if not sessions:
        return "why? " + " · ".join(counts or ["no sessions"])
    top = sessions[0]
    latest = max((get(s, "last_touch") or "" for s in sessions), default="") or None
    return f"why? {' · '.join(counts)} · {harness_name(get(top, 'harness'))} · {ago(latest)}"


def line_range(start: int, end: int) -> types.Range:
    return types.Range(start=types.Position(line=start, character=0), end=types.Position(line=end + 1, character=0))


def lens(uri: str, version: int, r: LiveRegion, notes_only: bool = False) -> types.CodeLens:
    data: dict[str, Any] = {"uri": uri, "version": version, "start": r.start, "end": r.end}
    if notes_only:
        data["notesOnly"] = True
    return types.CodeLens(range=types.Range(start=types.Position(line=r.start, character=0),
                                            end=types.Position(line=r.start, character=0)), data=data)


def protocol_converter() -> Any:
    """pygls's converter (lsprotocol's), writing code lenses directly: the answer of 475 lenses
    (bench/lsp_notes.py's 5,000-line file) was ~6 ms of CPU on the event loop to serialise through
    cattrs's generic path, ~4 ms this way. The JSON is the same (absent fields left out)."""
    conv = default_converter()

    def lens_json(lens: types.CodeLens) -> dict[str, Any]:
        start, end = lens.range.start, lens.range.end
        out: dict[str, Any] = {"range": {"start": {"line": start.line, "character": start.character},
                                         "end": {"line": end.line, "character": end.character}}}
        if lens.command is not None:
            out["command"] = conv.unstructure(lens.command)
        if lens.data is not None:
            out["data"] = lens.data  # (JSON already: what `lens` made, or what a client sent)
        return out

    conv.register_unstructure_hook(types.CodeLens, lens_json)
    return conv


def resolved_command(uri: str, r: LiveRegion, sessions: list[dict[str, Any]] | None = None,
                     notes: int = 0) -> types.Command:
    """The lens command; titled from the region's explain (`sessions`) so lens and explain agree."""
    rng = {"start": {"line": r.start, "character": 0}, "end": {"line": r.end + 1, "character": 0}}
    title = lens_title(sessions if sessions else r.sessions, notes)
    return types.Command(title=title, command="engram.explain", arguments=[uri, rng])


def command_link(command: str, args: list[Any], label: str) -> str:
    import json  # noqa: PLC0415

    return f"[{label}](command:{command}?{quote(json.dumps(args))})"


def _view_args(tape: str, offset: int) -> list[Any]:
    return [tape, 0, 0, 100000] if offset < 0 else [tape, offset, 10, 10]


class ReferenceLinks:
    """Links written `[label][n]`, their `[n]: command:...` definitions given once at the end (the
    VS Code extension's explain document finds them there and keeps the long URIs out of the text)."""

    def __init__(self) -> None:
        self.defs: list[str] = []
        self.seen: dict[str, int] = {}

    def __call__(self, label: str, tape: str, offset: int) -> str:
        import json  # noqa: PLC0415

        uri = f"command:engram.view?{quote(json.dumps(_view_args(tape, offset)))}"
        n = self.seen.setdefault(uri, len(self.seen) + 1)
        if n > len(self.defs):
            self.defs.append(f"[{n}]: {uri}")
        return f"[{label}][{n}]"

    def definitions(self) -> list[str]:
        return ["", "<!-- links -->", *self.defs] if self.defs else []


def view_link(label: str, tape: str, offset: int) -> str:
    """A link that opens a transcript at `offset` (-1: the whole transcript), for the markdown
    engram.query.render writes."""
    return command_link("engram.view", _view_args(tape, offset), label)


#: A note's content shown in a hover: its first lines, then how many more there are.
NOTE_HOVER_LINES = 6


def author(source: dict[str, Any]) -> str:
    """`you` / `a person`, `Claude Code session abc123`, `import from FILE`."""
    kind = source.get("type")
    if kind == "agent":
        who = harness_name(str(source.get("harness") or "an agent"))
        return f"{who} session `{source['session']}`" if source.get("session") else who
    if kind == "import":
        return f"import from {source['origin']}" if source.get("origin") else "an import"
    return "a person"


def drift(place: Place) -> str | None:
    """`edited 60%`, `moved from a.py:3-9`, `vanished`; None for an intact anchor."""
    if place.state == "edited":
        return f"edited {round(100 * place.retained)}%"
    if place.state == "moved":
        return f"moved from {place.anchor.get('file')}:{place.anchor.get('start')}-{place.anchor.get('end')}"
    if place.state == "vanished":
        return "vanished"
    return None


def drift_message(memory: Memory, place: Place) -> str:
    """A drift diagnostic's text: what happened to the code, and the note's summary."""
    what = ("its code is gone" if place.state == "vanished"
            else f"its code was edited ({round(100 * place.retained)}% of it kept)")
    return f"Engram note {memory.id[:8]} ({memory.kind}): {what}. {memory.summary}"


def note_markdown(memory: Memory, places: list[Place], now: dt.datetime | None = None) -> str:
    """A note in a hover: kind, author, age, drift, then its first lines (and "more")."""
    head = [f"**{memory.kind}**", f"note `{memory.id[:8]}`", author(memory.source), ago(memory.created, now)]
    head += [d for d in (drift(p) for p in places) if d]
    lines = memory.content.strip().splitlines()
    shown = "\n".join(md_quote("\n".join(lines[:NOTE_HOVER_LINES])))
    if len(lines) > NOTE_HOVER_LINES:
        shown += f"\n>\n> … {plural(len(lines) - NOTE_HOVER_LINES, 'more line')}"
    return " · ".join(head) + "\n\n" + shown
