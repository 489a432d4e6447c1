"""The only module that knows both the core's results and lsprotocol's types."""

from __future__ import annotations

import datetime as dt
from typing import Any
from urllib.parse import quote

from lsprotocol import types

from engram.query.regions import RegionSession
from engram.query.render import harness_name
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


def lens_title(sessions: list[RegionSession] | list[dict[str, Any]]) -> str:
    """`why? 3 sessions · Claude Code · 2 days ago` from region sessions or explain sessions."""
    def get(s: Any, key: str) -> Any:
        return s.get(key) if isinstance(s, dict) else getattr(s, key)

    n = len(sessions)
    top = sessions[0]
    latest = max((get(s, "last_touch") or "" for s in sessions), default="") or None
    return f"why? {n} session{'s' if n != 1 else ''} · {harness_name(get(top, 'harness'))} · {ago(latest)}"


def line_range(start: int, end: int) -> types.Range:
    return types.Range(start=types.Position(line=start, character=0), end=types.Position(line=end + 1, character=0))


def lens(uri: str, version: int, r: LiveRegion) -> types.CodeLens:
    return types.CodeLens(range=types.Range(start=types.Position(line=r.start, character=0),
                                            end=types.Position(line=r.start, character=0)),
                          data={"uri": uri, "version": version, "start": r.start, "end": r.end})


def resolved_command(uri: str, r: LiveRegion, sessions: list[dict[str, Any]] | None = None) -> types.Command:
    """The lens command; titled from the region's explain (`sessions`) so lens and explain agree."""
    rng = {"start": {"line": r.start, "character": 0}, "end": {"line": r.end + 1, "character": 0}}
    title = lens_title(sessions if sessions else r.sessions)
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
