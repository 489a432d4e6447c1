"""The story around one touch, for a person: what was asked, what was said, what happened next.

Read from the tape around the fragment: the user's request that led to it (the last real
`msg.in` before it), the assistant's words right before and right after, and the result of the
next tool run. Raw text, trimmed; nothing is summarised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from engram.tape import events as E
from engram.tape.reader import TapeReader

LOOK_BACK: Final = 5000  # the request may be far back: a long session asks once, works for hours
LOOK_AHEAD: Final = 60


@dataclass
class Story:
    request: str | None
    said_before: str | None
    said_after: str | None
    next_result: str | None
    next_result_tool: str | None
    next_result_error: bool


def trim(text: str | None, limit: int) -> str | None:
    if not text:
        return None
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# Harness-injected user-role text: notifications, reminders, slash-command wrappers, caveats.
_INJECTED = re.compile(r"^\s*(<[a-z][a-z0-9_-]*[ >]|Caveat:|\[Request interrupted)", re.I)


def _is_request(ev: dict[str, Any]) -> bool:
    """A person's request: a user message that is not harness-injected context or another agent's message."""
    if (ev.get("kind") != E.MSG_IN or ev.get("is_meta") or ev.get("injected") or ev.get("compact_summary")
            or ev.get("sender")):
        return False
    t = ev.get("text")
    return isinstance(t, str) and bool(t.strip()) and not _INJECTED.match(t)


def _said(ev: dict[str, Any]) -> bool:
    return ev.get("kind") == E.MSG_OUT and ev.get("block") != "thinking" and isinstance(ev.get("text"), str)


def touch_story(reader: TapeReader, offset: int, limit: int = 400) -> Story:
    start = max(1, offset - LOOK_BACK)
    before = list(reader.events(start, offset, resolve_objects=True))
    after = list(reader.events(offset + 1, offset + 1 + LOOK_AHEAD, resolve_objects=True))
    request = next((ev["text"] for ev in reversed(before) if _is_request(ev)), None)
    said_before = next((ev["text"] for ev in reversed(before) if _said(ev)), None)
    said_after = next((ev["text"] for ev in after if _said(ev)), None)
    result = next((ev for ev in after if ev.get("kind") == E.TOOL_RESULT and ev.get("name") not in
                   ("Edit", "Write", "MultiEdit", "Read", "NotebookEdit", "apply_patch", "TodoWrite")), None)
    out = None
    if result is not None:
        out = "\n".join(x for x in (result.get("stdout"), result.get("stderr")) if isinstance(x, str) and x.strip())
    return Story(trim(request, limit), trim(said_before, limit), trim(said_after, limit), trim(out, limit),
                 result.get("name") if result else None, bool(result.get("is_error")) if result else False)
