"""The only module that knows both the core's results and lsprotocol's types."""

from __future__ import annotations

import datetime as dt
from typing import Any
from urllib.parse import quote

from lsprotocol import types

from engram.query.regions import RegionSession
from engram.query.story import Story
from .documents import LiveRegion

HARNESS_NAMES = {"claude-code": "Claude Code", "codex": "Codex", "editor": "editor", "raw": "text",
                 "record": "recorded command"}


def harness_name(h: str) -> str:
    return HARNESS_NAMES.get(h, h)


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


def escape_markdown(text: str) -> str:
    """Transcript text shown as markdown: no HTML (`<task-notification>` would vanish) and no
    accidental emphasis or links."""
    out = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for ch in "\\`*_[]":
        out = out.replace(ch, "\\" + ch)
    return out


def _quote_block(text: str) -> str:
    return "\n".join("> " + escape_markdown(line) if line.strip() else ">" for line in text.splitlines())


def hover_markdown(items: list[tuple[RegionSession, Story, int]]) -> str:
    """Per top session: request, words before/after, next result, who/when, links."""
    parts: list[str] = []
    for s, story, offset in items:
        head = (f"**{harness_name(s.harness)}** · {(s.last_touch or '')[:10]} · {s.model or 'unknown model'} · "
                f"`{s.session_id}` · {s.touches} touch{'es' if s.touches != 1 else ''}")
        block = [head]
        if story.request:
            block.append("**Asked:**\n" + _quote_block(story.request))
        if story.said_before:
            block.append("**Before the edit:**\n" + _quote_block(story.said_before))
        if story.said_after:
            block.append("**After:**\n" + _quote_block(story.said_after))
        if story.next_result:
            status = "failed" if story.next_result_error else "ran"
            block.append(f"**Next {story.next_result_tool or 'tool'} run ({status}):**\n```\n{story.next_result}\n```")
        block.append(command_link("engram.view", [s.tape, offset, 10, 10], "open window") + " · " +
                     command_link("engram.view", [s.tape, 0, 0, 100000], "whole transcript"))
        parts.append("\n\n".join(block))
    return "\n\n---\n\n".join(parts)
